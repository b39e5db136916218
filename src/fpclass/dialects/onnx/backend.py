"""An onnx backend (`onnx.backend.base.Backend`): IsNaN / IsInf on fpclass, every other operator
through onnx's ReferenceEvaluator. This is the class the ONNX conformance suite runs.

    >>> outputs = fpclass.onnx.Backend.run_model(model, [x])
    >>> outputs["y"]            # or outputs[0]
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.checker
import onnx.external_data_helper
import onnx.shape_inference
from onnx.backend.base import Backend as _BaseBackend
from onnx.backend.base import BackendRep as _BaseBackendRep
from onnx.backend.base import Device, DeviceType, namedtupledict

from .evaluator import Evaluator
from .nodes import NodeSemantics
from .schema import (DEFAULT_DOMAINS, OPERATORS, canonical_domains, canonical_node,
                     default_opset, type_name)
from .tensors import element_type_of, to_array

#: Above this a ModelProto cannot be serialized, so onnx's checker cannot take it in memory.
_PROTOBUF_LIMIT = 2**31 - 1


class BackendRep(_BaseBackendRep):
    """A prepared model: `run(inputs)` returns its outputs as a tuple that also answers by name."""

    def __init__(self, model: onnx.ModelProto, evaluator: Evaluator):
        self.model = model
        self._evaluator = evaluator
        graph = model.graph
        initialized = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
        self._inputs = [i for i in graph.input if i.name not in initialized]
        self.input_names = [i.name for i in self._inputs]
        self.output_names = [o.name for o in graph.output]
        self._declared = {i.name: i.type for i in graph.input}  # every graph input, initialized or not

    def run(self, inputs, **kwargs):
        """Outputs for `inputs`: a dict by name, a sequence in graph-input order (initialized inputs
        skipped), or a single array for a one-input model. TensorProto inputs are accepted."""
        if kwargs:
            raise TypeError(f"unexpected options {sorted(kwargs)}; BackendRep.run takes only inputs")
        feeds = {name: self._check_input(name, value) for name, value in self._named(inputs).items()}
        results = self._evaluator.run(None, feeds)
        return namedtupledict("Outputs", self.output_names)(*results)

    def _named(self, inputs) -> dict:
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - self._declared.keys())
            if unknown:
                raise ValueError(f"unknown inputs {unknown}; the model's inputs are {self.input_names}")
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ValueError(f"missing inputs {missing}; the model's inputs are {self.input_names}")
            return dict(inputs)
        if isinstance(inputs, (np.ndarray, onnx.TensorProto)):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise ValueError(f"the model takes {len(self.input_names)} input(s) {self.input_names}, "
                             f"got {len(inputs)}")
        return dict(zip(self.input_names, inputs))

    def _check_input(self, name: str, value):
        if isinstance(value, onnx.TensorProto):
            value = to_array(value)
        if not isinstance(value, np.ndarray):
            return value  # sequences, maps, optionals: the evaluator's business
        declared = self._declared.get(name)
        if declared is not None and declared.HasField("tensor_type") and declared.tensor_type.elem_type:
            want = declared.tensor_type.elem_type
            try:
                got = type_name(element_type_of(value.dtype))
            except TypeError:
                got = f"dtype {value.dtype}"
            if got != type_name(want):
                raise TypeError(f"input {name!r} is declared {type_name(want)}, got {got}")
        return value


class Backend(_BaseBackend):
    """fpclass's onnx backend (CPU). `prepare(model)` takes a ModelProto, a path or serialized
    bytes; pass `base_dir=` for a ModelProto whose initializers live in external files."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """True for "CPU" (and "CPU:n"), the only device fpclass runs on."""
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError, TypeError):
            return False

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> BackendRep:
        """Check `model` (onnx checker, then every IsNaN / IsInf node's attributes and statically
        known input types) and build its evaluator. Raises OnnxNodeError naming the bad node."""
        base_dir = kwargs.pop("base_dir", None)
        if kwargs:
            raise TypeError(f"unexpected options {sorted(kwargs)}; prepare accepts base_dir")
        _check_device(device)
        model = canonical_domains(_load(model, base_dir))  # the default domain as "", not "ai.onnx"
        _check_fpclass_nodes(model)  # first, so its errors name node and version
        if model.ByteSize() <= _PROTOBUF_LIMIT:
            onnx.checker.check_model(model)
        return BackendRep(model, Evaluator(model))

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Outputs of one node for `inputs` (in node.input order) at `opset_version` (default: the
        newest the installed onnx knows)."""
        node = canonical_node(node)  # the default domain as "", which onnx's checker wants
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        _check_device(device)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        values = [to_array(v) if isinstance(v, onnx.TensorProto) else v for v in inputs]
        if node.op_type in OPERATORS and node.domain in DEFAULT_DOMAINS:
            results = [NodeSemantics.from_proto(node, opset)(*values)]
        else:
            graph = onnx.helper.make_graph(
                [node], "run_node", [onnx.helper.make_value_info(n, onnx.TypeProto()) for n in node.input if n],
                [onnx.helper.make_value_info(n, onnx.TypeProto()) for n in node.output if n])
            feeds = {n: v for n, v in zip(node.input, values) if n}
            results = Evaluator(graph, opsets={node.domain: opset}).run(None, feeds)
        return namedtupledict("Outputs", [n for n in node.output if n])(*results)


def _check_device(device: str) -> None:
    if not Backend.supports_device(device):
        raise ValueError(f"fpclass.onnx runs on device 'CPU' only, got {device!r}")


def _load(model, base_dir) -> onnx.ModelProto:
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model))  # also loads external data next to the file
    if isinstance(model, bytes):
        model = onnx.load_model_from_string(model)
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"model must be an onnx.ModelProto, a path or bytes, got {type(model).__name__}")
    external = [t.name for t in model.graph.initializer if onnx.external_data_helper.uses_external_data(t)]
    if external:
        if base_dir is None:
            raise ValueError(f"initializers {external[:3]} keep their data in external files; "
                             f"pass base_dir=, the directory the model was saved in")
        loaded = onnx.ModelProto()
        loaded.CopyFrom(model)
        onnx.external_data_helper.load_external_data_for_model(loaded, os.fspath(base_dir))
        model = loaded
    return model


def _declared_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element types of the main graph's values that are known before running: declared inputs,
    initializers, value_info, and what onnx's (non-strict) type inference adds."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 -- inference is a bonus; run time checks every input anyway
        inferred = model.graph
    known = {}
    for info in [*inferred.value_info, *model.graph.input, *model.graph.value_info]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            known[info.name] = info.type.tensor_type.elem_type
    for init in model.graph.initializer:
        known[init.name] = init.data_type
    return known


def _check_fpclass_nodes(model: onnx.ModelProto) -> None:
    opsets = {o.domain: o.version for o in model.opset_import}
    nodes = [n for n in model.graph.node if n.op_type in OPERATORS and n.domain in DEFAULT_DOMAINS]
    if not nodes:
        return
    known = _declared_types(model)
    for node in nodes:
        semantics = NodeSemantics.from_proto(node, default_opset(opsets) or 0)
        if node.input and node.input[0] in known:
            semantics.check_type(known[node.input[0]], f"input X ({node.input[0]!r})")
