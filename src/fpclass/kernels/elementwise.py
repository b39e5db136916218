"""The element-wise kernel: one bit test per element, written as 1/0 bytes.

`mask_range` is the kernel: positions start..stop of a plan, so that threads can each take a
range (kernels/thread_parts.py). Generic over the word width (uint8/16/32/64): numba compiles one
specialization per width, cached on disk.
"""

import numpy as np
from numba import njit

from .vectors import VECTOR, fence, match_bits, stream_bits
from .walk import INNER, JIT, advance, hit, run_length, seek, word_at


@njit(**JIT)
def mask_range(src, s_off, s_str, dst, d_off, d_str, shape, start, stop, m, v, m2, v2, lanes, negate,
               stream=False):
    """dst[i] = test(src[i]) ^ negate for C-order positions start..stop of the plan; with lanes == 2
    an element is two adjacent words (complex) and the test holds if it holds for either.
    With `stream`, contiguous runs are written with non-temporal stores (for masks larger than
    the cache)."""
    idx = np.empty(shape.size, np.int64)
    seek(shape, start, idx)
    last = shape.size - 1
    ss = s_str[last]
    ds = d_str[last]
    pos = start
    while pos < stop:
        run = run_length(idx, shape, pos, stop)
        sp = word_at(idx, s_str, s_off)
        dp = word_at(idx, d_str, d_off)
        # Unsigned indices: numba then skips its negative-index wraparound, which blocks SIMD.
        # Offsets stay int64 and only the finished index is cast (uint64 + int64 is float64).
        if lanes == 1:
            if ss == 1 and ds == 1:  # the common case: a separate loop LLVM can vectorize
                s0 = np.uint64(sp)
                d0 = np.uint64(dp)
                head = done = np.uint64(run)
                if stream:
                    head, done = _stream_run(src, s0, dst, d0, run, m, v, m2, v2, negate)
                _mask_words(src, s0, dst, d0, np.uint64(0), head, m, v, m2, v2, negate)
                _mask_words(src, s0, dst, d0, done, np.uint64(run), m, v, m2, v2, negate)
            else:
                for k in range(run):
                    dst[np.uint64(dp + k * ds)] = hit(src[np.uint64(sp + k * ss)], m, v, m2, v2) ^ negate
        else:
            for k in range(run):
                i = np.uint64(sp + k * ss)
                pair = hit(src[i], m, v, m2, v2) | hit(src[i + np.uint64(1)], m, v, m2, v2)
                dst[np.uint64(dp + k * ds)] = pair ^ negate
        pos += run
        advance(idx, shape, run)
    if stream:
        fence()


@njit(**INNER)
def _mask_words(src, s0, dst, d0, lo, hi, m, v, m2, v2, negate):
    """dst[d0 + k] = test(src[s0 + k]) ^ negate for k in lo..hi, unit strides."""
    if m2 == 0:  # a one-clause test: half the work per word
        for k in range(lo, hi):
            dst[d0 + k] = ((src[s0 + k] & m) == v) ^ negate
    else:
        for k in range(lo, hi):
            dst[d0 + k] = hit(src[s0 + k], m, v, m2, v2) ^ negate


@njit(**INNER)
def _stream_run(src, s0, dst, d0, run, m, v, m2, v2, negate):
    """Write the whole 64-element vectors of a unit-stride run of a uint8 mask that start on a
    64-byte boundary of dst, with non-temporal stores. Returns (head, done): the positions before
    and after them, which the caller writes the plain way."""
    head = (np.uint64(64) - (np.uint64(dst.ctypes.data) + d0) % np.uint64(64)) % np.uint64(64)
    if np.uint64(run) < head + np.uint64(VECTOR):
        return np.uint64(run), np.uint64(run)
    vectors = (np.uint64(run) - head) // np.uint64(VECTOR)
    if m2 == 0:
        _stream_vectors(src, s0 + head, dst, d0 + head, vectors, m, v, None, None, negate)
    else:
        _stream_vectors(src, s0 + head, dst, d0 + head, vectors, m, v, m2, v2, negate)
    return head, head + vectors * np.uint64(VECTOR)


@njit(**INNER)
def _stream_vectors(src, s0, dst, d0, vectors, m, v, m2, v2, negate):
    flip = np.uint64(0xFFFFFFFFFFFFFFFF) if negate else np.uint64(0)
    for b in range(vectors):
        k = b * np.uint64(VECTOR)
        stream_bits(dst, d0 + k, match_bits(src, s0 + k, m, v, m2, v2) ^ flip)


@njit(**JIT)
def mask_flat(src, dst, test):
    """mask_range for a contiguous source: dst[k] = test(element k). `test` holds mask, value,
    mask2, value2 and flags (1: negate, 2: an element is two words, complex). Returns False,
    writing nothing, if dst overlaps src. Three arguments and no plan: for small arrays numba's
    per-argument dispatch is most of the cost (8 arguments: 0.8 µs, 3: 0.4 µs)."""
    s0 = src.ctypes.data
    d0 = dst.ctypes.data
    if s0 < d0 + dst.size * dst.itemsize and d0 < s0 + src.size * src.itemsize:
        return False
    m = test[0]
    v = test[1]
    m2 = test[2]
    v2 = test[3]
    negate = (test[4] & 1) != 0
    if test[4] & 2 == 0 and m2 == 0:  # a one-clause test: half the work per word
        for k in range(dst.size):
            dst[k] = ((src[k] & m) == v) ^ negate
    elif test[4] & 2 == 0:
        for k in range(dst.size):
            dst[k] = hit(src[k], m, v, m2, v2) ^ negate
    else:
        for k in range(dst.size):
            dst[k] = (hit(src[2 * k], m, v, m2, v2) | hit(src[2 * k + 1], m, v, m2, v2)) ^ negate
    return True
