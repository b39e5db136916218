"""JAX arrays and any other DLPack producer: read in place (bfloat16 and float8 too, which
numpy.from_dlpack cannot represent), answered against JAX's own functions and the numpy twin;
arrays off the host are refused with the copy the caller can make."""

import tracemalloc

import numpy as np
import pytest

import fpclass
import samples
from fpclass import twin

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16, jnp.float8_e4m3fn, jnp.float8_e5m2,
          jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz, jnp.float8_e4m3b11fnuz, jnp.complex64,
          jnp.int32, jnp.bool_]
OPS = ["isnan", "isinf", "isfinite", "isposinf", "isneginf"]


def values(dtype) -> np.ndarray:
    """Every bit pattern of an 8/16-bit dtype, specials and random bits for float32."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        v = np.array([0, 1.5, -2, np.inf, -np.inf, np.nan], np.float32)
        out = np.empty((6, 6), dtype)
        out.real, out.imag = v[:, None], v[None, :]
        return out.reshape(-1)
    if dtype.kind in "ib":
        return np.arange(-50, 50).astype(dtype)
    if dtype.itemsize <= 2:
        return samples.all_patterns(dtype)
    return np.concatenate([samples.specials(dtype), samples.random_bits(dtype, 4096)])


def jax_answer(op, x):
    return np.asarray(getattr(jnp, op)(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_against_jax_and_numpy(dtype):
    host = values(dtype)
    n = host.size - host.size % 4
    for x in (jnp.asarray(host), jnp.asarray(host[:n]).reshape(4, -1).T, jnp.asarray(host[3])):
        for op in OPS:
            if np.dtype(dtype).kind == "c" and op in ("isposinf", "isneginf"):
                with pytest.raises(TypeError, match="complex"):
                    getattr(fpclass, op)(x)
                continue
            got = getattr(fpclass, op)(x)
            assert isinstance(got, jax.Array) and got.dtype == jnp.bool_ and got.shape == x.shape
            np.testing.assert_array_equal(np.asarray(got), jax_answer(op, x), err_msg=op)
            want = getattr(twin, op)(np.asarray(x))
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=op)


def test_queries_on_jax():
    x = jnp.asarray(np.array([[1, np.nan, 3], [np.inf, 5, -np.inf]], np.float32)).astype(jnp.bfloat16)
    # a full reduction is a 0-d JAX array, as jnp.isnan(x).any() gives
    whole = fpclass.any_nan(x)
    assert isinstance(whole, jax.Array) and whole.shape == () and whole.dtype == bool and whole
    assert fpclass.count_inf(x, detect_positive=False) == 1
    assert fpclass.first_inf(x) == (1, 0)
    per_column = fpclass.count_nonfinite(x, axis=0)
    assert isinstance(per_column, jax.Array)
    np.testing.assert_array_equal(np.asarray(per_column), np.asarray((~jnp.isfinite(x)).sum(0)))
    assert fpclass.class_counts(x).total == 6


class Producer:
    """A DLPack producer fpclass has never heard of (it only forwards the protocol)."""

    def __init__(self, inner, device=None):
        self.inner, self.device = inner, device

    def __dlpack__(self, **kwargs):
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device or self.inner.__dlpack_device__()


def test_any_dlpack_producer_including_bfloat16_from_torch():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, float("nan")], [float("inf"), 2.0]], dtype=torch.bfloat16).t()
    with pytest.raises(Exception):
        np.from_dlpack(Producer(t))  # what fpclass does instead
    got = fpclass.isnan(Producer(t))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, torch.isnan(t).numpy())
    assert fpclass.first_inf(Producer(t)) == (0, 1)
    f8 = torch.tensor([1.0, float("nan")]).to(torch.float8_e5m2)
    assert fpclass.count_nan(Producer(f8)) == 1


def test_arrays_off_the_host_are_refused_with_the_copy_to_make():
    x = jnp.ones(3)
    with pytest.raises(TypeError, match="cuda:1.*copy"):
        fpclass.isnan(Producer(x, device=(2, 1)))

    class CudaOnly:
        __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4", "data": (0, False),
                                    "version": 3}

    with pytest.raises(TypeError, match="CUDA.*copy"):
        fpclass.any_nan(CudaOnly())


def test_traced_values_inside_jit_are_refused_clearly():
    with pytest.raises(TypeError, match="jit"):
        jax.jit(fpclass.any_nan)(jnp.ones(3))


def test_reading_a_jax_bfloat16_array_copies_nothing():
    x = jnp.ones(16 << 20, jnp.bfloat16).at[-1].set(jnp.nan)  # 32 MiB
    for traced in (False, True):  # the first round loads the kernels, untraced: numba's
        if traced:                  # compiler is slow under tracemalloc
            tracemalloc.start()
        try:
            found = fpclass.any_nan(x)
            counts = fpclass.count_nan(x)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert found and counts == 1
    assert peak < 1 << 20, peak
