"""Per-slice reductions: how many elements of each slice match a bit test, or whether any does.

The plan (layout.py) visits the input in memory order, its output cells at stride 0 along the
reduced axes. Where the innermost run lies along a reduced axis, the run belongs to one slice and
is counted as whole-array counting does (64 words a compare, a popcount), or, for `any`, searched
until its first hit; a slice already known to hold a hit is not read again (contiguous rows of
2..8 words are answered 16 at a time by rows.py, a kernel the launcher calls on its own). Where
the innermost run lies along a kept axis, each word adds its 0/1 to its own cell in a plain loop
that LLVM vectorizes: the cells (an array of the word's width or wider, see launch_reduce.py)
stay in cache while the rows stream past; `any` stops reading such rows once every cell holds a
hit (rows narrower than a vector read as wider ones). Tests are always two-clause here: a
one-clause test's second clause (m2 = 0) passes every word, and each loop variant is more to
compile for every word and cell type. For the same reason the mode `any_mode` is a type, True
(`any`) or None (counts), which numba prunes on: each mode's kernels hold only their own loops;
and no kernel passes a constant to another (numba would compile the callee again for the
literal).
"""

import numpy as np
from numba import njit

from .reductions import count_run
from .vectors import VECTOR, match_bits
from .walk import INNER, JIT, element_hit, hit, word_at

#: Vectors `any_run` tests before it looks at whether one had a hit: one branch per 256 words
#: costs nothing measurable, and a hit is still found within 1 KiB of float32.
ANY_GROUP = 4
#: Words `any` along an outer axis reads between two looks at whether every cell has its hit.
CHECK_WORDS = 1 << 14


@njit(**INNER)
def _any_vectors(src, s0, groups, m, v, m2, v2):
    """Does any of the ANY_GROUP * 64 * groups words from src[s0] match (m2 = v2 = None: one clause)?"""
    for g in range(groups):
        at = s0 + g * np.uint64(ANY_GROUP * VECTOR)
        bits = match_bits(src, at, m, v, m2, v2)
        for b in range(1, ANY_GROUP):
            bits |= match_bits(src, at + np.uint64(b * VECTOR), m, v, m2, v2)
        if bits != 0:
            return True
    return False


@njit(**INNER)
def any_run(src, sp, ss, run, m, v, m2, v2, lanes):
    """1 if any of the `run` elements from word sp, ss words apart, matches (either word of an
    element with lanes == 2), else 0; stops at the first hit (a reversed run: searched forwards)."""
    if lanes == 1 and (ss == 1 or ss == -1):
        s0 = np.uint64(sp if ss == 1 else sp - run + 1)
        groups = np.uint64(run // (ANY_GROUP * VECTOR))
        if m2 == 0:
            found = _any_vectors(src, s0, groups, m, v, None, None)
        else:
            found = _any_vectors(src, s0, groups, m, v, m2, v2)
        if found:
            return 1
        for j in range(groups * np.uint64(ANY_GROUP * VECTOR), np.uint64(run)):
            if hit(src[s0 + j], m, v, m2, v2):
                return 1
    elif lanes == 1:
        for k in range(run):
            if hit(src[np.uint64(sp + k * ss)], m, v, m2, v2):
                return 1
    else:
        for k in range(run):
            if element_hit(src, np.uint64(sp + k * ss), m, v, m2, v2, lanes):
                return 1
    return 0


@njit(**INNER)
def _add_run(src, sp, ss, cells, dp, ds, run, m, v, m2, v2, lanes, any_mode):
    """cells[dp + k*ds] += test(element k) for the run's elements (any_mode True: |=)."""
    if lanes == 1 and ss == 1 and ds == 1:  # the common case: a loop LLVM vectorizes
        s0 = np.uint64(sp)
        d0 = np.uint64(dp)
        n = np.uint64(run)
        if any_mode is not None:
            for k in range(n):
                cells[d0 + k] |= hit(src[s0 + k], m, v, m2, v2)
        else:
            for k in range(n):
                cells[d0 + k] += hit(src[s0 + k], m, v, m2, v2)
    else:
        for k in range(run):
            h = element_hit(src, np.uint64(sp + k * ss), m, v, m2, v2, lanes)
            if any_mode is not None:
                cells[np.uint64(dp + k * ds)] |= h
            else:
                cells[np.uint64(dp + k * ds)] += h


@njit(**INNER)
def _add_four_rows(src, sp, row, cells, dp, run, m, v, m2, v2, any_mode):
    """_add_run for four unit-stride rows, `row` words apart, that add into the same cells: each
    cell is loaded and stored once for four words (measured: 51% -> 83% of read bandwidth on
    float32 columns)."""
    s0 = np.uint64(sp)
    s1 = np.uint64(sp + row)
    s2 = np.uint64(sp + 2 * row)
    s3 = np.uint64(sp + 3 * row)
    d0 = np.uint64(dp)
    n = np.uint64(run)
    if any_mode is not None:
        for k in range(n):
            cells[d0 + k] |= (hit(src[s0 + k], m, v, m2, v2) | hit(src[s1 + k], m, v, m2, v2)
                              | hit(src[s2 + k], m, v, m2, v2) | hit(src[s3 + k], m, v, m2, v2))
    else:
        for k in range(n):
            cells[d0 + k] += ((hit(src[s0 + k], m, v, m2, v2) + hit(src[s1 + k], m, v, m2, v2))
                              + (hit(src[s2 + k], m, v, m2, v2) + hit(src[s3 + k], m, v, m2, v2)))


@njit(**INNER)
def _all_set(cells, dp, ds, run):
    """Is every one of the `run` cells from dp, ds apart, non-zero?"""
    for k in range(run):
        if cells[dp + k * ds] == 0:
            return False
    return True


@njit(**INNER)
def _any_rows(src, sp, s1, ss, cells, dp, ds, rows, run, m, v, m2, v2, lanes, any_mode):
    """_reduce_rows's rows that all answer into the same `run` cells, with any_mode: stops
    reading once every cell holds a hit, looked at every CHECK_WORDS words or so."""
    if ds == 1 and ss == 1 and lanes == 1 and s1 == run and run < VECTOR:
        _any_narrow_rows(src, sp, cells, dp, rows, run, m, v, m2, v2, any_mode)
        return
    every = max(4, (CHECK_WORDS // max(run, 1)) // 4 * 4)
    i = 0
    while i < rows and not _all_set(cells, dp, ds, run):
        stop = min(rows, i + every)
        if ds == 1 and ss == 1 and lanes == 1:
            while i + 4 <= stop:
                _add_four_rows(src, sp + i * s1, s1, cells, dp, run, m, v, m2, v2, any_mode)
                i += 4
        while i < stop:
            _add_run(src, sp + i * s1, ss, cells, dp, ds, run, m, v, m2, v2, lanes, any_mode)
            i += 1


@njit(**INNER)
def _any_narrow_rows(src, sp, cells, dp, rows, run, m, v, m2, v2, any_mode):
    """_any_rows for contiguous rows of run < 64 words into contiguous cells: read as rows of a
    multiple of both (whole rows: word q of such a row is column q % run) into cells of their
    own, so the loop is long enough to vectorize; folded into `cells` before each look."""
    wide = run
    while wide % VECTOR:
        wide += run
    per = wide // run  # short rows a wide one holds
    acc = np.zeros(wide, cells.dtype)
    every = max(1, CHECK_WORDS // wide) * per
    i = 0
    zero, one = np.int64(0), np.int64(1)
    while i < rows and not _all_set(cells, dp, one, run):
        stop = min(rows, i + every)
        k = (stop - i) // per
        j = 0
        while j + 4 <= k:
            _add_four_rows(src, sp + (i + j * per) * run, wide, acc, zero, wide, m, v, m2, v2, any_mode)
            j += 4
        while j < k:
            _add_run(src, sp + (i + j * per) * run, one, acc, zero, one, wide, m, v, m2, v2, one,
                     any_mode)
            j += 1
        i += k * per
        while i < stop:  # the last rows, too few for a wide one
            _add_run(src, sp + i * run, one, cells, dp, one, run, m, v, m2, v2, one, any_mode)
            i += 1
        for q in range(wide):
            cells[dp + q % run] |= acc[q]


@njit(**INNER)
def _reduce_rows(src, sp, s1, ss, cells, dp, d1, ds, rows, run, m, v, m2, v2, lanes, any_mode):
    """reduce_plan over the plan's two innermost axes: `rows` runs of `run` elements, the runs
    s1 words and d1 cells apart, their elements ss words and ds cells apart. A tight loop: with
    short runs, walking the plan's index per run would cost more than the run."""
    if ds != 0:
        if any_mode is not None and d1 == 0:
            _any_rows(src, sp, s1, ss, cells, dp, ds, rows, run, m, v, m2, v2, lanes, any_mode)
            return
        i = 0
        if d1 == 0 and ds == 1 and ss == 1 and lanes == 1:
            # rows that add into the same cells go four at a time
            while i + 4 <= rows:
                _add_four_rows(src, sp + i * s1, s1, cells, dp, run, m, v, m2, v2, any_mode)
                i += 4
        while i < rows:
            _add_run(src, sp + i * s1, ss, cells, dp + i * d1, ds, run, m, v, m2, v2, lanes, any_mode)
            i += 1
        return
    if any_mode is not None:
        for i in range(rows):
            c = dp + i * d1
            if cells[c] == 0:  # a slice with a hit is never read again
                cells[c] = any_run(src, sp + i * s1, ss, run, m, v, m2, v2, lanes)
    elif d1 == 0:  # every row counts into one cell
        total = 0
        for i in range(rows):
            total += count_run(src, sp + i * s1, ss, run, m, v, m2, v2, lanes)
        cells[dp] += total
    else:
        for i in range(rows):
            cells[dp + i * d1] += count_run(src, sp + i * s1, ss, run, m, v, m2, v2, lanes)


@njit(**JIT)
def reduce_plan(src, s_off, s_str, cells, d_off, d_str, shape, m, v, m2, v2, lanes, any_mode):
    """cells[c] += the matches among the elements of slice c (any_mode True: cells[c] = 1 if
    there is one; None: counts; never False, which would search too), over the whole plan.
    `cells` are the output's words, at stride 0 on the reduced axes; they must be wide enough
    for every count (the caller's duty)."""
    last = shape.size - 1
    if last == 0:
        zero = np.int64(0)
        _reduce_rows(src, s_off, zero, s_str[0], cells, d_off, zero, d_str[0], np.int64(1), shape[0],
                     m, v, m2, v2, lanes, any_mode)
        return
    blocks = 1
    for ax in range(last - 1):
        blocks *= shape[ax]
    idx = np.zeros(shape.size, np.int64)  # the two innermost stay 0: a block's first element
    for _ in range(blocks):
        _reduce_rows(src, word_at(idx, s_str, s_off), s_str[last - 1], s_str[last], cells,
                     word_at(idx, d_str, d_off), d_str[last - 1], d_str[last], shape[last - 1],
                     shape[last], m, v, m2, v2, lanes, any_mode)
        ax = last - 2
        while ax >= 0:
            idx[ax] += 1
            if idx[ax] < shape[ax]:
                break
            idx[ax] = 0
            ax -= 1
