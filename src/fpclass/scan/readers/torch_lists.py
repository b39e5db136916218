"""Tensors built from (nested) Python lists in a pickle (torch.tensor-style constructors, a
quantized tensor's per-channel scales): their values as a tensor of the dtype holds them."""

from __future__ import annotations

import numpy as np

from .pickle_values import PickleError
from .torch_items import INTEGERS, Values


def values(nested, dtype: str) -> Values:
    """The values of a (nested) list of numbers as a tensor of `dtype` holds them (float32
    rounding included: 1e300 becomes inf), walked without recursion."""
    flat, shape, level = [], [], [(nested, 0)]
    while level:
        nxt = []
        for x, depth in level:
            if isinstance(x, (list, tuple)):
                if depth == len(shape):
                    shape.append(len(x))
                elif depth > len(shape) or shape[depth] != len(x):
                    raise PickleError("a tensor built from a ragged list")
                nxt.extend((c, depth + 1) for c in x)
            elif type(x) in (int, float, bool):
                if depth != len(shape):
                    raise PickleError("a tensor built from a ragged list")
                flat.append(x)
            else:
                raise PickleError(f"a tensor built from a list holding a {type(x).__name__}")
        level = nxt
        if len(shape) > 64:
            raise PickleError("a tensor built from a list nested over 64 deep")
    if dtype in INTEGERS:
        return Values(dtype, tuple(shape), np.zeros(len(flat), np.int8).reshape(shape))
    with np.errstate(over="ignore", invalid="ignore"):
        a = np.array(flat, np.float64)
        if dtype in ("float32", "bfloat16"):
            a = a.astype(np.float32)
        if dtype == "bfloat16":
            a = _round_bfloat16(a)
        elif dtype == "float16":
            a = a.astype(np.float16)
    return Values(dtype, tuple(shape), a.reshape(shape))


def _round_bfloat16(a):
    """float32 values rounded to bfloat16 (to nearest, ties to even), kept as float32."""
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return np.where(np.isnan(a), a, rounded.view(np.float32))
