"""Per-slice queries (any / all / count along axes) through the numba reduce launcher, serial and
threaded, against the NumPy twin (fpclass.twin): every axis combination, every layout, the cell
widths' edges, slices that stop early and slices cut into several runs."""

import itertools

import ml_dtypes
import numpy as np
import pytest

import fpclass
import samples
from fpclass import twin

DTYPES = [np.dtype(t) for t in (np.float64, ">f4", np.float16, ml_dtypes.bfloat16,
                                ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                ml_dtypes.float8_e8m0fnu, np.complex64)]
CLASSES = {  # query name -> (fpclass any, fpclass count, the twin's mask)
    "nan": (fpclass.any_nan, fpclass.count_nan, twin.isnan),
    "inf": (fpclass.any_inf, fpclass.count_inf, twin.isinf),
    "nonfinite": (fpclass.any_nonfinite, fpclass.count_nonfinite, lambda x: ~twin.isfinite(x)),
}


@pytest.fixture(params=["serial", "threaded"])
def kernels(request, monkeypatch):
    """Every input through the numba kernels (no small-input NumPy path), on one thread or in
    parts on several threads, as small as the split allows."""
    from fpclass.kernels import numpy_bits, threads
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", -1)
    if request.param == "threaded":
        monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    return request.param


def all_axes(ndim):
    return [axes for r in range(1, ndim + 1) for axes in itertools.combinations(range(ndim), r)]


def check_slices(x, axes_list=None):
    for axis in axes_list or all_axes(x.ndim):
        for name, (any_, count, mask) in CLASSES.items():
            m = mask(x)
            for keepdims in (False, True):
                got = any_(x, axis=axis, keepdims=keepdims)
                want = m.any(axis=axis, keepdims=keepdims)
                np.testing.assert_array_equal(got, want, err_msg=f"any {name} axis={axis}")
                assert np.asarray(got).dtype == bool
                got = count(x, axis=axis, keepdims=keepdims)
                np.testing.assert_array_equal(got, np.count_nonzero(m, axis=axis, keepdims=keepdims),
                                              err_msg=f"count {name} axis={axis}")
                assert np.asarray(got).dtype == np.int64
        np.testing.assert_array_equal(fpclass.all_finite(x, axis=axis), twin.isfinite(x).all(axis=axis))


def mixed(dtype, shape, seed):
    """Random bits with a third of the elements non-finite (random patterns alone seldom hit the
    narrow NaN of e4m3fn or the single one of e4m3fnuz)."""
    x = samples.random_bits(dtype, int(np.prod(shape)), seed=seed).reshape(shape)
    specials = samples.all_patterns(dtype.newbyteorder("=")) if dtype.itemsize == 1 else None
    rng = np.random.default_rng(seed)
    if specials is not None:
        bad = specials[~twin.isfinite(specials)]
        if bad.size:
            pick = rng.random(shape) < 0.3
            x[pick] = bad[rng.integers(0, bad.size, int(pick.sum()))]
    return x


LAYOUTS = {
    "C": lambda x: x,
    "transposed": lambda x: x.transpose(2, 0, 1),
    "reversed": lambda x: x[::-1, :, ::-1],
    "strided": lambda x: x[:, ::2, 1::3],
    "unaligned": lambda x: np.frombuffer(b"\0" + x.tobytes(), x.dtype, offset=1).reshape(x.shape)
    if x.dtype.itemsize > 1 else x[:, :, 1:],
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_axis_and_layout(dtype, layout, kernels):
    x = LAYOUTS[layout](mixed(dtype, (6, 40, 70), seed=3))
    check_slices(x)
    check_slices(np.ascontiguousarray(x[:, :, :1]), [(0,), (2,), (0, 2)])  # length-1 axes
    if dtype.kind == "f":
        swapped = x.astype(x.dtype.newbyteorder("S"))
        check_slices(swapped, [(0,), (1, 2)])


@pytest.mark.parametrize("dtype", [np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.float16)], ids=str)
@pytest.mark.parametrize("rows", [255, 256, 65535, 65536])
def test_counts_at_the_edges_of_the_cell_widths(dtype, rows, kernels):
    # per-column counts of 1- and 2-byte words accumulate in narrow cells; a column of NaN as
    # long as a cell's largest value, and one longer, must count exactly
    x = np.zeros((rows, 3), dtype)
    x[:, 1] = np.nan
    x[::2, 2] = np.inf
    np.testing.assert_array_equal(fpclass.count_nan(x, axis=0), [0, rows, 0])
    np.testing.assert_array_equal(fpclass.count_nonfinite(x, axis=0), [0, rows, (rows + 1) // 2])
    np.testing.assert_array_equal(fpclass.any_inf(x, axis=0), [False, False, True])


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16),
                                   np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.complex128)], ids=str)
def test_slices_that_stop_early_and_slices_in_several_runs(dtype, kernels):
    x = np.ones((8, 5, 700), dtype)
    x[:4, :, 0] = np.nan        # hits at the start of the slices' first runs
    x[4:6, 3, 699] = np.nan     # a hit in a later run, at its very end
    x[6, 0, 350] = np.inf
    for axis in [(2,), (1, 2), (0, 2), (0, 1, 2), (0,)]:
        check_slices(x, [axis])
    check_slices(x.transpose(1, 0, 2), [(0, 2), (2,)])


def test_whole_array_axes_give_the_whole_array_answer(kernels):
    x = mixed(np.dtype(np.float16), (30, 50), seed=5)
    assert fpclass.count_nan(x, axis=(0, 1)) == fpclass.count_nan(x)
    assert fpclass.any_nan(x, axis=(1, 0), keepdims=True).shape == (1, 1)
    assert fpclass.any_nonfinite(x[:1], axis=1, keepdims=True).shape == (1, 1)


def test_empty_and_zero_d(kernels):
    for shape, axis in [((0, 4), 0), ((0, 4), 1), ((3, 0), 1), ((2, 0, 3), (0, 2))]:
        x = np.empty(shape, np.float32)
        np.testing.assert_array_equal(fpclass.count_nan(x, axis=axis), np.zeros(shape).sum(axis=axis))
        np.testing.assert_array_equal(fpclass.any_nan(x, axis=axis), np.zeros(shape, bool).any(axis=axis))
        np.testing.assert_array_equal(fpclass.all_finite(x, axis=axis), np.ones(shape, bool).all(axis=axis))
    assert fpclass.count_nan(np.float32(np.nan), axis=()) == 1


def test_read_only_input_is_not_written(kernels):
    x = mixed(np.dtype(np.float32), (40, 70), seed=9)
    before = x.copy()
    x.flags.writeable = False
    check_slices(x)
    np.testing.assert_array_equal(x.view(np.uint32), before.view(np.uint32))
