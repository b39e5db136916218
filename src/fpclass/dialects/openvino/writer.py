"""Writing a validated program as IR v11 XML (+ an empty .bin) that OpenVINO's reader loads."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from .attributes import write_bool
from .ir import Port
from .validate import Node, Program


def _names(names: tuple[str, ...]) -> str:
    return ",".join(n.replace("\\", "\\\\").replace(",", "\\,") for n in names)


def _port(parent: ET.Element, port: Port) -> None:
    attrs = {"id": str(port.id), "precision": port.precision.precision}
    if port.names:
        attrs["names"] = _names(port.names)
    element = ET.SubElement(parent, "port", attrs)
    for d in port.dims:
        ET.SubElement(element, "dim").text = str(d)


def _layer(parent: ET.Element, node: Node) -> None:
    layer, kind = node.layer, node.kind
    version = f"opset{kind.first_opset}"
    element = ET.SubElement(parent, "layer", {"id": str(layer.id), "name": layer.name,
                                              "type": kind.type, "version": version})
    if kind.type == "Parameter":
        ET.SubElement(element, "data", {"shape": str(node.shape),
                                        "element_type": node.element_type.name})
    elif kind.attributes:
        ET.SubElement(element, "data", {k: write_bool(node.options[k]) for k in kind.attributes})
    for section, ports in (("input", layer.inputs), ("output", layer.outputs)):
        if ports:
            holder = ET.SubElement(element, section)
            for port in ports.values():
                _port(holder, port)


def to_xml(program: Program) -> str:
    """IR v11 text for `program`: layers in document order, booleans written as true/false."""
    net = ET.Element("net", {"name": program.graph.name, "version": "11"})
    layers = ET.SubElement(net, "layers")
    by_id = {n.layer.id: n for n in program.nodes}
    for lid in program.graph.layers:
        _layer(layers, by_id[lid])
    edges = ET.SubElement(net, "edges")
    for e in program.graph.edges:
        ET.SubElement(edges, "edge", {"from-layer": str(e.from_layer), "from-port": str(e.from_port),
                                      "to-layer": str(e.to_layer), "to-port": str(e.to_port)})
    ET.indent(net, "\t")
    return '<?xml version="1.0"?>\n' + ET.tostring(net, encoding="unicode") + "\n"


def write_model(model, path) -> tuple[str, str]:
    """Write `model` (an fpclass.openvino Model) to `path` (.xml) and an empty weights file beside
    it (.bin: these layers have no weights). Returns both paths."""
    path = os.fspath(path)
    base, ext = os.path.splitext(path)
    if ext.lower() != ".xml":
        raise ValueError(f"write_model path must end in .xml, got {path!r}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(model.to_xml())
    bin_path = base + ".bin"
    with open(bin_path, "wb"):
        pass
    return path, bin_path
