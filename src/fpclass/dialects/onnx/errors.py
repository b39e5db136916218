"""The exceptions fpclass.onnx raises for invalid nodes and inputs.

They derive from ValueError, not TypeError, on purpose: onnx's ReferenceEvaluator re-wraps any
TypeError raised by an operator into a generic message, which would hide the node and types named here.
"""


class OnnxNodeError(ValueError):
    """A node, its attributes, or its input does not satisfy its ONNX operator version."""


class NodeVersionError(OnnxNodeError):
    """The operator or the opset version is not one fpclass.onnx evaluates."""


class NodeAttributeError(OnnxNodeError):
    """An attribute is unknown, of the wrong AttributeProto type, or out of range."""


class NodeTypeError(OnnxNodeError):
    """The input's element type is not admitted by the operator version."""
