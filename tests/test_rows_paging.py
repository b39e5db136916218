"""Short rows answered by threads that claim chunks of rows, one of them faulting the fresh
answer's pages in ahead (kernels/paging.py, launch_rows.py): the advice changes no byte, the
pager runs where it should and nowhere else, and the answers equal the NumPy twin's in every
layout, for both kernels (a row a word, and the shuffles), every cell width, through both
launchers (the threaded one with chunks of a few rows, so that many are claimed and faulted)."""

import mmap

import ml_dtypes
import numpy as np
import pytest
from numba import njit

import fpclass
from fpclass import twin
from fpclass.kernels import launch_rows, paging, threads
from samples import random_bits

linux_populate = pytest.mark.skipif(paging.function() == 0,
                                    reason="madvise(MADV_POPULATE_WRITE) is Linux >= 5.14's")


@njit
def _populate(madvise, start, length):
    return paging._populate(madvise, start, length)


@linux_populate
def test_faulting_in_changes_no_byte():
    pages = 64
    # fresh, page-aligned, private like an array's memory
    memory = mmap.mmap(-1, pages * paging.PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    a = np.frombuffer(memory, np.uint8)
    written = random_bits(np.uint8, pages // 2 * paging.PAGE, seed=1)
    a[:written.size] = written                                 # the first half present, the rest not
    assert _populate(paging.function(), a.ctypes.data + 100, a.size - 100) == -1  # unaligned: refused
    assert _populate(paging.function(), a.ctypes.data, a.size) == 0
    np.testing.assert_array_equal(a[:written.size], written)
    assert not a[written.size:].any()                          # fresh pages read zero
    a[-1] = 7                                                  # and are writable
    del a
    memory.close()


@pytest.fixture
def states(monkeypatch):
    """The claim states of every kernel call since the fixture started."""
    made, fresh = [], paging.state

    def recorded():
        made.append(fresh())
        return made[-1]

    monkeypatch.setattr(paging, "state", recorded)
    return made


@pytest.fixture
def small_chunks(monkeypatch):
    """Threads on any input, chunks of a few rows, and every answer faulted in ahead."""
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    monkeypatch.setattr(launch_rows, "CHUNK_BYTES", 64)
    monkeypatch.setattr(launch_rows, "PAGE_MIN", 0)


CASES = {  # name -> (fpclass function, keyword arguments, the twin's element mask, any)
    "any_nan": (fpclass.any_nan, {}, twin.isnan, True),
    "all_finite": (fpclass.all_finite, {}, twin.isfinite, None),
    "count_nan uint8": (fpclass.count_nan, {"dtype": np.uint8}, twin.isnan, False),
    "count_nonfinite": (fpclass.count_nonfinite, {}, lambda x: ~twin.isfinite(x), False),
    "count_inf uint16": (fpclass.count_inf, {"dtype": np.uint16}, twin.isinf, False),
}


def check(x, axis=-1):
    for name, (ours, flags, mask, any_mode) in CASES.items():
        elements = mask(x)
        if any_mode is None:
            want = elements.all(axis=axis)
        elif any_mode:
            want = elements.any(axis=axis)
        else:
            want = np.count_nonzero(elements, axis=axis).astype(flags.get("dtype", np.int64))
        got = ours(x, axis=axis, **flags)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {x.dtype} {x.shape} {x.strides}")
        assert np.asarray(got).dtype == want.dtype, name


LAYOUTS = {
    "C": lambda x: x,
    "reversed rows": lambda x: x[::-1],
    "transposed": lambda x: x.T,                      # the rows along axis 0, contiguous in memory
    "every other block": lambda x: x.reshape(4, -1, x.shape[-1])[::2, :-5],   # 2 blocks of 1099 rows
    "byte-swapped": lambda x: x.astype(x.dtype.newbyteorder()),
    "read-only": lambda x: _read_only(x),
}


def _read_only(x):
    x = x.copy()
    x.flags.writeable = False
    return x


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype, width", [(ml_dtypes.float8_e4m3fn, 4), (ml_dtypes.float8_e4m3fn, 8),
                                          (ml_dtypes.float8_e5m2fnuz, 4), (ml_dtypes.bfloat16, 2),
                                          (ml_dtypes.float8_e4m3fn, 6), (np.float16, 3),
                                          (np.float32, 2)], ids=str)
def test_answers_with_the_pages_faulted_ahead(dtype, width, layout, launcher, monkeypatch, states):
    if launcher == "threaded":
        monkeypatch.setattr(launch_rows, "CHUNK_BYTES", 64)
        monkeypatch.setattr(launch_rows, "PAGE_MIN", 0)
    x = random_bits(dtype, 4416 * width, seed=width)
    # dense NaN and Inf (where the format has them), so that every kind of cell is often not
    # zero and a cell left unwritten shows
    rng = np.random.default_rng(width)
    x[rng.random(x.size) < 0.2] = np.nan
    x[rng.random(x.size) < 0.1] = np.inf
    x = x.reshape(-1, width)
    y = LAYOUTS[layout](x[:-3] if layout != "every other block" else x)   # a step cut short
    check(y, axis=0 if layout == "transposed" else -1)
    if launcher == "threaded" and layout != "reversed rows" and paging.function():
        # (reversed: not the rows kernels'; no pager where madvise cannot fault in)
        # the pager faulted chunks in past the first
        assert states and all(s[1] > 1 for s in states), "no chunk was faulted in ahead"


def test_the_pager_only_with_threads_fresh_cells_and_large_answers(monkeypatch, states):
    x = random_bits(ml_dtypes.float8_e4m3fn, 1 << 20, seed=3).reshape(-1, 4)
    monkeypatch.setattr(launch_rows, "CHUNK_BYTES", 1 << 12)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    monkeypatch.setattr(launch_rows, "PAGE_MIN", 1 << 30)          # answer too small to fault in
    check(x)
    assert states and all(s[1] == 1 for s in states)
    # without the pager each thread's rows are one chunk (plus one failed claim each at the end)
    assert all(s[0] <= 2 * fpclass.get_num_threads() for s in states)
    monkeypatch.setattr(launch_rows, "PAGE_MIN", 0)
    states.clear()
    fpclass.set_num_threads(1)                                       # no other thread to write
    try:
        check(x)
    finally:
        fpclass.set_num_threads(None)
    assert states and all(s[1] == 1 for s in states)
    states.clear()
    check(x)
    if paging.function():
        assert all(s[1] > 1 for s in states)


@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (0,), (), (3, 0, 4)])
def test_empty_and_0d(shape, small_chunks):
    x = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    if x.ndim:
        check(x)
    else:
        assert fpclass.any_nan(x, axis=None) == bool(twin.isnan(x))


def test_higher_dimensions_blocks_answer_into_their_own_cells(small_chunks, states):
    x = random_bits(ml_dtypes.float8_e4m3fn, 3 * 2100 * 8, seed=9).reshape(3, 2100, 8)
    check(x[:, 50:])
    check(x.reshape(3, 2100, 2, 4)[:, :, 1])
    assert len(states) >= 3


def test_cold_background_policy_answers_the_same(tmp_path, monkeypatch, small_chunks):
    # FPCLASS_COMPILE=background on a cold cache: NumPy answers while the kernels would compile
    from fpclass.kernels import compile_cache
    monkeypatch.setattr(compile_cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(compile_cache, "_forced", None)
    monkeypatch.setenv(compile_cache.ENV, "background")
    monkeypatch.setattr(compile_cache, "_spawn", lambda: None)
    compile_cache.reset()
    try:
        x = random_bits(ml_dtypes.float8_e4m3fn, 1 << 16, seed=4).reshape(-1, 8)
        check(x)
        check(x.reshape(-1, 4)[::-1])
    finally:
        compile_cache.reset()
