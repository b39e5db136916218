"""Read-only kernels: count elements matching bit tests, find matches in C order with early exit,
and say whether any element matches.

All read the data once and build no mask. Counting walks its range test by test over each run;
runs are cut to COUNT_BYTES, so the repeated passes hit L1 cache, not memory.
"""

import numpy as np
from numba import njit

from . import atomics
from .vectors import VECTOR, masked_max, match_bits, popcount
from .walk import INNER, JIT, advance, element_hit, hit, run_length, seek, word_at

#: Bytes counted before `find_range` stops to look for the exact position of a hit: large
#: enough that the per-block work is noise, small enough that an early hit answers in microseconds.
FIND_BYTES = 1 << 16
#: Longest run, in bytes, counted test by test: its words stay in L1 cache between the passes
#: (measured: 16 KiB runs count float16 at 0.65x the speed of 4 KiB runs).
COUNT_BYTES = 1 << 12


@njit(**INNER)
def _count_vectors(src, s0, vectors, m, v, m2, v2):
    """Matches among the 64 * vectors words from src[s0] (m2 = v2 = None: a one-clause test)."""
    total = np.uint64(0)
    for b in range(vectors):
        total += popcount(match_bits(src, s0 + b * np.uint64(VECTOR), m, v, m2, v2))
    return total


@njit(**INNER)
def count_run(src, sp, ss, run, m, v, m2, v2, lanes):
    """How many of the `run` elements from word sp, ss words apart, match the test (with
    lanes == 2 an element is two words and matches if either does)."""
    c = 0
    if lanes == 1 and (ss == 1 or ss == -1):  # a reversed run holds as many: count it forwards
        s0 = np.uint64(sp if ss == 1 else sp - run + 1)
        vectors = np.uint64(run // VECTOR)
        if m2 == 0:  # a one-clause test (Inf, non-finite, zero): half the work per word
            total = _count_vectors(src, s0, vectors, m, v, None, None)
        else:
            total = _count_vectors(src, s0, vectors, m, v, m2, v2)
        for j in range(vectors * np.uint64(VECTOR), np.uint64(run)):
            total += np.uint64(hit(src[s0 + j], m, v, m2, v2))
        c = np.int64(total)
    elif lanes == 1:
        for k in range(run):
            c += hit(src[np.uint64(sp + k * ss)], m, v, m2, v2)
    else:
        for k in range(run):
            i = np.uint64(sp + k * ss)
            c += hit(src[i], m, v, m2, v2) | hit(src[i + np.uint64(1)], m, v, m2, v2)
    return c


@njit(**JIT)
def count_range(src, s_off, s_str, shape, start, stop, tests, lanes, counts):
    """counts[t] += how many elements at C-order positions start..stop match tests[t]
    (tests: a (T, 4) array of mask, value, mask2, value2 words), test by test over each run."""
    idx = np.empty(shape.size, np.int64)
    seek(shape, start, idx)
    ss = s_str[shape.size - 1]
    pos = start
    while pos < stop:
        run = min(run_length(idx, shape, pos, stop), COUNT_BYTES // src.itemsize)
        sp = word_at(idx, s_str, s_off)
        for t in range(tests.shape[0]):
            counts[t] += count_run(src, sp, ss, run, tests[t, 0], tests[t, 1], tests[t, 2], tests[t, 3],
                                   lanes)
        pos += run
        advance(idx, shape, run)


@njit(**JIT)
def find_range(src, s_off, s_str, shape, start, stop, m, v, m2, v2, lanes, found):
    """Write the C-order positions of the first len(found) matches in start..stop into `found`;
    return how many were written. Counts a block at a time and stops after the first block that
    fills `found`."""
    idx = np.empty(shape.size, np.int64)
    ss = s_str[shape.size - 1]
    n_found = 0
    if found.size == 0:
        return 0
    block = FIND_BYTES // (src.itemsize * lanes)
    for b0 in range(start, stop, block):
        b1 = min(stop, b0 + block)
        seek(shape, b0, idx)
        pos = b0
        hits = 0
        while pos < b1:
            run = run_length(idx, shape, pos, b1)
            hits += count_run(src, word_at(idx, s_str, s_off), ss, run, m, v, m2, v2, lanes)
            pos += run
            advance(idx, shape, run)
        if hits == 0:
            continue
        seek(shape, b0, idx)
        pos = b0
        while pos < b1:
            run = run_length(idx, shape, pos, b1)
            sp = word_at(idx, s_str, s_off)
            for k in range(run):
                if element_hit(src, np.uint64(sp + k * ss), m, v, m2, v2, lanes):
                    found[n_found] = pos + k
                    n_found += 1
                    if n_found == found.size:
                        return n_found
            pos += run
            advance(idx, shape, run)
    return n_found


@njit(**JIT)
def first_claims(src, s_off, s_str, shape, m, v, m2, v2, lanes, start, stop, chunk, state):
    """One thread's share of a search by several, each running this on the same `state`:
    state[1] = the first match at plan positions start..stop if it is below state[1] (which
    starts at stop). The threads claim chunks of `chunk` positions in order (state[0] counts the
    claims) and stop at the first chunk that starts past a match seen: every chunk before the
    first match is searched whole, none after it is."""
    one = np.empty(1, np.int64)
    while True:
        b0 = start + atomics.fetch_add(state, 0, 1) * chunk
        if b0 >= min(stop, atomics.load(state, 1)):
            break
        if find_range(src, s_off, s_str, shape, b0, min(stop, b0 + chunk), m, v, m2, v2, lanes, one):
            atomics.fetch_min(state, 1, one[0])


@njit(**INNER)
def _any_vectors(src, s0, vectors, m, v, m2, v2):
    """Nonzero iff one of the 64 * vectors words from src[s0] matches (m2 = v2 = None: one clause):
    the match bits or-ed, no count."""
    seen = np.uint64(0)
    for b in range(vectors):
        seen |= match_bits(src, s0 + b * np.uint64(VECTOR), m, v, m2, v2)
    return seen


@njit(**INNER)
def any_run(src, sp, ss, run, m, v, m2, v2, lanes, top, bound):
    """Does one of the `run` elements from word sp, ss words apart, match (count_run's terms)?
    top != 0 says the test is (w & top) > bound (launch_find.above): where the run's words are
    adjacent, their largest `w & top` answers (masked_max)."""
    if top != 0 and (ss == lanes or ss == -lanes):  # adjacent words: a complex element's both
        words = run * lanes
        s0 = np.uint64(sp if ss > 0 else sp - words + lanes)
        vectors = np.uint64(words // VECTOR)
        if masked_max(src, s0, vectors, top) > bound:
            return True
        for j in range(vectors * np.uint64(VECTOR), np.uint64(words)):
            if (src[s0 + j] & top) > bound:
                return True
        return False
    if lanes == 1 and (ss == 1 or ss == -1):
        s0 = np.uint64(sp if ss == 1 else sp - run + 1)
        vectors = np.uint64(run // VECTOR)
        if m2 == 0:
            seen = _any_vectors(src, s0, vectors, m, v, None, None)
        else:
            seen = _any_vectors(src, s0, vectors, m, v, m2, v2)
        for j in range(vectors * np.uint64(VECTOR), np.uint64(run)):
            seen |= np.uint64(hit(src[s0 + j], m, v, m2, v2))
        return seen != 0
    return count_run(src, sp, ss, run, m, v, m2, v2, lanes) > 0


@njit(**INNER)
def any_range(src, s_off, s_str, shape, start, stop, m, v, m2, v2, lanes, top, bound):
    """Does an element at C-order positions start..stop of the plan match? Stops after the first
    run that holds one."""
    idx = np.empty(shape.size, np.int64)
    seek(shape, start, idx)
    ss = s_str[shape.size - 1]
    pos = start
    while pos < stop:
        run = run_length(idx, shape, pos, stop)
        if any_run(src, word_at(idx, s_str, s_off), ss, run, m, v, m2, v2, lanes, top, bound):
            return True
        pos += run
        advance(idx, shape, run)
    return False


@njit(**JIT)
def any_chunks(src, s_off, s_str, shape, m, v, m2, v2, lanes, top, bound, start, stop, chunk):
    """any_range over start..stop a chunk at a time, stopping after the first chunk with a match."""
    for b0 in range(start, stop, chunk):
        if any_range(src, s_off, s_str, shape, b0, min(stop, b0 + chunk), m, v, m2, v2, lanes, top, bound):
            return True
    return False


@njit(**JIT)
def any_claims(src, s_off, s_str, shape, m, v, m2, v2, lanes, top, bound, start, stop, chunk, state):
    """One thread's share of a search by several, each running this on the same `state`:
    state[1] = 1 if an element at plan positions start..stop matches. The threads claim chunks of
    `chunk` positions in turn (state[0] counts the claims: a thread that runs late or slowly takes
    fewer) and all stop at the end of the chunk in which one sees a match."""
    while atomics.load(state, 1) == 0:
        b0 = start + atomics.fetch_add(state, 0, 1) * chunk
        if b0 >= stop:
            break
        if any_range(src, s_off, s_str, shape, b0, min(stop, b0 + chunk), m, v, m2, v2, lanes, top, bound):
            atomics.store(state, 1, 1)
