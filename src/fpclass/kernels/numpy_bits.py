"""The kernels' bit tests evaluated with NumPy: the same functions, arguments and answers as
`launch` (mask, count, histogram, count_into, find), with nothing to compile.

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


def count_into(a, word, lanes, test, counts) -> None:
    """counts[...] += test(a) for an int64 `counts` broadcast to a's shape (zero strides on the
    reduced axes)."""
    hit = matches(a, word, lanes, test)
    reduced = tuple(ax for ax, st in enumerate(counts.strides) if st == 0 and a.shape[ax] > 1)
    sums = np.count_nonzero(hit, axis=reduced, keepdims=True) if reduced else hit
    # One element per kept slice: write through a view that selects index 0 on reduced axes.
    first = tuple(slice(0, 1) if ax in reduced else slice(None) for ax in range(a.ndim))
    counts[first] += sums


def find(a, word, lanes, test, limit) -> np.ndarray:
    """C-order flat positions of the first `limit` elements of `a` matching `test` (int64)."""
    if limit <= 0:
        return np.empty(0, np.int64)
    return np.flatnonzero(matches(a, word, lanes, test))[:limit].astype(np.int64, copy=False)
