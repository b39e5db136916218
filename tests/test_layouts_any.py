"""Searches on threads (kernels/launch_find.py): threads claim chunks of the plan in turn; `any`/
`all` stop once one sees a match, `first` once the chunks left start past a match seen. Every
answer is compared with the plain-NumPy twin, for hits at every chunk edge, on contiguous and
strided layouts."""

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin
from fpclass.kernels import launch_find, numpy_bits, threads

DTYPES = [np.dtype(t) for t in (np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2,
                                np.complex64, ">f4")]
CHUNK_BYTES = 1 << 9


@pytest.fixture
def claimed_chunks(monkeypatch):
    """The kernels on threads for every input, with a short serial prefix and small chunks."""
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", -1)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1 << 6)
    monkeypatch.setattr(launch_find, "PREFIX", 96)
    monkeypatch.setattr(launch_find, "CLAIM_BYTES", CHUNK_BYTES)


def layouts(base):
    """(name, view of base) laid out in memory differently."""
    yield "contiguous", base
    yield "transposed", base.T
    yield "reversed", base[::-1, ::-1]
    yield "stepped", base[:, ::2]
    yield "broadcast", np.broadcast_to(base[:1], (5,) + base.shape[1:]).transpose(1, 0, 2)


def edges(n, per_chunk):
    """Flat memory positions around the prefix and each chunk edge, and the ends."""
    around = {0, 1, n - 1, 95, 96, 97}
    for k in range(96, n, per_chunk):
        around |= {k - 1, k, k + 1}
    return sorted(p for p in around if 0 <= p < n)


def check(x):
    for any_, mask in ((fpclass.any_nan, twin.isnan), (fpclass.any_inf, twin.isinf),
                       (fpclass.any_nonfinite, lambda y: ~twin.isfinite(y))):
        assert any_(x) == mask(x).any()
    assert fpclass.all_finite(x) == twin.isfinite(x).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_hit_at_every_chunk_edge(dtype, claimed_chunks):
    shape = (6, 40, 9)
    per_chunk = CHUNK_BYTES // dtype.itemsize
    clean = np.random.default_rng(0).uniform(-2, 2, shape).astype(dtype)
    for name, x in layouts(clean):
        check(x)
    for k, at in enumerate(edges(clean.size, per_chunk)):
        base = clean.copy()
        base.reshape(-1)[at] = np.array(np.nan if k % 2 else -np.inf).astype(dtype)
        for name, x in layouts(base):
            try:
                check(x)
            except AssertionError:
                raise AssertionError(f"{name}, hit at memory position {at}") from None


def test_hits_everywhere_and_nowhere(claimed_chunks):
    x = np.full((64, 64), np.nan, np.float32)
    assert fpclass.any_nan(x.T) and not fpclass.all_finite(x.T)
    x[:] = 1
    assert not fpclass.any_nan(x.T) and fpclass.all_finite(x.T)
    x[-1, -1] = np.inf  # the last chunk's last element, claimed by whichever thread is free
    assert fpclass.any_inf(x.T) and not fpclass.any_nan(x.T) and not fpclass.all_finite(x[::-1])


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.float8_e5m2, np.complex128], ids=str)
def test_first_of_two_hits_in_any_chunks(dtype, claimed_chunks):
    dtype = np.dtype(dtype)
    n = 3000
    at = edges(n, CHUNK_BYTES // dtype.itemsize)
    clean = np.random.default_rng(0).uniform(-2, 2, n).astype(dtype)
    for i, early in enumerate(at):
        for late in at[i + 1::3] + at[-1:]:
            if late <= early:
                continue
            x = clean.copy()
            x[[early, late]] = np.array(np.nan).astype(dtype)
            for y in (x, x[::-1], x.reshape(30, 100)[:, ::-1]):
                m = twin.isnan(y)
                want = tuple(int(k) for k in np.argwhere(m)[0])
                assert fpclass.first_nan(y) == want, (early, late, y.shape, y.strides)


@pytest.mark.parametrize("dtype, word", [(np.float16, np.uint16), (ml_dtypes.float8_e4m3fn, np.uint8),
                                         (ml_dtypes.float8_e5m2, np.uint8), (np.float32, np.uint32)],
                         ids=str)
def test_any_on_every_special_pattern(dtype, word, claimed_chunks):
    # NaN and non-finite tests are answered from the largest masked word of a run
    # (launch_find.above): each pattern with the exponent all ones, its neighbours and a spread
    # of the rest, one at a time in a clean run, forwards and reversed, as the twin says
    dtype, word = np.dtype(dtype), np.dtype(word)
    bits = 8 * word.itemsize
    exponent = {np.dtype(np.float16): 5, np.dtype(np.float32): 8}.get(dtype, 4 if "e4" in dtype.name else 5)
    ones = ((1 << exponent) - 1) << (bits - 1 - exponent)
    low = np.arange(1 << min(bits - 1 - exponent, 10), dtype=np.uint64)
    picked = np.concatenate([ones | low, (ones | low) | (1 << (bits - 1)), (ones - 1) - low[:64],
                             np.linspace(0, (1 << bits) - 1, 512).astype(np.uint64)]).astype(word)
    clean = np.ones(300, dtype)
    for k, pattern in enumerate(picked):
        x = clean.copy()
        x.view(word)[(k * 37) % x.size] = pattern
        for y in (x, x[::-1], x.reshape(3, 100).T):
            for any_, mask in ((fpclass.any_nan, twin.isnan), (fpclass.any_inf, twin.isinf),
                               (fpclass.any_nonfinite, lambda z: ~twin.isfinite(z))):
                assert any_(y) == mask(y).any(), (hex(int(pattern)), y.strides)
