"""count_nan / count_inf / count_nonfinite with dtype=: the counts in any NumPy integer type,
against numpy's count_nonzero of the twin's mask cast to it, through both launchers (NumPy, the
kernels serial and threaded: short rows take kernels/rows.py, which writes every cell width), on
short rows and other layouts; the checks (TypeError, ValueError at the type's edge), empty and
0-d input, axis=None, keepdims, and dask."""

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin

INTEGERS = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                  np.int64, np.uint64, ">i4", ">u2")]
FORMATS = [np.dtype(t) for t in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16,
                                 ml_dtypes.float8_e4m3fn, np.complex64)]
COUNTS = {
    "count_nan": (fpclass.count_nan, twin.isnan),
    "count_nonfinite": (fpclass.count_nonfinite, lambda x: ~twin.isfinite(x)),
    "count_inf": (fpclass.count_inf, twin.isinf),
}


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < 0.2] = np.nan
    x[rng.random(shape) < 0.2] = -np.inf
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype)


def want(mask, x, axis, keepdims, dtype):
    counts = np.count_nonzero(mask(x), axis=axis, keepdims=keepdims)
    return np.asarray(counts).astype(dtype)


def check(x, axis, dtype, keepdims=False):
    for name, (ours, mask) in COUNTS.items():
        got = ours(x, axis=axis, keepdims=keepdims, dtype=dtype)
        expected = want(mask, x, axis, keepdims, dtype)
        assert np.asarray(got).dtype == dtype, (name, np.asarray(got).dtype)
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} axis={axis}")
        if expected.ndim == 0:
            assert type(got) is dtype.type, (name, type(got))


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_short_rows_in_every_integer_type(fmt, dtype, launcher):
    for width, rows in [(2, 40), (4, 1000), (5, 33), (8, 129), (12, 50)]:
        x = sample(fmt, (rows, width), seed=width)
        check(x, -1, dtype)
        check(x[:120], 0, dtype)   # a column of at most 127: every type holds its count


@pytest.mark.parametrize("dtype", [np.dtype(np.uint8), np.dtype(np.int16)], ids=str)
def test_layouts_axes_and_keepdims(dtype, launcher):
    x = sample(np.dtype(np.float32), (6, 20, 4), seed=1)
    for view in (x, x[:, ::2], x[::-1, :, ::-1], x.transpose(2, 0, 1), np.asfortranarray(x),
                 np.broadcast_to(x[:1], x.shape)):
        for axis in (-1, 0, (0, 2)):
            for keepdims in (False, True):
                check(view, axis, dtype, keepdims)
        check(view, None, np.dtype(np.int16))   # 480 elements: a NumPy scalar of the type


@pytest.mark.parametrize("dtype, fits", [(np.int8, 127), (np.uint8, 255), (np.int16, 32767)])
def test_a_slice_longer_than_the_type_counts_raises(dtype, fits, launcher):
    x = np.full((2, fits), np.nan, np.float32)
    np.testing.assert_array_equal(fpclass.count_nan(x, axis=1, dtype=dtype), [fits, fits])
    longer = np.full((2, fits + 1), np.nan, np.float32)
    with pytest.raises(ValueError, match=f"{np.dtype(dtype)}.*{fits + 1} elements.*{fits}"):
        fpclass.count_nan(longer, axis=1, dtype=dtype)
    with pytest.raises(ValueError, match=np.dtype(dtype).name):
        fpclass.count_nonfinite(longer, dtype=dtype)   # axis=None: the whole array is one slice
    np.testing.assert_array_equal(fpclass.count_inf(longer, axis=0, dtype=dtype), np.zeros(fits + 1))


@pytest.mark.parametrize("bad", [np.float32, bool, "f8", object, "not a dtype", 3])
def test_a_type_that_is_not_an_integer_raises(bad):
    with pytest.raises(TypeError, match="dtype must be a NumPy integer dtype"):
        fpclass.count_nan(np.ones((4, 4), np.float32), axis=1, dtype=bad)


def test_empty_and_zero_d(launcher):
    empty = np.ones((0, 4), np.float32)
    for axis in (None, 0, 1):
        check(empty, axis, np.dtype(np.uint8))
    got = fpclass.count_nan(np.float32(np.nan), dtype=np.uint16)
    assert type(got) is np.uint16 and got == 1
    got = fpclass.count_nonfinite(np.array(1.0), dtype="i1")
    assert type(got) is np.int8 and got == 0
    got = fpclass.count_nan(np.full(10, np.nan), dtype=np.uint32)   # a small input's own path
    assert type(got) is np.uint32 and got == 10


def test_the_default_stays_int64_and_python_int(launcher):
    x = sample(np.dtype(ml_dtypes.bfloat16), (3000, 4), seed=3)
    assert fpclass.count_nan(x, axis=1).dtype == np.int64
    assert type(fpclass.count_nan(x)) is int
    assert fpclass.count_nan(x, dtype=None) == np.count_nonzero(twin.isnan(x))


def test_dask_counts_in_the_type():
    da = pytest.importorskip("dask.array")
    x = sample(np.dtype(np.float32), (400, 300), seed=2)
    d = da.from_array(x, chunks=(100, 100))
    for axis in (0, 1, None):
        got = fpclass.count_nan(d, axis=axis, dtype=np.uint32).compute()
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, np.count_nonzero(twin.isnan(x), axis=axis))
    # a slice of the whole array longer than the type counts, though every block's are shorter
    with pytest.raises(ValueError, match="uint8"):
        fpclass.count_nan(d, axis=1, dtype=np.uint8)
    with pytest.raises(TypeError, match="integer"):
        fpclass.count_nan(d, axis=1, dtype=np.float64)


def test_dask_refuses_the_type_where_a_reduced_length_is_unknown():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.full(300, np.nan), chunks=100)
    unknown = x[x != 1]   # 300 elements, dask knows not how many
    for dtype in (np.int8, np.int64):  # no type is known to hold a count of unknown length
        with pytest.raises(ValueError, match="unknown"):
            fpclass.count_nan(unknown, dtype=dtype)
    assert fpclass.count_nan(unknown).compute() == 300
    with pytest.raises(ValueError, match="int8"):
        fpclass.count_nan(unknown.compute_chunk_sizes(), dtype=np.int8)
    assert fpclass.count_nan(unknown.compute_chunk_sizes(), dtype=np.int16).compute() == 300


def test_pandas_refuses_the_type_rather_than_ignore_it():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, np.nan], "b": [np.nan, np.nan]})
    with pytest.raises(TypeError, match="dtype= is not supported for pandas"):
        fpclass.count_nan(frame, axis=0, dtype=np.uint8)
    assert fpclass.count_nan(frame["b"]) == 2
