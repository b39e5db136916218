"""Block grids: chunked or compressed datasets (HDF5 chunks, zarr chunks and shards, FITS
tiles), read by the reader that decodes them, and the one walker of their ceiling-division
block grids."""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import import_module

from ..._records import stored_through_slots
from . import Storage, cut

#: Parts of a grid whose blocks are decoded (compressed chunks, tiles) hold about this many
#: decoded bytes: decoding costs far more than reading, so a large compressed dataset is cut into
#: parts of whole blocks small enough that every scan thread decodes some (a 1 GiB dataset: 64
#: parts), each holding one block at a time.
PACKED_PART_BYTES = 16 << 20
#: Parts of a grid whose blocks are read as stored hold about this many bytes: a large chunked
#: array (zarr chunk files, HDF5 chunks) is classified on every scan thread, each part opening
#: its dataset once.
RAW_PART_BYTES = 64 << 20


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Grid(Storage):
    """Dataset `member` of `source` (a path inside the file; "" for the file itself), stored in
    `nblocks` blocks of `nbytes` in all, which the readers module `reader` reads and decodes with
    `read_blocks(task, chunk_bytes)`: (origin, array) in C order of the block grid, `first` /
    `count` of the task selecting blocks. `offset` locates the dataset where the reader needs it
    (a FITS HDU); `decode` is what the reader applies to the stored values (a CF policy, a FITS
    scaling, the task's `element` being then the decoded dtype; FITS tiles it decodes itself).
    `packed`: the blocks are decoded by a codec (compressed chunks or tiles), so the task is cut
    into parts of about PACKED_PART_BYTES that decode on every scan thread (RAW_PART_BYTES
    otherwise)."""

    source: str
    reader: str
    nbytes: int
    nblocks: int
    member: str = ""
    offset: int = 0
    decode: object = None
    packed: bool = False
    kind = "dataset"
    flat = False

    def units(self, task) -> int:
        return self.nblocks

    def parts(self, task, task_bytes):
        task_bytes = min(task_bytes, PACKED_PART_BYTES if self.packed else RAW_PART_BYTES)
        if self.nblocks <= 1 or self.nbytes <= task_bytes:
            return []
        return cut(self.nblocks, self.nbytes, task_bytes)

    def blocks(self, task, chunk_bytes: int):
        reader = import_module(f"{__package__.rpartition('.')[0]}.readers.{self.reader}")
        yield from reader.read_blocks(task, chunk_bytes)


class BlockGrid:
    """An array of `shape` stored in blocks of `block` (the edge blocks cut short): `grid`
    blocks per axis, walked in C order of the grid."""

    __slots__ = ("shape", "block", "grid")

    def __init__(self, shape: tuple, block: tuple):
        self.shape, self.block = tuple(shape), tuple(block)
        self.grid = tuple(-(-n // max(b, 1)) for n, b in zip(self.shape, self.block))

    @property
    def count(self) -> int:
        return math.prod(self.grid)

    def index(self, k: int) -> tuple:
        """The grid index of block `k` (C order)."""
        idx = []
        for n in reversed(self.grid):
            k, i = divmod(k, n)
            idx.append(i)
        return tuple(reversed(idx))

    def region(self, idx: tuple, extent: tuple | None = None) -> tuple:
        """(start, count) in the array of the blocks [idx, idx + extent) (default one block)."""
        extent = extent or (1,) * len(idx)
        start = tuple(i * b for i, b in zip(idx, self.block))
        stop = tuple(min((i + e) * b, n) for i, e, b, n in zip(idx, extent, self.block,
                                                                 self.shape))
        return start, tuple(e - s for s, e in zip(start, stop))

    def each(self, first: int, stop: int):
        """Yield (grid index, start, count) of the blocks [first, stop), one at a time."""
        for k in range(first, stop):
            idx = self.index(k)
            yield (idx,) + self.region(idx)

    def boxes(self, first: int, stop: int, limit: int):
        """Yield (grid index, extent) boxes of blocks covering [first, stop), see `boxes`."""
        yield from boxes(self.grid, first, stop, limit)


def boxes(grid: tuple, first: int, stop: int, limit: int):
    """Yield (start, extent) boxes of an array of shape `grid` that cover its items [first, stop)
    in C order, in order, each contiguous in C order and of at most `limit` items (a box of one
    item along every axis may be the most that fits)."""
    if first >= stop:
        return
    if not grid:  # a 0-d array: one item
        yield (), ()
        return
    if len(grid) == 1:
        for a in range(first, stop, limit):
            yield (a,), (min(limit, stop - a),)
        return
    inner = math.prod(grid[1:])
    i, j = divmod(first, inner)
    if j or stop - first < inner:  # a part of one slab, then the rest
        end = min(stop, (i + 1) * inner)
        for s, e in boxes(grid[1:], j, end - i * inner, limit):
            yield (i,) + s, (1,) + e
        yield from boxes(grid, end, stop, limit)
        return
    whole = stop // inner
    rest = (0,) * (len(grid) - 1)
    if inner <= limit:
        per = limit // inner
        for a in range(i, whole, per):
            yield (a,) + rest, (min(per, whole - a),) + tuple(grid[1:])
    else:
        for a in range(i, whole):
            for s, e in boxes(grid[1:], 0, inner, limit):
                yield (a,) + s, (1,) + e
    yield from boxes(grid, whole * inner, stop, limit)
