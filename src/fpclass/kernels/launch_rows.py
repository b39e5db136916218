"""Short rows reduced along their own axis (rows.py), launched on their own: a plan of contiguous
rows of 2..8 words into contiguous cells, 16 rows a step, parts of the rows on threads. Rows of 4
or 8 bytes on a word boundary into one-byte cells go to row_words.py instead, a row a word.

The kernel is not called from slices.py's plan walkers: numba compiles a kernel's callees into
each caller again, and the shuffles of seven row widths made every plan walker take seconds more
to compile (measured: 45 of the 56 s of a float16 warm-up unit).
"""

from __future__ import annotations

import numpy as np

from . import row_words, rows, thread_parts

#: A plan of more axes than two (rows not merged into one run of rows) goes to the kernel block by
#: block only where each block holds at least this many rows: a call per block costs microseconds.
BLOCK_ROWS = 1024


def takes(p, lanes: int) -> bool:
    """Does the kernel take plan `p` (source, cells): rows of NARROWEST..WIDEST contiguous words
    one after the other, reduced along their own axis into contiguous cells, and every outer axis
    kept (the kernel stores its cells: blocks answering into the same cells would overwrite)?"""
    if lanes != 1 or p.shape.size < 2:
        return False
    n, width = int(p.shape[-2]), int(p.shape[-1])
    return (rows.NARROWEST <= width <= rows.WIDEST and n >= rows.ROWS
            and tuple(p.strides[0][-2:]) == (width, 1) and tuple(p.strides[1][-2:]) == (1, 0)
            and (p.shape.size == 2 or n >= BLOCK_ROWS)
            and all(int(s) != 0 for s in p.strides[1][:-2]))


def reduce_rows(src: np.ndarray, cells: np.ndarray, p, scalars: tuple, any_mode: bool,
                threads: int) -> None:
    """cells = per-row counts (any_mode: 1 if one matches, else 0) over plan `p` (takes(p)
    holds) into `cells`, a 1-D array of unsigned integers, every cell of the plan written (its
    old contents never read); `scalars` the test's four constants in the word
    type. The last rows of a block, fewer than a step, are answered by NumPy (by row_words.py:
    none)."""
    n, width = int(p.shape[-2]), int(p.shape[-1])
    steps = n // rows.ROWS
    data = cells.view(np.uint8)
    m, v, m2, v2 = scalars
    done = steps * rows.ROWS
    row_bytes = width * src.itemsize
    by_words = cells.itemsize == 1 and row_bytes in row_words.ROW_WORDS
    if by_words:
        word_args = (*row_words.constants(tuple(int(s) for s in scalars), src.itemsize, row_bytes),
                     any_mode)
    blocks = list(np.ndindex(*(int(k) for k in p.shape[:-2])))
    split = -(-thread_parts.parts_for(threads) // len(blocks))   # parts of each block
    calls, tails = [], []
    for index in blocks:
        sp = p.offsets[0] + sum(i * int(s) for i, s in zip(index, p.strides[0]))
        dp = p.offsets[1] + sum(i * int(s) for i, s in zip(index, p.strides[1]))
        if by_words:
            block = src[sp:sp + n * width]
            # a view off a word boundary is another numba type, compiled again: shuffles then
            if block.ctypes.data % row_bytes == 0:
                words = block.view(row_words.ROW_WORDS[row_bytes])
                bounds = thread_parts.cuts(n, split)
                calls += [(row_words.word_rows, (words[lo:hi], data[dp + lo:dp + hi], *word_args))
                          for lo, hi in zip(bounds, bounds[1:])]
                continue
        bounds = thread_parts.cuts(steps, split)
        calls += [(rows.short_rows, (src, sp, width, data, dp, cells.itemsize, *scalars, any_mode, lo, hi))
                  for lo, hi in zip(bounds, bounds[1:])]
        if done < n:
            tails.append((sp, dp))
    thread_parts.run(_call, calls, threads)
    for sp, dp in tails:
        words = src[sp + done * width:sp + n * width].reshape(-1, width)
        found = (((words & m) == v) & ((words & m2) != v2)).sum(axis=1, dtype=cells.dtype)
        cells[dp + done:dp + n] = (found != 0) if any_mode else found


def _call(kernel, args) -> None:
    """kernel(*args): one part of reduce_rows, whichever its kernel."""
    kernel(*args)
