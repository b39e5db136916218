"""The element-wise operators against their NumPy twin (fpclass.twin)."""

import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fpclass
import samples
from fpclass import twin

#: Every test runs through both launchers (NumPy bit tests and the numba kernels).
pytestmark = pytest.mark.usefixtures("both_launchers")

FLAGS = [(True, True), (True, False), (False, True), (False, False)]


def swapped(x):
    """The same values stored in the opposite byte order."""
    return x.astype(x.dtype.newbyteorder("S"))


def check_all_ops(x):
    """Every operator and attribute combination on `x` agrees with the twin."""
    np.testing.assert_array_equal(fpclass.isnan(x), twin.isnan(x))
    np.testing.assert_array_equal(fpclass.isfinite(x), twin.isfinite(x))
    for neg, pos in FLAGS:
        got = fpclass.isinf(x, detect_negative=neg, detect_positive=pos)
        want = twin.isinf(x, detect_negative=neg, detect_positive=pos)
        np.testing.assert_array_equal(got, want, err_msg=f"neg={neg} pos={pos}")
    np.testing.assert_array_equal(fpclass.isposinf(x), twin.isposinf(x))
    np.testing.assert_array_equal(fpclass.isneginf(x), twin.isneginf(x))


@pytest.mark.parametrize("dtype", samples.NARROW, ids=str)
def test_every_bit_pattern(dtype):
    x = samples.all_patterns(dtype)
    check_all_ops(x)
    if dtype.itemsize > 1 and dtype.kind == "f":
        check_all_ops(swapped(x))


def test_every_bfloat16_pattern_reversed():
    x = samples.all_patterns(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(fpclass.isnan(x[::-1]), twin.isnan(x)[::-1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_specials_and_random_bits(dtype):
    for x in (samples.specials(dtype), samples.random_bits(dtype, 1_000_000)):
        check_all_ops(x)
        check_all_ops(swapped(x))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, ml_dtypes.complex32], ids=str)
def test_complex_either_part(dtype):
    parts = np.array([0.0, 1.5, -2.0, np.inf, -np.inf, np.nan])
    pairs = np.empty((parts.size, parts.size), np.complex128)
    pairs.real, pairs.imag = parts[:, None], parts[None, :]
    x = pairs.ravel().astype(dtype)
    np.testing.assert_array_equal(fpclass.isnan(x), twin.isnan(x))
    np.testing.assert_array_equal(fpclass.isinf(x), twin.isinf(x))
    np.testing.assert_array_equal(fpclass.isfinite(x), twin.isfinite(x))
    if np.dtype(dtype).kind == "c":
        np.testing.assert_array_equal(fpclass.isnan(swapped(x)), twin.isnan(x))
        np.testing.assert_array_equal(fpclass.isinf(swapped(x)), twin.isinf(x))
    with pytest.raises(TypeError, match="complex"):
        fpclass.isposinf(x)
    with pytest.raises(TypeError, match="complex"):
        fpclass.isinf(x, detect_positive=False)


def test_longdouble_by_value():
    x = np.array([1, np.nan, np.inf, -np.inf, np.finfo(np.longdouble).max], dtype=np.longdouble)
    np.testing.assert_array_equal(fpclass.isnan(x), np.isnan(x))
    np.testing.assert_array_equal(fpclass.isinf(x, detect_negative=False), np.isposinf(x))
    np.testing.assert_array_equal(fpclass.isfinite(x), np.isfinite(x))


@pytest.mark.parametrize("x", [np.arange(5, dtype=np.int16), np.array([True, False]),
                               np.arange(3, dtype=np.uint64), np.zeros(3, ml_dtypes.int4)], ids=str)
def test_integers_follow_numpy(x):
    assert not fpclass.isnan(x).any() and not fpclass.isinf(x).any() and fpclass.isfinite(x).all()
    assert fpclass.isnan(x).shape == x.shape


@pytest.mark.parametrize("unit", ["M8[s]", "m8[ns]", ">M8[D]"])
def test_datetime_nat_is_nan(unit):
    x = np.array(["NaT", 0, 12345, "NaT"], dtype="M8[s]").astype(unit) if "M8" in unit else \
        np.array(["NaT", 0, -7, "NaT"], dtype=unit)
    np.testing.assert_array_equal(fpclass.isnan(x), np.isnat(x))
    np.testing.assert_array_equal(fpclass.isfinite(x), ~np.isnat(x))
    assert not fpclass.isinf(x).any()


@pytest.mark.parametrize("bad", [np.array(["a"]), np.array([b"a"]), np.array([object()]),
                                 np.zeros(2, dtype=[("a", "f4")])], ids=lambda a: str(a.dtype))
def test_unsupported_dtypes_name_the_dtype(bad):
    with pytest.raises(TypeError, match=r"cannot classify dtype .*supported"):
        fpclass.isnan(bad)


def test_scalars_and_lists():
    assert fpclass.isnan(float("nan")) is np.True_
    assert fpclass.isinf(np.float16(-np.inf), detect_negative=False) is np.False_
    assert fpclass.isfinite(np.array(3.0)) is np.True_          # 0-d in, scalar out, like numpy
    np.testing.assert_array_equal(fpclass.isnan([1.0, float("nan")]), [False, True])
    assert fpclass.isnan([]).shape == (0,)


@pytest.mark.parametrize("shape", [(0,), (0, 0), (2, 0), (2, 0, 1)])
def test_empty_shapes(shape):
    x = np.empty(shape, np.float32)
    for op in (fpclass.isnan, fpclass.isinf, fpclass.isfinite):
        assert op(x).shape == shape and op(x).dtype == bool
        assert op(x.T).shape == x.T.shape


@st.composite
def laid_out(draw):
    """A random-valued array of a random format viewed through random slices and transposes."""
    dtype = draw(st.sampled_from(samples.REAL + [np.dtype(">f4"), np.dtype(">f8"), np.dtype(">f2"),
                                              np.dtype(np.complex64), np.dtype(">c8")]))
    base = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=7))
    words = samples.random_bits(np.dtype(f"u{dtype.itemsize}") if dtype.kind != "c" else dtype,
                            int(np.prod(base)), seed=draw(st.integers(0, 2**32 - 1)))
    x = words.view(dtype).reshape(base) if dtype.kind != "c" else words.reshape(base)
    index = tuple(slice(draw(st.integers(0, 2)), None, draw(st.sampled_from([1, 2, -1, -2, 3])))
                  for _ in base)
    x = x[index] if index else x
    if x.ndim > 1 and draw(st.booleans()):
        x = x.transpose(draw(st.permutations(range(x.ndim))))
    if draw(st.booleans()):
        x.flags.writeable = False
    return x


@settings(max_examples=300, deadline=None)
@given(x=laid_out(), out_kind=st.sampled_from([None, bool, np.uint8, "strided"]))
def test_any_layout(x, out_kind):
    before = x.copy()
    expected = twin.isnan(x), twin.isinf(x), twin.isfinite(x)
    for op, want in zip((fpclass.isnan, fpclass.isinf, fpclass.isfinite), expected):
        if out_kind is None:
            got = op(x)
        elif out_kind == "strided":
            buf = np.zeros(x.shape[::-1] + (2,), np.uint8)
            out = buf[..., 1].T
            assert op(x, out=out) is out
            got = out
        else:
            out = np.full(x.shape, 7, out_kind)
            assert op(x, out=out) is out
            got = out
        np.testing.assert_array_equal(np.asarray(got, dtype=bool), want)
        if out_kind is np.uint8:
            assert set(np.unique(got)) <= {0, 1}
    assert np.array_equal(x.tobytes(), before.tobytes())


def test_unaligned_and_odd_strides_are_classified_by_value():
    record = np.zeros(1000, dtype=[("pad", "u1"), ("v", "<f4"), ("w", "u1")])
    record["v"] = samples.random_bits(np.float32, 1000, seed=3)
    v = record["v"]                       # stride 6: not a whole number of float32 words
    np.testing.assert_array_equal(fpclass.isnan(v), twin.isnan(v))
    raw = np.zeros(4001, np.uint8)
    unaligned = raw[1:].view(np.float32)  # data one byte past an aligned address
    unaligned[:] = samples.random_bits(np.float32, 1000, seed=4)
    np.testing.assert_array_equal(fpclass.isinf(unaligned), twin.isinf(unaligned))
    scalar = np.ndarray((), "<f8", buffer=bytearray(b"\0" + np.float64(np.nan).tobytes()), offset=1)
    assert fpclass.isnan(scalar) and not fpclass.isfinite(scalar)


def test_out_overlapping_the_input():
    x = samples.all_patterns(ml_dtypes.float8_e5m2).copy()
    want = twin.isnan(x)
    out = x.view(np.uint8)                # the result overwrites the very bytes it reads
    fpclass.isnan(x, out=out)
    np.testing.assert_array_equal(out, want)
    y = samples.all_patterns(np.float16).copy()
    want = twin.isinf(y)
    out = y.view(np.uint8)[5:5 + y.size]  # shifted, partial overlap
    fpclass.isinf(y, out=out)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e5m2, ml_dtypes.bfloat16, np.float16, np.float32],
                         ids=str)
def test_small_bool_out_over_the_input(dtype):
    # small inputs answer in one NumPy call (a ufunc or a lookup table) straight into a bool out=,
    # here the input's own first bytes
    x = samples.random_bits(np.dtype(dtype), 2000, seed=3)
    x[::7] = np.nan
    x[3::7] = np.inf
    for op, truth in ((fpclass.isnan, twin.isnan), (fpclass.isfinite, twin.isfinite)):
        y = x.copy()
        want = truth(y)
        out = y.view(bool)[:y.size]
        assert op(y, out=out) is out
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("out, error, match", [
    (np.zeros(3, np.int32), TypeError, "bool or uint8"),
    (np.zeros(4, bool), ValueError, "shape"),
    (np.zeros((3, 1), bool), ValueError, "shape"),
    ([False] * 3, TypeError, "ndarray"),
])
def test_bad_out_is_refused_before_writing(out, error, match):
    with pytest.raises(error, match=match):
        fpclass.isnan(np.array([1.0, np.nan, 2.0]), out=out)


def test_read_only_out_is_refused():
    out = np.zeros(3, bool)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only.*writable"):
        fpclass.isnan(np.zeros(3), out=out)


OPERATORS = [fpclass.isnan, fpclass.isinf, fpclass.isfinite, fpclass.isposinf, fpclass.isneginf]
# small (the fast path), large (the general path), by value (long double), no such values (int8)
OUT_INPUTS = [np.array([[1.0, np.nan, np.inf]]), np.tile(np.array([[1.0, np.nan, -np.inf]]), 40_000),
              np.array([[1.0, np.nan, -np.inf]], np.longdouble), np.zeros((1, 5), np.int8)]


@pytest.mark.parametrize("x", OUT_INPUTS, ids=["small", "large", "by-value", "int8"])
@pytest.mark.parametrize("op", OPERATORS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [bool, np.uint8], ids=["bool", "uint8"])
def test_masked_out_is_refused_before_writing(x, op, dtype):
    # a masked out= would get its data written and its mask left stale; numba must not see it
    out = np.ma.masked_array(np.full(x.shape, 7, dtype), mask=np.eye(*x.shape, dtype=bool))
    before = out.data.copy()
    with pytest.raises(TypeError, match=r"^out ") as refused:
        op(x, out=out)
    for says in ("masked arrays", "writable", "bool or uint8", f"shape {x.shape}"):
        assert says in str(refused.value)
    assert np.array_equal(out.data, before) and out.mask.sum() == 1


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("x", OUT_INPUTS, ids=["small", "large", "by-value", "int8"])
@pytest.mark.parametrize("op", OPERATORS, ids=lambda f: f.__name__)
def test_ndarray_subclass_out_is_written_through_and_returned(x, op, tmp_path):
    # np.matrix reshapes to 2-D and once made the kernel write garbage (or crash); a memmap is a
    # legitimate out= (a mask written straight into a file)
    want = op(x)
    for out in (np.asmatrix(np.zeros(x.shape, bool)),
                np.memmap(tmp_path / "mask", dtype=np.uint8, mode="w+", shape=x.shape)):
        assert op(x, out=out) is out
        np.testing.assert_array_equal(np.asarray(out, dtype=bool), want, err_msg=type(out).__name__)
        del out
    with pytest.raises(ValueError, match="shape"):
        op(x[0], out=np.asmatrix(np.zeros(x.shape, bool)))  # a matrix is never 1-D


@pytest.mark.parametrize("value", [2, -1, "yes", None, 1.0])
def test_bad_flags(value):
    with pytest.raises(TypeError, match="detect_negative"):
        fpclass.isinf(np.zeros(2), detect_negative=value)


def test_signalling_nans_never_warn():
    x = samples.specials(np.float32)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        check_all_ops(x)


def test_large_arrays_use_the_parallel_path_correctly(monkeypatch):
    from fpclass.kernels import threads
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 12)  # the threaded path, on a small array
    x = samples.random_bits(np.float16, 3_000_001, seed=9)
    np.testing.assert_array_equal(fpclass.isnan(x), twin.isnan(x))
    np.testing.assert_array_equal(fpclass.isfinite(x[::-3]), twin.isfinite(x[::-3]))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.float8_e4m3fn, np.float64], ids=str)
@pytest.mark.parametrize("out_offset", [0, 5])
@pytest.mark.parametrize("threaded", [False, True])
def test_streamed_masks_match_the_twin(dtype, out_offset, threaded, monkeypatch):
    # large masks are written past the caches from the first 64-byte boundary of `out`, by one
    # thread or many: check head, whole vectors and tail, one- and two-clause tests, negated
    from fpclass.kernels import launch_elementwise, threads
    if threaded:
        monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 12)
    monkeypatch.setattr(launch_elementwise, "STREAM_MIN_BYTES", 0)
    x = samples.random_bits(np.dtype(dtype), 300_017, seed=11)
    buffer = np.full(x.size + out_offset + 64, 7, np.uint8)
    cases = {"isnan": (fpclass.isnan, twin.isnan), "isinf": (fpclass.isinf, twin.isinf),
             "isfinite": (fpclass.isfinite, twin.isfinite),
             "isneginf": (fpclass.isneginf, twin.isneginf)}
    for name, (ours, truth) in cases.items():
        got = ours(x, out=buffer[out_offset:out_offset + x.size].view(bool))
        np.testing.assert_array_equal(got, truth(x), err_msg=name)
        assert (buffer[:out_offset] == 7).all() and (buffer[out_offset + x.size:] == 7).all()


def test_import_compiles_nothing():
    code = "import sys, fpclass; print('numba' in sys.modules, 'ml_dtypes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_masked_arrays_are_refused_not_unmasked():
    x = np.ma.masked_array([1.0, np.nan], mask=[False, True])
    with pytest.raises(TypeError, match="masked"):
        fpclass.isnan(x)


def test_large_masks_recycle_memory_only_when_every_view_is_gone():
    from fpclass.operators import outputs
    x = np.zeros(outputs.POOL_MIN_BYTES, np.float16)
    x[6] = np.nan
    first = fpclass.isnan(x)
    view = first[::2]
    address = first.ctypes.data
    del first                              # a view still holds the memory: not recycled
    second = fpclass.isnan(x)
    assert second.ctypes.data != address
    assert view[3] and view.sum() == 1     # the view still reads its own answer
    del view
    third = fpclass.isnan(x)               # now the first block is free to reuse
    assert third.ctypes.data == address
    np.testing.assert_array_equal(third, np.isnan(x))
    del third
    assert outputs._idle_bytes >= x.size   # idle again, kept for reuse ...
    fpclass.release_idle_masks()
    assert outputs._idle_bytes == 0        # ... until the public call gives it back


@pytest.mark.parametrize("query, flags, truth", [
    ("any_nan", {}, lambda x: np.isnan(x).any(axis=-1)),
    ("all_finite", {}, lambda x: np.isfinite(x).all(axis=-1)),
    ("count_nan", {"dtype": np.uint8}, lambda x: np.isnan(x).sum(axis=-1)),
    ("count_nonfinite", {}, lambda x: (~np.isfinite(x)).sum(axis=-1)),
])
def test_large_row_answers_recycle_memory_only_when_every_view_is_gone(query, flags, truth,
                                                                       both_launchers):
    from fpclass.operators import outputs
    fn = getattr(fpclass, query)
    yes_no = query in ("any_nan", "all_finite")
    cells = np.dtype(bool if yes_no else flags.get("dtype", np.int64)).itemsize
    x = np.ones((outputs.POOL_MIN_BYTES // cells, 4), np.float16)   # rows of 4: the short-row path
    x[5, 2] = np.nan
    x[-1, 0] = -np.inf
    fpclass.release_idle_masks()
    first = fn(x, axis=-1, **flags)
    np.testing.assert_array_equal(first, truth(x))
    assert first.dtype == np.dtype(flags.get("dtype", bool if yes_no else np.int64))
    looked_at = truth(x)[4:7].copy()
    if both_launchers == "numpy":          # NumPy's reductions allocate their own answers
        return
    owner = first
    while isinstance(owner, np.ndarray):
        owner = owner.base
    assert type(owner) is outputs._Lease   # the pool's memory, lent
    del owner
    view = first[4:7]
    address = first.ctypes.data
    del first                              # a view still holds the memory: not recycled
    x[5, 2] = 1.0
    second = fn(x, axis=-1, **flags)       # an answer that differs where the view looks
    assert second.ctypes.data != address
    np.testing.assert_array_equal(second, truth(x))
    del second
    np.testing.assert_array_equal(view, looked_at)   # the view still reads its own answer
    del view
    third = fn(x, axis=-1, **flags)        # now the first block is free to reuse
    assert third.ctypes.data == address
    np.testing.assert_array_equal(third, truth(x))
    del third
    assert outputs._idle_bytes >= x.shape[0] * cells
    fpclass.release_idle_masks()
    assert outputs._idle_bytes == 0


def test_pooled_memory_goes_to_the_sizes_asked_for_lately(monkeypatch):
    from fpclass.operators import outputs
    least = outputs.POOL_MIN_BYTES
    monkeypatch.setattr(outputs, "POOL_MAX_IDLE_BYTES", 2 * least + (1 << 16))
    fpclass.release_idle_masks()
    x = np.zeros(least, np.float16)
    kept = fpclass.isnan(x)                  # a size asked for again and again
    for k in (1, 2):                         # sizes never asked for again fill the pool
        odd = outputs.empty_answer((least + 4096 * k,), np.uint8)
        del odd
    assert outputs._idle_bytes == 2 * least + 4096 * 3
    address = kept.ctypes.data
    del kept                                 # no room: the size given back longest ago makes it
    again = fpclass.isnan(x)
    assert again.ctypes.data == address
    assert outputs._idle_bytes == least + 4096 * 2
    del again
    fpclass.release_idle_masks()


def test_pooled_answers_take_any_fixed_size_dtype():
    import ml_dtypes

    from fpclass.operators import outputs
    for dtype in (ml_dtypes.bfloat16, np.dtype(">u4"), np.uint64, bool):
        shape = (outputs.POOL_MIN_BYTES // 2 // np.dtype(dtype).itemsize, 2)   # pooled: 8 MiB
        got = outputs.empty_answer(shape, dtype)
        assert got.dtype == np.dtype(dtype) and got.shape == shape
        assert got.flags.c_contiguous and got.flags.writeable
    fpclass.release_idle_masks()


def test_pooled_mask_leases_cannot_be_copied():
    import copy
    import pickle

    from fpclass.operators import outputs
    mask = fpclass.isnan(np.zeros(outputs.POOL_MIN_BYTES, np.float16))
    lease = mask.base
    while isinstance(lease, np.ndarray):
        lease = lease.base
    for clone in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="lease"):
            clone(lease)
    assert pickle.loads(pickle.dumps(mask)).shape == mask.shape   # the mask itself pickles
