"""first_* / locate_* on arrays with stride-0 (broadcast) axes: the first hit is looked for in the
distinct elements only and its index mapped back to the C order of the full shape, whose
broadcast axes may lie between the others. Compared with NumPy (np.argwhere and the flat index of
the twin's mask) on many shapes, both launchers."""

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin
from fpclass.kernels import numpy_bits
from fpclass.operators import queries

QUERIES = (("nan", fpclass.first_nan, fpclass.locate_nan, twin.isnan),
           ("inf", fpclass.first_inf, fpclass.locate_inf, twin.isinf),
           ("nonfinite", fpclass.first_nonfinite, fpclass.locate_nonfinite, lambda y: ~twin.isfinite(y)))


def planted(shape, dtype, seed):
    """Finite values of `shape` with a NaN and an Inf at random places (none for seed 0)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, shape).astype(dtype)
    if seed and a.size:
        flat = a.reshape(-1)
        flat[rng.integers(a.size)] = np.array(np.nan).astype(dtype)
        flat[rng.integers(a.size)] = np.array(-np.inf).astype(dtype)
    return a


def broadcasts(dtype, seed):
    """(name, array with stride-0 axes) in many layouts."""
    yield "first", np.broadcast_to(planted((33,), dtype, seed), (7, 33))
    yield "last", np.broadcast_to(planted((9, 1), dtype, seed), (9, 40))
    yield "middle", np.broadcast_to(planted((5, 1, 11), dtype, seed), (5, 6, 11))
    yield "two", np.broadcast_to(planted((4, 1, 9, 1), dtype, seed), (4, 3, 9, 5))
    yield "outer two", np.broadcast_to(planted((13,), dtype, seed), (3, 4, 13))
    yield "transposed", np.broadcast_to(planted((5, 1, 11), dtype, seed), (5, 6, 11)).T
    yield "swapped", np.broadcast_to(planted((6, 1, 10), dtype, seed), (6, 4, 10)).transpose(1, 0, 2)
    yield "reversed base", np.broadcast_to(planted((8, 1, 12), dtype, seed)[::-1, :, ::-1], (8, 3, 12))
    yield "reversed", np.broadcast_to(planted((8, 1, 12), dtype, seed), (8, 3, 12))[::-1, ::-1, ::-2]
    yield "stepped", np.broadcast_to(planted((10, 1, 14), dtype, seed)[::2, :, 1::3], (5, 6, 5))
    yield "length 1", np.broadcast_to(planted((1, 1, 17), dtype, seed), (1, 5, 17))
    base = planted((7, 9), dtype, seed)
    yield "strided", np.lib.stride_tricks.as_strided(base, (7, 4, 9), (base.strides[0], 0, base.strides[1]),
                                                     writeable=False)


def answers(x):
    for name, first, locate, mask in QUERIES:
        m = mask(x)
        hits = np.argwhere(m)
        hits = hits.reshape(len(hits), x.ndim)
        flat = np.flatnonzero(m)
        want = tuple(int(i) for i in np.unravel_index(flat[0], x.shape)) if flat.size else None
        assert want == (tuple(int(i) for i in hits[0]) if len(hits) else None)  # the two references
        assert first(x) == want, name
        np.testing.assert_array_equal(locate(x, limit=1), hits[:1], err_msg=name)
        np.testing.assert_array_equal(locate(x, limit=4), hits[:4], err_msg=name)
        np.testing.assert_array_equal(locate(x), hits, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.complex64, ">f8", "<f2"],
                         ids=str)
def test_broadcast_first_is_numpys(dtype, both_launchers):
    dtype = np.dtype(dtype)
    for seed in range(5):
        for name, x in broadcasts(dtype, seed):
            assert 0 in x.strides and not x.flags.writeable
            try:
                answers(x)
            except AssertionError as e:
                raise AssertionError(f"{name} {x.shape} {x.strides} seed {seed}: {e}") from None


def test_every_broadcast_position(both_launchers):
    # one NaN at each distinct element in turn: each maps to the first of its copies
    for shape, full in (((5, 1, 11), (5, 6, 11)), ((4, 1, 9, 1), (4, 3, 9, 5)), ((1, 6, 1), (4, 6, 3))):
        for at in range(int(np.prod(shape))):
            base = np.ones(shape, np.float32)
            base.reshape(-1)[at] = np.nan
            for x in (np.broadcast_to(base, full), np.broadcast_to(base, full)[::-1, :, ::-1]):
                answers(x)


@pytest.mark.parametrize("x", [np.broadcast_to(np.ones(0, np.float32), (5, 0)),
                               np.broadcast_to(np.ones(7, np.float32), (0, 7)),
                               np.broadcast_to(np.float32(np.nan), ()),
                               np.broadcast_to(np.float32(np.nan), (3, 4)),
                               np.broadcast_to(np.array(np.inf, ">f4"), (2, 1, 3))],
                         ids=["empty inner", "empty outer", "0-d", "one value", "one value swapped"])
def test_empty_0d_and_one_value(x, both_launchers):
    answers(x)


@pytest.mark.parametrize("launch", ["numpy", "kernels"])
def test_huge_broadcast_needs_no_mask_of_its_shape(launch, monkeypatch):
    # 2**40 elements of stride-0 copies of one row: NumPy's launcher too (the answers while
    # numba's cache is cold) answers from the row; a mask of the full shape would need a TiB
    if launch == "numpy":
        monkeypatch.setattr(queries, "launcher", lambda a: numpy_bits)
    row = np.ones(1 << 10, np.float32)
    row[[300, 700]] = np.nan, np.inf
    x = np.broadcast_to(row, (1 << 30, row.size))
    assert fpclass.any_nan(x) and not fpclass.all_finite(x)
    assert fpclass.count_nan(x) == 1 << 30 and fpclass.count_nonfinite(x) == 1 << 31
    assert fpclass.first_nan(x) == (0, 300) and fpclass.first_inf(x.T) == (700, 0)
    assert not fpclass.any_nan(np.broadcast_to(np.ones(5, np.float32), (1 << 38, 5)))
