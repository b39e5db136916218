"""Byte-shuffled data put back in element order (HDF5's shuffle filter undone): a plain loop,
compiled by numba on first use (importing this module does not import numba)."""

from __future__ import annotations

import functools

import numpy as np


def unshuffle(data, size: int, out: np.ndarray) -> np.ndarray:
    """`out` (uint8, at least len(data) bytes) holding `data` unshuffled: byte k of every
    `size`-byte element was stored together (k = 0, 1, ...), then the bytes left over from a
    whole number of elements, which are copied as they are. Empty data gives `out` untouched."""
    src = np.frombuffer(data, np.uint8)
    n = src.size // size
    _kernel()(src, out, size, n)
    out[n * size:src.size] = src[n * size:]
    return out


def _loops(src, out, size, n):
    # Reads in order, writes with a stride: 5-10x faster than NumPy's transposed copy (measured).
    for k in range(size):
        base = k * n
        for i in range(n):
            out[i * size + k] = src[base + i]


@functools.lru_cache(maxsize=None)
def _kernel():
    import numba
    from .walk import JIT
    return numba.njit(**JIT)(_loops)
