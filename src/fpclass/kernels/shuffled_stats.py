"""The statistics kernel over byte-shuffled words (HDF5's shuffle filter), without unshuffling
them to memory (issue 22: unshuffling a chunk and then classifying it writes the chunk out and
reads it back): whole vectors of words rebuilt in registers from the byte planes
(shuffled_vectors.count_and_extremes_planes), their raw extremes folded as stats.stats_range folds
those of stored words. Only words that are all finite are answered here (a non-finite word would
win the raw extremes): the caller unshuffles the others, to locate what they hold. A small
function on purpose: a first call loads it from numba's cache in a few milliseconds."""

import numpy as np
from numba import njit

from .shuffled_vectors import count_and_extremes_planes, count_and_extremes_planes_swapped
from .stats import NONFINITE, TINY, ZERO, fold_raw
from .walk import JIT


@njit(**JIT)
def shuffled_stats(src, n, vectors, tests, c, swap, acc):
    """Whether the first 64 * `vectors` (>= 1) of the `n` words whose bytes `src` (uint8,
    C-contiguous) holds shuffled (byte k of word i at src[k * n + i], byte 0 the
    lowest-addressed) are all finite; if so, acc (int64[5], stats.py's slots) is updated with
    their statistics. `tests`, `c`, `swap` as stats.stats_range takes them; the words' size is the
    tests' (2, 4 or 8 bytes). A little-endian machine's word order (the caller's duty)."""
    if swap:
        bad, tiny, zero, umin, umax, smax = count_and_extremes_planes_swapped(
            src, np.uint64(0), np.uint64(vectors), tests[0, 0], tests[0, 1], tests[1, 0],
            tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0], tests[2, 1], np.uint64(n))
    else:
        bad, tiny, zero, umin, umax, smax = count_and_extremes_planes(
            src, np.uint64(0), np.uint64(vectors), tests[0, 0], tests[0, 1], tests[1, 0],
            tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0], tests[2, 1], np.uint64(n))
    if bad:
        return False
    acc[NONFINITE] += np.int64(bad)
    acc[TINY] += np.int64(tiny)
    acc[ZERO] += np.int64(zero)
    fold_raw(umin, umax, smax, c, acc)
    return True
