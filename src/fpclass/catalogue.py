"""The catalogue of public functions: their names by kind, their NumPy implementations and
signatures. The one list every layer above the operators reads (the façade, the adapters, dask);
it imports only the operators, so nothing that reads it imports the façade."""

from __future__ import annotations

import functools
import inspect
from typing import Callable

from .operators import elementwise, queries

#: Every public function, by kind. The NumPy implementation of each is the function of the same
#: name in operators.elementwise (element-wise kind) or operators.queries (the others);
#: fpclass.dask answers each kind with one lazy implementation, the adapters each with one rule.
KINDS = {
    "elementwise": ("isnan", "isinf", "isfinite", "isposinf", "isneginf"),
    # queries with axis / keepdims: their per-axis answers follow the caller's container
    "per_axis": ("any_nan", "any_inf", "any_nonfinite", "all_finite", "count_nan", "count_inf",
                 "count_nonfinite"),
    "histogram": ("class_counts",),
    "first": ("first_nan", "first_inf", "first_nonfinite"),
    "locate": ("locate_nan", "locate_inf", "locate_nonfinite"),
}
#: name -> kind, in KINDS order.
KIND = {name: kind for kind, names in KINDS.items() for name in names}
ELEMENTWISE, PER_AXIS = KINDS["elementwise"], KINDS["per_axis"]
LOCATING = KINDS["first"] + KINDS["locate"]


@functools.cache
def implementation(name: str) -> Callable:
    """The NumPy implementation of the public function `name`; AttributeError for other names."""
    if name not in KIND:
        raise AttributeError(f"fpclass has no function {name!r}")
    return getattr(elementwise if name in ELEMENTWISE else queries, name)


@functools.cache
def signature(name: str) -> inspect.Signature:
    """The signature of the public function `name` (its NumPy implementation's)."""
    return inspect.signature(implementation(name))


def arguments(name: str, x, args, kwargs) -> dict:
    """The public function's arguments by name, defaults filled in (TypeError as a call would)."""
    bound = signature(name).bind(x, *args, **kwargs)
    bound.apply_defaults()
    return bound.arguments
