"""The tasks a reader reports (see scan/tasks.py): a file marker, floats stored as raw elements, packed
sub-byte floats, values held in memory (`values_task`, the one way to report them), and tensors
not applicable or unchecked with their reason."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ...results.build import value_rule
from ..dtypes import can_hold_nonfinite, component, np_dtype
from ..storage.inline import Inline
from ..storage.ranges import Range
from ..tasks import CHECK, FILE, NOT_APPLICABLE, UNCHECKED, Task


def marker(path: str, fmt: str) -> Task:
    return Task(path, dtype=fmt, status=FILE)


def float_task(file, name, dtype_label, shape, element, storage, order="C", **fields) -> Task:
    """A CHECK task for a plain (possibly complex) floating-point tensor whose elements `storage`
    (a scan.storage object) holds (`fields`: other Task fields); complex tensors are checked as
    their real and imaginary parts (grid shape + (2,))."""
    element, parts = _as_parts(element)
    return Task(file, name, dtype_label, shape, CHECK, element=element, order=order,
                grid=shape + (2,) if parts else shape, storage=storage, **fields)


@functools.lru_cache(maxsize=None)
def _as_parts(element: str) -> tuple:
    """(the element dtype classified, whether each value is two of them: complex)."""
    dt = np_dtype(element)
    return (component(dt).str, True) if dt.kind == "c" else (element, False)


def packed_task(file, name, dtype_label, shape, element) -> Task:
    """A tensor of packed sub-byte floats (several per byte), which the core cannot read (it takes
    one value per byte). Checked without reading where the format table says `element` holds no
    NaN or Inf (float4, float6); unchecked otherwise."""
    if can_hold_nonfinite(element):
        return unchecked(file, name, dtype_label, shape,
                         f"packed sub-byte {dtype_label} values are not supported")
    return replace(float_task(file, name, dtype_label, shape, element, Range(file, 0, 0)),
                   grid=())


def not_applicable(file, name, dtype_label, shape, why="not a floating-point type") -> Task:
    return Task(file, name, dtype_label, tuple(shape), NOT_APPLICABLE, reason=why)


def unchecked(file, name, dtype_label, shape, reason) -> Task:
    return Task(file, name, dtype_label, tuple(shape), UNCHECKED, reason=reason)


def values_task(file, name, values, dtype_label: str = "") -> Task:
    """A task for values a reader holds in memory (a pickled Python float, an attribute, an array
    a format's own library decoded): checked from a copy of their bytes if floating point (complex
    as its two parts), else as results.build.value_rule says: not applicable if integer, bool or
    text, unchecked (with the dtype named) for anything else (objects, records, datetimes). The
    one way readers report in-memory values; empty input is checked as empty."""
    a = np.asarray(values)
    label = dtype_label or a.dtype.name
    shape = tuple(a.shape)
    rule = value_rule(a.dtype)  # the rule fpclass.check follows for the values it is given
    if rule is not None:
        status, reason = rule
        return Task(file, name, label, shape, status, reason=reason)
    data = np.ascontiguousarray(a).tobytes()
    return float_task(file, name, label, shape, a.dtype.str, Inline(data, len(data)))
