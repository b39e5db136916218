"""IsNaN and IsInf as drop-in operators for onnx's ReferenceEvaluator, computed by fpclass.

    >>> from onnx.reference import ReferenceEvaluator
    >>> session = ReferenceEvaluator(model, new_ops=fpclass.onnx.NEW_OPS)

The operator version comes from the evaluator's opset for the node's domain, so one class serves
IsNaN-9/13/20 and IsInf-10/20 (the evaluator keys new_ops by class name).
"""

from __future__ import annotations

import io
from dataclasses import replace

import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from .nodes import NodeSemantics
from .schema import canonical_domains, default_opset


class _FpclassOp(OpRun):
    op_domain = ""

    def __init__(self, onnx_node, run_params, schema=None):
        super().__init__(onnx_node, run_params, schema)
        opset = default_opset(run_params["opsets"])
        self.semantics = NodeSemantics.from_proto(onnx_node, opset)

    def _semantics_for(self, attributes: dict) -> NodeSemantics:
        if not self.semantics.linked:
            return self.semantics
        bound = {name: attributes[name] for name in self.semantics.linked}
        return replace(self.semantics, linked={}).bind(bound)


class IsNaN(_FpclassOp):
    """ONNX IsNaN (any version the evaluator's opset selects) on fpclass."""

    def _run(self, x):
        return (self.semantics(x),)


class IsInf(_FpclassOp):
    """ONNX IsInf (any version the evaluator's opset selects) on fpclass."""

    def _run(self, x, detect_negative=None, detect_positive=None):
        semantics = self._semantics_for(
            {"detect_negative": detect_negative, "detect_positive": detect_positive})
        return (semantics(x),)


#: Pass as ReferenceEvaluator(model, new_ops=NEW_OPS).
NEW_OPS = (IsNaN, IsInf)


class Evaluator(ReferenceEvaluator):
    """onnx's ReferenceEvaluator with IsNaN / IsInf on fpclass everywhere in the model: the main
    graph, control-flow subgraphs and model-local functions (which the evaluator builds through
    this class). Extra `new_ops` come after fpclass's and cannot replace them. A model may name
    the default domain "ai.onnx" (ReferenceEvaluator itself knows only "")."""

    def __init__(self, proto, *args, new_ops=None, **kwargs):
        if isinstance(proto, str):
            proto = onnx.load(proto)
        elif isinstance(proto, bytes):
            proto = onnx.load(io.BytesIO(proto))
        if isinstance(proto, onnx.ModelProto):
            proto = canonical_domains(proto)
        super().__init__(proto, *args, new_ops=[*NEW_OPS, *(new_ops or ())], **kwargs)
