"""The statistics kernel: class counts and the finite extremes of a real array, in one pass.

A run of at most RUN_BYTES of words one apart (nearly every run), in either byte order, is read
once by stats_vectors.count_and_extremes: the three bit-test counts (non-finite, tiny, zero) and
the raw extremes of the words (smallest and largest unsigned, largest signed), from which the
two extreme values follow where the run holds no non-finite word (fold_raw). Any other run (a
non-finite word in it, strided, foreign byte order) is counted test by test (reductions.count_run)
and scanned for the smallest and largest *order key* among its finite words. The order key is the stored word, shifted so the sign bit is the
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
from numba import njit, types
from numba.extending import intrinsic

from .reductions import count_run
from .stats_vectors import count_and_extremes, count_and_extremes_swapped
from .vectors import VECTOR
from .walk import INNER, JIT, advance, run_length, seek, word_at

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


@njit(**INNER)
def fold_raw(umin, umax, smax, c, acc):
    """acc's key slots updated from the raw extremes of finite words (count_and_extremes: the
    smallest and largest unsigned word, the largest signed word). In a signed format the largest
    value is the largest signed word where one is positive, else (all negative) the negative of
    least magnitude, the smallest unsigned word; the smallest value is the largest unsigned word
    (the negative of greatest magnitude) where one is negative, else the smallest unsigned word
    (the smallest positive value). An unsigned format: the unsigned extremes."""
    shift = np.int64(c[3])
    lo_u, hi_u, hi_s = _signed(umin, shift), _signed(umax, shift), np.int64(smax)
    if c[5] != 0:  # unsigned format
        w_min, w_max = lo_u, hi_u
    else:
        w_max = hi_s if hi_s >= 0 else lo_u
        w_min = hi_u if hi_u < 0 else lo_u
    acc[KEY_MIN] = min(acc[KEY_MIN], _key(w_min, c))
    acc[KEY_MAX] = max(acc[KEY_MAX], _key(w_max, c))


@njit(**JIT)
def stats_range(src, keys, s_off, s_str, shape, start, stop, tests, c, swap, acc):
    """acc (int64[5], slots as named above) updated with the elements at C-order positions
    start..stop of the plan: counts of tests[0..2] (non-finite, tiny, zero; (3, 4) unsigned
    words, in the stored byte order; the non-finite and zero tests one clause) on `src`,
    extremes on `keys` (the same memory as signed words)."""
    idx = np.empty(shape.size, np.int64)
    seek(shape, start, idx)
    ss = s_str[shape.size - 1]
    pos = start
    longest = RUN_BYTES // src.itemsize
    while pos < stop:
        run = min(run_length(idx, shape, pos, stop), longest)
        sp = word_at(idx, s_str, s_off)
        done = 0
        if ss == 1 and run >= VECTOR:  # the common case: one fused loop
            done = run - run % VECTOR
            if swap:  # big-endian FITS / NetCDF classic data: the same loop, swapping words
                bad, tiny, zero, umin, umax, smax = count_and_extremes_swapped(
                    src, np.uint64(sp), np.uint64(done // VECTOR), tests[0, 0], tests[0, 1],
                    tests[1, 0], tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0],
                    tests[2, 1])
            else:
                bad, tiny, zero, umin, umax, smax = count_and_extremes(
                    src, np.uint64(sp), np.uint64(done // VECTOR), tests[0, 0], tests[0, 1],
                    tests[1, 0], tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0],
                    tests[2, 1])
            acc[NONFINITE] += np.int64(bad)
            acc[TINY] += np.int64(tiny)
            acc[ZERO] += np.int64(zero)
            if bad == 0:
                fold_raw(umin, umax, smax, c, acc)
            elif swap:  # a non-finite word would win: the masked loop, over the same words
                _swapped(keys, sp, np.int64(1), done, c, acc)
            else:
                _native(keys, sp, np.int64(1), done, c, acc)
        if done < run:
            at, rest = sp + done * ss, run - done
            for t in range(3):
                acc[t] += count_run(src, at, ss, rest, tests[t, 0], tests[t, 1], tests[t, 2],
                                    tests[t, 3], np.int64(1))
            if swap:
                _swapped(keys, at, ss, rest, c, acc)
            else:
                _native(keys, at, ss, rest, c, acc)
        pos += run
        advance(idx, shape, run)
