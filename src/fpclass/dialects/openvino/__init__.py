"""OpenVINO IR models with IsInf-10 / IsFinite-10 / IsNaN-10 layers: read, run on fpclass, write.

Needs no OpenVINO: the IR is parsed with the standard library and evaluated by the fpclass core.

    >>> import numpy as np, fpclass.openvino as fov
    >>> b = fov.Builder("m")
    >>> b.result(b.is_finite(b.parameter("x", "f32", [4])), "finite")
    >>> b.build().infer({"x": np.array([np.nan, 2.1, 3.7, np.inf], np.float32)})[0].tolist()
    [False, True, True, False]
"""

from __future__ import annotations

import os

from .builder import Builder, Output
from .errors import InputError, IRError, OpenVINOError
from .ir import read_graph
from .layers import LAYER_KINDS
from .model import InferResults, Input, Model
from .shapes import Dimension, PartialShape
from .types import ELEMENT_TYPES, REAL_TYPES, ElementType
from .validate import build_program
from .writer import write_model
from . import xmlsafe

__all__ = [
    "Builder", "Dimension", "ELEMENT_TYPES", "ElementType", "InferResults", "Input", "InputError",
    "IRError", "LAYER_KINDS", "Model", "OpenVINOError", "Output", "PartialShape", "REAL_TYPES",
    "read_model", "write_model",
]


def _document(xml) -> bytes | str:
    if isinstance(xml, (bytes, bytearray, memoryview)):
        return bytes(xml)
    if isinstance(xml, str) and xml.lstrip().startswith("<"):
        return xml
    if isinstance(xml, (str, os.PathLike)):
        try:
            with open(xml, "rb") as f:
                return f.read()
        except OSError as e:
            raise IRError(f"cannot read IR file {os.fspath(xml)!r}: {e.strerror}") from None
    raise TypeError(f"xml must be a path, XML text or bytes, got {type(xml).__name__}")


def read_model(xml, weights=None, *, openvino_compatible: bool = False) -> Model:
    """A Model from IR v10/v11: `xml` a path, XML text or bytes; `weights` an optional .bin path or
    bytes (these layers carry no weights, so it is only checked to exist). Booleans are read
    strictly (true/false/1/0, any case) unless `openvino_compatible`, which reads them, and
    ignores unknown attributes, exactly as OpenVINO 2026.4 does. IRError on malformed IR."""
    if weights is not None and not isinstance(weights, (bytes, bytearray, memoryview)):
        if not os.path.isfile(weights):
            raise IRError(f"weights file {os.fspath(weights)!r} does not exist")
    graph = read_graph(xmlsafe.parse(_document(xml)))
    return Model(build_program(graph, openvino_compatible=openvino_compatible))
