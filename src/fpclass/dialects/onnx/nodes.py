"""The semantics of one IsNaN / IsInf node: its operator version, attributes and admitted input.

    >>> node = onnx.helper.make_node("IsInf", ["x"], ["y"], detect_negative=0)
    >>> NodeSemantics.from_proto(node, opset=20)(np.array([-np.inf, np.inf]))
    array([False,  True])

Classification itself is fpclass's: this module only translates the spec's interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import onnx

import fpclass

from .errors import NodeAttributeError, NodeTypeError, NodeVersionError
from .schema import DEFAULT_DOMAINS, OPERATORS, OpVersion, op_version, type_name
from .tensors import element_type_of

_ATTRIBUTE_TYPE_NAME = onnx.AttributeProto.AttributeType.Name


def describe(node: onnx.NodeProto) -> str:
    """How errors name a node: its name, or its first output when it has none."""
    if node.name:
        return f"{node.op_type} node {node.name!r}"
    first = node.output[0] if node.output else "?"
    return f"unnamed {node.op_type} node (output {first!r})"


@dataclass(frozen=True)
class NodeSemantics:
    """An IsNaN or IsInf node bound to the operator version in force at its opset, with checked
    attribute values. Calling it on an array returns a bool array of the same shape."""

    version: OpVersion
    where: str                                   # describe(node), for error messages
    opset: int
    attributes: dict[str, int] = field(default_factory=dict)
    linked: dict[str, str] = field(default_factory=dict)   # attribute -> caller attribute (functions)

    @classmethod
    def from_proto(cls, node: onnx.NodeProto, opset: int) -> NodeSemantics:
        """Check `node` against its operator version at default-domain `opset`: domain, input and
        output count, attribute names, types and values (missing ones take the schema default)."""
        where = describe(node)
        if node.domain not in DEFAULT_DOMAINS or node.op_type not in OPERATORS:
            raise NodeVersionError(f"{where}: fpclass.onnx evaluates {', '.join(OPERATORS)} of the "
                                   f"default domain, not {node.op_type!r} of domain {node.domain!r}")
        try:
            version = op_version(node.op_type, opset)
        except NodeVersionError as e:
            raise NodeVersionError(f"{where}: {e}") from None
        context = f"{where} ({version.label}, opset {opset})"
        if len(node.input) != 1 or len(node.output) != 1:
            raise NodeAttributeError(f"{context}: takes exactly one input and one output, got "
                                     f"{len(node.input)} input(s) and {len(node.output)} output(s)")
        values = {name: a.default for name, a in version.attributes.items()}
        linked = {}
        for att in node.attribute:
            spec = version.attributes.get(att.name)
            if spec is None:
                accepted = ", ".join(sorted(version.attributes)) or "none"
                raise NodeAttributeError(f"{context}: unknown attribute {att.name!r}; "
                                         f"accepted attributes: {accepted}")
            if att.ref_attr_name:
                linked[att.name] = att.ref_attr_name
                continue
            if att.type != spec.type:
                raise NodeAttributeError(
                    f"{context}: attribute {att.name!r} must be {_ATTRIBUTE_TYPE_NAME(spec.type)}, "
                    f"got {_ATTRIBUTE_TYPE_NAME(att.type)}")
            values[att.name] = onnx.helper.get_attribute_value(att)
        semantics = cls(version, where, opset, {}, linked)
        return semantics.bind(values)

    @property
    def context(self) -> str:
        return f"{self.where} ({self.version.label}, opset {self.opset})"

    def bind(self, values: dict) -> NodeSemantics:
        """A copy with attribute `values` (the schema's INT flags must be 0 or 1) set."""
        merged = dict(self.attributes)
        for name, value in values.items():
            if name not in self.version.attributes:
                raise NodeAttributeError(f"{self.context}: unknown attribute {name!r}")
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                    or value not in (0, 1):
                raise NodeAttributeError(f"{self.context}: attribute {name!r} must be the INT 0 or 1, "
                                         f"got {value!r}")
            merged[name] = int(value)
        return replace(self, attributes=merged)

    def check_type(self, element_type: int, what: str = "input X") -> None:
        """NodeTypeError unless TensorProto `element_type` is admitted by this operator version."""
        if element_type not in self.version.admitted:
            raise NodeTypeError(
                f"{self.context}: {what} has type {type_name(element_type)}, which "
                f"{self.version.label} does not admit; admitted: {self.version.admitted_names()}")

    def check_dtype(self, dtype, what: str = "input X") -> None:
        """check_type for a NumPy dtype (any byte order)."""
        try:
            element_type = element_type_of(dtype)
        except TypeError:
            raise NodeTypeError(
                f"{self.context}: {what} has dtype {np.dtype(dtype)}, which is no ONNX tensor type; "
                f"admitted: {self.version.admitted_names()}") from None
        self.check_type(element_type, what)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Y for input X: a bool array of x's shape (also for 0-d and empty x)."""
        if self.linked:
            raise NodeAttributeError(f"{self.context}: attributes {sorted(self.linked)} refer to "
                                     f"attributes of an enclosing function and were never bound")
        if not isinstance(x, np.ndarray):
            raise NodeTypeError(f"{self.context}: input X must be a numpy.ndarray, "
                                f"got {type(x).__name__}")
        self.check_dtype(x.dtype)
        # No out=: fpclass then answers from recycled memory (a fresh 64 MiB output would spend
        # a third of the call in page faults, measured) or, for a format without such values,
        # with untouched zeroed pages. ONNX tensors are C-order, whatever x's layout.
        if self.version.op_type == "IsNaN":
            y = fpclass.isnan(x)
        else:
            y = fpclass.isinf(x, detect_negative=bool(self.attributes["detect_negative"]),
                              detect_positive=bool(self.attributes["detect_positive"]))
        y = np.asarray(y)  # a 0-d input gives a NumPy scalar
        return y if y.flags.c_contiguous else np.ascontiguousarray(y)
