"""Whole-array queries on strided layouts (issue 22): searched in memory order, answered exactly.

any/all/count answer the same whatever order memory is read in; first/locate answer in C order.
Every answer is compared with the plain-NumPy twin's mask (np.argwhere for positions), for every
layout (transposed, Fortran order, channels_last, negative strides, stride 0), every word width,
both launchers (serial and threaded), with hits at the first and last element in memory order and
in C order.
"""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin
from fpclass.kernels import launch_find, launch_find_order, numpy_bits, threads

DTYPES = [np.dtype(t) for t in (np.float64, np.float32, np.float16, ml_dtypes.bfloat16,
                                ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.complex64,
                                np.complex128, ">f4", ">f8")]
SHAPE = (3, 5, 7, 64)  # 6720 elements: past the NumPy launcher's size for every width

MASKS = {
    "nan": (fpclass.any_nan, fpclass.count_nan, fpclass.first_nan, fpclass.locate_nan, twin.isnan),
    "inf": (fpclass.any_inf, fpclass.count_inf, fpclass.first_inf, fpclass.locate_inf, twin.isinf),
    "nonfinite": (fpclass.any_nonfinite, fpclass.count_nonfinite, fpclass.first_nonfinite,
                  fpclass.locate_nonfinite, lambda x: ~twin.isfinite(x)),
}


def views(base):
    """(name, view) of a 4-D C-ordered `base`: every strided layout of the issue."""
    yield "transposed", base.T
    yield "fortran", np.asfortranarray(base)
    yield "channels_last", np.ascontiguousarray(base.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    yield "negative", base[::-1, :, ::-1, ::-1]
    yield "negative-transposed", base[:, ::-1].transpose(2, 0, 3, 1)
    yield "stepped-transposed", base[:, :, ::2].transpose(3, 1, 2, 0)
    yield "stride-0", np.broadcast_to(base[:, :1], base.shape)
    yield "stride-0-inner", np.broadcast_to(base[..., :1], base.shape)
    yield "stride-0-transposed", np.broadcast_to(base[:1], base.shape).T
    yield "2-d-transposed", base.reshape(-1, 64).T
    yield "1-d-reversed", base.reshape(-1)[::-1]
    readonly = base.T.copy()
    readonly.flags.writeable = False
    yield "read-only-fortran", readonly.T


def clean(dtype, seed=0):
    """Finite random values of `dtype` in SHAPE."""
    values = np.random.default_rng(seed).uniform(-2, 2, SHAPE)
    if dtype.kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    return values.astype(dtype)


def special(dtype, which):
    return np.array(np.nan if which == "nan" else -np.inf).astype(dtype)


def check(x):
    for name, (any_, count, first, locate, mask) in MASKS.items():
        m = mask(x)
        hits = np.argwhere(m)
        hits = hits.reshape(len(hits), x.ndim)
        assert any_(x) == m.any(), name
        assert count(x) == np.count_nonzero(m), name
        assert first(x) == (tuple(int(i) for i in hits[0]) if len(hits) else None), name
        np.testing.assert_array_equal(locate(x), hits, err_msg=name)
        np.testing.assert_array_equal(locate(x, limit=3), hits[:3], err_msg=name)
    assert fpclass.all_finite(x) == twin.isfinite(x).all()
    if x.dtype.kind != "c":
        assert fpclass.class_counts(x) == twin.class_counts(x)


def corners(x):
    """Index tuples of x's first and last elements in memory order and in C order."""
    offsets = sum(np.indices(x.shape) * np.array(x.strides).reshape(-1, *[1] * x.ndim))
    memory = [np.unravel_index(int(at), x.shape) for at in (offsets.argmin(), offsets.argmax())]
    return {tuple(int(i) for i in ix) for ix in memory} | {(0,) * x.ndim, tuple(n - 1 for n in x.shape)}


def marked_views(dtype):
    """(name, view) with hits planted through the view, where the view is writable."""
    for name, x in views(clean(dtype)):
        yield name, x
        if not x.flags.writeable:  # read-only or broadcast: planted in the array it views
            for k, where in enumerate([(0, 0, 0, 0), (2, 0, 6, 63), (1, 0, 3, 5), (2, 4, 6, 63),
                                       (0, 4, 6, 63), (0, 2, 3, 10)]):
                base = clean(dtype)
                base[where] = special(dtype, ("nan", "inf")[k % 2])
                yield f"{name} in base at {where}", dict(views(base))[name]
            continue
        for k, where in enumerate(sorted(corners(x))):  # one hit at a time at each corner
            which = ("nan", "inf")[k % 2]
            y = dict(views(clean(dtype)))[name]
            y[where] = special(dtype, which)
            yield f"{name} {which} at {where}", y
        y = dict(views(clean(dtype)))[name]  # a NaN at every corner, a few Infs between
        for where in corners(y):
            y[where] = special(dtype, "nan")
        rng = np.random.default_rng(1)
        y[tuple(rng.integers(0, n, 5) for n in y.shape)] = special(dtype, "inf")
        yield f"{name} many", y
        y = dict(views(clean(dtype)))[name]  # past the early-exit search's prefix, in every chunk
        y[np.unravel_index(np.arange(80, y.size, 97), y.shape)] = special(dtype, "nan")
        yield f"{name} periodic", y


LAUNCHERS = ["serial", "threaded", "threaded-deep"]
#: The formats run on threads: every word width and both byte orders ...
THREADED = [np.dtype(t) for t in (np.float64, np.float16, ml_dtypes.float8_e4m3fn, np.complex64, ">f4")]
#: ... and through the deepest search: one width of each kind of element.
DEEP = [np.dtype(t) for t in (np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, np.complex128)]


@pytest.fixture(params=LAUNCHERS)
def launchers(request, monkeypatch):
    """The numba kernels (never NumPy's small path), serial or on threads; "deep" also narrows
    the C-order search of odd layouts to one axis at a time (the most passes)."""
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", -1)
    if request.param != "serial":  # also the early-exit searches' chunks, on these small arrays
        monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 8)
        monkeypatch.setattr(launch_find, "PREFIX", 64)
        monkeypatch.setattr(launch_find, "CLAIM_BYTES", 1 << 9)
    if request.param == "threaded-deep":
        monkeypatch.setattr(launch_find_order, "CELLS", 1)
        monkeypatch.setattr(launch_find_order, "HEAD", 0)
        monkeypatch.setattr(launch_find_order, "SLICES", 2)
    return request.param


@pytest.mark.parametrize("dtype, launchers", [(d, k) for k, formats in zip(LAUNCHERS, (DTYPES, THREADED, DEEP))
                                               for d in formats],
                         ids=str, indirect=["launchers"])
def test_every_layout_against_the_twin(dtype, launchers):
    for name, x in marked_views(dtype):
        try:
            check(x)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.complex64], ids=str)
def test_first_is_the_c_order_first_not_the_memory_first(dtype, launchers):
    dtype = np.dtype(dtype)
    for name, x in views(clean(dtype)):
        if not x.flags.writeable:
            continue
        middle = tuple(n // 2 for n in x.shape)
        for where in sorted(corners(x) - {(0,) * x.ndim}):
            y = dict(views(clean(dtype)))[name]
            y[where] = special(dtype, "nan")
            y[middle] = special(dtype, "nan")  # C order puts one of the two first
            want = min(where, middle)
            assert fpclass.first_nan(y) == want, (name, where)
            np.testing.assert_array_equal(fpclass.locate_nan(y, limit=1), [want])


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0, 3), ()])
def test_empty_and_0d(shape, launchers):
    x = np.ones(shape, np.float32)
    for y in (x, x.T, x[::-1] if x.ndim else x):
        check(y)
    if not shape:
        check(np.array(np.nan, np.float32))


def test_broadcast_without_reading_every_copy():
    # 2**45 elements of stride-0 copies of one row: read as the one row, so the answers come at
    # once; reading every copy would take hours (the limit is far above the expected time)
    code = """
import numpy as np, fpclass
row = np.ones(1 << 12, np.float32)
row[1000], row[3000] = np.nan, np.inf
x = np.broadcast_to(row, (1 << 33, row.size)).T  # stride 0 outside and inside the transpose
m = np.isnan(row)
assert fpclass.any_nan(x) and fpclass.any_nonfinite(x) and not fpclass.all_finite(x)
assert fpclass.count_nan(x) == np.count_nonzero(m) * (1 << 33)
assert fpclass.count_nonfinite(x) == np.count_nonzero(~np.isfinite(row)) * (1 << 33)
assert fpclass.first_nan(x) == (int(np.flatnonzero(m)[0]), 0)
assert fpclass.first_inf(np.broadcast_to(row, (1 << 33, row.size))) == (0, 3000)
assert not fpclass.any_nan(np.broadcast_to(np.ones(7, np.float32), (1 << 40, 7)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
