"""The density-map kernel: where a chunk's NaN, +Inf and -Inf are, binned into a small grid.

A chunk is a run of words (one per value); value e of it is item `first + e` of its tensor, and
item i sits in the map's row (i // parts // div_r) % mod_r + row0 and column
((i // parts // div_c) % mod_c) * col_scale + col0 — the one affine rule every storage's chunks
follow (C or Fortran order, N-d blocks at an origin, a complex value's two parts, a quantized
block standing for `col_scale` columns). Classes come from the format table's bit tests, as
everywhere else; the chunk is read once more, from cache, and only when it holds a finding.
"""

import numpy as np
from numba import njit

from .vectors import VECTOR, match_bits, popcount
from .walk import INNER, JIT, hit

#: Rows of the `tests` table handed to the kernel: the three classes, then "non-finite" (their
#: union, one cheap test that skips the finite words).
NAN, POSINF, NEGINF, NONFINITE = range(4)
#: Items between two hits below which the hit's cell is reached by stepping from the last one's
#: (a few additions an item) rather than computed afresh (eight integer divisions).
STEP_MAX = 24
#: 64 bits set: every word of a vector matched.
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(**JIT)
def _cell(i, place):
    """(part, bin row, bin column) of item `i` (eight integer divisions)."""
    elem = i // place[0]
    row = (elem // place[1]) % place[2] + place[3]
    col = ((elem // place[4]) % place[5]) * place[6] + place[7]
    return i % place[0], row * place[10] // place[8], col * place[11] // place[9]


@njit(**JIT)
def _bits(words, at, tests, t):
    """Bit k set iff words[at + k] (k < 64) passes tests[t]."""
    if tests[t, 2] == 0:  # a one-clause test: half the work per word
        return match_bits(words, at, tests[t, 0], tests[t, 1], None, None)
    return match_bits(words, at, tests[t, 0], tests[t, 1], tests[t, 2], tests[t, 3])


@njit(**INNER)
def _uniform(words, at, tests):
    """The class all 64 words from words[at] have (all non-finite), or -1 if they differ."""
    for cls in (NAN, POSINF, NEGINF):
        if _bits(words, at, tests, cls) == ALL:
            return cls
    return -1


@njit(**JIT)
def bin_words(words, tests, first, place, edges_r, edges_c, channel, counts):
    """counts[channel[part, class], r, c] += 1 for every word of `words` (1-D, unsigned) that is
    a NaN, +Inf or -Inf by the (4, 4) `tests` (mask, value, mask2, value2; rows as named above),
    at item first + e; `part` is the item's place in its value (item % parts); edges_r / edges_c
    are the first position of each bin and then the axis length (results.density.edges).
    64 finite words are skipped with one vector test; 64 words of one class along a row are
    counted a cell at a time."""
    parts, div_r, mod_r, row0 = place[0], place[1], place[2], place[3]
    div_c, mod_c, col_scale, col0 = place[4], place[5], place[6], place[7]
    wrap_r = row0 * place[10] // place[8]  # the bin of the first row / column
    wrap_c = col0 * place[11] // place[9]
    along_rows = parts == 1 and div_c == 1 and col_scale == 1
    m, v = tests[NONFINITE, 0], tests[NONFINITE, 1]
    m2, v2 = tests[NONFINITE, 2], tests[NONFINITE, 3]
    # where item `at` is: its part, its place within the current row and column steps, its row
    # and column, and their bins; stepping item by item needs no division
    at = np.int64(-1 - STEP_MAX)
    part = q_r = row = q_c = col = b_r = b_c = np.int64(0)
    n = words.size
    vectors = n // VECTOR
    for b in range(vectors + 1):
        lo = b * VECTOR
        hi = min(lo + VECTOR, n)
        uniform = -1
        if b < vectors:
            bits = _bits(words, np.uint64(lo), tests, np.int64(NONFINITE))
            if bits == 0:
                continue
            if bits == ALL and along_rows:
                uniform = _uniform(words, np.uint64(lo), tests)
        e = lo
        while e < hi:
            if uniform >= 0:
                cls = uniform
            else:
                w = words[e]
                if not hit(w, m, v, m2, v2):
                    e += 1
                    continue
                if hit(w, tests[NAN, 0], tests[NAN, 1], tests[NAN, 2], tests[NAN, 3]):
                    cls = NAN
                elif hit(w, tests[POSINF, 0], tests[POSINF, 1], tests[POSINF, 2],
                         tests[POSINF, 3]):
                    cls = POSINF
                elif hit(w, tests[NEGINF, 0], tests[NEGINF, 1], tests[NEGINF, 2],
                         tests[NEGINF, 3]):
                    cls = NEGINF
                else:
                    e += 1
                    continue
            i = first + e
            if i - at > STEP_MAX:
                elem = i // parts
                part = i % parts
                q_r, row = elem % div_r, (elem // div_r) % mod_r
                q_c, col = elem % div_c, (elem // div_c) % mod_c
                b_r = (row0 + row) * place[10] // place[8]
                b_c = (col0 + col * col_scale) * place[11] // place[9]
                at = i
            while at < i:
                at += 1
                part += 1
                if part < parts:
                    continue
                part = 0
                q_c += 1
                if q_c == div_c:
                    q_c = 0
                    col += 1
                    if col == mod_c:
                        col = 0
                        b_c = wrap_c
                    else:
                        while col0 + col * col_scale >= edges_c[b_c + 1]:
                            b_c += 1
                q_r += 1
                if q_r == div_r:
                    q_r = 0
                    row += 1
                    if row == mod_r:
                        row = 0
                        b_r = wrap_r
                    else:
                        while row0 + row >= edges_r[b_r + 1]:
                            b_r += 1
            run = 1
            if uniform >= 0:  # the items up to the end of this cell, row step or vector
                run = min(hi - e, div_r - q_r, mod_c - col, edges_c[b_c + 1] - col0 - col)
                # state moves to the run's last item: no boundary lies before it
                col += run - 1
                q_r += run - 1
                at += run - 1
            counts[channel[part, cls], b_r, b_c] += run
            e += run


@njit(**JIT)
def bin_mask(mask, first, place, edges_r, edges_c, channel, counts):
    """counts[channel, r, c] += 1 for every set byte of `mask` (1-D uint8), at item first + e."""
    for e in range(mask.size):
        if mask[e]:
            _, r, c = _cell(first + e, place)
            counts[channel, r, c] += 1


def place_array(values) -> np.ndarray:
    """The `place` argument of the kernels, as int64: (parts, div_r, mod_r, row0, div_c, mod_c,
    col_scale, col0, rows, columns, bins_r, bins_c), the names of the module docstring, then the
    layout and its bins."""
    return np.asarray(values, dtype=np.int64)
