"""A chunked HDF5 dataset's chunk index as a table, read in one pass of HDF5's chunk iteration
(hdf5_runs reads its chunks from it).

h5py's iteration (DatasetID.chunk_iter) calls Python once a chunk with a new object: 10 ms for
the 8,192 chunks of a NetCDF-4 variable of 4 KiB records, twice the time to read and classify
its 32 MiB. Where it can, the iteration here is HDF5's own H5Dchunk_iter, called through ctypes
in the library h5py's modules link, with a compiled callback writing the table
(kernels/index_rows.py): 0.3 ms for the same index. It is called holding h5py's lock, as h5py
calls HDF5 (HDF5 is not thread-safe), and without the GIL for a file HDF5 reads itself (its
sec2 driver), so that the other scan threads run Python meanwhile (a 512 MiB NetCDF-4 file of
4 KiB records: 8% faster); with the GIL for a file read through h5py's Python file driver (a
member of a .keras archive, a URL), whose reads run inside the call. Where that cannot be done
(no such symbol, an h5py without chunk iteration or without that lock, numba's cache not warm
under the compile policy, an iteration that fails or lists more chunks than the table's room,
an entry of 4 GiB or more) h5py's iteration reads the index, and raises what h5py raises.
"""

from __future__ import annotations

import functools
from array import array
from typing import NamedTuple

import numpy as np

from ...kernels import compile_cache

#: HDF5's H5P_DEFAULT: the default transfer property list.
_H5P_DEFAULT = 0


def chunk_rows(dsid, ndim: int, room: int) -> np.ndarray:
    """int64 (chunks, ndim + 3): for each chunk in the index of dataset `dsid` (an h5py
    DatasetID of rank `ndim` with chunk iteration), its offset along each axis (elements), byte
    address (-1: none), stored size and filter mask, in the index's order. An index of more
    than `room` chunks is read by h5py's iteration."""
    rows = _native_rows(dsid, ndim, room)
    if rows is not None:
        return rows
    found = array("q")  # the callback only collects, 8 bytes a value: the checks run on arrays
    dsid.chunk_iter(lambda info: found.extend(
        (*info.chunk_offset, -1 if info.byte_offset is None else info.byte_offset,
         info.size, info.filter_mask)))
    return np.frombuffer(found, np.int64).reshape(-1, ndim + 3)


def any_chunk(dsid) -> bool:
    """Whether the index of chunked dataset `dsid` (an h5py DatasetID) lists a chunk: HDF5's
    iteration stopped at the first where it can be called here (a count walks it all)."""
    table = _native_table(dsid, 0, 0)
    if table is None:
        return dsid.get_num_chunks() > 0
    from ...kernels import index_rows
    return index_rows.table_rows(table) is None  # a first chunk, without room


def _native_rows(dsid, ndim: int, room: int) -> np.ndarray | None:
    """chunk_rows through HDF5's H5Dchunk_iter, or None where it cannot be used here or the
    index lists more than `room` chunks."""
    table = _native_table(dsid, ndim, room)
    if table is None:
        return None
    from ...kernels import index_rows
    return index_rows.table_rows(table)


def _native_table(dsid, ndim: int, room: int) -> np.ndarray | None:
    """The index of `dsid` as kernels/index_rows.py's table of `room` rows, through HDF5's
    H5Dchunk_iter; None where it cannot be called here, or fails."""
    native = _native_iteration()
    if native is None or not isinstance(dsid, native.dataset) \
            or not compile_cache.kernels_ready():
        return None
    from ...kernels import index_rows  # compiles or loads the callback: the cache is warm
    table = index_rows.new_table(ndim, room)
    try:
        if room and dsid.rank != ndim:  # (the callback writes `ndim` offsets a row)
            return None
        own_reads = native.h5i.get_file_id(dsid).get_access_plist().get_driver() \
            == native.sec2
        iterate = native.without_gil if own_reads else native.with_gil
        with native.lock:
            status = iterate(dsid.id, _H5P_DEFAULT, index_rows.collect.address,
                             table.ctypes.data)
    except Exception:  # an id h5py refuses, a Python file driver's error (raised by ctypes):
        return None     # h5py's own calls raise it
    # the callback's stop at an entry without room is no failure (HDF5 returns it, or 0)
    return table if status >= 0 else None


class _Native(NamedTuple):
    """H5Dchunk_iter as ctypes functions, and what calling it needs from h5py."""

    with_gil: object       # (ctypes.PyDLL's)
    without_gil: object    # (ctypes.CDLL's)
    lock: object           # h5py's lock around every HDF5 call
    dataset: type          # h5py's DatasetID
    h5i: object
    sec2: int              # HDF5's own POSIX file driver


@functools.lru_cache(maxsize=None)
def _native_iteration() -> _Native | None:
    """What calling H5Dchunk_iter here takes, or None where it cannot be called."""
    import ctypes
    from .hdf5_types import _h5py
    h5py = _h5py()
    if not hasattr(h5py.h5d.DatasetID, "chunk_iter"):  # h5py's HDF5 lacks it, or an old h5py
        return None
    # herr_t H5Dchunk_iter(hid_t dset_id, hid_t dxpl_id, H5D_chunk_iter_op_t cb, void *op_data)
    functions = []
    try:
        from h5py._objects import phil
        for library in (ctypes.PyDLL, ctypes.CDLL):
            # dlsym on the handle of h5py's module finds the symbol in the libraries it links
            iterate = library(h5py.h5d.__file__).H5Dchunk_iter
            iterate.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                ctypes.c_void_p]
            iterate.restype = ctypes.c_int
            functions.append(iterate)
    except (ImportError, OSError, AttributeError):
        return None
    return _Native(*functions, phil, h5py.h5d.DatasetID, h5py.h5i, h5py.h5fd.SEC2)


__all__ = ["any_chunk", "chunk_rows"]
