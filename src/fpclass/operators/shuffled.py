"""value_stats of finite float values stored byte-shuffled (HDF5's shuffle filter), read as
stored: the statistics kernel over words rebuilt in registers (kernels/shuffled_stats.py), never
the whole unshuffled array written out and read back. The format table's bit tests, as
value_stats takes them (statistics.word_stats)."""

from __future__ import annotations

import sys

import numpy as np

from ..kernels import compile_cache
from ..kernels.layout import read_only_bytes
from .statistics import ValueStats, value_stats, word_stats

#: Element sizes read shuffled (1-byte shuffle is no shuffle; wider ones are classified by value).
SIZES = (2, 4, 8)


def finite_shuffled_stats(data, dtype, count: int) -> ValueStats | None:
    """The ValueStats of the first `count` elements of real float `dtype` (either byte order)
    whose bytes `data` holds shuffled (len(data) // itemsize elements, byte k of each stored
    together, in order of k), when every one of them is finite. None when one is not (to be
    unshuffled and located), and where they are not read shuffled here: elements of a size not in
    SIZES, formats classified by value, a big-endian machine, numba's cache not warm (the
    compile policy): then unshuffle them and call value_stats."""
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    if size not in SIZES or sys.byteorder != "little" or not compile_cache.kernels_ready():
        return None
    rule = word_stats(dtype)
    if rule is None:
        return None
    tests, consts, _, swapped, to_stats = rule
    src = read_only_bytes(data)  # one compiled kernel per word size, whoever owns the bytes
    n = src.size // size
    if not 0 <= count <= n:
        raise ValueError(f"count must be 0..{n} (the elements data holds), got {count}")
    from ..kernels.vectors import VECTOR  # imports numba: not while the kernels are cold
    done = count - count % VECTOR
    found = ValueStats()
    if done:
        from ..kernels import launch_stats, shuffled_stats as kernel  # imports numba
        row = launch_stats.empty_row()
        if not kernel.shuffled_stats(src, n, done // VECTOR, tests, consts, swapped, row):
            return None
        found = to_stats(row, done)
    if done < count:  # the last few: unshuffled by NumPy, classified by its bit tests
        tail = src[:n * size].reshape(size, n)[:, done:count].T.copy().view(dtype)[:, 0]
        rest = value_stats(tail)
        if rest.nonfinite:
            return None
        found = found + rest
    return found
