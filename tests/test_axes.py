"""Per-axis queries on the shapes issue 22 made fast, against the NumPy twin (fpclass.twin): short
rows reduced along their own axis (16 rows a step, kernels/rows.py), per-column counts of tall,
narrow tables (counted as longer rows, then folded; threads in cells of their own) and `any` along
an outer axis (stops once every cell has a hit), in every layout, through both launchers, serial
and threaded, and the thread policy inside foreign workers."""

from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin
from fpclass.kernels import numpy_bits, slices, thread_parts, threads

DTYPES = [np.dtype(t) for t in (np.float32, np.float64, ">f4", np.float16, ml_dtypes.bfloat16,
                                ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.complex64)]
QUERIES = {  # name -> (fpclass function, the twin's answer along `axis`)
    "count_nan": (fpclass.count_nan, lambda x, axis: np.count_nonzero(twin.isnan(x), axis=axis)),
    "any_nan": (fpclass.any_nan, lambda x, axis: twin.isnan(x).any(axis=axis)),
    "count_nonfinite": (fpclass.count_nonfinite,
                        lambda x, axis: np.count_nonzero(~twin.isfinite(x), axis=axis)),
    "all_finite": (fpclass.all_finite, lambda x, axis: twin.isfinite(x).all(axis=axis)),
}


def sample(dtype, shape, seed, share=0.15):
    """Random finite values with NaN and Inf sprinkled in (`share` of the elements each); formats
    without Inf get NaN there, as the cast gives."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < share] = np.nan
    x[rng.random(shape) < share] = np.inf
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype)


def check(x, axes):
    for axis in axes:
        for name, (ours, want) in QUERIES.items():
            got = ours(x, axis=axis)
            np.testing.assert_array_equal(got, want(x, axis), err_msg=f"{name} axis={axis}")
            assert np.asarray(got).dtype == np.asarray(want(x, axis)).dtype


LAYOUTS = {
    "C": lambda x: x,
    "F": lambda x: np.asfortranarray(x),
    "transposed": lambda x: x.T,
    "reversed rows": lambda x: x[::-1],
    "reversed both": lambda x: x[::-1, ::-1],
    "every other row": lambda x: x[::2],
    "rows cut short": lambda x: x[:, 1:],
    "stride 0": lambda x: np.broadcast_to(x[:1], x.shape),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_short_rows_and_narrow_columns_in_every_layout(dtype, layout, launcher):
    # widths around the short-row kernel's range (2..8) and the column widening (< 64); row
    # counts that leave part of a 16-row step and part of a widened row over
    for width, rows in [(1, 37), (2, 50), (3, 33), (4, 1000), (5, 35), (6, 300), (7, 16), (8, 129),
                        (9, 40), (12, 700)]:
        x = LAYOUTS[layout](sample(dtype, (rows, width), seed=width))
        check(x, [0, 1, -1, (0, 1)])


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16),
                                   np.dtype(ml_dtypes.float8_e4m3fn)], ids=str)
def test_short_rows_in_higher_dimensions(dtype, launcher):
    x = sample(dtype, (5, 40, 6), seed=3)
    check(x, [2, (0, 2), (1, 2)])
    check(x.transpose(1, 0, 2), [2, (0, 2)])
    check(x[:, ::3], [2, (1, 2)])


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.float8_e4m3fn)], ids=str)
def test_short_rows_reduced_along_an_outer_axis_too(dtype, launcher):
    # blocks long enough for the short-row kernel, all of them answering into the same cells
    x = sample(dtype, (3, 2100, 4), seed=5)
    check(x, [(0, 2), (0, 1, 2)])
    y = np.zeros((2, 2048, 4), dtype)
    y[0, 5, 1] = np.nan   # its row's only hit is in the first of the two blocks
    np.testing.assert_array_equal(np.flatnonzero(fpclass.count_nan(y, axis=(0, 2))), [5])
    np.testing.assert_array_equal(np.flatnonzero(fpclass.any_nan(y, axis=(0, 2))), [5])


@pytest.mark.parametrize("dtype", [np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.float16)], ids=str)
@pytest.mark.parametrize("rows", [255, 256, 70_000])
def test_narrow_column_counts_at_the_edges_of_the_cell_widths(dtype, rows, launcher):
    # counted as long rows then folded: a column as long as a cell's largest value, and longer
    x = np.zeros((rows, 4), dtype)
    x[:, 1] = np.nan
    x[::2, 2] = np.inf
    x[-1, 3] = np.nan
    np.testing.assert_array_equal(fpclass.count_nan(x, axis=0), [0, rows, 0, 1])
    np.testing.assert_array_equal(fpclass.count_nonfinite(x, axis=0), [0, rows, (rows + 1) // 2, 1])
    np.testing.assert_array_equal(fpclass.any_inf(x, axis=0), [False, False, True, False])
    np.testing.assert_array_equal(fpclass.count_nan(x, axis=1)[-2:], [1, 2])


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.float8_e4m3fn)], ids=str)
@pytest.mark.parametrize("row", [0, 3, 2000, 4999])
def test_any_along_an_outer_axis_with_a_hit_in_one_row(dtype, row, launcher):
    # every column's hit in one row (early, late, or the last), the last column's in another
    for width in (6, 8, 200):
        x = np.ones((5000, width), dtype)
        x[row, :-1] = np.nan
        x[4999 - row, -1] = np.inf
        check(x, [0])


def test_empty_and_zero_d(launcher):
    for shape, axis in [((0, 4), 0), ((0, 4), 1), ((4, 0), 1), ((0, 6), -1), ((2, 0, 6), 2)]:
        check(np.empty(shape, np.float32), [axis])
    assert fpclass.count_nan(np.float32(np.nan), axis=()) == 1
    assert not fpclass.any_nan(np.float32(1), axis=())


def test_read_only_input_is_not_written(launcher):
    x = sample(np.dtype(ml_dtypes.bfloat16), (3000, 6), seed=4)
    before = x.view(np.uint16).copy()
    x.flags.writeable = False
    check(x, [0, 1])
    np.testing.assert_array_equal(x.view(np.uint16), before)


def test_threads_take_parts_of_the_rows_only_on_the_main_thread(monkeypatch):
    # a tall, narrow table: its columns cannot be shared out, so the threads count parts of its
    # rows in cells of their own; inside a foreign worker the same call runs on one thread
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", -1)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    calls = []
    real = thread_parts.run

    def spy(kernel, parts, threads):
        if kernel is slices.reduce_plan:
            calls.append(min(len(parts), threads))
        return real(kernel, parts, threads)
    monkeypatch.setattr(thread_parts, "run", spy)
    x = sample(np.dtype(np.float32), (20_000, 6), seed=5)
    want = np.count_nonzero(twin.isnan(x), axis=0)
    with ThreadPoolExecutor(1) as pool:
        np.testing.assert_array_equal(pool.submit(fpclass.count_nan, x, axis=0).result(), want)
        np.testing.assert_array_equal(pool.submit(fpclass.any_nan, x, axis=0).result(), want > 0)
    assert calls == []
    np.testing.assert_array_equal(fpclass.count_nan(x, axis=0), want)
    if threads.get_num_threads() > 1:
        assert calls and all(parts > 1 for parts in calls)
