"""fpclass.twin: every public function of fpclass again, in plain NumPy, decided by values.

Each function has the name, signature, result types and empty-input answer of the public one
(`twin.any_nan` is `fpclass.any_nan`'s twin), but classifies the way a NumPy user would: every
element is widened to a native NumPy dtype that holds its value exactly (`values`) and asked with
numpy's own isnan / isinf / isfinite / signbit. No bit pattern, format table or kernel of fpclass
is involved. That makes the twin the oracle the tests compare fpclass with (as `bottleneck.slow`
is for bottleneck), and fpclass's own answer for the dtypes its bit tests do not take (long
double). It builds a mask per call (and, for ml_dtypes, a widened copy): for checking, not speed.

    >>> import numpy as np
    >>> from fpclass import twin
    >>> twin.count_nan(np.array([1.0, np.nan, np.nan]))
    2

Layering: this module imports numpy (and ml_dtypes on first use, for class_counts of its formats)
and nothing of fpclass but the ClassCounts result type.
"""

from __future__ import annotations

import numpy as np

from .counts import ClassCounts

__all__ = [
    "ClassCounts", "all_finite", "any_inf", "any_nan", "any_nonfinite", "class_counts", "count_inf",
    "count_nan", "count_nonfinite", "first_inf", "first_nan", "first_nonfinite", "isfinite",
    "isinf", "isnan", "isneginf", "isposinf", "locate_inf", "locate_nan", "locate_nonfinite",
    "values",
]

#: Sub-byte formats stored one per byte: the upper bits are padding, which fpclass ignores and
#: ml_dtypes reads as a sign. The twin clears them before widening.
_PADDED_BITS = {"float6_e2m3fn": 6, "float6_e3m2fn": 6, "float4_e2m1fn": 4}
#: numpy kinds fpclass classifies: bool, integers, floats, complex, timedelta64, datetime64.
_KINDS = "biufcmM"


def _is_ml(dtype: np.dtype) -> bool:
    return dtype.type.__module__ == "ml_dtypes"


def _array(x) -> np.ndarray:
    """`x` as an ndarray, refused (TypeError) where fpclass refuses it."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError("fpclass.twin does not take masked arrays (numpy.ma), as fpclass does not: "
                        "pass x.data, or x.filled(value)")
    a = np.asarray(x)
    if a.dtype.kind not in _KINDS and not _is_ml(a.dtype):
        raise TypeError(f"cannot classify dtype {a.dtype}: supported are floating-point (numpy and "
                        "ml_dtypes), complex, integer, bool, datetime64 and timedelta64 dtypes")
    return a


def values(x) -> np.ndarray:
    """`x` in a native NumPy dtype that holds each of its values exactly, for numpy's own isnan,
    isinf, isfinite and signbit: ml_dtypes floats become float32 (each of them, of at most 16
    bits, is a float32 exactly), ml_dtypes complex becomes complex64, ml_dtypes integers int64,
    and foreign byte order native; an array already native comes back as it is (no copy).
    TypeError for masked arrays and for dtypes fpclass does not classify."""
    a = _array(x)
    dtype = a.dtype
    if _is_ml(dtype):
        if dtype.name in _PADDED_BITS:
            a = (a.view(np.uint8) & ((1 << _PADDED_BITS[dtype.name]) - 1)).view(dtype)
        wide = np.dtype(np.complex64 if "complex" in dtype.name
                        else np.int64 if "int" in dtype.name else np.float32)
    else:
        wide = dtype.newbyteorder("=")
    with np.errstate(all="ignore"):  # signalling NaNs may raise floating-point flags on the way
        return a.astype(wide, copy=False)


# -- masks -------------------------------------------------------------------------------------

def _flag(name: str, value) -> bool:
    """An attribute flag, accepted as fpclass accepts it: a bool, or the integers 0 / 1."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))
                                               and not isinstance(value, bool) and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (or 0/1), got {value!r}")


def _nan(x) -> np.ndarray:
    v = values(x)
    with np.errstate(all="ignore"):
        return np.asarray(np.isnan(v))       # NaT for datetimes; either part for complex


def _finite(x) -> np.ndarray:
    v = values(x)
    with np.errstate(all="ignore"):
        return np.asarray(np.isfinite(v))


def _inf(x, what: str, detect_negative, detect_positive) -> np.ndarray:
    neg, pos = _flag("detect_negative", detect_negative), _flag("detect_positive", detect_positive)
    v = values(x)
    if v.dtype.kind == "c" and not (neg and pos):
        raise TypeError(f"{what} with one or no sign is not supported for complex values because "
                        "it would be ambiguous")
    with np.errstate(all="ignore"):
        if neg and pos:
            return np.asarray(np.isinf(v))
        if v.dtype.kind != "f":                  # integers, bool, datetimes: never infinite
            return np.zeros(v.shape, bool)
        return np.asarray((np.isposinf(v) & pos) | (np.isneginf(v) & neg))


def _answer(mask: np.ndarray, out):
    """The mask, as the element-wise operators give it: a NumPy bool scalar for 0-d input, or
    written into `out` (checked as fpclass checks it) and `out` itself."""
    if out is None:
        return mask[()] if mask.ndim == 0 else mask
    accepted = "a writable numpy.ndarray of dtype bool or uint8 and exactly the input's shape"
    if isinstance(out, np.ma.MaskedArray) or not isinstance(out, np.ndarray):
        raise TypeError(f"out must be {accepted} {mask.shape}, got {type(out).__name__}")
    if out.dtype not in (np.dtype(bool), np.dtype(np.uint8)):
        raise TypeError(f"out must have dtype bool or uint8, got {out.dtype}")
    if out.shape != mask.shape:
        raise ValueError(f"out has shape {out.shape}, but the input has shape {mask.shape}")
    if not out.flags.writeable:
        raise ValueError(f"out is read-only; pass {accepted}")
    np.copyto(out, mask, casting="unsafe")   # the mask is complete before `out` is written
    return out


# -- element-wise ------------------------------------------------------------------------------

def isnan(x, out=None):
    """Same as np.isnan(values(x)): True where `x` is NaN (NaT for datetimes, either part for
    complex). Empty input gives an empty mask."""
    return _answer(_nan(x), out)


def isinf(x, out=None, *, detect_negative=True, detect_positive=True):
    """Same as np.isinf(values(x)) restricted to the selected signs (both off: all False).
    Complex input with one or no sign raises TypeError. Empty input gives an empty mask."""
    return _answer(_inf(x, "isinf", detect_negative, detect_positive), out)


def isfinite(x, out=None):
    """Same as np.isfinite(values(x)): neither NaN (nor NaT) nor ±Inf. Empty input gives an empty
    mask."""
    return _answer(_finite(x), out)


def isposinf(x, out=None):
    """Same as np.isposinf(values(x)); complex raises TypeError. Empty input gives an empty mask."""
    return _answer(_inf(x, "isposinf", False, True), out)


def isneginf(x, out=None):
    """Same as np.isneginf(values(x)); complex raises TypeError. Empty input gives an empty mask."""
    return _answer(_inf(x, "isneginf", True, False), out)


# -- per-axis queries --------------------------------------------------------------------------

def any_nan(x, axis=None, keepdims=False):
    """Same as isnan(x).any(axis, keepdims=keepdims). Empty input gives False."""
    return _nan(x).any(axis=axis, keepdims=keepdims)


def any_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True):
    """Same as isinf(x, ...).any(axis, keepdims=keepdims). Empty input gives False."""
    return _inf(x, "any_inf", detect_negative, detect_positive).any(axis=axis, keepdims=keepdims)


def any_nonfinite(x, axis=None, keepdims=False):
    """Same as (~isfinite(x)).any(axis, keepdims=keepdims). Empty input gives False."""
    return (~_finite(x)).any(axis=axis, keepdims=keepdims)


def all_finite(x, axis=None, keepdims=False):
    """Same as isfinite(x).all(axis, keepdims=keepdims). Empty input gives True."""
    return _finite(x).all(axis=axis, keepdims=keepdims)


def count_nan(x, axis=None, keepdims=False, *, dtype=None):
    """Same as np.count_nonzero(isnan(x), axis, keepdims=keepdims), in int64 (one count: a
    Python int), or in `dtype` (an integer dtype; one count: a NumPy scalar). Empty input
    gives 0."""
    return _counts(_nan(x).sum(axis=axis, keepdims=keepdims, dtype=np.int64), x, axis, dtype)


def count_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True,
              dtype=None):
    """Same as np.count_nonzero(isinf(x, ...), axis, keepdims=keepdims), in int64 or `dtype`.
    Empty input gives 0."""
    mask = _inf(x, "count_inf", detect_negative, detect_positive)
    return _counts(mask.sum(axis=axis, keepdims=keepdims, dtype=np.int64), x, axis, dtype)


def count_nonfinite(x, axis=None, keepdims=False, *, dtype=None):
    """Same as np.count_nonzero(~isfinite(x), axis, keepdims=keepdims), in int64 or `dtype`.
    Empty input gives 0."""
    return _counts((~_finite(x)).sum(axis=axis, keepdims=keepdims, dtype=np.int64), x, axis,
                   dtype)


def _counts(counts, x, axis, dtype):
    """int64 counts per slice, one count (no axis left) as a Python int; or in `dtype`: TypeError
    unless an integer dtype, ValueError if a slice holds more elements than it can count."""
    if dtype is None:
        return int(counts) if np.ndim(counts) == 0 else counts
    if not (isinstance(dtype, (type, np.dtype, str)) and np.dtype(dtype).kind in "iu"):
        raise TypeError(f"dtype must be a NumPy integer dtype, got {dtype!r}")
    shape = np.shape(x)
    axes = range(len(shape)) if axis is None else np.atleast_1d(axis)
    length = int(np.prod([shape[int(ax)] for ax in axes], dtype=np.int64))
    if length > np.iinfo(dtype).max:
        raise ValueError(f"dtype {np.dtype(dtype)} cannot count {length} elements")
    counts = np.asarray(counts).astype(dtype)
    return counts[()] if counts.ndim == 0 else counts


# -- class histogram ---------------------------------------------------------------------------

def _is_real_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or (_is_ml(dtype) and "complex" not in dtype.name
                                 and "int" not in dtype.name)


def class_counts(x) -> ClassCounts:
    """Counts of NaN, ±Inf, ±zero, ±subnormal and ±normal values of a real floating-point `x`,
    from numpy's isnan / signbit / isfinite and the format's smallest normal (np.finfo or
    ml_dtypes.finfo). A NaN's sign is not counted; padding bits of float6 / float4 are ignored.
    Complex, integer and datetime input raise TypeError. Empty input gives all zeros."""
    a = _array(x)
    if not _is_real_float(a.dtype):
        raise TypeError(f"class_counts needs a real floating-point dtype, got {a.dtype} "
                        "(for complex, count x.real and x.imag separately)")
    if _is_ml(a.dtype):
        import ml_dtypes
        info = ml_dtypes.finfo(a.dtype)
    else:
        info = np.finfo(a.dtype.newbyteorder("="))
    v = values(a)
    smallest_normal = np.asarray(info.smallest_normal).astype(v.dtype)  # exact, as the values
    with np.errstate(all="ignore"):
        nan = np.isnan(v)
        neg = np.signbit(v) & ~nan
        finite = np.isfinite(v)
        zero = v == 0
        sub = finite & ~zero & (np.abs(v) < smallest_normal)
        normal = finite & ~zero & ~sub

    def count(mask):
        return int(np.count_nonzero(mask))
    return ClassCounts(count(nan), count(np.isposinf(v)), count(np.isneginf(v)), count(zero & ~neg),
                       count(zero & neg), count(sub & ~neg), count(sub & neg), count(normal & ~neg),
                       count(normal & neg))


# -- locate ------------------------------------------------------------------------------------

def _first(mask: np.ndarray):
    flat = np.flatnonzero(mask)              # C order, whatever the memory order
    return tuple(int(i) for i in np.unravel_index(flat[0], mask.shape)) if flat.size else None


def _locate(mask: np.ndarray, limit) -> np.ndarray:
    if limit is not None and (not isinstance(limit, (int, np.integer)) or isinstance(limit, bool)
                              or limit < 0):
        raise ValueError(f"limit must be None or an integer >= 0, got {limit!r}")
    return np.argwhere(mask)[:limit].astype(np.int64)


def first_nan(x):
    """The N-d index (a tuple of ints) of the first NaN in C order, as np.argwhere(isnan(x))[0];
    () for a 0-d NaN; None where there is none. Empty input gives None."""
    return _first(_nan(x))


def first_inf(x, *, detect_negative=True, detect_positive=True):
    """The N-d index of the first infinity of a selected sign in C order, or None. Empty input
    gives None."""
    return _first(_inf(x, "first_inf", detect_negative, detect_positive))


def first_nonfinite(x):
    """The N-d index of the first NaN or Inf in C order, or None. Empty input gives None."""
    return _first(~_finite(x))


def locate_nan(x, limit=None):
    """Same as np.argwhere(isnan(x))[:limit] in int64: a (k, ndim) array. Empty input gives
    (0, ndim)."""
    return _locate(_nan(x), limit)


def locate_inf(x, limit=None, *, detect_negative=True, detect_positive=True):
    """Same as np.argwhere(isinf(x, ...))[:limit] in int64: (k, ndim). Empty input gives
    (0, ndim)."""
    return _locate(_inf(x, "locate_inf", detect_negative, detect_positive), limit)


def locate_nonfinite(x, limit=None):
    """Same as np.argwhere(~isfinite(x))[:limit] in int64: (k, ndim). Empty input gives
    (0, ndim)."""
    return _locate(~_finite(x), limit)
