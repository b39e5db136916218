"""C-order positions of the first matches on any layout, reading memory in order.

A C-order search of a transposed, Fortran-ordered or channels_last array jumps through memory on
every step (6.5x slower than numpy's `isnan(a.T).any()`, measured). Here such an array is searched
outer C axis first: one memory-order pass (launch_reduce.reduce, threaded like any per-slice
answer) says which index tuples of the leading C axes hold matches (or how many); the answer is
then looked for in those slices only, in C order, each the same way, until a slice is searched in
C order because its C order streams through memory. Exact: the C-order first match lies in the
first slice that holds one, and the first k matches in the first slices whose counts reach k.
"""

from __future__ import annotations

import math

import numpy as np

from .launch_find import find as find_streaming
from .launch_reduce import reduce
from .layout import as_words, c_order_streams

#: Elements searched in C order before the memory-order pass, at most 1/64 of the array: where
#: matches are dense, the first is found at once; where they are not, this costs little.
HEAD = 1 << 12
#: Most cells of one memory-order pass: the leading C axes kept are as many as fit (at least
#: one), so the pass narrows the search to one short slice where it can, and its cells stay in
#: cache (measured, Fortran-ordered 406³ float32: first_nan 1.6x count_nan with 1 << 16, 0.9x here).
CELLS = 1 << 18
#: Most slices searched one by one for the first k matches: past that many (dense matches), one
#: C-order walk of the whole costs less than a Python call per slice.
SLICES = 64


def find(a: np.ndarray, word: np.dtype, lanes: int, test, limit: int) -> np.ndarray:
    """C-order flat positions of the first `limit` elements of `a` matching `test` (int64), as
    launch_find.find gives, at the cost of about one memory-order pass on any layout."""
    if limit <= 0 or a.size == 0:
        return np.empty(0, np.int64)
    repeats = any(s == 0 and n > 1 for n, s in zip(a.shape, a.strides))
    if c_order_streams(a) or as_words(a, word) is None or repeats:
        return find_streaming(a, word, lanes, test, limit)
    if limit == 1:
        head = find_streaming(a, word, lanes, test, 1, within=min(HEAD, a.size >> 6))
        if head.size:
            return head
    return _descend(a, word, lanes, test, limit)


def _descend(a, word, lanes, test, limit):
    """The first `limit` matches of `a` in C order (fewer where `a` holds fewer)."""
    if c_order_streams(a):
        return find_streaming(a, word, lanes, test, limit)
    kept = 1  # a 1-D array always streams: here ndim >= 2
    while kept < a.ndim - 1 and math.prod(a.shape[:kept + 1]) <= CELLS:
        kept += 1
    cells = reduce(a, word, lanes, test, tuple(range(kept, a.ndim)), limit == 1).reshape(-1)
    inner = math.prod(a.shape[kept:])
    holding = np.flatnonzero(cells)  # in the kept axes' C order
    if limit > 1 and np.searchsorted(np.cumsum(cells[holding]), limit) >= SLICES:
        return find_streaming(a, word, lanes, test, limit)  # dense: one C-order walk
    out, found = [], 0
    for cell in holding:
        want = 1 if limit == 1 else min(limit - found, int(cells[cell]))
        sub = a[np.unravel_index(int(cell), a.shape[:kept])]
        more = _descend(sub, word, lanes, test, want)
        out.append(more + int(cell) * inner)
        found += more.size
        if found >= limit:
            break
    return np.concatenate(out) if out else np.empty(0, np.int64)
