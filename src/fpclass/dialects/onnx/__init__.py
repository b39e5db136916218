"""fpclass.onnx: ONNX IsNaN-9/13/20 and IsInf-10/20, exactly as the installed onnx's schemas define
them, on the fpclass core.

- `Backend`: an `onnx.backend.base.Backend` (IsNaN / IsInf on fpclass, other operators through
  onnx's ReferenceEvaluator).
- `NEW_OPS` / `Evaluator`: the same operators for `onnx.reference.ReferenceEvaluator`.
- `NodeSemantics`: one node's checked semantics; `op_version`: what a version admits.
- `to_array` / `from_array`: TensorProto <-> NumPy, bfloat16 and float8 bit for bit.

Importing this module imports onnx (fpclass[onnx]); `import fpclass` does not.
"""

from ..._optional import require

require("onnx", "onnx", "fpclass.onnx")   # before the modules below, whose bare imports would fail

from .backend import Backend, BackendRep
from .errors import NodeAttributeError, NodeTypeError, NodeVersionError, OnnxNodeError
from .evaluator import NEW_OPS, Evaluator, IsInf, IsNaN
from .nodes import NodeSemantics
from .schema import OPERATORS, OpVersion, op_version, since_versions, type_name
from .tensors import dtype_of, element_type_of, from_array, to_array

__all__ = [
    "NEW_OPS", "OPERATORS", "Backend", "BackendRep", "Evaluator", "IsInf", "IsNaN",
    "NodeAttributeError", "NodeSemantics", "NodeTypeError", "NodeVersionError", "OnnxNodeError",
    "OpVersion", "dtype_of", "element_type_of", "from_array", "op_version", "since_versions",
    "to_array", "type_name",
]
