"""Shared checks for readers: byte ranges inside a file, without overlaps, and tasks for dtypes."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..dtypes import can_hold_nonfinite, component, np_dtype
from ..tasks import CHECK, FILE, NOT_APPLICABLE, RAW, UNCHECKED, Task


def elements(shape) -> int:
    return math.prod(shape)


def marker(path: str, fmt: str) -> Task:
    return Task(path, dtype=fmt, status=FILE)


def overlaps(ranges) -> list:
    """Names of ranges (name, begin, end) that overlap an earlier-starting range."""
    bad = []
    last_end, last_name = 0, None
    for name, begin, end in sorted(ranges, key=lambda r: (r[1], r[2])):
        if begin < last_end and end > begin:
            bad.append((name, last_name))
        if end > last_end:
            last_end, last_name = end, name
    return bad


def float_task(file, name, dtype_label, shape, element, *, source, offset, nbytes,
               storage=RAW, member="", order="C") -> Task:
    """A CHECK task for a plain (possibly complex) floating-point tensor stored as raw elements;
    complex tensors are checked as their real and imaginary parts (grid shape + (2,))."""
    dt = np_dtype(element)
    grid = tuple(shape)
    if dt.kind == "c":
        element, grid = component(dt).str, grid + (2,)
    return Task(file, name, dtype_label, tuple(shape), CHECK, source=source, storage=storage,
                offset=offset, nbytes=nbytes, member=member, element=element, order=order,
                grid=grid)


def packed_task(file, name, dtype_label, shape, element) -> Task:
    """A tensor of packed sub-byte floats (several per byte), which the core cannot read (it takes
    one value per byte). Checked without reading where the format table says `element` holds no
    NaN or Inf (float4, float6); unchecked otherwise."""
    if can_hold_nonfinite(element):
        return unchecked(file, name, dtype_label, shape,
                         f"packed sub-byte {dtype_label} values are not supported")
    return replace(float_task(file, name, dtype_label, shape, element, source=file, offset=0,
                              nbytes=0), grid=())


def not_applicable(file, name, dtype_label, shape, why="not a floating-point type") -> Task:
    return Task(file, name, dtype_label, tuple(shape), NOT_APPLICABLE, reason=why)


def unchecked(file, name, dtype_label, shape, reason) -> Task:
    return Task(file, name, dtype_label, tuple(shape), UNCHECKED, reason=reason)


def check_shape(shape, what="shape") -> tuple:
    """`shape` as a tuple of non-negative ints; ValueError naming what is wrong."""
    if not isinstance(shape, (list, tuple)):
        raise ValueError(f"{what} must be a list of integers, got {shape!r}")
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0:
            raise ValueError(f"{what} must hold non-negative integers, got {list(shape)!r}")
    return tuple(int(d) for d in shape)
