"""Fused queries: any / all / count / class histogram / first / locate — one pass, no mask.

Empty input: any → False, all → True, counts → 0, first → None, locate → an empty (0, ndim) array.
Every query takes the same inputs as the operators and raises the same errors.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .. import twin
from ..counts import ClassCounts
from ..formats import Query
from ..kernels.layout import position_in, without_broadcast
from ..kernels.numpy_bits import reduce_mask
from .elementwise import BY_VALUE, SMALL_INF, SMALL_FINITE, SMALL_NAN, inf_query, launcher
from .inputs import as_source, real_float_source
from .outputs import empty_answer


def _small(fast, x, axis, keepdims):
    """The answer mask of a small plain ndarray for a whole-array query, or None."""
    return fast.hits(x) if axis is None and not keepdims else None


def _first_of(hit, found: bool):
    """The N-d index of the first element of `hit` equal to `found`, or None."""
    if hit.size == 0:
        return None
    flat = int(hit.argmax() if found else hit.argmin())
    if bool(hit.flat[flat]) is not found:
        return None
    if hit.ndim <= 1:
        return (flat,) if hit.ndim else ()
    return tuple(int(i) for i in np.unravel_index(flat, hit.shape))


def _per_slice(x, query: Query | None, axis, keepdims, any_mode: bool, dtype=None):
    """Per-slice counts (int64, or `dtype` checked by count_type) or, with any_mode, "has one"
    (bool) of class `query` along `axis` (None: all axes); None for `query`: no class, all zero."""
    src = as_source(x)
    a = src.array
    axes = tuple(range(a.ndim)) if axis is None else normalize_axis_tuple(_axis(axis), a.ndim)
    kept = tuple(1 if ax in axes else n for ax, n in enumerate(a.shape))
    answer = None if dtype is None else count_type(dtype, a.shape, axes)
    native = None if answer is None else answer.newbyteorder("=")
    test = None if query is None else src.test(query)
    if a.size == 0 or query is None or (test is None and not src.by_value):
        result = np.zeros(kept, bool if any_mode else np.int64 if native is None else native)
    elif src.by_value:
        result = reduce_mask(BY_VALUE[query](a), axes, any_mode, native)
    else:
        result = launcher(a).reduce(a, src.word, src.lanes, test, axes, any_mode, native,
                                    empty=empty_answer)
    if answer is not None and answer != native:
        result = result.astype(answer)
    if not keepdims:
        result = result.reshape([n for ax, n in enumerate(a.shape) if ax not in axes])
    if result.ndim:
        return result
    return scalar(result) if answer is None else result[()]


def count_type(dtype, shape: tuple, axes: tuple) -> np.dtype:
    """A count's `dtype` argument for counting along `axes` (normalized) of `shape`, checked:
    TypeError unless a NumPy integer dtype, ValueError where a slice's count could exceed its
    largest value."""
    try:
        answer = np.dtype(dtype)
    except TypeError:
        answer = None
    if answer is None or answer.kind not in "iu":
        raise TypeError(f"dtype must be a NumPy integer dtype (signed or unsigned, any width), "
                        f"got {dtype!r}")
    length = math.prod(shape[ax] for ax in axes)
    if length > np.iinfo(answer).max:
        raise ValueError(f"dtype {answer} cannot hold the count of a slice of {length} elements "
                         f"(at most {np.iinfo(answer).max}); pass an integer dtype whose largest "
                         f"value is at least {length}, or dtype=None (int64)")
    return answer


def scalar(result: np.ndarray):
    """A 0-d answer as one value: a count as a Python int (JSON-serialisable, as
    numpy.count_nonzero(x) gives), a yes/no as numpy.bool_ (as numpy's any() gives, so that `~`
    negates it)."""
    return int(result) if result.dtype.kind in "iu" else result[()]


def _axis(axis):
    """`axis` checked: an int or a tuple of ints (numpy's rule); TypeError naming them otherwise."""
    items = axis if isinstance(axis, tuple) else (axis,)
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))
               for i in items):
        raise TypeError(f"axis must be None, an int or a tuple of ints, got {axis!r} "
                        f"({type(axis).__name__})")
    return axis


def _count(x, query: Query | None, axis, keepdims, dtype=None):
    return _per_slice(x, query, axis, keepdims, False, dtype)


def _any(x, query: Query | None, axis, keepdims):
    return _per_slice(x, query, axis, keepdims, True)


def _positions(x, query: Query | None, limit):
    src = as_source(x)
    a = src.array
    test = None if query is None else src.test(query)
    if limit is None:
        limit = a.size
    elif not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 0:
        raise ValueError(f"limit must be None or an integer >= 0, got {limit!r}")
    limit = min(int(limit), a.size)
    if a.size == 0 or query is None or limit == 0:
        flat = np.empty(0, np.int64)
    elif src.by_value:
        flat = np.flatnonzero(BY_VALUE[query](a))[:limit]
    elif test is None:
        flat = np.empty(0, np.int64)
    elif limit == 1 and (b := without_broadcast(a)[0]) is not a:
        # the first match of an array repeated along stride-0 axes is in its first copy
        first = launcher(b).find(b, src.word, src.lanes, test, 1)
        flat = np.array([position_in(int(first[0]), b.shape, a.shape)] if first.size else [],
                        np.int64)
    else:
        launch = launcher(a)
        if limit == a.size:  # count first, so the buffer holds exactly the hits (no a.size buffer)
            limit = int(launch.count(a, src.word, src.lanes, [test])[0])
        flat = launch.find(a, src.word, src.lanes, test, limit) if limit else np.empty(0, np.int64)
    return flat, a.shape


def _first(x, query):
    flat, shape = _positions(x, query, 1)
    if not flat.size:
        return None
    return tuple(int(i) for i in np.unravel_index(flat[0], shape)) if shape else ()


def _locate(x, query, limit):
    flat, shape = _positions(x, query, limit)
    if not shape:
        return np.empty((flat.size, 0), np.int64)
    return np.stack(np.unravel_index(flat, shape), axis=-1).reshape(flat.size, len(shape))


# -- boolean queries ---------------------------------------------------------------------------

def any_nan(x, axis=None, keepdims=False):
    """Same as numpy's isnan(x).any(axis, keepdims=keepdims), in one pass that stops at the first
    NaN. Empty input gives False."""
    if (hit := _small(SMALL_NAN, x, axis, keepdims)) is not None:
        return hit.any()
    return _any(x, Query.NAN, axis, keepdims)


def any_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True):
    """Same as isinf(x, detect_negative=..., detect_positive=...).any(axis), without the mask."""
    if detect_negative is True and detect_positive is True and \
            (hit := _small(SMALL_INF, x, axis, keepdims)) is not None:
        return hit.any()
    return _any(x, inf_query(x, "any_inf", detect_negative, detect_positive), axis, keepdims)


def any_nonfinite(x, axis=None, keepdims=False):
    """Same as (~isfinite(x)).any(axis): is there a NaN or an Inf? Empty input gives False."""
    if (finite := _small(SMALL_FINITE, x, axis, keepdims)) is not None:
        return ~finite.all()
    return _any(x, Query.NONFINITE, axis, keepdims)


def all_finite(x, axis=None, keepdims=False):
    """Same as isfinite(x).all(axis): no NaN and no Inf. Empty input gives True."""
    if (finite := _small(SMALL_FINITE, x, axis, keepdims)) is not None:
        return finite.all()
    some = _any(x, Query.NONFINITE, axis, keepdims)
    if isinstance(some, np.ndarray) and some.ndim:
        return np.logical_not(some, out=some)   # in place: a large answer keeps pooled memory
    return ~some


# -- counts ------------------------------------------------------------------------------------

def count_nan(x, axis=None, keepdims=False, *, dtype=None):
    """Same as count_nonzero(isnan(x), axis): a Python int when no axis is left (axis=None), else
    an int64 array. Empty input gives 0. `dtype` (a NumPy integer dtype): the counts in that
    type instead (a NumPy scalar when no axis is left), written directly (narrow counts of
    short rows write less); ValueError if a slice's length exceeds its largest value."""
    if dtype is None and (hit := _small(SMALL_NAN, x, axis, keepdims)) is not None:
        return int(np.count_nonzero(hit))
    return _count(x, Query.NAN, axis, keepdims, dtype)


def count_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True,
              dtype=None):
    """Same as count_nonzero(isinf(x, ...), axis), for the selected signs; `dtype` as count_nan's."""
    return _count(x, inf_query(x, "count_inf", detect_negative, detect_positive), axis, keepdims,
                  dtype)


def count_nonfinite(x, axis=None, keepdims=False, *, dtype=None):
    """Same as count_nonzero(~isfinite(x), axis); `dtype` as count_nan's."""
    if dtype is None and (finite := _small(SMALL_FINITE, x, axis, keepdims)) is not None:
        return finite.size - int(np.count_nonzero(finite))
    return _count(x, Query.NONFINITE, axis, keepdims, dtype)


def class_counts(x) -> ClassCounts:
    """Counts of NaN, ±Inf, ±zero, ±subnormal and ±normal values of a real floating-point `x`, in
    one pass. Subnormal means exponent field 0 and mantissa != 0. A NaN's sign is not counted.
    Complex, integer and datetime input raise TypeError. Empty input gives all zeros."""
    src = real_float_source(x, "class_counts", "for complex, count x.real and x.imag separately")
    a = src.array
    if src.by_value:
        return twin.class_counts(a)
    t = src.test
    # rows as in kernels/histogram.py: nonfinite, tiny, negative, zero, their signed tiny and zero;
    # then the non-finite classes, counted only where there are non-finite values
    base = [t(Query.NONFINITE), t(Query.TINY), t(Query.NEGATIVE), t(Query.ZERO), t(Query.TINY, True),
            t(Query.ZERO, True)]
    special = [t(Query.NAN), t(Query.NAN, True), t(Query.POSINF), t(Query.NEGINF)]
    counts = launcher(a).histogram(a, src.word, base, special) if a.size else np.zeros(10, np.int64)
    _, tiny, neg, zero, tiny_neg, zero_neg, nan, nan_neg, pinf, ninf = (int(c) for c in counts)
    # Subnormals are the tiny values that are not zero: two tests fewer than counting them.
    sub, sub_neg = tiny - zero, tiny_neg - zero_neg
    neg_normal = neg - nan_neg - ninf - zero_neg - sub_neg
    pos_normal = a.size - nan - pinf - ninf - zero - sub - neg_normal
    return ClassCounts(nan, pinf, ninf, zero - zero_neg, zero_neg, sub - sub_neg, sub_neg, pos_normal,
                       neg_normal)


# -- locate ------------------------------------------------------------------------------------

def first_nan(x):
    """The N-d index (a tuple) of the first NaN in C order, or None. Stops at the first hit (where
    C order is not memory order, after one pass in memory order: kernels/launch_find_order.py)."""
    if (hit := _small(SMALL_NAN, x, None, False)) is not None:
        return _first_of(hit, True)
    return _first(x, Query.NAN)


def first_inf(x, *, detect_negative=True, detect_positive=True):
    """The N-d index of the first infinity of a selected sign in C order, or None."""
    return _first(x, inf_query(x, "first_inf", detect_negative, detect_positive))


def first_nonfinite(x):
    """The N-d index of the first NaN or Inf in C order, or None."""
    if (finite := _small(SMALL_FINITE, x, None, False)) is not None:
        return _first_of(finite, False)
    return _first(x, Query.NONFINITE)


def locate_nan(x, limit=None):
    """Indices of the NaNs in C order as a (k, ndim) int64 array, like np.argwhere(isnan(x)),
    stopping after `limit` hits (None: all)."""
    return _locate(x, Query.NAN, limit)


def locate_inf(x, limit=None, *, detect_negative=True, detect_positive=True):
    """Indices of the selected infinities in C order, (k, ndim), at most `limit`."""
    return _locate(x, inf_query(x, "locate_inf", detect_negative, detect_positive), limit)


def locate_nonfinite(x, limit=None):
    """Indices of the NaNs and Infs in C order, (k, ndim), at most `limit`."""
    return _locate(x, Query.NONFINITE, limit)
