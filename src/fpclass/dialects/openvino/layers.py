"""The layer catalogue: every layer type fpclass.openvino runs, its ports, attributes and meaning.

Each operator layer translates its spec's interface into one fpclass core call; nothing here
decides what a NaN or an Inf is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ... import isfinite, isinf, isnan


def _is_inf(x: np.ndarray, out: np.ndarray, options: dict) -> None:
    isinf(x, out, detect_negative=options["detect_negative"],
          detect_positive=options["detect_positive"])


@dataclass(frozen=True)
class LayerKind:
    """One layer type: the first opset defining it, its port counts, its `<data>` attributes
    (name -> default for booleans, None for required text) and, for operators, its evaluation."""

    type: str
    first_opset: int
    inputs: int
    outputs: int
    attributes: dict
    evaluate: Callable[[np.ndarray, np.ndarray, dict], None] | None = None


LAYER_KINDS: dict[str, LayerKind] = {k.type: k for k in (
    LayerKind("Parameter", 1, 0, 1, {"shape": None, "element_type": None}),
    LayerKind("Result", 1, 1, 0, {}),
    LayerKind("IsInf", 10, 1, 1, {"detect_negative": True, "detect_positive": True}, _is_inf),
    LayerKind("IsFinite", 10, 1, 1, {}, lambda x, out, _: isfinite(x, out)),
    LayerKind("IsNaN", 10, 1, 1, {}, lambda x, out, _: isnan(x, out)),
)}
