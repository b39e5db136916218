"""A C callback that copies each entry of a chunk index into an int64 table, with the signature
of HDF5's chunk iteration callback (H5Dchunk_iter's H5D_chunk_iter_op_t), so that a dataset's
whole index is read in one native pass (scan/readers/hdf5_index.py) instead of one Python call
a chunk. Importing this module compiles the callback (or loads it from numba's cache): import
it where the compile policy allows (kernels/compile_cache.py).

The table: HEADER int64 (the number of offset axes, the rows it has room for, the rows written,
the entries it turned away), then a row a chunk: its offset along each axis, its byte address,
its stored size, its filter mask. An entry past the table's room, or of a size HDF5 cannot
hold, stops the iteration (the callback returns 1, which HDF5 returns, or 0 where the index's
iteration ends with it: the fourth header word says it)."""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, types

HEADER = 4


def new_table(ndim: int, rows: int) -> np.ndarray:
    """An empty table for up to `rows` entries of `ndim` offset axes."""
    table = np.zeros(HEADER + rows * (ndim + 3), np.int64)
    table[:HEADER] = (ndim, rows, 0, 0)
    return table


def table_rows(table: np.ndarray) -> np.ndarray | None:
    """The rows written into `table`: int64 (rows, ndim + 3); None where an entry was turned
    away."""
    ndim, _, written, turned_away = (int(v) for v in table[:HEADER])
    if turned_away:
        return None
    return table[HEADER:HEADER + written * (ndim + 3)].reshape(written, ndim + 3)


@cfunc(types.int32(types.CPointer(types.uint64), types.uint32, types.uint64, types.uint64,
                   types.voidptr), nopython=True, cache=True, error_model="numpy")
def collect(offset, filter_mask, address, size, data):
    head = carray(data, (HEADER,), dtype=np.int64)
    ndim, room, written = head[0], head[1], head[2]
    # HDF5 reads no chunk of 4 GiB or more, and its 1.13 releases passed the size in 32 bits
    # (the register's upper half undefined): such a size is turned away as well, for h5py's
    # iteration to list the index
    if written >= room or size >> np.uint64(32) != 0:
        head[3] += 1
        return 1
    width = ndim + 3
    table = carray(data, (HEADER + room * width,), dtype=np.int64)
    at = HEADER + written * width
    for axis in range(ndim):
        table[at + axis] = np.int64(offset[axis])
    table[at + ndim] = np.int64(address)  # HDF5's undefined address (all ones) reads as -1
    table[at + ndim + 1] = np.int64(size)
    table[at + ndim + 2] = np.int64(filter_mask)
    head[2] = written + 1
    return 0


__all__ = ["HEADER", "collect", "new_table", "table_rows"]
