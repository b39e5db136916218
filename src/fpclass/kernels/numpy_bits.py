"""The kernels' bit tests evaluated with NumPy: the same functions, arguments and answers as
`launch` (mask, count, histogram, reduce, find), with nothing to compile.

For small inputs the work is a few microseconds; numba's first call compiles for seconds and every
later call costs its dispatch. Operators send inputs up to SMALL_BYTES here, so a first answer
never waits for a compile, and the exhaustive tests run every format through both launchers.
"""

from __future__ import annotations

import numpy as np

from .layout import without_broadcast

#: Inputs of at most this many bytes are classified here rather than by the numba kernels
#: (benchmarks/bench_startup.py: below it NumPy's whole call is cheaper than numba's dispatch).
SMALL_BYTES = 1 << 14


def matches(a: np.ndarray, word: np.dtype, lanes: int, test) -> np.ndarray:
    """Bool array of a's shape: test(w) for each element's stored words `w` (any lane, for the
    two words of a complex element). Any layout. As fast as NumPy's own expression: its ufunc
    where it defines the class as the format table does, else the bit test on the words
    (viewed, or copied where strides do not allow a view)."""
    fast = _fast(a, word, lanes, test)
    return bits(a, word, lanes, test) if fast is None else fast(a)


def bits(a: np.ndarray, word: np.dtype, lanes: int, test) -> np.ndarray:
    """matches() computed from the bit test itself, for any format."""
    if lanes == 1 and a.dtype.itemsize == word.itemsize:
        w = a.view(word)
    else:
        w = np.ascontiguousarray(a).reshape(a.shape + (1,)).view(word)
    mask, value, mask2, value2 = test
    if (mask2, value2) == (0, 1):
        hit = (w & mask) == value
    elif value == mask and value2 == 0 and mask2 and mask2 < (mask & -mask):
        # "these bits all set, some of the lower ones set" (NaN: exponent all ones, mantissa
        # not zero) is one comparison: w & (mask | mask2) > mask
        hit = (w & (mask | mask2)) > mask
    else:
        t = np.asarray(w & mask)   # (0-d input gives a scalar)
        hit = t == value
        np.bitwise_and(w, mask2, out=t)
        hit &= t != value2
    return hit.any(axis=-1) if w.ndim > a.ndim else hit


def mask(a, word, lanes, test, negate, out) -> None:
    """out[...] = test(a) ^ negate element-wise; `out` is a uint8 array of a's shape."""
    fast = _fast(a, word, lanes, test)
    # NumPy 2.4's float32/float64 isnan, isinf and isfinite write wrong answers into an `out`
    # whose elements are not adjacent (tests/test_numpy_bits_out.py): the ufunc writes into
    # `out` only where both are C-contiguous, and nowhere `out` lies in a's own memory
    direct = (fast is not None and out.flags.c_contiguous and a.flags.c_contiguous
              and not np.may_share_memory(a, out))
    if direct and fast is _nonfinite and negate:
        np.isfinite(a, out=out.view(np.bool_))
        return
    if direct:
        hit = fast(a, out=out.view(np.bool_))
        if negate:
            np.logical_not(hit, out=hit)
        return
    hit = bits(a, word, lanes, test) if fast is None else fast(a)
    if negate:
        hit = ~hit
    np.copyto(out, hit, casting="unsafe")


def count(a, word, lanes, tests) -> np.ndarray:
    """How many elements of `a` match each of `tests` (int64 array, one per test)."""
    a, copies = without_broadcast(a)  # a stride-0 axis: no mask as large as the broadcast shape
    return copies * np.array([np.count_nonzero(matches(a, word, lanes, t)) for t in tests], np.int64)


def histogram(a, word, base, special) -> np.ndarray:
    """launch.histogram's counts: each test of `base` then of `special` (None matches nothing)."""
    return np.array([0 if t is None else np.count_nonzero(matches(a, word, 1, t))
                     for t in base + special], np.int64)


def reduce(a, word, lanes, test, axes, any_mode, dtype=None, empty=None) -> np.ndarray:
    """launch.reduce's per-slice answers along `axes`, shaped like `a` with 1 on the reduced axes:
    counts as `dtype` (None: int64), or with `any_mode` bool. `empty` is launch.reduce's, unused:
    NumPy's reductions allocate their own answers."""
    if len(axes) == a.ndim:  # whole array: each distinct element once
        b, copies = without_broadcast(a)
        hit = reduce_mask(matches(b, word, lanes, test), axes, any_mode, dtype)
        if not any_mode:
            hit *= copies  # in place: the answer keeps `dtype` (a fresh array, wide enough)
        return hit
    return reduce_mask(matches(a, word, lanes, test), axes, any_mode, dtype)


def reduce_mask(hit: np.ndarray, axes: tuple, any_mode: bool, dtype=None) -> np.ndarray:
    """A bool mask reduced along `axes` with kept dimensions: counts as `dtype` (an integer dtype
    wide enough for a slice's count; None: int64), or with `any_mode` bool "one is set"."""
    dtype = np.int64 if dtype is None else dtype
    if len(axes) == hit.ndim:   # whole array: numpy's fast paths take no axis
        kept = (1,) * hit.ndim
        if any_mode:
            return np.full(kept, hit.any())
        return np.full(kept, np.count_nonzero(hit), dtype)
    if any_mode:
        return hit.any(axis=axes, keepdims=True)
    return np.count_nonzero(hit, axis=axes, keepdims=True).astype(dtype, copy=False)


def find(a, word, lanes, test, limit) -> np.ndarray:
    """C-order flat positions of the first `limit` elements of `a` matching `test` (int64)."""
    if limit <= 0:
        return np.empty(0, np.int64)
    return np.flatnonzero(matches(a, word, lanes, test))[:limit].astype(np.int64, copy=False)


def _nonfinite(a, out=None):
    hit = np.isfinite(a, out=out)
    return np.logical_not(hit, out=hit)


#: Where NumPy stores the format natively and IEEE defines it, numpy's ufuncs are the format
#: table's definitions (as operators/elementwise._one_call).
_IEEE = tuple(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64,
                                    np.complex128))
_FAST: dict = {}   # (id(dtype), lanes, test) -> (dtype, function or None); the dtype keeps the id


def _fast(a, word, lanes, test):
    """The one-call function for `a`'s dtype and `test` (taking out=), or None (bits())."""
    if a.ndim == 0:
        return None   # a ufunc or take() would give a scalar, not an array
    dtype = a.dtype
    key = (id(dtype), lanes, test)
    entry = _FAST.get(key)
    if entry is None or entry[0] is not dtype:
        if len(_FAST) > 1024:
            _FAST.clear()
        entry = _FAST[key] = (dtype, _plan(dtype, word, lanes, test))
    return entry[1]


def _plan(dtype, word, lanes, test):
    if dtype.isnative and dtype in _IEEE:
        from ..formats import NaN, Query, bit_test, component_format, format_of
        fmt = format_of(dtype)
        wf = component_format(fmt) if lanes == 2 else fmt
        if wf.inf and wf.nan is NaN.IEEE:
            for query, ufunc in ((Query.NAN, np.isnan), (Query.INF, np.isinf),
                                 (Query.NONFINITE, _nonfinite)):
                if bit_test(wf, query) == tuple(test):
                    return ufunc
    # (a table of every pattern, as the small path's, is slower here: take() makes its indices
    # intp, 4-8x the words; the vectorised bit test on 8- or 16-bit words runs 3-7x faster)
    return None
