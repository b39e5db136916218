"""The kernels' bit tests evaluated with NumPy: the same functions, arguments and answers as
`launch` (mask, count, histogram, reduce, find), with nothing to compile.

For small inputs the work is a few microseconds; numba's first call compiles for seconds and every
later call costs its dispatch. Operators send inputs up to SMALL_BYTES here, so a first answer
never waits for a compile, and the exhaustive tests run every format through both launchers.
"""

from __future__ import annotations

import numpy as np

#: Inputs of at most this many bytes are classified here rather than by the numba kernels
#: (benchmarks/bench_startup.py: below it NumPy's whole call is cheaper than numba's dispatch).
SMALL_BYTES = 1 << 14


def matches(a: np.ndarray, word: np.dtype, lanes: int, test) -> np.ndarray:
    """Bool array of a's shape: test(w) for each element's stored words `w` (any lane, for the
    two words of a complex element). Any layout; the words are viewed, or copied when their
    strides do not allow a view."""
    if lanes == 1 and a.dtype.itemsize == word.itemsize:
        w = a.view(word)
    else:
        w = np.ascontiguousarray(a).reshape(a.shape + (1,)).view(word)
    mask, value, mask2, value2 = test
    hit = (w & mask) == value
    if (mask2, value2) != (0, 1):
        hit &= (w & mask2) != value2
    return hit.any(axis=-1) if w.ndim > a.ndim else hit


def mask(a, word, lanes, test, negate, out) -> None:
    """out[...] = test(a) ^ negate element-wise; `out` is a uint8 array of a's shape."""
    hit = matches(a, word, lanes, test)
    if negate:
        hit = ~hit
    np.copyto(out, hit, casting="unsafe")


def count(a, word, lanes, tests) -> np.ndarray:
    """How many elements of `a` match each of `tests` (int64 array, one per test)."""
    return np.array([np.count_nonzero(matches(a, word, lanes, t)) for t in tests], np.int64)


def histogram(a, word, base, special) -> np.ndarray:
    """launch.histogram's counts: each test of `base` then of `special` (None matches nothing)."""
    return np.array([0 if t is None else np.count_nonzero(matches(a, word, 1, t))
                     for t in base + special], np.int64)


def reduce(a, word, lanes, test, axes, any_mode) -> np.ndarray:
    """launch.reduce's per-slice answers along `axes`, shaped like `a` with 1 on the reduced axes:
    int64 counts, or with `any_mode` bool."""
    return reduce_mask(matches(a, word, lanes, test), axes, any_mode)


def reduce_mask(hit: np.ndarray, axes: tuple, any_mode: bool) -> np.ndarray:
    """A bool mask reduced along `axes` with kept dimensions: int64 counts, or with `any_mode`
    bool "one is set"."""
    if any_mode:
        return hit.any(axis=axes, keepdims=True)
    return np.count_nonzero(hit, axis=axes, keepdims=True).astype(np.int64, copy=False)


def find(a, word, lanes, test, limit) -> np.ndarray:
    """C-order flat positions of the first `limit` elements of `a` matching `test` (int64)."""
    if limit <= 0:
        return np.empty(0, np.int64)
    return np.flatnonzero(matches(a, word, lanes, test))[:limit].astype(np.int64, copy=False)
