"""LZF decompression (liblzf's format, as h5py's lzf filter writes HDF5 chunks): a plain loop,
compiled by numba on first use without the GIL, so chunks inflate on every thread (importing this
module does not import numba)."""

from __future__ import annotations

import functools

import numpy as np

from .layout import read_only_bytes


def lzf_decompress(data, out: np.ndarray) -> int:
    """The bytes of LZF stream `data` written into `out` (uint8): how many, or -1 when the stream
    is corrupt or decodes to more than `out` holds."""
    return int(_kernel()(read_only_bytes(data), out))


def _loop(src, out):
    # liblzf's lzf_d.c: a control byte below 32 starts a literal run of ctrl + 1 bytes; above,
    # a back reference of length (ctrl >> 5) + 2 (7: one more length byte) at distance
    # ((ctrl & 31) << 8) + next byte + 1, copied byte by byte as it may overlap its own output.
    ip, op, n, m = 0, 0, src.size, out.size
    while ip < n:
        ctrl = np.int64(src[ip])
        ip += 1
        if ctrl < 32:
            length = ctrl + 1
            if op + length > m or ip + length > n:
                return -1
            for k in range(length):
                out[op + k] = src[ip + k]
            op += length
            ip += length
        else:
            length = ctrl >> 5
            ref = op - ((ctrl & 31) << 8) - 1
            if ip >= n:
                return -1
            if length == 7:
                length += np.int64(src[ip])
                ip += 1
                if ip >= n:
                    return -1
            ref -= np.int64(src[ip])
            ip += 1
            length += 2
            if op + length > m or ref < 0:
                return -1
            for k in range(length):
                out[op + k] = out[ref + k]
            op += length
    return op


@functools.lru_cache(maxsize=None)
def _kernel():
    import numba
    from .walk import JIT
    return numba.njit(**JIT)(_loop)
