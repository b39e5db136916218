"""The fused queries against their NumPy twin (fpclass.twin)."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fpclass
import samples
from fpclass import twin
from test_operators import laid_out, swapped

#: Every test runs through both launchers (NumPy bit tests and the numba kernels).
pytestmark = pytest.mark.usefixtures("both_launchers")

QUERIES = {  # fpclass queries -> (..., the twin's element-wise mask)
    "nan": (fpclass.any_nan, fpclass.count_nan, fpclass.first_nan, fpclass.locate_nan, twin.isnan),
    "inf": (fpclass.any_inf, fpclass.count_inf, fpclass.first_inf, fpclass.locate_inf,
            twin.isinf),
    "nonfinite": (fpclass.any_nonfinite, fpclass.count_nonfinite, fpclass.first_nonfinite,
                  fpclass.locate_nonfinite, lambda x: ~twin.isfinite(x)),
}


def check_queries(x, axis=None):
    for name, (any_, count, first, locate, mask) in QUERIES.items():
        m = mask(x)
        assert any_(x) == m.any(), name
        assert count(x) == np.count_nonzero(m), name
        hits = np.argwhere(m)
        np.testing.assert_array_equal(locate(x), hits.reshape(len(hits), x.ndim))
        np.testing.assert_array_equal(locate(x, limit=3), hits[:3].reshape(len(hits[:3]), x.ndim))
        assert first(x) == (tuple(int(i) for i in hits[0]) if len(hits) else None), name
        if axis is not None:
            np.testing.assert_array_equal(any_(x, axis=axis), m.any(axis=axis))
            np.testing.assert_array_equal(any_(x, axis=axis, keepdims=True), m.any(axis=axis, keepdims=True))
            np.testing.assert_array_equal(count(x, axis=axis), np.count_nonzero(m, axis=axis))
    fin = twin.isfinite(x)
    assert fpclass.all_finite(x) == fin.all()
    if axis is not None:
        np.testing.assert_array_equal(fpclass.all_finite(x, axis=axis), fin.all(axis=axis))


def check_counts(x):
    got = fpclass.class_counts(x)
    assert got == twin.class_counts(x)
    assert got.total == x.size


@pytest.mark.parametrize("dtype", samples.NARROW, ids=str)
def test_every_bit_pattern(dtype):
    x = samples.all_patterns(dtype)
    check_queries(x)
    check_counts(x)
    check_queries(x.reshape(16, -1), axis=1)
    if dtype.kind == "f" and dtype.itemsize > 1:
        check_queries(swapped(x))
        check_counts(swapped(x))


@pytest.mark.parametrize("dtype", samples.NARROW, ids=str)
@pytest.mark.parametrize("start", [1, 63])
def test_every_bit_pattern_off_vector_boundaries(dtype, start):
    # kernels test 64 words at a time: start mid-vector and end with a partial one
    x = np.tile(samples.all_patterns(dtype), 3)[start:-5]
    check_counts(x)
    for any_, count, _, _, mask in QUERIES.values():
        assert count(x) == np.count_nonzero(mask(x))
        assert any_(x) == mask(x).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ">f4", ">f8"], ids=str)
def test_random_bits_and_specials(dtype):
    x = samples.random_bits(np.dtype(dtype), 300_000, seed=5)
    x[::1000] = samples.specials(np.dtype(dtype).newbyteorder("="))[np.arange(x[::1000].size) % 22]
    check_queries(x)
    check_counts(x)
    check_queries(x[:297_000].reshape(3, -1, 11), axis=(0, 2))


@pytest.mark.parametrize("position", [0, 1, (1 << 12) - 1, 1 << 12, (1 << 14) - 1, 1 << 14,
                                      (1 << 15) - 1, 1 << 15, (1 << 16) - 1, 1 << 16,
                                      (1 << 18) + 7, 3_000_000 - 1])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.complex64],
                         ids=str)
@pytest.mark.parametrize("threaded", [False, True])
def test_single_hit_at_block_boundaries(position, dtype, threaded, monkeypatch):
    from fpclass.kernels import threads
    if threaded:  # the threaded count and the rounds of the early-exit search
        monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 12)
    x = np.ones(3_000_000, dtype)
    x[position] = np.nan
    assert fpclass.first_nan(x) == (position,)
    assert fpclass.first_nonfinite(x) == (position,)
    assert fpclass.any_nan(x) and not fpclass.all_finite(x)
    assert fpclass.count_nan(x) == 1
    np.testing.assert_array_equal(fpclass.locate_nan(x), [[position]])
    if x.dtype.kind != "c":
        assert fpclass.class_counts(x).nan == 1
    y = x.reshape(1000, 3000)
    assert fpclass.first_nan(y) == divmod(position, 3000)
    assert fpclass.first_nan(y.T) == divmod(position, 3000)[::-1]  # C order of the transpose


@pytest.mark.parametrize("dtype", [np.float64, ">f4", np.float16, ml_dtypes.float8_e4m3fnuz,
                                   ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn], ids=str)
def test_threaded_class_counts_on_any_layout(dtype, monkeypatch):
    # the streaming histogram kernel on threads: unit-stride and strided runs, foreign byte order,
    # non-finite values in some runs only (NaN and Inf are counted only on those runs)
    from fpclass.kernels import launch_reduce, threads
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 10)
    monkeypatch.setattr(launch_reduce, "BLOCK", 1 << 12)
    dtype = np.dtype(dtype)
    x = samples.random_bits(dtype.newbyteorder("="), 200_004, seed=21).astype(dtype)
    bad = ~twin.isfinite(x)
    mostly_finite = x.copy()
    mostly_finite[bad] = x[~bad][0]
    if bad.any():  # one non-finite value, in one run of one task
        mostly_finite[150_001] = x[bad][0]
    y = mostly_finite
    for view in (y, y[::-1], y[::3], y.reshape(7, -1)[:, 1::2].T, x[5:]):
        check_counts(view)


def test_first_is_in_c_order_not_memory_order():
    x = np.zeros((4, 5), np.float32, order="F")
    x[3, 0] = np.nan                      # first in memory (column-major)
    x[0, 4] = np.inf                      # first in C order
    assert fpclass.first_nonfinite(x) == (0, 4)
    np.testing.assert_array_equal(fpclass.locate_nonfinite(x), np.argwhere(~np.isfinite(x)))


@pytest.mark.parametrize("shape", [(0,), (0, 0), (2, 0), (2, 0, 1)])
def test_empty(shape):
    x = np.empty(shape, np.float16)
    assert fpclass.any_nan(x) is np.False_
    assert fpclass.all_finite(x) is np.True_
    assert fpclass.count_nan(x) == 0
    assert fpclass.first_nan(x) is None
    assert fpclass.locate_inf(x).shape == (0, len(shape))
    assert fpclass.class_counts(x).total == 0
    np.testing.assert_array_equal(fpclass.any_nan(x, axis=0), np.isnan(x).any(axis=0))
    np.testing.assert_array_equal(fpclass.all_finite(x, axis=-1), np.isfinite(x).all(axis=-1))


def test_zero_dimensional():
    x = np.array(np.nan, np.float32)
    assert fpclass.any_nan(x) and fpclass.first_nan(x) == ()
    assert fpclass.locate_nan(x).shape == (1, 0)
    assert fpclass.any_nan(x, keepdims=True).shape == ()
    assert fpclass.class_counts(np.float32(-0.0)).neg_zero == 1


def test_formats_without_the_value_answer_without_reading():
    x = np.zeros(10, ml_dtypes.float8_e4m3fn)
    assert not fpclass.any_inf(x) and fpclass.first_inf(x) is None
    assert not fpclass.any_nan(np.zeros(4, ml_dtypes.float4_e2m1fn))
    assert not fpclass.any_nan(np.arange(10)) and fpclass.all_finite(np.arange(10))


def test_inf_signs_and_complex():
    x = np.array([1, np.inf, -np.inf, np.nan], np.float64)
    assert fpclass.count_inf(x, detect_negative=False) == 1
    assert fpclass.first_inf(x, detect_positive=False) == (2,)
    assert fpclass.count_inf(x, detect_negative=False, detect_positive=False) == 0
    z = np.array([1 + 1j, complex(1, np.nan), complex(np.inf, 0)], np.complex64)
    assert fpclass.count_nan(z) == 1 and fpclass.first_inf(z) == (2,)
    with pytest.raises(TypeError, match="complex"):
        fpclass.class_counts(z)
    for query in (fpclass.any_inf, fpclass.count_inf, fpclass.first_inf, fpclass.locate_inf):
        with pytest.raises(TypeError, match="complex"):
            query(z, detect_negative=False)
        with pytest.raises(TypeError, match="complex"):
            query(z, detect_negative=False, detect_positive=False)


def test_limit_zero_and_limits_beyond_the_size():
    x = np.array([np.nan, 1, np.nan], np.float32)
    assert fpclass.locate_nan(x, limit=0).shape == (0, 1)
    np.testing.assert_array_equal(fpclass.locate_nan(x, limit=10**9), [[0], [2]])


def test_odd_strides_go_through_pieces():
    record = np.zeros(5000, dtype=[("pad", "u1"), ("v", "<f4")])
    record["v"] = samples.random_bits(np.float32, 5000, seed=8)
    v = record["v"]                       # stride 5: copied piece by piece
    check_queries(v)
    check_counts(v)


def test_errors():
    with pytest.raises(TypeError, match="cannot classify dtype"):
        fpclass.any_nan(np.array(["x"]))
    with pytest.raises(np.exceptions.AxisError):
        fpclass.any_nan(np.zeros((2, 2)), axis=2)
    with pytest.raises(ValueError, match="limit"):
        fpclass.locate_nan(np.zeros(3), limit=-1)
    with pytest.raises(TypeError, match="real floating-point"):
        fpclass.class_counts(np.arange(3))


def test_longdouble_by_value():
    x = np.array([0, -0.0, np.nan, -np.inf, np.finfo(np.longdouble).smallest_subnormal * 4, 3], np.longdouble)
    got = fpclass.class_counts(x)
    assert (got.nan, got.neginf, got.neg_zero, got.pos_subnormal, got.pos_normal) == (1, 1, 1, 1, 1)
    assert fpclass.first_nonfinite(x) == (2,)


@settings(max_examples=200, deadline=None)
@given(x=laid_out(), data=st.data())
def test_any_layout_and_axis(x, data):
    axis = data.draw(st.none() | (hnp.valid_tuple_axes(x.ndim, min_size=1) if x.ndim else st.none()))
    check_queries(x, axis=axis)
    if x.dtype.kind != "c":
        check_counts(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ">f4"], ids=str)
def test_class_counts_of_single_values(dtype):
    # one element per call: the gated tests are skipped wherever their gate finds nothing
    for value in samples.specials(np.dtype(dtype).newbyteorder("=")).astype(dtype):
        x = np.array([value], dtype)
        assert fpclass.class_counts(x) == twin.class_counts(x)


def test_histogram_counts_a_second_clause_wherever_a_format_puts_one():
    # The streaming histogram loop tests a second clause for TINY only; a format whose ZERO (or
    # NONFINITE, NEGATIVE) test had one must still be counted exactly. Here ZERO is replaced by a
    # two-clause test, "exponent 0 and mantissa != 0" (float16 subnormals), which the one-clause
    # loop would miscount as every tiny value.
    from fpclass.formats.bit_tests import BitTest
    from fpclass.kernels import launch
    x = samples.random_bits(np.dtype(np.float16), 100_000, seed=4)
    words = np.dtype(np.uint16)
    sign = 0x8000
    tiny, subnormal = BitTest(0x7C00, 0), BitTest(0x7C00, 0, 0x03FF, 0)
    base = [BitTest(0x7C00, 0x7C00), tiny, BitTest(sign, sign), subnormal, tiny.with_sign(sign),
            subnormal.with_sign(sign)]
    special = [BitTest(0x7C00, 0x7C00, 0x03FF, 0)]
    counts = launch.histogram(x, words, base, special)
    v = twin.values(x)
    with np.errstate(invalid="ignore"):
        sub = (v != 0) & (np.abs(v) < np.finfo(np.float16).smallest_normal)
    assert counts[3] == np.count_nonzero(sub)
    assert counts[5] == np.count_nonzero(sub & np.signbit(v))
    assert counts[6] == np.count_nonzero(np.isnan(v))
