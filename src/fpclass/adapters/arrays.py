"""Foreign arrays read in place: the NumPy implementation runs on an ndarray view of their memory,
and the answer goes back in the caller's container. Shared by the torch and DLPack adapters."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..catalogue import ELEMENTWISE, PER_AXIS, arguments, implementation
from ..operators import queries

#: What a negated view (torch's lazy negation) turns each sign-specific question into.
_NEGATED_NAME = {"isposinf": "isneginf", "isneginf": "isposinf"}


class View(NamedTuple):
    """An ndarray over a foreign array's memory, and how its stored values relate to the values."""

    array: np.ndarray
    negated: bool = False     # stored values are the negatives of the values (torch's lazy neg bit)
    packed: str = ""          # the name of a packed sub-byte dtype: classes cannot be counted
    conjugated: bool = False  # stored imaginary parts are the negatives of the values' (lazy conj)


def run(name: str, view: View, args, kwargs, *, new_mask: Callable, as_out: Callable,
        per_axis: Callable):
    """Answer fpclass.`name` for the array behind `view`. Element-wise results are written into
    the ndarray of `new_mask(ndarray)` -> (ndarray to write, finish() -> the answer), or of
    `as_out(out)` -> the same; per-axis query answers (as ndarrays, 0-d for a full reduction)
    go through `per_axis`;
    everything else comes back as it does for NumPy input."""
    given = arguments(name, view.array, args, kwargs)
    if view.negated:
        name = _NEGATED_NAME.get(name, name)
        if "detect_negative" in given:
            given["detect_negative"], given["detect_positive"] = \
                given["detect_positive"], given["detect_negative"]
    impl = implementation(name)
    if name in ELEMENTWISE:
        out = given.pop("out")
        target, finish = new_mask(view.array) if out is None else as_out(out)
        impl(view.array, target, **{k: v for k, v in given.items() if k != "x"})
        return finish()
    if name == "class_counts" and view.packed:
        raise TypeError(f"class_counts cannot count the classes of {view.packed} (two packed values "
                        "per byte, and neither can be NaN or Inf); unpack them first")
    answer = impl(**given)
    if name == "class_counts" and view.negated:
        return swap_signs(answer)
    if name in PER_AXIS:
        # a full reduction too: a 0-d array of the caller's kind, as torch.isnan(t).sum() gives
        return per_axis(np.asarray(answer))
    return answer


def swap_signs(counts: queries.ClassCounts) -> queries.ClassCounts:
    """The class counts of the negated values."""
    return queries.ClassCounts(counts.nan, counts.neginf, counts.posinf, counts.neg_zero,
                               counts.pos_zero, counts.neg_subnormal, counts.pos_subnormal,
                               counts.neg_normal, counts.pos_normal)


def check_out(out, shape) -> np.ndarray:
    """A NumPy `out=` as the operators take it (the operators validate it)."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a bool or uint8 array of shape {tuple(shape)} (NumPy, or "
                        f"the input's own kind), got {type(out).__module__}.{type(out).__qualname__}")
    return out
