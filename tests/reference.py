"""The plain-numpy reference twin: every answer derived from values, independently of fpclass.

Each element is converted to a wider type whose classification numpy already does exactly
(ml_dtypes formats and foreign byte order → float64); no bit masks appear here.
"""

import ml_dtypes
import numpy as np

ML_FLOATS = [np.dtype(getattr(ml_dtypes, n)) for n in (
    "bfloat16", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn")]
NARROW = [np.dtype(np.float16)] + ML_FLOATS          # every 8- and 16-bit format
REAL = [np.dtype(np.float64), np.dtype(np.float32)] + NARROW


def values(x) -> np.ndarray:
    """`x` as an array numpy classifies exactly: ml_dtypes → float64, foreign order → native."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):  # signalling NaNs may raise FP flags while converting
        return _values(x)


def _values(x):
    if x.dtype.type.__module__ == "ml_dtypes":
        return x.astype(np.complex128 if "complex" in x.dtype.name else np.float64)
    return x.astype(x.dtype.newbyteorder("="))


def isnan(x):
    return np.isnan(values(x))


def isinf(x, detect_negative=True, detect_positive=True):
    v = values(x)
    if np.iscomplexobj(v):
        assert detect_negative and detect_positive
        return np.isinf(v)
    return (np.isposinf(v) & bool(detect_positive)) | (np.isneginf(v) & bool(detect_negative))


def isfinite(x):
    return np.isfinite(values(x))


#: Sub-byte formats stored one per byte (formats.md): the upper bits are padding. ml_dtypes reads a
#: set padding bit as a sign; fpclass ignores padding, so the twin clears it before converting.
PADDED_BITS = {"float6_e2m3fn": 6, "float6_e3m2fn": 6, "float4_e2m1fn": 4}


def class_counts(x) -> dict:
    x = np.asarray(x)
    if x.dtype.name in PADDED_BITS:
        x = (x.view(np.uint8) & ((1 << PADDED_BITS[x.dtype.name]) - 1)).view(x.dtype)
    v = values(x).ravel()
    smallest_normal = ml_dtypes.finfo(np.asarray(x).dtype).smallest_normal \
        if np.asarray(x).dtype.type.__module__ == "ml_dtypes" else np.finfo(v.dtype).smallest_normal
    nan = np.isnan(v)
    neg = np.signbit(v) & ~nan
    fin = np.isfinite(v)
    zero = v == 0
    sub = fin & ~zero & (np.abs(v) < float(smallest_normal))
    normal = fin & ~zero & ~sub
    c = lambda m: int(np.count_nonzero(m))
    return dict(nan=c(nan), pos_inf=c(np.isposinf(v)), neg_inf=c(np.isneginf(v)),
                pos_zero=c(zero & ~neg), neg_zero=c(zero & neg), pos_subnormal=c(sub & ~neg),
                neg_subnormal=c(sub & neg), pos_normal=c(normal & ~neg), neg_normal=c(normal & neg))


def all_patterns(dtype) -> np.ndarray:
    """Every stored bit pattern of an 8- or 16-bit dtype, in order."""
    dtype = np.dtype(dtype)
    return np.arange(1 << (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}").view(dtype)


def specials(dtype) -> np.ndarray:
    """Every special class of float32/float64: ±0, extreme subnormals, ±max, ±Inf, quiet and
    signalling NaNs with payloads, negative NaNs (built from bit patterns)."""
    dtype = np.dtype(dtype)
    bits = 8 * dtype.itemsize
    mant = {32: 23, 64: 52}[bits]
    exp = ((1 << (bits - 1 - mant)) - 1) << mant
    sign = 1 << (bits - 1)
    quiet = 1 << (mant - 1)
    words = [0, 1, (1 << mant) - 1, 1 << mant, exp - 1, exp, exp | 1, exp | quiet, exp | quiet | 5,
             exp | (1 << mant) - 1, exp | 12345]
    words += [w | sign for w in words]
    return np.array(words, dtype=f"u{dtype.itemsize}").view(dtype)


def random_bits(dtype, n, seed=0) -> np.ndarray:
    dtype = np.dtype(dtype)
    return np.frombuffer(np.random.default_rng(seed).bytes(n * dtype.itemsize), dtype=dtype).copy()
