"""`import fpclass.openvino`: the OpenVINO IR dialect, fpclass.dialects.openvino, under a short name."""
from fpclass.dialects.openvino import *  # noqa: F401,F403
from fpclass.dialects.openvino import __all__  # noqa: F401
