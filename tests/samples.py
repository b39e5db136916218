"""Test inputs: the formats by group, every bit pattern, the special values, random bits, and the
adversarial arrays (empty, 0-d, strided, reversed, transposed, byte-swapped, read-only) on which
every public function is compared with its NumPy twin (fpclass.twin, the oracle of the tests).
"""

import ml_dtypes
import numpy as np

ML_FLOATS = [np.dtype(getattr(ml_dtypes, n)) for n in (
    "bfloat16", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn")]
NARROW = [np.dtype(np.float16)] + ML_FLOATS          # every 8- and 16-bit format
REAL = [np.dtype(np.float64), np.dtype(np.float32)] + NARROW


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


# -- adversarial arrays (bottleneck's tests/util.py) -----------------------------------------------

#: One dtype of each kind of storage: IEEE, 16- and 8-bit ml_dtypes (with and without Inf, NaN
#: only at 0x80 or 0xFF), sub-byte with padding, complex, long double (classified by value),
#: integer, bool and datetime (NaT).
ADVERSARIAL_DTYPES = [np.dtype(t) for t in (
    np.float64, np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu,
    ml_dtypes.float4_e2m1fn, np.complex64, np.complex128, np.longdouble, np.int16, np.bool_,
    "M8[s]")]
EMPTY_SHAPES = [(0,), (0, 0), (2, 0), (2, 0, 1)]
SHAPES = EMPTY_SHAPES + [(), (1,), (7,), (3, 4), (2, 3, 4)]
#: Values planted among random bits: NaN of both signs, ±Inf, ±0, subnormals of float64 and
#: float16, and values past the range of the narrow formats (they become NaN or Inf there).
PLANTED = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 5e-324, -6e-8, 3e38,
                    -1e300])


def filled(dtype, shape, seed=0) -> np.ndarray:
    """An array of `dtype` and `shape`: random stored bits with about half the elements replaced
    by PLANTED values (random integers for integers and bool; datetimes with NaT)."""
    dtype, n = np.dtype(dtype), int(np.prod(shape))
    rng = np.random.default_rng(seed)
    if dtype.kind in "biu":
        return rng.integers(-300, 300, n).astype(dtype).reshape(shape)
    if dtype.kind == "M":
        a = rng.integers(-10**9, 10**9, n).astype(dtype)
        a[rng.random(n) < 0.4] = np.datetime64("NaT")
        return a.reshape(shape)
    if dtype == np.longdouble:  # its padding bytes hold no value: random bits would mean nothing
        a = np.ones(n, dtype)
    else:
        a = random_bits(dtype if dtype.kind == "c" else f"u{dtype.itemsize}", n, seed).view(dtype)
    planted = rng.random(n) < 0.5
    pick = PLANTED[rng.integers(0, PLANTED.size, (2, n))]
    with np.errstate(all="ignore"):
        values = (pick[0] + 1j * pick[1]) if dtype.kind == "c" else pick[0]
        a[planted] = values[planted].astype(dtype)
    return a.reshape(shape)


def layouts(a):
    """(name, view) of the same values laid out every way an input may come: contiguous, Fortran
    order, reversed, every other element of a larger array (also backwards), transposed, in a
    record (an odd stride), byte-swapped and read-only."""
    yield "c-order", a
    if a.ndim == 0:
        yield "read-only", _read_only(a)
        return
    yield "f-order", np.asfortranarray(a)
    yield "reversed", a[(slice(None, None, -1),) * a.ndim]
    wide = np.zeros((2 * a.shape[0],) + a.shape[1:], a.dtype)
    wide[::2], wide[1::2] = a, a[::-1]
    yield "strided", wide[::2]
    yield "negative-stride", wide[::-1][1::2]
    if a.ndim > 1:
        yield "transposed", a.T
    record = np.zeros(a.shape, [("pad", "u1"), ("v", a.dtype)])
    record["v"] = a
    yield "in-record", record["v"]
    if a.dtype.itemsize > 1 and a.dtype.type.__module__ != "ml_dtypes":
        yield "byte-swapped", a.astype(a.dtype.newbyteorder("S"))
    yield "read-only", _read_only(a)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def adversarial(dtypes=ADVERSARIAL_DTYPES, shapes=SHAPES):
    """(label, array) for every dtype, shape and layout."""
    for dtype in dtypes:
        for k, shape in enumerate(shapes):
            for layout, a in layouts(filled(dtype, shape, seed=k)):
                yield f"{dtype.str if dtype.byteorder != '|' else dtype.name}{shape} {layout}", a
