"""The statistics kernel over byte-shuffled words (HDF5's shuffle filter), without unshuffling
them to memory (issue 22: unshuffling a chunk and then classifying it writes the chunk out and
reads it back). Blocks of BLOCK words: their whole vectors go through
shuffled_vectors.count_and_extremes_planes (words rebuilt in registers; the raw extremes folded
as stats.stats_range folds them); the last few words, and a block holding a non-finite word (whose
extremes need the masked loop), are rebuilt into a small buffer that stays in L1 cache and read
there by stats.stats_range. The same tests, extremes and order keys as for unshuffled words."""

import numpy as np
from numba import njit

from .shuffled_vectors import count_and_extremes_planes, count_and_extremes_planes_swapped
from .stats import NONFINITE, TINY, ZERO, fold_raw, stats_range
from .vectors import VECTOR
from .walk import JIT

#: Words per block: 8-32 KiB, which stay in L1 cache when a block is rebuilt into the buffer.
BLOCK = 1 << 12


@njit(**JIT)
def _rebuild(src, n, at, m, words):
    """words[:m] = the words at..at + m of the n whose bytes src holds shuffled."""
    size = words.itemsize
    # one slice per plane: plain loops over slices vectorize, indexing src at computed
    # offsets does not (measured: 18x slower)
    b0, b1 = src[at:at + m], src[n + at:n + at + m]
    if size == 2:
        for i in range(m):
            words[i] = np.uint16(b0[i]) | (np.uint16(b1[i]) << 8)
    elif size == 4:
        b2, b3 = src[2 * n + at:2 * n + at + m], src[3 * n + at:3 * n + at + m]
        for i in range(m):
            words[i] = (np.uint32(b0[i]) | (np.uint32(b1[i]) << 8)
                        | (np.uint32(b2[i]) << 16) | (np.uint32(b3[i]) << 24))
    else:
        b2, b3 = src[2 * n + at:2 * n + at + m], src[3 * n + at:3 * n + at + m]
        b4, b5 = src[4 * n + at:4 * n + at + m], src[5 * n + at:5 * n + at + m]
        b6, b7 = src[6 * n + at:6 * n + at + m], src[7 * n + at:7 * n + at + m]
        for i in range(m):
            low = (np.uint64(b0[i]) | (np.uint64(b1[i]) << 8)
                   | (np.uint64(b2[i]) << 16) | (np.uint64(b3[i]) << 24))
            high = (np.uint64(b4[i]) | (np.uint64(b5[i]) << 8)
                    | (np.uint64(b6[i]) << 16) | (np.uint64(b7[i]) << 24))
            words[i] = low | (high << 32)


@njit(**JIT)
def shuffled_stats(src, n, count, words, keys, tests, c, swap, acc):
    """acc (int64[5], stats.py's slots) updated with the statistics of the first `count` of the
    `n` elements whose bytes `src` (uint8, C-contiguous) holds shuffled: byte k of element i at
    src[k * n + i], byte 0 the lowest-addressed of the stored element. `words` (BLOCK unsigned
    words of the element's size, 2, 4 or 8 bytes) is scratch, `keys` the same memory as signed
    words; `tests`, `c`, `swap` as stats_range takes them. A little-endian machine's word order
    (the caller's duty)."""
    shape = np.empty(1, np.int64)
    shape[0] = words.size
    unit = np.ones(1, np.int64)
    for at in range(0, count, words.size):
        m = min(words.size, count - at)
        done = m - m % VECTOR
        if done:
            if swap:
                bad, tiny, zero, umin, umax, smax = count_and_extremes_planes_swapped(
                    src, np.uint64(at), np.uint64(done // VECTOR), tests[0, 0], tests[0, 1],
                    tests[1, 0], tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0],
                    tests[2, 1], np.uint64(n))
            else:
                bad, tiny, zero, umin, umax, smax = count_and_extremes_planes(
                    src, np.uint64(at), np.uint64(done // VECTOR), tests[0, 0], tests[0, 1],
                    tests[1, 0], tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0],
                    tests[2, 1], np.uint64(n))
            if bad == 0:  # nearly every block
                acc[NONFINITE] += np.int64(bad)
                acc[TINY] += np.int64(tiny)
                acc[ZERO] += np.int64(zero)
                fold_raw(umin, umax, smax, c, acc)
            else:  # a non-finite word would win the raw extremes: the masked loop, in cache
                done = 0
        if done < m:
            _rebuild(src, n, at + done, m - done, words)
            stats_range(words, keys, 0, unit, shape, 0, m - done, tests, c, swap, acc)
