"""Shared checks for readers: byte ranges inside a file, without overlaps, and tasks for dtypes."""

from __future__ import annotations

import functools
import math
from array import array
from dataclasses import replace

import numpy as np

from . import ReaderError
from ..dtypes import can_hold_nonfinite, component, np_dtype
from ..storage.inline import Inline
from ..storage.ranges import Range
from ..tasks import CHECK, FILE, NOT_APPLICABLE, UNCHECKED, Task


def elements(shape) -> int:
    return math.prod(shape)


def marker(path: str, fmt: str) -> Task:
    return Task(path, dtype=fmt, status=FILE)


#: Most tensors one file may declare. Real checkpoints hold thousands (the largest MoE models tens
#: of thousands, over many shards); each declared tensor costs the whole scan about 12 us and
#: 500 bytes, so this keeps any file within 10 s and 512 MB (benchmarks/bench_scan.py --hostile),
#: and a header claiming more is refused.
MAX_TENSORS = 250_000


def check_count(count: int, what: str = "tensors") -> None:
    """ReaderError when a file declares more than MAX_TENSORS `what`."""
    if count > MAX_TENSORS:
        raise ReaderError(f"the file declares {count} {what}, over the limit of {MAX_TENSORS}")


class Ranges:
    """The non-empty byte ranges [begin, end) of a file's tensors, by name, clipped to the file's
    `size`; held as two integer arrays, since a header may list a million of them."""

    def __init__(self, size: int):
        self.size = size
        self.begins, self.ends, self.names = array("q"), array("q"), []

    def add(self, name: str, begin: int, end: int) -> None:
        if end > self.size:
            end = self.size
        if end > begin:
            self.begins.append(begin)
            self.ends.append(end)
            self.names.append(name)

    def _sorted(self):
        begins = np.frombuffer(self.begins, np.int64) if self.begins else np.empty(0, np.int64)
        ends = np.frombuffer(self.ends, np.int64) if self.ends else np.empty(0, np.int64)
        order = np.lexsort((ends, begins))
        begins, ends = begins[order], ends[order]
        # The end of the data covered before each range, and the range that reached it first.
        reach = np.maximum.accumulate(ends)
        before = np.concatenate(([0], reach[:-1]))
        first = np.maximum.accumulate(np.where(ends > before, np.arange(ends.size), 0))
        return order, begins, before, first, reach

    def overlaps(self) -> list:
        """(name, other) for each range that starts inside an earlier-starting range `other`."""
        order, begins, before, first, _ = self._sorted()
        hits = np.flatnonzero(begins < before)
        return [(self.names[order[i]], self.names[order[first[i - 1]]]) for i in hits.tolist()]

    def uncovered(self) -> list:
        """(begin, end) of each run of bytes in [0, size) that no range covers."""
        _, begins, before, _, reach = self._sorted()
        gaps = [(int(before[i]), int(begins[i])) for i in np.flatnonzero(begins > before).tolist()]
        end = int(reach[-1]) if reach.size else 0
        return gaps + ([(end, self.size)] if end < self.size else [])


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


def check_shape(shape, what="shape") -> tuple:
    """`shape` as a tuple of non-negative ints; ValueError naming what is wrong."""
    if not isinstance(shape, (list, tuple)):
        raise ValueError(f"{what} must be a list of integers, got {shape!r}")
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0:
            raise ValueError(f"{what} must hold non-negative integers, got {list(shape)!r}")
    return tuple(int(d) for d in shape)


def values_task(file, name, values, dtype_label: str = "") -> Task:
    """A task for values a reader holds in memory (a pickled Python float, an attribute, an array
    a format's own library decoded): checked from a copy of their bytes if floating point (complex
    as its two parts), not applicable if integer, bool or text, unchecked (with the dtype named)
    for anything else (objects, records, datetimes). The one way readers report in-memory values;
    empty input is checked as empty."""
    a = np.asarray(values)
    label = dtype_label or a.dtype.name
    shape = tuple(a.shape)
    if a.dtype.kind in "biu":
        return not_applicable(file, name, label, shape)
    if a.dtype.kind in "SU":
        return not_applicable(file, name, label, shape, "text, not a floating-point type")
    if a.dtype.kind not in "fc" or a.dtype.names is not None:
        return unchecked(file, name, label, shape, f"values of type {a.dtype} cannot be classified")
    data = np.ascontiguousarray(a).tobytes()
    return float_task(file, name, label, shape, a.dtype.str, Inline(data, len(data)))
