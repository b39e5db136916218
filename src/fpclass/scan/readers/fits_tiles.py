"""Tile-compressed FITS images whose tiles fpclass decodes itself: unquantized floats compressed
by GZIP_1 (a gzip stream of the tile's big-endian values) or GZIP_2 (the same after HDF5's byte
shuffle), the table holding only the COMPRESSED_DATA column. Each tile is read at its heap
descriptor and inflated on the scan thread that reads it (zlib and the unshuffle kernel release
the GIL), so the parts of a large image decode on every core; astropy's decompression holds the
GIL. Any other tile-compressed image (RICE, HCOMPRESS, PLIO, quantized floats, integers, extra
columns, a scaling or blank keyword) is read through astropy's `section` (fits_read)."""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

import numpy as np

from ..storage.buffers import thread_buffer
from ..storage.grids import BlockGrid
from ..storage.reads import (SourceError, close_source, open_source, read_exactly,
                             source_size)
from ...kernels.unshuffle import unshuffle
from .fits_scaling import Bad, header_int

#: Keywords by which astropy scales or blanks the decoded values: an image with any of them is
#: read through astropy.
SCALING = ("BLANK", "BSCALE", "BZERO", "ZBLANK", "ZSCALE", "ZZERO", "ZDITHER0")
#: Heap descriptors read at a time (16 bytes each at most).
DESCRIPTORS = 4096


@dataclass(frozen=True)
class Tiles:
    """Where the tiles of a GZIP_1/GZIP_2 image lie: the table of heap descriptors at `table`,
    `row` bytes a row (descriptors of 64 bits when `wide`), the heap at `heap`; tiles of `tile`
    elements (NumPy order) of `itemsize`-byte big-endian floats."""

    method: str
    table: int
    row: int
    wide: bool
    heap: int
    tile: tuple
    itemsize: int


def direct_tiles(h, data_at: int, tile: tuple) -> Tiles | None:
    """Tiles when the compressed image's table header `h` (data at byte `data_at`) is one
    decoded here (see the module docstring), else None."""
    method = str(h.get("ZCMPTYPE", "")).strip().upper()
    bitpix = h.get("ZBITPIX")
    form = str(h.get("TFORM1", "")).strip().upper()
    kind = re.fullmatch(r"1?([PQ])B(\(\d+\))?", form)
    if (method not in ("GZIP_1", "GZIP_2") or bitpix not in (-32, -64) or kind is None
            or h.get("TFIELDS") != 1 or str(h.get("TTYPE1", "")).strip() != "COMPRESSED_DATA"
            or str(h.get("ZQUANTIZ", "NONE")).strip().upper() != "NONE"
            or any(k in h for k in SCALING)):
        return None
    try:
        row, rows = header_int(h, "NAXIS1"), header_int(h, "NAXIS2")
        wide = kind.group(1) == "Q"
        if row != (16 if wide else 8):
            return None
        heap = data_at + header_int(h, "THEAP", row * rows)
    except Bad:
        return None
    return Tiles(method, data_at, row, wide, heap, tuple(tile), -bitpix // 8)


def read_tiles(task, tiles: Tiles, first: int, stop: int):
    """Yield (origin, tile) for tiles [first, stop) of the image (C order of the tile grid, the
    order FITS stores them), each decoded into big-endian floats; SourceError for a tile whose
    bytes lie past the end of the file or do not inflate to the tile's size."""
    grid = BlockGrid(task.shape, tiles.tile)
    desc = np.dtype(">i8" if tiles.wide else ">i4")
    value = np.dtype(f">f{tiles.itemsize}")
    fd = open_source(task.source)
    try:
        size = source_size(fd)
        for at in range(first, stop, DESCRIPTORS):
            n = min(DESCRIPTORS, stop - at)
            table = np.empty(n * tiles.row, np.uint8)
            read_exactly(fd, memoryview(table), tiles.table + at * tiles.row, task.source)
            pairs = table.view(desc).reshape(n, 2)
            for k in range(n):
                length, offset = int(pairs[k, 0]), int(pairs[k, 1])
                idx = grid.index(at + k)
                start, count = grid.region(idx)
                nbytes = math.prod(count) * tiles.itemsize
                where = f"tile {at + k} ({tiles.method})"
                begin = tiles.heap + offset
                if offset < 0 or length < 0 or begin + length > size:
                    raise SourceError(f"{where}: its {length} bytes at heap offset {offset} lie "
                                      f"past the end of the file ({size} bytes; truncated?)")
                packed = thread_buffer("packed", length)
                read_exactly(fd, memoryview(packed), begin, task.source)
                try:  # 47: a gzip or a zlib stream, as cfitsio reads either; at most one
                    # byte more than the tile is inflated
                    inflate = zlib.decompressobj(47)
                    data = inflate.decompress(packed, nbytes + 1)
                except zlib.error as e:
                    raise SourceError(f"{where}: corrupt gzip data ({e})") from None
                if len(data) != nbytes or not inflate.eof:
                    raise SourceError(f"{where} inflates to {len(data)} bytes"
                                      f"{'' if inflate.eof else ' before its end'}, {nbytes} "
                                      "expected")
                if tiles.method == "GZIP_2":
                    data = unshuffle(data, tiles.itemsize, thread_buffer("decoded", nbytes))
                yield start, np.frombuffer(data, value, math.prod(count)).reshape(count)
    finally:
        close_source(fd)
