"""Strided views of stored bytes (a PyTorch tensor that is a transpose or a slice of its storage),
read in blocks of bounded size: each block is one positioned read of the bytes it spans, seen as
an N-d array with the view's strides.

Blocks follow the storage's own order (the view's dimensions sorted by stride), so a transposed
view reads its bytes once and in sequence, like a contiguous one; `to_view` maps an index in that
order back to the view's own dimensions.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..._records import stored_through_slots
from . import Storage
from ..dtypes import np_dtype
from .reads import SourceError, close_source, open_source, source_size, read_exactly


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Strided(Storage):
    """A view of the task's shape with element `strides` whose first element is at byte `offset`
    of `source` (`nbytes`: the distinct bytes it reaches). Dimensions in `broadcast` (stride 0)
    are read once and counted as many times as their sizes say; with `overlap`, other
    dimensions overlap: the span is read once and each value counted as often as the view
    reaches it (overlap.py)."""

    source: str
    offset: int
    nbytes: int
    strides: tuple
    broadcast: tuple = ()
    overlap: bool = False
    kind = "strided"
    flat = False

    def layout(self, task) -> tuple:
        """(sizes, strides) of the view in its items: a complex view is read as its parts, with
        a last axis of 2 (strides doubled, the parts one item apart); broadcast dimensions are
        read once (size 1)."""
        shape = tuple(1 if d in self.broadcast else n for d, n in enumerate(task.shape))
        if len(task.grid) == len(task.shape) + 1:
            return shape + (2,), tuple(2 * s for s in self.strides) + (1,)
        return shape, self.strides

    def blocks(self, task, chunk_bytes: int):
        """Yield (origin, N-d array) blocks of about `chunk_bytes`, origins in storage order."""
        dtype = np_dtype(task.element)
        source = self.source
        fd = open_source(source)
        try:
            size = source_size(fd)

            def read_at(view, position):
                if position + len(view) > size:
                    raise SourceError(f"a view reaches byte {position + len(view)} of "
                                      f"{source} ({size} bytes; truncated?)")
                read_exactly(fd, view, position, source)
            yield from blocks(read_at, self.offset, dtype, *self.layout(task), chunk_bytes)
        finally:
            close_source(fd)

    def where(self, task):
        order = storage_order(*self.layout(task))

        def where(origin, row):
            return to_view(tuple(o + r for o, r in zip(origin, row)), order)
        return where


def storage_order(sizes: tuple, strides: tuple) -> tuple:
    """The view's dimensions from the largest stride to the smallest (the storage's order)."""
    return tuple(sorted(range(len(sizes)), key=lambda d: (-strides[d], -sizes[d], d)))


def to_view(index: tuple, order: tuple) -> tuple:
    """An index in storage order (plus any trailing axes, such as a complex part) as an index in
    the view's dimensions."""
    out = [0] * len(order)
    for position, dim in enumerate(order):
        out[dim] = index[position]
    return tuple(out) + tuple(index[len(order):])


def blocks(read_at, offset: int, dtype: np.dtype, sizes: tuple, strides: tuple,
           chunk_bytes: int):
    """Yield (origin, array) covering every element of the view once: the view of `sizes` and
    `strides` (in elements) whose first element is at byte `offset`, read with
    `read_at(memoryview, byte position)`. Origins and arrays are in storage order (see
    storage_order), of the view's full rank; each array is a strided view into a buffer reused by
    the next block."""
    if not sizes:
        sizes, strides = (1,), (1,)
        squeeze = True
    else:
        squeeze = False
    if math.prod(sizes) == 0:
        return
    order = storage_order(sizes, strides)
    s = [sizes[d] for d in order]
    t = [strides[d] for d in order]
    item = dtype.itemsize
    limit = max(1, chunk_bytes // item)
    # Whole dimensions from the innermost out while their span fits one block...
    k, span = len(s), 1
    while k > 0 and span + (s[k - 1] - 1) * t[k - 1] <= limit:
        span += (s[k - 1] - 1) * t[k - 1]
        k -= 1
    # ...then the next one cut into pieces that fit, and single indices of the rest.
    if k:
        step = t[k - 1]
        piece = s[k - 1] if step == 0 else max(1, min(s[k - 1], (limit - span) // step + 1))
    buf = None
    for outer in itertools.product(*(range(n) for n in s[:k - 1])) if k > 1 else [()]:
        starts = range(0, s[k - 1], piece) if k else [0]
        for j in starts:
            count = min(piece, s[k - 1] - j) if k else 1
            origin = outer + ((j,) if k else ()) + (0,) * (len(s) - k)
            shape = (1,) * max(k - 1, 0) + ((count,) if k else ()) + tuple(s[k:])
            steps = (0,) * max(k - 1, 0) + ((t[k - 1],) if k else ()) + tuple(t[k:])
            first = sum(i * st for i, st in zip(origin, t))
            nbytes = (sum((n - 1) * st for n, st in zip(shape, steps)) + 1) * item
            if buf is None or buf.size < nbytes:
                buf = np.empty(nbytes, np.uint8)
            read_at(memoryview(buf)[:nbytes], offset + first * item)
            arr = np.ndarray(shape, dtype, buf, 0, tuple(st * item for st in steps))
            yield (() if squeeze else origin), (arr.reshape(()) if squeeze else arr)


def multiplicity(sizes: tuple, strides: tuple) -> np.ndarray:
    """How many indices of the view (element `sizes` and `strides`, all >= 0) reach each element
    of the span it covers, [0, 1 + sum((n - 1) * stride)): int64, built one dimension at a time
    as a running sum along each residue of its stride (linear in the span, whatever the view's
    element count)."""
    m = np.ones(1, np.int64)
    for n, st in sorted(zip(sizes, strides), key=lambda p: p[1]):
        if n == 1:
            continue
        if st == 0:
            m = m * n
            continue
        extent = m.size + (n - 1) * st
        rows = -(-extent // st)
        padded = np.zeros((rows + n) * st, np.int64)
        padded[n * st:n * st + m.size] = m
        cs = padded.reshape(-1, st)
        np.cumsum(cs, axis=0, out=cs)  # along the positions of each residue
        m = (cs[n:] - cs[:-n]).reshape(-1)[:extent]
    return m


def find_index(position: int, sizes: tuple, strides: tuple, budget: int = 100_000):
    """An index of the view that reaches element `position` of its span, or None when none
    does (or none was found within `budget` steps): a depth-first search over the dimensions
    from the largest stride down, each index bounded by what the smaller strides can still add."""
    dims = sorted(range(len(sizes)), key=lambda d: -strides[d])
    reach = [0] * (len(dims) + 1)  # the most the dimensions from k on can add
    for k in range(len(dims) - 1, -1, -1):
        reach[k] = reach[k + 1] + (sizes[dims[k]] - 1) * strides[dims[k]]
    stack = [(position, ())]
    for _ in range(budget):
        if not stack:
            break
        left, chosen = stack.pop()
        k = len(chosen)
        if k == len(dims):
            if left == 0:
                index = [0] * len(sizes)
                for d, i in zip(dims, chosen):
                    index[d] = i
                return tuple(index)
            continue
        n, st = sizes[dims[k]], strides[dims[k]]
        if st == 0:
            stack.append((left, chosen + (0,)))
            continue
        low = max(0, -(-(left - reach[k + 1]) // st))
        for i in range(low, min(n - 1, left // st) + 1):  # the highest is tried first
            stack.append((left - i * st, chosen + (i,)))
    return None


__all__ = ["blocks", "find_index", "multiplicity", "storage_order", "to_view"]
