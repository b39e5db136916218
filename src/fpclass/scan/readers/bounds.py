"""Bounds on what a file declares, checked before a reader trusts it: how many tensors, what
shapes, which byte ranges (inside the file, without overlaps)."""

from __future__ import annotations

import math
from array import array

import numpy as np

from . import ReaderError


def elements(shape) -> int:
    return math.prod(shape)


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


def check_shape(shape, what="shape") -> tuple:
    """`shape` as a tuple of non-negative ints; ValueError naming what is wrong."""
    if not isinstance(shape, (list, tuple)):
        raise ValueError(f"{what} must be a list of integers, got {shape!r}")
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0:
            raise ValueError(f"{what} must hold non-negative integers, got {list(shape)!r}")
    return tuple(int(d) for d in shape)
