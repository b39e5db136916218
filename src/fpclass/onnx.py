"""`import fpclass.onnx`: the ONNX dialect (see fpclass.dialects.onnx)."""

from .dialects.onnx import *  # noqa: F403
from .dialects.onnx import __all__  # noqa: F401
