"""Many small HDF5 chunks read without a lookup and a classification each (hdf5_blocks uses it).

NetCDF-4 variables along an unlimited dimension are chunked one record or a few at a time by
default (chunks of a few KiB): read one by one, each chunk cost about 150 us of Python (a lookup
in HDF5's chunk index, a read, a classification call), some 30 times its reading. Here the
chunk index of a task's chunks is read in one pass (hdf5_index.py), and unfiltered
chunks that span the dataset's trailing axes and lie back to back in the file, in the order of
the chunk grid, are read with one positioned read as one block of up to RUN_BYTES. Whatever the
index says is checked as for a chunk read alone: a chunk of another size, bytes past the end of
the file, a chunk never written (read as the fill value); an index that cannot be read here, or
names a chunk twice or off the grid, leaves the chunks to HDF5's own lookup.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .hdf5_index import chunk_rows

#: Bytes of back-to-back chunks read and classified as one block.
RUN_BYTES = 4 << 20
#: Chunk counts for which the index is read in one pass: from this many chunks in a task, up to
#: a million (a table of 24 bytes a chunk and the index as read, 8 bytes a value: about 64 MB
#: for a 2-D dataset), and only where the task holds at least a quarter of the dataset's chunks
#: (a part of a larger dataset would read the whole index again). Other tasks look their chunks
#: up one at a time.
MIN_CHUNKS, MAX_CHUNKS = 64, 1 << 20


class ChunkInfo(NamedTuple):
    """What HDF5's index says of one chunk (as h5py's StoreInfo)."""

    chunk_offset: tuple
    filter_mask: int
    byte_offset: int | None
    size: int


def chunk_table(dsid, grid: tuple, block: tuple, first: int, last: int):
    """int64 array (last - first, 3): byte offset (-1: never written), stored size and filter
    mask of the chunks [first, last) in C order of `grid` (chunks of shape `block`), read in one
    pass over the chunk index of dataset `dsid`; None where the chunks are better looked up one
    at a time (see MIN_CHUNKS) or the index is not one this reads (the lookup then decides)."""
    n = last - first
    cells = math.prod(grid) if grid else 0
    if not hasattr(dsid, "chunk_iter") or not MIN_CHUNKS <= n <= MAX_CHUNKS or not grid \
            or cells >= 1 << 62:  # chunk numbers as int64
        return None
    try:
        # an index that lists each chunk of the grid once at most fits a table of the grid's
        # cells (without a count first: counting walks the index too); a larger grid is
        # counted, and its index read where the task holds a quarter of its chunks or more
        room = cells if cells <= min(4 * n, MAX_CHUNKS) else dsid.get_num_chunks()
        if room > 4 * n:
            return None
        rows = chunk_rows(dsid, len(grid), room)
    except Exception:  # an index h5py cannot iterate, values past int64
        return None
    entries = rows[:, len(grid):]
    if (entries[:, 0] < 0).any():
        return None  # a chunk listed without storage
    k = np.zeros(len(rows), np.int64)  # each chunk's number in the grid's C order
    for axis, (cells_along, size) in enumerate(zip(grid, block)):
        index, r = np.divmod(rows[:, axis], size)  # (a scalar divisor: numpy's fast division)
        if r.any() or (index < 0).any() or (index >= cells_along).any():
            return None  # a chunk off the grid
        k = k * cells_along + index
    k -= first
    increasing = bool((k[1:] > k[:-1]).all())  # HDF5's indexes list them in order
    if increasing and len(k) == n and (not n or (k[0] == 0 and k[-1] == n - 1)):
        return np.ascontiguousarray(entries)  # every chunk of the task, in order
    ordered = k if increasing else np.sort(k)
    if (ordered[1:] == ordered[:-1]).any():
        return None  # a chunk listed twice
    mine = (k >= 0) & (k < n)
    table = np.full((n, 3), -1, np.int64)
    table[k[mine]] = entries[mine]
    return table


def runs(table, walk, first: int, last: int, nbytes: int, whole: bool):
    """Yield (start, count, ChunkInfo or None: never written, chunks) over the chunks
    [first, last) of BlockGrid `walk`, from `table` (chunk_table): `chunks` > 1 for a run of
    chunks back to back in the file, `nbytes` each and unfiltered (RUN_BYTES at most; only where
    `whole`: chunks spanning the trailing axes, so that a run is rows of the first axis),
    `count` then the run's."""
    if not whole:
        for k, (_, start, count) in enumerate(walk.each(first, last)):
            yield start, count, info_of(table[k], start), 1
        return
    rest = tuple(walk.shape[1:])
    zeros = (0,) * len(rest)
    for k, chunks, row, rows in zip(*(v.tolist() for v in run_spans(table, walk, first,
                                                                      nbytes))):
        start = (row,) + zeros
        yield start, (rows,) + rest, info_of(table[k], start), chunks


def run_spans(table, walk, first: int, nbytes: int) -> tuple:
    """The runs of `runs` where `whole`, as int64 arrays: the row of `table` (chunk_table of
    the chunks from `first` of BlockGrid `walk`) of their first chunk, their chunks, the first
    record (along the first axis) and the records they hold."""
    heads = _run_heads(table, nbytes)
    head, end = heads[:-1], heads[1:]
    rows = walk.block[0]
    row = (first + head) * rows
    return head, end - head, row, np.minimum((first + end) * rows, walk.shape[0]) - row


def _run_heads(table, nbytes: int) -> np.ndarray:
    """The rows of `table` where runs start, then len(table): a run is chunks back to back in
    the file, `nbytes` each and unfiltered, RUN_BYTES at most, or one chunk."""
    off, size, mask = table[:, 0], table[:, 1], table[:, 2]
    ok = (off >= 0) & (size == nbytes) & (mask == 0)
    link = np.zeros(len(table), bool)
    link[1:] = ok[1:] & ok[:-1] & (off[1:] == off[:-1] + nbytes)
    # a new run where the chain breaks, and every RUN_BYTES along one chain
    per_run = max(1, RUN_BYTES // max(nbytes, 1))
    chain = np.flatnonzero(~link)
    at = np.arange(len(table)) - chain[np.cumsum(~link) - 1]
    return np.append(np.flatnonzero(~link | (at % per_run == 0)), len(table))


def info_of(row, start) -> ChunkInfo | None:
    """The ChunkInfo of a row of chunk_table for the chunk at `start`; None: never written."""
    offset, size, mask = (int(v) for v in row)
    return None if offset < 0 else ChunkInfo(start, mask, offset, size)


__all__ = ["ChunkInfo", "MAX_CHUNKS", "MIN_CHUNKS", "RUN_BYTES", "chunk_table", "info_of",
           "run_spans", "runs"]
