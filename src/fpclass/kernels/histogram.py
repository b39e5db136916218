"""The class-histogram kernel: six class counts per element in one streaming pass.

Counting the classes test by test over cache-sized runs leaves memory idle while the later tests
run (measured: 40-60% of read bandwidth on 8-bit formats). Here each 64-word vector is loaded once
and tested for every class, so the loads stream while the tests run (mostly 70-85% on the same
formats).
The two signed counts are ANDs of bit masks the vector already has, not tests of their own.
"""

import numpy as np
from numba import njit

from .reductions import count_run
from .vectors import VECTOR, match_bits, popcount
from .walk import JIT, advance, run_length, seek, word_at

#: Rows of the `base` table: the counts every run gets. SIGNED_TINY and SIGNED_ZERO must be the
#: TINY and ZERO tests restricted to a set sign bit (BitTest.with_sign): the streaming loop takes
#: them as TINY & NEGATIVE and ZERO & NEGATIVE, the strided fallback tests them as given.
NONFINITE, TINY, NEGATIVE, ZERO, SIGNED_TINY, SIGNED_ZERO = range(6)
#: Runs of at most this many bytes: a run with a non-finite value is read again for the `special`
#: tests, from L2 cache.
RUN_BYTES = 1 << 16


@njit(**JIT)
def _stream(src, s0, vectors, base, counts, tiny_mask2, tiny_value2):
    """counts[0:6] += the base counts of the 64 * vectors words from src[s0]. Only TINY may be a
    two-clause test, its second clause passed apart: None for one-clause tests, so numba
    compiles a loop without it (launch_reduce.histogram counts any other two-clause format test
    by test instead)."""
    nonfinite = tiny = negative = zero = signed_tiny = signed_zero = np.uint64(0)
    m0, v0, m1, v1 = base[NONFINITE, 0], base[NONFINITE, 1], base[TINY, 0], base[TINY, 1]
    m2, v2, m3, v3 = base[NEGATIVE, 0], base[NEGATIVE, 1], base[ZERO, 0], base[ZERO, 1]
    for b in range(vectors):
        at = s0 + b * np.uint64(VECTOR)
        bits_n = match_bits(src, at, m2, v2, None, None)
        bits_t = match_bits(src, at, m1, v1, tiny_mask2, tiny_value2)
        bits_z = match_bits(src, at, m3, v3, None, None)
        nonfinite += popcount(match_bits(src, at, m0, v0, None, None))
        tiny += popcount(bits_t)
        negative += popcount(bits_n)
        zero += popcount(bits_z)
        signed_tiny += popcount(bits_t & bits_n)
        signed_zero += popcount(bits_z & bits_n)
    counts[NONFINITE] += np.int64(nonfinite)
    counts[TINY] += np.int64(tiny)
    counts[NEGATIVE] += np.int64(negative)
    counts[ZERO] += np.int64(zero)
    counts[SIGNED_TINY] += np.int64(signed_tiny)
    counts[SIGNED_ZERO] += np.int64(signed_zero)


@njit(**JIT)
def histogram_range(src, s_off, s_str, shape, start, stop, base, special, counts):
    """counts[t] += matches of base[t] (t < 6, rows as named above) and counts[6 + k] += matches
    of special[k] among C-order positions start..stop. Special tests (NaN, ±Inf) must only match
    where base[NONFINITE] does: they are counted only on runs holding a non-finite value."""
    idx = np.empty(shape.size, np.int64)
    seek(shape, start, idx)
    ss = s_str[shape.size - 1]
    pos = start
    while pos < stop:
        run = min(run_length(idx, shape, pos, stop), RUN_BYTES // src.itemsize)
        sp = word_at(idx, s_str, s_off)
        nonfinite_before = counts[NONFINITE]
        done = 0
        if ss == 1:
            done = run - run % VECTOR
            vectors = np.uint64(done // VECTOR)
            if base[TINY, 2] == 0:
                _stream(src, np.uint64(sp), vectors, base, counts, None, None)
            else:  # tiny in the *fnuz formats, whose NaN sits in the -0 slot
                _stream(src, np.uint64(sp), vectors, base, counts, base[TINY, 2], base[TINY, 3])
        for t in range(base.shape[0]):
            counts[t] += count_run(src, sp + done, ss, run - done, base[t, 0], base[t, 1], base[t, 2],
                                   base[t, 3], np.int64(1))
        if counts[NONFINITE] > nonfinite_before:
            for k in range(special.shape[0]):
                counts[base.shape[0] + k] += count_run(src, sp, ss, run, special[k, 0], special[k, 1],
                                                       special[k, 2], special[k, 3], np.int64(1))
        pos += run
        advance(idx, shape, run)
