"""The NumPy launcher writing into an `out` of any layout: NumPy 2.4's float32/float64 isnan,
isinf and isfinite give wrong answers into a strided bool `out` (a NumPy bug found here), so the
launcher must not hand such an `out` to them. Truth: the same ufunc into a fresh array."""

import numpy as np
import pytest

import fpclass
from fpclass.kernels import numpy_bits

CASES = [("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)]


def _values(dtype, n):
    x = np.random.default_rng(3).standard_normal(n).astype(dtype)
    x[::5], x[1::7], x[2::11] = np.nan, np.inf, -np.inf
    return x


def _outs(n):
    yield "stride 2", np.zeros(2 * n, bool)[::2]
    yield "stride 4 uint8", np.zeros(4 * n, np.uint8)[::4]
    yield "reversed", np.zeros(n, bool)[::-1]
    yield "contiguous", np.zeros(n, bool)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("name,ufunc", CASES)
@pytest.mark.parametrize("n", [64, 500, 4097])
def test_strided_out_gets_numpys_fresh_answer(dtype, name, ufunc, n, monkeypatch):
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", 1 << 40)   # the NumPy launcher at any size
    x = _values(dtype, n)
    for xs in (x, x[::-1], np.repeat(x, 2)[::2]):
        truth = ufunc(xs)
        for label, out in _outs(n):
            got = getattr(fpclass, name)(xs, out=out)
            assert got is out
            assert np.array_equal(out.astype(bool), truth), (label, xs.strides)


def test_transposed_2d_out(monkeypatch):
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", 1 << 40)
    x = _values("float32", 64 * 48).reshape(64, 48)
    out = np.zeros((48, 64), bool).T
    fpclass.isnan(x, out=out)
    assert np.array_equal(out, np.isnan(x))
