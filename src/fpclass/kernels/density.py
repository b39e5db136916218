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

from .walk import JIT, hit

#: Rows of the `tests` table handed to the kernel.
NAN, POSINF, NEGINF = range(3)


@njit(**JIT)
def _cell(i, place):
    """(row, column) in the map of item `i` under `place` (see the module docstring), binned:
    place = (parts, div_r, mod_r, row0, div_c, mod_c, col_scale, col0, rows, cols, bins_r,
    bins_c)."""
    elem = i // place[0]
    row = (elem // place[1]) % place[2] + place[3]
    col = ((elem // place[4]) % place[5]) * place[6] + place[7]
    return row * place[10] // place[8], col * place[11] // place[9]


@njit(**JIT)
def bin_words(words, tests, first, place, channel, counts):
    """counts[channel[part, class], r, c] += 1 for every word of `words` (1-D, unsigned) that is
    a NaN, +Inf or -Inf by the (3, 4) `tests` (mask, value, mask2, value2), at item first + e;
    `part` is the item's place in its value (item % parts). Returns the words binned."""
    found = 0
    parts = place[0]
    for e in range(words.size):
        w = words[e]
        if hit(w, tests[NAN, 0], tests[NAN, 1], tests[NAN, 2], tests[NAN, 3]):
            cls = NAN
        elif hit(w, tests[POSINF, 0], tests[POSINF, 1], tests[POSINF, 2], tests[POSINF, 3]):
            cls = POSINF
        elif hit(w, tests[NEGINF, 0], tests[NEGINF, 1], tests[NEGINF, 2], tests[NEGINF, 3]):
            cls = NEGINF
        else:
            continue
        i = first + e
        r, c = _cell(i, place)
        counts[channel[i % parts, cls], r, c] += 1
        found += 1
    return found


@njit(**JIT)
def bin_mask(mask, first, place, channel, counts):
    """counts[channel, r, c] += 1 for every set byte of `mask` (1-D uint8), at item first + e."""
    for e in range(mask.size):
        if mask[e]:
            r, c = _cell(first + e, place)
            counts[channel, r, c] += 1


def place_array(values) -> np.ndarray:
    """The `place` argument of the kernels, as int64."""
    return np.asarray(values, dtype=np.int64)
