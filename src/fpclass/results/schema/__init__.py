"""The JSON Schemas of the scan's JSON document, shipped with the package: one file per version,
`scan-N.json` for "fpclass.scan/N"."""

from __future__ import annotations

import json
from importlib import resources

from ..report import SCHEMA


def file_name(schema: str = SCHEMA) -> str:
    """The schema file of the document version `schema` ("fpclass.scan/2" -> "scan-2.json");
    ValueError for a name that is not a scan document version."""
    prefix, _, version = schema.partition("/")
    if prefix != "fpclass.scan" or not version.isdigit():
        raise ValueError(f"not a scan document version: {schema!r}; expected fpclass.scan/N")
    return f"scan-{version}.json"


def json_schema(schema: str = SCHEMA) -> dict:
    """The JSON Schema (draft 2020-12) of the document version `schema` (default: the one this
    fpclass writes); FileNotFoundError when this fpclass ships none for it."""
    name = file_name(schema)
    try:
        text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"fpclass ships no JSON Schema for {schema!r} ({name})") from None
    return json.loads(text)
