"""torch tensors in, torch answers out: every dtype and layout against torch's own answers (and
the NumPy twin, fpclass.twin), the return types, lazy conj/neg views, zero-copy reads, and the clear
errors for tensors fpclass cannot read in place (sparse, off the host)."""

import tracemalloc
import warnings

import ml_dtypes
import numpy as np
import pytest

import fpclass
import samples
from fpclass import twin

torch = pytest.importorskip("torch")
# torch warns whenever a complex32 tensor is made
pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")

#: torch dtype -> (same-width integer dtype to build bit patterns, ml_dtypes / numpy dtype)
DTYPES = {
    torch.float64: (torch.int64, np.float64), torch.float32: (torch.int32, np.float32),
    torch.float16: (torch.int16, np.float16), torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
    torch.complex128: (torch.int64, np.complex128), torch.complex64: (torch.int32, np.complex64),
    torch.complex32: (torch.int32, ml_dtypes.complex32),
    torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2),
    torch.float8_e4m3fnuz: (torch.uint8, ml_dtypes.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: (torch.uint8, ml_dtypes.float8_e5m2fnuz),
    torch.float8_e8m0fnu: (torch.uint8, ml_dtypes.float8_e8m0fnu),
    torch.float4_e2m1fn_x2: (torch.uint8, None),
}
COMPLEX = {torch.complex128, torch.complex64, torch.complex32}
OPS = ["isnan", "isinf", "isfinite", "isposinf", "isneginf"]


def patterns(dtype) -> "torch.Tensor":
    """Every bit pattern of an 8/16-bit dtype; specials and random bits for the wider ones."""
    word, _ = DTYPES[dtype]
    size = torch.empty(0, dtype=dtype).element_size()
    if dtype in COMPLEX:
        parts = {torch.complex32: np.float16, torch.complex64: np.float32,
                 torch.complex128: np.float64}[dtype]
        v = np.array([0, 1.5, -2, np.inf, -np.inf, np.nan], parts)
        grid = np.stack(np.broadcast_arrays(v[:, None], v[None, :]), -1).reshape(-1)
        return torch.from_numpy(grid.copy()).view(dtype)
    if size <= 2:
        bits = np.arange(1 << (8 * size), dtype=f"u{size}")
    else:
        np_dtype = DTYPES[dtype][1]
        bits = np.concatenate([samples.specials(np_dtype), samples.random_bits(np_dtype, 4096)])
        bits = bits.view(f"u{size}")
    return torch.from_numpy(bits.view(f"i{size}") if size > 1 else bits).view(word).view(dtype)


#: torch kernels that answer wrongly: torch.isfinite calls float8_e8m0fnu's NaN (0xFF) finite,
#: though torch.isnan and torch's own conversion to float32 call it NaN.
TORCH_WRONG = {(torch.float8_e8m0fnu, "isfinite")}


def torch_answer(op, t):
    """torch's own answer; where torch has no kernel for the dtype (or a wrong one), torch's own
    exact widening (float8 -> float32, complex32 -> complex64) first. float4_e2m1fn_x2 holds no
    NaN or Inf."""
    if t.dtype == torch.float4_e2m1fn_x2:
        return torch.full(t.shape, op == "isfinite")
    if (t.dtype, op) not in TORCH_WRONG:
        try:
            return getattr(torch, op)(t)
        except (RuntimeError, NotImplementedError):
            pass
    wide = t.to(torch.complex64) if t.dtype == torch.complex32 else t.float()
    return getattr(torch, op)(wide)


def numpy_answer(op, t):
    """The NumPy twin (fpclass.twin) on the same bits seen through ml_dtypes."""
    word, np_dtype = DTYPES[t.dtype]
    if np_dtype is None:
        return np.full(t.shape, op == "isfinite")
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if t.dtype in COMPLEX:  # the parts, widened exactly by numpy
        parts = torch.view_as_real(t).numpy()
        a = np.empty(t.shape, np.complex128)
        a.real, a.imag = parts[..., 0], parts[..., 1]
    else:
        a = t.view(word).numpy().view(np_dtype)
    return getattr(twin, op)(a)


def layouts(t):
    """The same values as contiguous, transposed, strided, offset, expanded and 0-d tensors."""
    n = t.numel() - t.numel() % 8
    two = t[:n].reshape(8, -1)
    yield "contiguous", t
    yield "transposed", two.t()
    yield "strided", t[::3]
    yield "offset", t[5:]
    yield "expanded", t[:1].expand(4, 3)
    yield "0-d", t[1]
    yield "empty", t[:0].reshape(0, 3)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        try:
            yield "requires_grad", t.detach().clone().requires_grad_(True)
        except RuntimeError:
            pass  # torch refuses grads for this dtype


def compare(op, t):
    got = getattr(fpclass, op)(t)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bool, type(got)
    assert got.shape == t.shape
    expected = torch_answer(op, t.detach().resolve_conj().resolve_neg())
    assert torch.equal(got, expected), (op, t.dtype)
    np.testing.assert_array_equal(got.numpy(), numpy_answer(op, t))


@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
def test_every_dtype_and_layout_against_torch_and_numpy(dtype):
    for layout, t in layouts(patterns(dtype)):
        for op in OPS:
            if dtype in COMPLEX and op in ("isposinf", "isneginf"):
                with pytest.raises(TypeError, match="complex"):
                    getattr(fpclass, op)(t)
                continue
            compare(op, t)


def test_result_keeps_the_input_strides_and_writes_in_place():
    t = torch.randn(64, 32, dtype=torch.bfloat16).t()
    t[3, 4] = float("nan")
    got = fpclass.isnan(t)
    assert got.stride() == t.stride()
    out = torch.empty(t.shape, dtype=torch.bool)
    assert fpclass.isnan(t, out=out) is out and out[3, 4] and out.sum() == 1
    u8 = torch.zeros(t.shape, dtype=torch.uint8)
    assert fpclass.isfinite(t, out=u8) is u8 and u8.sum() == t.numel() - 1


def test_lazy_negation_and_conjugation_are_read_as_their_values():
    base = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])
    neg = torch._neg_view(base)
    assert neg.is_neg()
    for op in OPS:
        compare(op, neg)
    assert fpclass.count_inf(neg, detect_negative=False) == 1
    assert fpclass.first_inf(neg, detect_positive=False) == (1,)
    np.testing.assert_array_equal(fpclass.locate_inf(neg, detect_negative=False), [[2]])
    counts = fpclass.class_counts(neg)
    assert (counts.posinf, counts.neginf, counts.neg_zero, counts.neg_normal) == (1, 1, 1, 1)
    z = torch.tensor([complex(1, float("inf")), complex(float("nan"), 2), 1j]).conj()
    assert z.is_conj()
    for op in ("isnan", "isinf", "isfinite"):
        compare(op, z)
    imag = z.imag  # a negative view of the conjugate's imaginary parts
    assert imag.is_neg()
    assert fpclass.isneginf(imag).tolist() == [True, False, False]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e5m2], ids=str)
def test_queries_against_torch(dtype):
    t = torch.randn(6, 7).to(dtype)
    t[1, 2] = float("nan")
    t[4, 0] = float("inf")
    t[5, 6] = -float("inf")
    wide = t.float()
    assert fpclass.any_nan(t) == torch.isnan(wide).any().item()
    assert fpclass.all_finite(t) == torch.isfinite(wide).all().item()
    assert fpclass.count_nonfinite(t) == (~torch.isfinite(wide)).sum().item()
    assert fpclass.first_nonfinite(t) == tuple(torch.nonzero(~torch.isfinite(wide))[0].tolist())
    np.testing.assert_array_equal(fpclass.locate_inf(t), torch.nonzero(torch.isinf(wide)).numpy())
    per_row = fpclass.count_nan(t.t(), axis=0)
    assert isinstance(per_row, torch.Tensor) and torch.equal(per_row, torch.isnan(wide).sum(1))
    kept = fpclass.any_inf(t, axis=1, keepdims=True)
    assert isinstance(kept, torch.Tensor) and torch.equal(kept, torch.isinf(wide).any(1, keepdim=True))
    assert fpclass.class_counts(t).total == t.numel()


def test_full_reductions_are_0d_tensors_as_torch_gives_the_rest_as_on_numpy():
    t = torch.tensor([[1.0, float("nan")]], dtype=torch.bfloat16)
    for got, want in ((fpclass.any_nan(t), torch.isnan(t).any()),
                      (fpclass.count_nan(t), torch.isnan(t).sum()),
                      (fpclass.count_nan(t, axis=(0, 1)), torch.isnan(t).sum((0, 1))),
                      (fpclass.all_finite(t, axis=(-1, 0)), torch.isfinite(t).all())):
        assert type(got) is torch.Tensor and got.dim() == 0 and got.dtype == want.dtype
        assert got.item() == want.item()
    assert fpclass.first_nan(t) == (0, 1)
    assert isinstance(fpclass.class_counts(t), fpclass.ClassCounts)


def test_parameters_are_read_without_autograd():
    p = torch.nn.Parameter(torch.tensor([1.0, float("nan")], dtype=torch.bfloat16))
    got = fpclass.isnan(p)
    assert not got.requires_grad and got.tolist() == [False, True]
    assert fpclass.count_nan(p) == 1


def test_packed_float4_has_no_classes_to_count():
    t = torch.arange(256, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    assert not fpclass.any_nonfinite(t)
    with pytest.raises(TypeError, match="float4_e2m1fn_x2"):
        fpclass.class_counts(t)


def test_sparse_and_off_host_tensors_are_refused_clearly():
    sparse = torch.tensor([[0.0, float("nan")]]).to_sparse()
    with pytest.raises(TypeError, match="sparse.*values\\(\\)"):
        fpclass.isnan(sparse)
    meta = torch.empty(3, device="meta")
    with pytest.raises(TypeError, match="meta.*\\.cpu\\(\\)"):
        fpclass.any_nan(meta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantized dtypes
        quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    with pytest.raises(TypeError, match="qint8"):
        fpclass.isnan(quantized)


def test_reading_a_bfloat16_tensor_copies_nothing():
    t = torch.ones(32 << 20, dtype=torch.bfloat16)  # 64 MiB
    t[-1] = float("nan")
    for traced in (False, True):  # the first round loads the kernels, untraced: numba's
        if traced:                  # compiler is slow under tracemalloc
            tracemalloc.start()
        try:
            mask = fpclass.isnan(t)
            found = fpclass.any_nan(t)
            counts = fpclass.class_counts(t)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert found and mask[-1] and counts.nan == 1
    # The mask is torch's allocation (not traced); a copy of the input would be 64 MiB.
    assert peak < 1 << 20, peak
