"""Blocks a reader classified as it decoded them, yielded in place of their values."""

from __future__ import annotations

from typing import NamedTuple


class FiniteBlock(NamedTuple):
    """A block of `values` values (`nbytes` bytes), every one finite, with their ValueStats:
    what a reader yields for a block it classified without writing its values out (HDF5's
    shuffled chunks, hdf5_blocks.py). A block holding any NaN or Inf comes as its values."""

    values: int
    nbytes: int
    stats: object
