"""The statistics launcher: kernels/stats.py over any layout and thread count, or the same
answer from NumPy for small inputs (no compile, no dispatch cost) and while numba's cache is cold
(compile_cache.py).

The answer is an int64 row (slots as stats.py names them): non-finite, tiny and zero counts, then
the smallest and largest order key among the finite words. Rows of parts merge with `merge_rows`.
"""

from __future__ import annotations

import numpy as np

from . import compile_cache, numpy_bits, thread_parts
from .layout import source_plan
from .pieces import fresh_copy, pieces
from .threads import threads_for

#: Parts on threads start at multiples of this many elements.
BLOCK = 1 << 16
_I64 = np.iinfo(np.int64)


def empty_row() -> np.ndarray:
    """The row of no elements: zero counts, the key slots at their neutral values."""
    return np.array([0, 0, 0, _I64.max, _I64.min], np.int64)


def merge_rows(rows: np.ndarray) -> np.ndarray:
    """One row from rows of parts (a (k, 5) array)."""
    return np.array([*rows[:, :3].sum(axis=0), rows[:, 3].min(), rows[:, 4].max()], np.int64)


def stats(a: np.ndarray, word: np.dtype, tests: np.ndarray, consts: np.ndarray,
          swap: bool) -> np.ndarray:
    """The statistics row of a real array `a` read as unsigned `word`s. `tests`: (3, 4) words,
    the non-finite, tiny and zero bit tests in the stored byte order (one that matches nothing
    where a class does not exist); `consts`: stats.py's constants, as signed words; `swap`: words
    in the foreign byte order."""
    if a.size == 0:
        return empty_row()
    pad = int(consts[2])
    if pad:  # float6 / float4: the sign bit on top, the padding bits dropped (one byte words)
        a = np.ascontiguousarray(a).view(word) << word.type(pad)
        tests = tests << word.type(pad)
        consts = consts.copy()
        consts[:2] <<= pad
        consts[2] = 0
    signed = np.dtype(f"i{word.itemsize}")
    if a.nbytes <= numpy_bits.SMALL_BYTES or not compile_cache.kernels_ready():
        w = np.ascontiguousarray(a).reshape(-1).view(word)
        return _numpy_row(w, signed, tests, consts, swap)
    from . import stats as kernels  # imports numba
    flat, p = source_plan(a, word)
    if flat is None:
        return merge_rows(np.array([stats(fresh_copy(a[ix]), word, tests, consts, swap)
                                    for ix in pieces(a.shape)]))
    common = (flat, flat.view(signed), p.offsets[0], p.strides[0], p.shape)
    threads = threads_for(p.size)
    if threads == 1:   # no parts to merge: a few µs less on calls of kilobytes
        row = empty_row()
        kernels.stats_range(*common, 0, p.size, tests, consts, swap, row)
        return row
    bounds = thread_parts.cuts(p.size, thread_parts.parts_for(threads), BLOCK)
    rows = np.tile(empty_row(), (len(bounds) - 1, 1))
    thread_parts.run(kernels.stats_range, [(*common, b0, b1, tests, consts, swap, row)
                                           for b0, b1, row in zip(bounds, bounds[1:], rows)], threads)
    return merge_rows(rows)


def _numpy_row(w: np.ndarray, signed: np.dtype, tests, c, swap: bool) -> np.ndarray:
    """stats() in NumPy, for a 1-D array of unsigned words."""
    def hits(k):
        m, v, m2, v2 = tests[k]
        return ((w & m) == v) & ((w & m2) != v2)
    row = empty_row()
    row[:3] = [np.count_nonzero(hits(k)) for k in range(3)]
    s = (w.byteswap() if swap else w).view(signed)
    nm, nv, _, shift, mag, flip = c[:6]
    s = s[(s & nm) != nv]
    if s.size:
        x = s ^ flip
        key = x ^ ((x >> shift) & mag)
        row[3:] = [key.min(), key.max()]
    return row
