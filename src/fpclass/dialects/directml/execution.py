"""Writing an operator's 1/0 result through an output view, whatever its layout.

The core writes straight into a uint8 view. Two layouts need more: a UINT32 output (the core
writes bool or uint8 only) and an output whose elements share addresses (a zero stride, or strides
that interleave). DirectML leaves the latter undefined; here each shared address gets the result
of the last of its elements in row-major order, as a sequential loop would leave it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

#: classify(input_view, out) writes 1/0 into the uint8 array `out` of the input's shape.
Classify = Callable[[np.ndarray, np.ndarray], None]


def write_result(classify: Classify, source: np.ndarray, out: np.ndarray) -> None:
    """out[...] = classify(source), for `out` of source's shape with non-negative strides."""
    # Along an output axis of stride 0 only the last index survives, so it is the only one computed.
    keep_last = tuple(slice(n - 1, n) if s == 0 and n > 1 else slice(None)
                      for n, s in zip(out.shape, out.strides))
    source, out = source[keep_last], out[keep_last]
    if _may_share_addresses(out):
        _scatter_last_wins(classify, source, out)
    elif out.dtype == np.uint8:
        classify(source, out)
    else:
        result = np.empty(out.shape, np.uint8)
        classify(source, result)
        out[...] = result


def _may_share_addresses(a: np.ndarray) -> bool:
    """False when no two elements of `a` (non-negative strides) can share an address: each stride,
    in increasing order, passes the span of all smaller ones. True may be a false alarm."""
    span = 0
    for n, s in sorted(((n, s) for n, s in zip(a.shape, a.strides) if n > 1), key=lambda ax: ax[1]):
        if s < span + a.itemsize:
            return True
        span += (n - 1) * s
    return False


def _scatter_last_wins(classify: Classify, source: np.ndarray, out: np.ndarray) -> None:
    result = np.empty(out.shape, np.uint8)
    classify(source, result)
    step = out.itemsize
    offsets = np.zeros(out.shape, np.int64)
    for axis, (n, s) in enumerate(zip(out.shape, out.strides)):
        shape = [1] * out.ndim
        shape[axis] = n
        offsets += np.arange(n, dtype=np.int64).reshape(shape) * (s // step)
    offsets = offsets.ravel()
    unique, first_from_end = np.unique(offsets[::-1], return_index=True)
    last = offsets.size - 1 - first_from_end
    flat = np.lib.stride_tricks.as_strided(out, shape=(int(unique[-1]) + 1,), strides=(step,))
    flat[unique] = result.ravel()[last]
