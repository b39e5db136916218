"""From a graph to a runnable program: every check that the IR makes sense, then a topological order.

Checks: known layer types and opsets, port counts, attribute values, edges between declared ports,
every input connected exactly once, no cycles, element types and dims agreeing between connected
ports, real inputs for the operators, BOOL outputs of the input's shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .attributes import check_known, read_bool
from .errors import IRError
from .ir import Edge, Graph, Layer, Port
from .layers import LAYER_KINDS, LayerKind
from .shapes import PartialShape
from .types import BOOLEAN, REAL_TYPES, ElementType, element_type


@dataclass
class Node:
    """A validated layer: its kind, parsed options, the (layer id, port id) feeding its input, and
    the element type and partial shape of the tensor it produces (or, for a Result, receives)."""

    layer: Layer
    kind: LayerKind
    options: dict = field(default_factory=dict)
    source: tuple[int, int] | None = None
    element_type: ElementType | None = None
    shape: PartialShape | None = None


@dataclass
class Program:
    """A validated graph: nodes in evaluation order, Parameters and Results in document order."""

    graph: Graph
    nodes: list[Node]
    parameters: list[Node]
    results: list[Node]


def _kind(layer: Layer) -> LayerKind:
    kind = LAYER_KINDS.get(layer.type)
    if kind is None:
        raise IRError(f"{layer}: unsupported layer type {layer.type!r}; supported: "
                      + ", ".join(LAYER_KINDS))
    match = re.fullmatch(r"opset(\d+)", layer.version)
    if match is None or int(match.group(1)) < kind.first_opset:
        raise IRError(f"{layer}: version {layer.version!r} does not define {layer.type}; accepted: "
                      f"opset{kind.first_opset} or later")
    if len(layer.inputs) != kind.inputs or len(layer.outputs) != kind.outputs:
        raise IRError(f"{layer}: has {len(layer.inputs)} input and {len(layer.outputs)} output "
                      f"port(s); {layer.type} has {kind.inputs} and {kind.outputs}")
    return kind


def _options(layer: Layer, kind: LayerKind, compatible: bool) -> dict:
    check_known(layer.attrs, tuple(kind.attributes), where=str(layer), openvino_compatible=compatible)
    options = {}
    for name, default in kind.attributes.items():
        if default is None:
            if name not in layer.attrs:
                raise IRError(f"{layer}: required attribute {name!r} is absent")
            options[name] = layer.attrs[name]
        else:
            options[name] = read_bool(layer.attrs.get(name), default=default, where=str(layer),
                                      attribute=name, openvino_compatible=compatible)
    return options


def _sources(graph: Graph) -> dict[tuple[int, int], tuple[int, int]]:
    sources: dict[tuple[int, int], tuple[int, int]] = {}
    for edge in graph.edges:
        _check_edge(graph, edge)
        target = (edge.to_layer, edge.to_port)
        if target in sources:
            raise IRError(f"{edge}: input port {edge.to_port} of {graph.layers[edge.to_layer]} "
                          f"already has an incoming edge")
        sources[target] = (edge.from_layer, edge.from_port)
    for layer in graph.layers.values():
        for pid in layer.inputs:
            if (layer.id, pid) not in sources:
                raise IRError(f"{layer}: input port {pid} has no incoming edge (missing edge)")
    return sources


def _check_edge(graph: Graph, edge: Edge) -> None:
    for end, lid, pid, ports in (("from", edge.from_layer, edge.from_port, "outputs"),
                                 ("to", edge.to_layer, edge.to_port, "inputs")):
        layer = graph.layers.get(lid)
        if layer is None:
            raise IRError(f"{edge}: there is no layer with id {lid}")
        if pid not in getattr(layer, ports):
            kind = "output" if ports == "outputs" else "input"
            raise IRError(f"{edge}: {layer} has no {kind} port {pid} (dangling edge); its {kind} "
                          f"ports: {sorted(getattr(layer, ports)) or 'none'}")


def _order(graph: Graph, sources: dict) -> list[int]:
    consumers: dict[int, list[int]] = {lid: [] for lid in graph.layers}
    waiting = {lid: len(layer.inputs) for lid, layer in graph.layers.items()}
    for (to_layer, _), (from_layer, _) in sources.items():
        consumers[from_layer].append(to_layer)
    ready = [lid for lid, n in waiting.items() if n == 0]
    order = []
    while ready:
        lid = ready.pop()
        order.append(lid)
        for c in consumers[lid]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if len(order) != len(graph.layers):
        stuck = ", ".join(str(graph.layers[lid]) for lid, n in waiting.items() if n)
        raise IRError(f"the graph has a cycle through: {stuck}")
    return order


def _agree(port: Port, source: Port, layer: Layer, source_layer: Layer) -> None:
    where = f"{layer} input port {port.id}"
    if port.precision != source.precision:
        raise IRError(f"{where}: precision {port.precision.precision} disagrees with "
                      f"{source.precision.precision} on output port {source.id} of {source_layer}")
    if port.dims != source.dims:
        raise IRError(f"{where}: dims {list(port.dims)} disagree with {list(source.dims)} on "
                      f"output port {source.id} of {source_layer}")


def _parameter(node: Node) -> None:
    layer = node.layer
    node.element_type = element_type(node.options["element_type"], f"{layer} element_type")
    if node.element_type.name != node.options["element_type"].lower():
        raise IRError(f"{layer}: element_type={node.options['element_type']!r} is a port precision; "
                      f"write the element type name {node.element_type.name!r}")
    node.shape = PartialShape.parse(node.options["shape"], f"{layer} shape")
    (port,) = layer.outputs.values()
    if port.precision != node.element_type:
        raise IRError(f"{layer}: output port precision {port.precision.precision} disagrees with "
                      f"element_type {node.element_type.name} (precision "
                      f"{node.element_type.precision})")
    if not node.shape.agrees_with_port(port.dims):
        raise IRError(f"{layer}: output port dims {list(port.dims)} disagree with shape "
                      f"{str(node.shape)!r} (expected {list(node.shape.port_dims())})")


def _operator(node: Node, source: Node) -> None:
    layer = node.layer
    if not source.element_type.real:
        raise IRError(f"{layer}: input element type {source.element_type.name} must be a floating "
                      f"point number; accepted: {', '.join(REAL_TYPES)}")
    (inp,), (out,) = layer.inputs.values(), layer.outputs.values()
    if out.precision != BOOLEAN:
        raise IRError(f"{layer}: output port {out.id} precision {out.precision.precision} must be "
                      f"BOOL")
    if out.dims != inp.dims:
        raise IRError(f"{layer}: output port dims {list(out.dims)} differ from input port dims "
                      f"{list(inp.dims)}; the output shape is the input's")
    node.element_type, node.shape = BOOLEAN, source.shape


def build_program(graph: Graph, *, openvino_compatible: bool = False) -> Program:
    """Check `graph` and order it for evaluation. IRError naming the first problem found."""
    nodes = {}
    for layer in graph.layers.values():
        kind = _kind(layer)
        nodes[layer.id] = Node(layer, kind, _options(layer, kind, openvino_compatible))
    sources = _sources(graph)
    order = _order(graph, sources)
    for lid in order:
        node = nodes[lid]
        if node.kind.type == "Parameter":
            _parameter(node)
            continue
        (pid,) = node.layer.inputs
        node.source = sources[(lid, pid)]
        upstream = nodes[node.source[0]]
        _agree(node.layer.inputs[pid], upstream.layer.outputs[node.source[1]], node.layer,
               upstream.layer)
        if node.kind.evaluate is not None:
            _operator(node, upstream)
        else:
            node.element_type, node.shape = upstream.element_type, upstream.shape
    results = [n for n in nodes.values() if n.kind.type == "Result"]
    if not results:
        raise IRError("the IR has no Result layer, so a model would compute nothing")
    parameters = [n for n in nodes.values() if n.kind.type == "Parameter"]
    return Program(graph, [nodes[lid] for lid in order], parameters, results)
