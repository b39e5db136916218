"""The statistics kernel: class counts and the finite extremes of a real array, in one pass.

Each run of at most RUN_BYTES is counted test by test (non-finite, tiny, zero: reductions.count_run,
from L1 cache after the first test) and then scanned once for the smallest and largest *order
key* among its finite words. A run without a non-finite word in native byte order (nearly every
run) takes two plain reductions instead (largest unsigned word, largest signed word), from
which the two extremes follow (_fold_raw): no key or mask per word. The order key is the stored word, shifted so the sign bit is the
word's top bit (the launcher shifts
float6 / float4 words, whose top bits are padding), read as a signed integer with its magnitude bits flipped where the sign is set:
signed integer order is then the values' order (the classic compare-floats-as-integers trick), so
min and max never decode a value. Only the two winners are decoded, by the caller, with the
format's own conversion.

`consts` (signed words): [0] the non-finite test's mask and [1] value, [2] the left shift that
puts the sign bit on top (done by the launcher), [3] the right shift by the word's bits - 1, [4] the magnitude mask after
that shift, [5] a flip that makes an unsigned format's words signed-ordered, [6] / [7] the
smallest / largest signed word.
"""

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

from .reductions import count_run
from .vectors import VECTOR, match_bits, popcount
from .walk import JIT, advance, plan_size, run_length, seek, word_at

#: Slots of the accumulator row (int64): counts, then the winning keys.
NONFINITE, TINY, ZERO, KEY_MIN, KEY_MAX = range(5)
#: Longest run, in bytes, counted test by test and then scanned for the extremes: its words stay
#: in L1 cache between the passes (as reductions.COUNT_BYTES).
RUN_BYTES = 1 << 14


@intrinsic
def _bswap(typingctx, w):
    """`w` (an integer) with its bytes reversed."""
    if not isinstance(w, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return args[0] if sig.args[0].bitwidth == 8 else builder.bswap(args[0])

    return w(w), codegen


def _make_extremes(swap):
    """The extremes loop for words in this machine's byte order or (`swap`) the other: two
    compiled loops, so the common one carries no swap."""

    @njit(**JIT)
    def extremes(keys, sp, ss, run, c, acc):
        """acc[KEY_MIN], acc[KEY_MAX] updated with the order keys of the finite words among the
        `run` words from keys[sp], ss apart. Every step is a select, not a branch: a vector
        loop where ss is 1."""
        nm, nv, shift, mag, flip, lo, hi = c[0], c[1], c[3], c[4], c[5], c[6], c[7]
        kmin, kmax = hi, lo
        if ss == 1:
            for k in range(run):
                w = keys[np.uint64(sp + k)]
                if swap:
                    w = _bswap(w)
                x = w ^ flip
                key = x ^ ((x >> shift) & mag)
                bad = (w & nm) == nv
                kmin = min(kmin, hi if bad else key)
                kmax = max(kmax, lo if bad else key)
        else:
            for k in range(run):
                w = keys[np.uint64(sp + k * ss)]
                if swap:
                    w = _bswap(w)
                x = w ^ flip
                key = x ^ ((x >> shift) & mag)
                bad = (w & nm) == nv
                kmin = min(kmin, hi if bad else key)
                kmax = max(kmax, lo if bad else key)
        acc[KEY_MIN] = min(acc[KEY_MIN], np.int64(kmin))
        acc[KEY_MAX] = max(acc[KEY_MAX], np.int64(kmax))
    return extremes


_native, _swapped = _make_extremes(False), _make_extremes(True)


@njit(**JIT)
def _stream(src, s0, vectors, tests, acc, tiny_mask2, tiny_value2):
    """acc[0:3] += the non-finite, tiny and zero counts of the 64 * vectors words from src[s0],
    each 64-word vector loaded once for the three tests (as histogram._stream). Only the tiny
    test may have a second clause, passed apart (None: none, so numba compiles the loop
    without it); the caller returns the non-finite count it added."""
    bad = tiny = zero = np.uint64(0)
    m0, v0, m1, v1, m2, v2 = tests[0, 0], tests[0, 1], tests[1, 0], tests[1, 1], tests[2, 0], tests[2, 1]
    for b in range(vectors):
        at = s0 + b * np.uint64(VECTOR)
        bad += popcount(match_bits(src, at, m0, v0, None, None))
        tiny += popcount(match_bits(src, at, m1, v1, tiny_mask2, tiny_value2))
        zero += popcount(match_bits(src, at, m2, v2, None, None))
    acc[NONFINITE] += np.int64(bad)
    acc[TINY] += np.int64(tiny)
    acc[ZERO] += np.int64(zero)
    return np.int64(bad)


@njit(**JIT)
def _raw_extremes(src, keys, sp, run):
    """(largest unsigned, largest signed) of the `run` words from src[sp] (`keys`: the same
    memory as signed words), one word apart: two plain reductions, the fastest loop there is
    (no key, no mask: for runs of finite words in native byte order)."""
    at = np.uint64(sp)
    umax = src[at]
    smax = keys[at]
    for k in range(run):
        i = at + np.uint64(k)
        umax = max(umax, src[i])
        smax = max(smax, keys[i])
    return umax, smax


@njit(**JIT)
def _raw_min(src, sp, run):
    """The smallest unsigned word of the `run` words from src[sp], one word apart."""
    at = np.uint64(sp)
    umin = src[at]
    for k in range(run):
        umin = min(umin, src[at + np.uint64(k)])
    return umin


@njit(**JIT)
def _signed(u, shift):
    """The unsigned word value `u` as the signed word's value (sign-extended to int64)."""
    v = np.int64(u)
    if shift < 63 and (v >> shift) & 1:
        v -= np.int64(1) << (shift + 1)
    return v


@njit(**JIT)
def _key(w, c):
    """The order key (int64) of the signed word value `w`."""
    x = w ^ np.int64(c[5])
    return x ^ ((x >> np.int64(c[3])) & np.int64(c[4]))


@njit(**JIT)
def _fold_raw(src, sp, run, umax, smax, c, acc):
    """acc's key slots updated from _raw_extremes. In a signed format the largest value is the
    largest signed word where one is positive, and the smallest value the largest unsigned word
    (the negative of greatest magnitude) where one is negative; a run missing either sign (or an
    unsigned format) also needs the smallest unsigned word, read again from L1 cache: the
    negative of least magnitude, or the smallest positive value."""
    shift = np.int64(c[3])
    hi_u = _signed(umax, shift)
    if c[5] != 0:  # unsigned format
        w_min, w_max = _signed(_raw_min(src, sp, run), shift), hi_u
    elif smax >= 0 and hi_u < 0:  # both signs: the common case
        w_min, w_max = hi_u, np.int64(smax)
    elif smax >= 0:  # no negative value
        w_min, w_max = _signed(_raw_min(src, sp, run), shift), np.int64(smax)
    else:  # no positive value
        w_min, w_max = hi_u, _signed(_raw_min(src, sp, run), shift)
    acc[KEY_MIN] = min(acc[KEY_MIN], _key(w_min, c))
    acc[KEY_MAX] = max(acc[KEY_MAX], _key(w_max, c))


@njit(**JIT)
def stats_range(src, keys, s_off, s_str, shape, start, stop, tests, c, swap, acc):
    """acc (int64[5], slots as named above) updated with the elements at C-order positions
    start..stop of the plan: counts of tests[0..2] (non-finite, tiny, zero; (3, 4) unsigned
    words, in the stored byte order) on `src`, extremes on `keys` (the same memory as signed
    words)."""
    idx = np.empty(shape.size, np.int64)
    seek(shape, start, idx)
    ss = s_str[shape.size - 1]
    pos = start
    longest = RUN_BYTES // src.itemsize
    while pos < stop:
        run = min(run_length(idx, shape, pos, stop), longest)
        sp = word_at(idx, s_str, s_off)
        done = 0
        bad = 0
        if ss == 1 and tests[0, 2] == 0 and tests[2, 2] == 0:
            done = run - run % VECTOR
            vectors = np.uint64(done // VECTOR)
            if tests[1, 2] == 0:
                bad = _stream(src, np.uint64(sp), vectors, tests, acc, None, None)
            else:  # tiny in the *fnuz formats, whose NaN sits in the -0 slot
                bad = _stream(src, np.uint64(sp), vectors, tests, acc, tests[1, 2], tests[1, 3])
        for t in range(3):
            n = count_run(src, sp + done, ss, run - done, tests[t, 0], tests[t, 1], tests[t, 2],
                          tests[t, 3], 1)
            acc[t] += n
            if t == 0:
                bad += n
        if swap:
            _swapped(keys, sp, ss, run, c, acc)
        elif bad or ss != 1:
            _native(keys, sp, ss, run, c, acc)
        else:  # the common case: finite words, one apart
            umax, smax = _raw_extremes(src, keys, sp, run)
            _fold_raw(src, sp, run, umax, smax, c, acc)
        pos += run
        advance(idx, shape, run)


@njit(parallel=True, **JIT)
def stats_parallel(src, keys, s_off, s_str, shape, tests, c, swap, block, rows):
    """stats_range over the whole plan, a row of `rows` per task of `block` positions."""
    total = plan_size(shape)
    for t in prange(rows.shape[0]):
        stats_range(src, keys, s_off, s_str, shape, t * block, min(total, (t + 1) * block), tests,
                    c, swap, rows[t])
