"""Building models of Parameter, IsInf / IsFinite / IsNaN and Result layers from Python.

    >>> b = Builder("m")
    >>> x = b.parameter("x", "f32", [1, -1])
    >>> b.result(b.is_inf(x, detect_negative=False), "posinf")
    >>> b.build().infer({"x": np.array([[1, np.inf]], np.float32)})["posinf"].tolist()
    [[False, True]]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .attributes import write_bool
from .errors import IRError
from .ir import Edge, Graph, Layer, Port
from .layers import LAYER_KINDS
from .model import Model
from .shapes import PartialShape
from .types import BOOLEAN, element_type, from_dtype
from .validate import build_program


class Output(NamedTuple):
    """A handle on an output port of a layer being built."""

    layer: int
    port: int


class Builder:
    """Accumulates layers and edges; `build()` validates them like a read IR and returns a Model."""

    def __init__(self, name: str = "model"):
        self._graph = Graph(name, 11, {}, [])

    def _add(self, type_: str, name: str | None, attrs: dict, source: Output | None,
             output: Port | None) -> Output:
        lid = len(self._graph.layers)
        name = name if name is not None else f"{type_}_{lid}"
        if any(layer.name == name for layer in self._graph.layers.values()):
            raise IRError(f"a layer named {name!r} already exists")
        version = f"opset{LAYER_KINDS[type_].first_opset}"
        layer = Layer(lid, name, type_, version, attrs)
        if source is not None:
            fed = self._port(source)
            layer.inputs[0] = Port(0, fed.precision, fed.dims)
            self._graph.edges.append(Edge(source.layer, source.port, lid, 0))
        if output is not None:
            layer.outputs[output.id] = output
        self._graph.layers[lid] = layer
        return Output(lid, output.id if output is not None else -1)

    def _port(self, source) -> Port:
        if not isinstance(source, Output) or source.layer not in self._graph.layers \
                or source.port not in self._graph.layers[source.layer].outputs:
            raise IRError(f"{source!r} is not an output of a layer of this builder")
        return self._graph.layers[source.layer].outputs[source.port]

    def parameter(self, name: str, element_type_, shape) -> Output:
        """A model input: `element_type_` an OpenVINO type name (`f32`) or a NumPy / ml_dtypes
        dtype; `shape` a partial shape (ints, -1 or None dynamic, `(lo, hi)`, IR text, None)."""
        try:
            et = element_type(element_type_, f"parameter {name!r}")
        except IRError:
            et = from_dtype(element_type_)
        shape = PartialShape.of(shape, f"parameter {name!r} shape")
        port = Port(0, et, shape.port_dims(), (name,))
        return self._add("Parameter", name, {"shape": str(shape), "element_type": et.name}, None,
                         port)

    def _operator(self, type_: str, source: Output, name: str | None, attrs: dict) -> Output:
        fed = self._port(source)
        return self._add(type_, name, attrs, source, Port(1, BOOLEAN, fed.dims))

    def is_inf(self, source: Output, *, detect_negative: bool = True, detect_positive: bool = True,
               name: str | None = None) -> Output:
        """An IsInf-10 layer on `source`."""
        for attr, value in (("detect_negative", detect_negative),
                            ("detect_positive", detect_positive)):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{attr} must be a bool, got {value!r}")
        return self._operator("IsInf", source, name, {
            "detect_negative": write_bool(detect_negative),
            "detect_positive": write_bool(detect_positive)})

    def is_finite(self, source: Output, *, name: str | None = None) -> Output:
        """An IsFinite-10 layer on `source`."""
        return self._operator("IsFinite", source, name, {})

    def is_nan(self, source: Output, *, name: str | None = None) -> Output:
        """An IsNaN-10 layer on `source`."""
        return self._operator("IsNaN", source, name, {})

    def result(self, source: Output, name: str | None = None) -> None:
        """A model output fed by `source`; its name also becomes a tensor name of `source`, so
        OpenVINO's infer results answer to it too."""
        fed = self._port(source)
        out = self._add("Result", name, {}, source, None)
        result_name = self._graph.layers[out.layer].name
        if result_name not in fed.names:
            fed.names = (*fed.names, result_name)

    def build(self) -> Model:
        """The model, validated exactly as `read_model` validates an IR document."""
        return Model(build_program(self._graph))
