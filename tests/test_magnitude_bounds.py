"""Magnitude bounds from exponent fields (formats.magnitude, operators.buffers.magnitude_screen):
every 8- and 16-bit pattern of the bounded formats against the value ml_dtypes and NumPy give
it, float32 and float64 binade by binade, and the screen's answer against NumPy's largest
magnitude over sizes that cross the vector blocks, on one thread, in parts and on every core."""

import math

import ml_dtypes
import numpy as np
import pytest

from fpclass import formats
from fpclass.kernels import threads
from fpclass.operators.buffers import magnitude_screen

SIXTEEN = {"float16": (np.float16, np.uint16), "bfloat16": (ml_dtypes.bfloat16, np.uint16)}
EIGHT = {"float8_e5m2": ml_dtypes.float8_e5m2, "float8_e4m3": ml_dtypes.float8_e4m3,
         "float8_e3m4": ml_dtypes.float8_e3m4}


def _least_k(values: np.ndarray) -> np.ndarray:
    """The least k with |v| < 2**k, per finite nonzero value (NumPy's frexp: |v| = m * 2**e,
    0.5 <= m < 1)."""
    return np.frexp(np.abs(values.astype(np.float64)))[1]


def _check_every_pattern(f, values: np.ndarray, words: np.ndarray):
    """Each finite pattern's magnitude lies below 2**k of its field's bound k, and the field's
    largest magnitude reaches 2**(k-1) (k is the least); the non-finite patterns are exactly
    the all-ones field."""
    field = (words.astype(np.int64) & f.exponent_mask) >> f.mantissa_bits
    with np.errstate(invalid="ignore"):  # NaN patterns, cast
        wide = values.astype(np.float64)
    finite = np.isfinite(wide)
    assert (~finite == (field == (1 << f.exponent_bits) - 1)).all()
    nonzero = finite & (wide != 0)
    # |v| = m * 2**e with 0.5 <= m < 1: |v| < 2**k iff e <= k, and |v| >= 2**(k-1) iff e == k
    least = np.frexp(np.abs(wide[nonzero]))[1]
    bounds = np.array([formats.magnitude_exponent(f, int(e)) for e in field[nonzero]])
    assert (least <= bounds).all()
    for e in np.unique(field[nonzero]):
        assert least[field[nonzero] == e].max() == formats.magnitude_exponent(f, int(e)), e
    assert least.max() == formats.largest_magnitude_exponent(f)


@pytest.mark.parametrize("name", sorted(SIXTEEN))
def test_every_16_bit_pattern_lies_below_its_fields_bound(name):
    dtype, word = SIXTEEN[name]
    words = np.arange(1 << 16, dtype=np.uint32).astype(word)
    _check_every_pattern(formats.FORMATS[name], words.view(dtype), words)


@pytest.mark.parametrize("name", sorted(EIGHT))
def test_every_8_bit_pattern_lies_below_its_fields_bound(name):
    words = np.arange(256, dtype=np.uint8)
    _check_every_pattern(formats.FORMATS[name], words.view(EIGHT[name]), words)


@pytest.mark.parametrize("name, word", [("float32", np.uint32), ("float64", np.uint64)])
def test_every_binade_of_float32_and_float64(name, word):
    """Each finite exponent field with its smallest and largest mantissa."""
    f = formats.FORMATS[name]
    fields = np.arange((1 << f.exponent_bits) - 1, dtype=np.uint64)
    low = (fields << np.uint64(f.mantissa_bits)).astype(word)
    high = (low | word(f.mantissa_mask)).astype(word)
    words = np.concatenate([low, high])
    _check_every_pattern(f, words.view(np.dtype(name)), words)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu",
                                  "float4_e2m1fn", "complex64"])
def test_formats_without_ieee_specials_have_no_bounds(name):
    f = formats.FORMATS[name]
    assert not formats.has_magnitude_bounds(f)
    with pytest.raises(ValueError, match="no IEEE exponent bounds"):
        formats.magnitude_exponent(f, 0)


def test_a_field_outside_the_finite_ones_is_refused():
    f = formats.FORMATS["float32"]
    for field in (-1, 255, 300):
        with pytest.raises(ValueError, match="not a finite one"):
            formats.magnitude_exponent(f, field)


DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
SIZES = [0, 1, 63, 64, 65, 1031, 5000]


def _truth(x: np.ndarray):
    """None when x holds NaN or Inf, else the bound its largest magnitude's field gives."""
    wide = x.astype(np.float64)
    if not np.isfinite(wide).all():
        return None
    f = formats.format_of(x.dtype)
    least = formats.magnitude_exponent(f, 0)  # zeros and subnormals: the least field's
    biggest = float(np.abs(wide).max()) if x.size else 0.0
    return max(least, int(np.frexp(biggest)[1])) if biggest else least


@pytest.fixture(params=["one thread", "in parts", "every core"])
def launcher(request, monkeypatch):
    if request.param == "in parts":
        monkeypatch.setattr(threads, "SPLIT_MIN", 64)
        monkeypatch.setattr(threads.SPLIT, "split", True)
        monkeypatch.setattr(threads.SPLIT, "mark", lambda: None)
    elif request.param == "every core":
        monkeypatch.setattr(threads, "PARALLEL_MIN", 64)
    return request.param


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_screen_bound_matches_numpy_largest_magnitude(dtype, n, launcher):
    screen = magnitude_screen(np.dtype(dtype))
    rng = np.random.default_rng(n)
    for scale in (0.0, 1e-6, 1.0, 100.0):
        x = (rng.standard_normal(n) * scale).astype(dtype)
        assert screen(x.ctypes.data, n) == _truth(x), (scale, launcher)
        if not n:
            continue
        for position in sorted({0, n // 2, min(n - 1, 64), n - 1}):
            peak = x.copy()
            peak[position] = ml_dtypes.finfo(dtype).max if position % 2 else -ml_dtypes.finfo(dtype).tiny
            assert screen(peak.ctypes.data, n) == _truth(peak), (position, launcher)
            for bad in (np.nan, np.inf, -np.inf):
                planted = x.copy()
                planted[position] = bad
                assert screen(planted.ctypes.data, n) is None, (position, bad, launcher)


@pytest.mark.parametrize("dtype", [np.complex64, ml_dtypes.float8_e4m3fn, np.int32,
                                   np.dtype(">f4")])
def test_screen_refuses_dtypes_without_bounds(dtype):
    with pytest.raises((ValueError, TypeError)):
        magnitude_screen(np.dtype(dtype))
