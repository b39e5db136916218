"""torch tensors: read in place through a NumPy view of their memory, answered as torch tensors.

Every float dtype is read through a same-width integer view of the tensor, seen by NumPy as the
ml_dtypes type (`.numpy()` refuses bfloat16 and float8): no copy, whatever the strides, and no
autograd (a detached alias). Lazy conjugation is undone by a view (NaN and Inf do not depend on
the sign of an imaginary part); lazy negation by a view whose +Inf and -Inf questions swap.
This module is imported only for torch input, so it imports torch freely.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from . import arrays

#: torch dtype -> (the integer dtype of the same width to view it as, the NumPy dtype of the view);
#: None: .numpy() gives the right dtype directly.
_VIEWS = {
    torch.bfloat16: (torch.int16, np.dtype(ml_dtypes.bfloat16)),
    torch.complex32: (torch.int32, np.dtype(ml_dtypes.complex32)),
    torch.float8_e4m3fn: (torch.uint8, np.dtype(ml_dtypes.float8_e4m3fn)),
    torch.float8_e5m2: (torch.uint8, np.dtype(ml_dtypes.float8_e5m2)),
    torch.float8_e4m3fnuz: (torch.uint8, np.dtype(ml_dtypes.float8_e4m3fnuz)),
    torch.float8_e5m2fnuz: (torch.uint8, np.dtype(ml_dtypes.float8_e5m2fnuz)),
    # two float4_e2m1fn per byte: neither can be NaN or Inf, so each byte is answered as one
    # padded float4 (fpclass reads its low bits only), which is all False / all finite
    torch.float4_e2m1fn_x2: (torch.uint8, np.dtype(ml_dtypes.float4_e2m1fn)),
}
if hasattr(torch, "float8_e8m0fnu"):
    _VIEWS[torch.float8_e8m0fnu] = (torch.uint8, np.dtype(ml_dtypes.float8_e8m0fnu))
_NATIVE = {torch.float64, torch.float32, torch.float16, torch.complex64, torch.complex128,
           torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
for _name in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        _NATIVE.add(getattr(torch, _name))
_PACKED = {torch.float4_e2m1fn_x2: "torch.float4_e2m1fn_x2"}
_NUMPY = {**{d: np.dtype(str(d).removeprefix("torch.")) for d in _NATIVE},
          **{d: np_dtype for d, (_, np_dtype) in _VIEWS.items()}}

#: Device types whose memory the host can read in place.
_HOST = ("cpu",)


def numpy_dtype(dtype) -> np.dtype | None:
    """The NumPy dtype fpclass reads a torch dtype's elements as (None: not read)."""
    return _NUMPY.get(dtype)


def dtype_view(dtype) -> tuple | None:
    """(integer dtype to view as, NumPy dtype) for a torch dtype fpclass reads; (None, None) for
    the dtypes .numpy() takes as they are; None for the rest."""
    if dtype in _NATIVE:
        return None, None
    return _VIEWS.get(dtype)


def refuse(t: torch.Tensor) -> str:
    """Why fpclass cannot read `t` in place ("" when it can): a sparse or other non-strided
    layout, memory off the host, or a dtype without a NumPy view."""
    if t.is_nested:
        return ("fpclass reads dense tensors; this is a nested tensor (one tensor per component, "
                "of different shapes) — pass its components (t.unbind()) or "
                "t.to_padded_tensor(0.0)")
    if t.layout is not torch.strided:
        return (f"fpclass reads dense tensors; this one is {t.layout} — pass its stored values "
                "(t.values(), or t.coalesce().values() for sparse COO) or t.to_dense()")
    if t.device.type not in _HOST:
        what = "meta tensors hold no data" if t.device.type == "meta" else \
            f"this tensor is on {t.device}"
        return (f"fpclass reads host memory and never copies from a device: {what}. Copy it "
                "yourself with t.cpu() (or use torch.isnan / torch.isfinite on the device)")
    if dtype_view(t.dtype) is None:
        return (f"fpclass does not classify {t.dtype} tensors; it takes torch's floating-point, "
                "complex, integer and bool dtypes")
    return ""


def view(t: torch.Tensor) -> arrays.View:
    """A NumPy view of `t`'s values: no copy, no autograd; TypeError naming what is wrong (see
    `refuse`)."""
    why = refuse(t)
    if why:
        raise TypeError(why)
    t = t.detach()
    negated = conjugated = False
    if t.is_conj():
        t = t.conj()  # clears the bit: a view of the stored values; NaN/Inf ignore the sign
        conjugated = True
    if t.is_neg():
        t = _stored(t)
        negated = True
    word, np_dtype = dtype_view(t.dtype)
    try:
        a = t.numpy() if word is None else t.view(word).numpy().view(np_dtype)
    except RuntimeError as e:  # functorch / fake / compiled-graph tensors have no memory to read
        raise TypeError(f"fpclass cannot read this tensor's memory: {e}") from None
    return arrays.View(a, negated, _PACKED.get(t.dtype, ""), conjugated)


def _stored(t: torch.Tensor) -> torch.Tensor:
    """A view of a negated tensor's stored values (the neg bit toggled off, no copy); torch has
    no public spelling, so where its private one is missing the negation is resolved (a copy)."""
    toggle = getattr(torch, "_neg_view", None)
    if toggle is None:
        return t.resolve_neg().neg()
    return toggle(t)


def _new_mask(t: torch.Tensor):
    def make(a: np.ndarray):
        # empty_like keeps a transposed input's strides, so the kernels write in memory order
        mask = torch.empty_like(t, dtype=torch.bool, requires_grad=False, device="cpu")
        return mask.numpy(), lambda: mask
    return make


def _as_out(shape):
    def take(out):
        if isinstance(out, torch.Tensor):
            if out.dtype not in (torch.bool, torch.uint8) or out.layout is not torch.strided \
                    or out.device.type != "cpu":
                raise TypeError(f"out must be a CPU bool or uint8 tensor (or NumPy array) of shape "
                                f"{tuple(shape)}, got a {out.dtype} {out.layout} tensor on {out.device}")
            return out.detach().numpy(), lambda: out
        return arrays.check_out(out, shape), lambda: out
    return take


def dispatch(name: str, x, *args, **kwargs):
    """fpclass.`name` of the tensor `x`: element-wise answers as torch bool tensors of x's shape
    (written in place by fpclass), per-axis query answers as torch tensors, the rest as for NumPy."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"fpclass.{name} does not take {type(x).__module__}.{type(x).__qualname__}")
    v = view(x)
    return arrays.run(name, v, args, kwargs, new_mask=_new_mask(x), as_out=_as_out(x.shape),
                      per_axis=torch.from_numpy)
