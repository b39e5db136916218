"""The layer catalogue: every layer type fpclass.openvino runs, its ports, attributes and meaning.

Each operator layer translates its spec's interface into one fpclass core call; nothing here
decides what a NaN or an Inf is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import fpclass


def _is_inf(x: np.ndarray, out: np.ndarray | None, options: dict):
    return fpclass.isinf(x, out, detect_negative=options["detect_negative"],
                         detect_positive=options["detect_positive"])


@dataclass(frozen=True)
class LayerKind:
    """One layer type: the first opset defining it, its port counts, its `<data>` attributes
    (name -> default for booleans, None for required text) and, for operators, its evaluation:
    evaluate(x, out, options) is the fpclass call's answer, written into `out` unless it is None."""

    type: str
    first_opset: int
    inputs: int
    outputs: int
    attributes: dict
    evaluate: Callable[[np.ndarray, np.ndarray | None, dict], object] | None = None


LAYER_KINDS: dict[str, LayerKind] = {k.type: k for k in (
    LayerKind("Parameter", 1, 0, 1, {"shape": None, "element_type": None}),
    LayerKind("Result", 1, 1, 0, {}),
    LayerKind("IsInf", 10, 1, 1, {"detect_negative": True, "detect_positive": True}, _is_inf),
    LayerKind("IsFinite", 10, 1, 1, {}, lambda x, out, _: fpclass.isfinite(x, out)),
    LayerKind("IsNaN", 10, 1, 1, {}, lambda x, out, _: fpclass.isnan(x, out)),
)}
