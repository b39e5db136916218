"""The exceptions fpclass.openvino raises: every message names the offending layer, port or input."""


class OpenVINOError(ValueError):
    """Base class: something fpclass.openvino was given does not satisfy the IR or the spec."""


class IRError(OpenVINOError):
    """The IR document is malformed or describes a graph fpclass (or OpenVINO) cannot run."""


class InputError(OpenVINOError):
    """An input given to `Model.infer` does not match its Parameter (name, element type, shape)."""
