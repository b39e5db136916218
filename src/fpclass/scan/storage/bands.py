"""Record bands: a variable whose values are a field of every row of a table or record of a
file (NetCDF classic record variables whose records are not a whole number of values apart,
FITS binary table columns), read in bands of whole rows, each one positioned read of the bytes
the band spans, seen as a strided array (rows `row` bytes apart, unaligned where `row` is not a
multiple of the element)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import import_module

import numpy as np

from ..._records import stored_through_slots
from . import Storage, cut
from .reads import SourceError, close_source, open_source, source_size, read_exactly


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Bands(Storage):
    """The task's values, stored as `stored` elements (default: the task's `element`) at byte
    `offset` of `source` and `row`
    bytes from one row of its first axis to the next (the rest of its grid in C order inside a
    row); `nbytes` the values' bytes. With `reader`, that reader module's
    `decode_bands(task, bands, chunk_bytes)` turns the stored values into the task's
    `element`s, by `decode` (a CF policy, a FITS scaling)."""

    source: str
    offset: int
    nbytes: int
    row: int
    stored: str = ""
    reader: str = ""
    decode: object = None
    kind = "bands"
    flat = False

    def units(self, task) -> int:
        return task.shape[0] if task.shape else 1

    def parts(self, task, task_bytes):
        rows = self.units(task)
        if rows <= 1 or self.nbytes <= task_bytes:
            return []
        return cut(rows, self.nbytes, task_bytes)

    def blocks(self, task, chunk_bytes: int):
        rows = self.units(task)
        stop = rows if task.count < 0 else task.first + task.count
        bands = read_bands(self, task.grid, np.dtype(self.stored or task.element), task.first,
                           stop, chunk_bytes)
        if self.reader:
            reader = import_module(f"{__package__.rpartition('.')[0]}.readers.{self.reader}")
            bands = reader.decode_bands(task, bands, chunk_bytes)
        yield from bands


def read_bands(bands: Bands, grid: tuple, item: np.dtype, first: int, stop: int,
               chunk_bytes: int):
    """The one band reader: yield (origin, array) over rows [first, stop) of `bands` for values of
    `grid` (its first axis the rows; () for a scalar, one row) stored as `item`s, in bands of
    about `chunk_bytes`, each array a strided view into a buffer reused by the next band."""
    if not grid:
        for _, block in read_bands(bands, (1,), item, first, stop, chunk_bytes):
            yield (), block.reshape(())
        return
    inner = tuple(grid[1:])
    field = math.prod(inner) * item.itemsize
    strides, step = [], item.itemsize
    for n in reversed(inner):
        strides.insert(0, step)
        step *= n
    strides = (bands.row,) + tuple(strides)
    row = max(bands.row, 1)
    per = max(1, chunk_bytes // row)
    fd = open_source(bands.source)
    try:
        size = source_size(fd)
        end = bands.offset + (grid[0] - 1) * bands.row + field
        if grid[0] and field and end > size:
            raise SourceError(f"data ends at byte {end} but {bands.source} has {size} bytes "
                              "(truncated?)")
        buf = None
        for a in range(first, stop, per):
            n = min(per, stop - a)
            nbytes = (n - 1) * bands.row + field
            if buf is None or buf.size < nbytes:
                buf = np.empty(nbytes, np.uint8)
            read_exactly(fd, memoryview(buf)[:nbytes], bands.offset + a * bands.row,
                         bands.source)
            yield (a,) + (0,) * len(inner), np.ndarray((n,) + inner, item, buf, 0, strides)
    finally:
        close_source(fd)
