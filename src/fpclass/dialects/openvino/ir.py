"""IR v10/v11 documents as a graph: layers with their ports, and the edges between ports.

This module reads the document's structure (ids, names, precisions, dims, attributes) and reports
what is malformed; `validate` checks that the graph makes sense.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from .errors import IRError
from .types import ElementType, element_type

IR_VERSIONS = (10, 11)


@dataclass
class Port:
    """One input or output port: its precision, its `<dim>` list (-1 dynamic) and tensor names."""

    id: int
    precision: ElementType
    dims: tuple[int, ...]
    names: tuple[str, ...] = ()


@dataclass
class Layer:
    """One `<layer>`: id, name, type, opset version, its `<data>` attributes and its ports."""

    id: int
    name: str
    type: str
    version: str
    attrs: dict[str, str] = field(default_factory=dict)
    inputs: dict[int, Port] = field(default_factory=dict)
    outputs: dict[int, Port] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.type} layer {self.name!r} (id {self.id})"


@dataclass(frozen=True)
class Edge:
    """A connection from an output port of one layer to an input port of another."""

    from_layer: int
    from_port: int
    to_layer: int
    to_port: int

    def __str__(self) -> str:
        return (f"edge from-layer={self.from_layer} from-port={self.from_port} "
                f"to-layer={self.to_layer} to-port={self.to_port}")


@dataclass
class Graph:
    """A whole IR document: layers in document order (keyed by id) and edges."""

    name: str
    version: int
    layers: dict[int, Layer]
    edges: list[Edge]


def _int(element: ET.Element, attribute: str, where: str, *, minimum: int = 0) -> int:
    text = element.get(attribute)
    if text is None:
        raise IRError(f"{where}: required attribute {attribute!r} is absent")
    try:
        value = int(text.strip())
    except ValueError:
        raise IRError(f"{where}: {attribute}={text!r} is not an integer") from None
    if value < minimum:
        raise IRError(f"{where}: {attribute}={text!r} is below {minimum}")
    return value


def _split_names(text: str | None) -> tuple[str, ...]:
    # OpenVINO separates tensor names with commas and escapes a literal comma as "\,".
    if not text:
        return ()
    names, current, chars = [], "", iter(text)
    for c in chars:
        if c == "\\":
            current += next(chars, "")
        elif c == ",":
            names.append(current.strip())
            current = ""
        else:
            current += c
    names.append(current.strip())
    return tuple(n for n in names if n)


def _port(element: ET.Element, where: str) -> Port:
    if element.tag != "port":
        raise IRError(f"{where}: unexpected <{element.tag}> where a <port> was expected")
    pid = _int(element, "id", where)
    where = f"{where} port {pid}"
    precision = element.get("precision")
    if precision is None:
        raise IRError(f"{where}: required attribute 'precision' is absent")
    dims = []
    for d in element:
        if d.tag != "dim":
            continue
        text = (d.text or "").strip()
        try:
            n = int(text)
        except ValueError:
            raise IRError(f"{where}: <dim>{text}</dim> is not an integer (-1 means dynamic)") from None
        if n < -1:
            raise IRError(f"{where}: <dim>{text}</dim> is negative (only -1, dynamic, is allowed)")
        dims.append(n)
    return Port(pid, element_type(precision, where), tuple(dims), _split_names(element.get("names")))


def _ports(layer: ET.Element, section: str, where: str) -> dict[int, Port]:
    ports: dict[int, Port] = {}
    for holder in layer.findall(section):
        for element in holder:
            port = _port(element, f"{where} {section}")
            if port.id in ports:
                raise IRError(f"{where}: port id {port.id} is declared twice")
            ports[port.id] = port
    return ports


def _layer(element: ET.Element, index: int) -> Layer:
    where = f"layer #{index}"
    lid = _int(element, "id", where)
    ltype = element.get("type")
    name = element.get("name", "")
    where = f"layer {name!r} (id {lid})"
    if not ltype:
        raise IRError(f"{where}: required attribute 'type' is absent")
    data = element.findall("data")
    if len(data) > 1:
        raise IRError(f"{where}: more than one <data> element")
    layer = Layer(lid, name, ltype, element.get("version", ""), dict(data[0].attrib) if data else {})
    where = str(layer)
    layer.inputs = _ports(element, "input", where)
    layer.outputs = _ports(element, "output", where)
    # An input and an output may share a port id (the IsInf spec example does, and OpenVINO
    # reads it): edges name the direction, so no lookup is ambiguous.
    return layer


def read_graph(root: ET.Element) -> Graph:
    """The graph of a parsed IR document. IRError naming what is malformed."""
    if root.tag != "net":
        raise IRError(f"not an OpenVINO IR document: the root element is <{root.tag}>, not <net>")
    version = _int(root, "version", "<net>")
    if version not in IR_VERSIONS:
        raise IRError(f"IR version {version} is not supported; accepted: "
                      + ", ".join(map(str, IR_VERSIONS)))
    sections = {child.tag: child for child in root}
    if "layers" not in sections:
        raise IRError("IR has no <layers> section")
    layers: dict[int, Layer] = {}
    for i, element in enumerate(sections["layers"].findall("layer")):
        layer = _layer(element, i)
        if layer.id in layers:
            raise IRError(f"layer id {layer.id} is used by both {layers[layer.id]} and {layer}")
        layers[layer.id] = layer
    edges = []
    for i, element in enumerate(sections["edges"].findall("edge") if "edges" in sections else ()):
        where = f"edge #{i}"
        edges.append(Edge(*(_int(element, a, where)
                            for a in ("from-layer", "from-port", "to-layer", "to-port"))))
    return Graph(root.get("name", ""), version, layers, edges)
