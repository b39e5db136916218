"""Parsing untrusted XML into an ElementTree without DTDs or entities (defusedxml's policy)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.parsers import expat

from .errors import IRError


def _refuse(what: str):
    def handler(*_):
        raise IRError(f"IR must not contain {what} (DTDs and entities are refused for safety)")
    return handler


def parse(data: bytes | str) -> ET.Element:
    """The root element of `data`. IRError for text that is not well-formed XML, and for any
    DOCTYPE, entity declaration or external entity reference, which are never resolved."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse("a DOCTYPE declaration")
    parser.EntityDeclHandler = _refuse("an entity declaration")
    parser.UnparsedEntityDeclHandler = _refuse("an entity declaration")
    parser.ExternalEntityRefHandler = _refuse("an external entity reference")
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise IRError(f"not well-formed XML: {expat.errors.messages[e.code]} "
                      f"at line {e.lineno}, column {e.offset + 1}") from None
    return builder.close()
