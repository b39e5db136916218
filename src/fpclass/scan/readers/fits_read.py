"""Reading FITS data planned by `fits`: scaled table columns decoded to their physical values
(their bands of rows read by storage.bands), scaled images decoded per box of elements, GZIP
tiles of floats decoded here (`fits_tiles`), and other tile-compressed images through astropy's
`section`, whole tiles at a time.
Memory follows `chunk_bytes`, never an HDU's size."""

from __future__ import annotations

import io
import itertools
import math
import threading
import warnings

import numpy as np

from ..storage.grids import BlockGrid, boxes
from ..storage.reads import (SourceError, Window, close_source, open_source, read_exactly,
                             source_size)
from ..tasks import Task
from .fits_scaling import Scaling, _astropy, _line
from .fits_tiles import Tiles, read_tiles

_QUIET = threading.Lock()



def read_blocks(task: Task, chunk_bytes: int):
    """Yield (origin, block) over the blocks [first, first + count) of an image of Grid storage:
    elements of a scaled image (read here, decoded by its scaling), tiles of a compressed one
    (read through astropy's `section`)."""
    where = task.storage
    stop = where.nblocks if task.count < 0 else task.first + task.count
    if isinstance(where.decode, Tiles):  # tiles decoded here, on this thread
        yield from read_tiles(task, where.decode, task.first, stop)
    elif where.decode:
        yield from _scaled_image(task, Scaling.decode(where.decode), task.first, stop, chunk_bytes)
    else:
        yield from _sections(task, task.first, stop, chunk_bytes)


def decode_bands(task: Task, bands, chunk_bytes: int):
    """The bands of rows of a scaled table column (Bands storage), as physical values."""
    scaling = Scaling.decode(task.storage.decode)
    for origin, raw in bands:
        yield origin, scaling.values(raw)


def _scaled_image(task, scaling, first, stop, chunk_bytes):
    """Elements [first, stop) of a scaled image (its blocks are its elements, stored in C order
    from the storage's `offset`) in boxes of about `chunk_bytes` stored bytes, as physical
    values."""
    where = task.storage
    raw = np.dtype(scaling.raw)
    limit = max(1, chunk_bytes // raw.itemsize)
    fd = open_source(where.source)
    try:
        size = source_size(fd)
        if where.offset + where.nbytes > size:
            raise SourceError(f"data ends at byte {where.offset + where.nbytes} but "
                              f"{where.source} has {size} bytes (truncated?)")
        for start, extent in boxes(task.shape, first, stop, limit):
            flat = int(np.ravel_multi_index(start, task.shape))
            buf = np.empty(math.prod(extent) * raw.itemsize, np.uint8)
            read_exactly(fd, memoryview(buf), where.offset + flat * raw.itemsize, where.source)
            yield start, scaling.values(buf.view(raw).reshape(extent))
    finally:
        close_source(fd)


def _sections(task, first, stop, chunk_bytes):
    """Blocks [first, stop) of an image read through astropy: whole tiles of a compressed image
    (its blocks are its tiles), or elements of a scaled one (its blocks are its elements),
    grouped into boxes of about `chunk_bytes`."""
    fits = _astropy()
    offset = task.storage.offset
    with io.BufferedReader(Window(task.source, offset)) as window:
        try:
            # catch_warnings swaps process-wide state: one thread at a time.
            with _QUIET, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hdul = fits.open(window, memmap=False, lazy_load_hdus=True,
                                 ignore_missing_simple=True)
                hdu = hdul[0]
        except Exception as e:
            raise SourceError(f"astropy cannot read the HDU at byte {offset}: "
                              f"{_line(e)}") from None
        with hdul:
            shape = getattr(hdu, "shape", None)
            if shape is None or tuple(shape) != task.shape:
                raise SourceError(f"the HDU at byte {offset} is not the image of shape "
                                  f"{list(task.shape)} planned")
            if isinstance(hdu, fits.CompImageHDU):
                tile = tuple(int(t) for t in hdu.tile_shape)
            else:
                tile = (1,) * len(task.shape)
            grid = BlockGrid(task.shape, tile).grid
            limit = max(1, chunk_bytes // (math.prod(tile) * np.dtype(task.element).itemsize))
            # Boxes of whole tiles, one astropy call each (a call costs about 1 ms on top of the
            # decompression). Locations come in tile order, the order tiles are stored: a box is
            # yielded whole where its C order is that order (tiles that span the image beyond
            # their first axis of more than one pixel: row tiles, plane tiles), else tile by tile.
            cut = next((k for k, t in enumerate(tile) if t > 1), len(tile))
            whole = not any(g > 1 for g in grid[cut + 1:])
            section = hdu.section
            for start, extent in boxes(grid, first, stop, limit):
                index = tuple(slice(s * t, min((s + e) * t, n))
                              for s, e, t, n in zip(start, extent, tile, task.shape))
                try:
                    with np.errstate(all="ignore"):  # scaling past the float range gives Inf
                        block = section[index]
                except Exception as e:
                    raise SourceError(f"astropy cannot read {_box(index)}: {_line(e)}") from None
                origin = tuple(s.start for s in index)
                if whole:
                    yield origin, block
                    continue
                for k in itertools.product(*(range(e) for e in extent)):
                    part = tuple(slice(i * t, (i + 1) * t) for i, t in zip(k, tile))
                    yield tuple(o + p.start for o, p in zip(origin, part)), block[part]


def _box(index) -> str:
    return "[" + ", ".join(f"{s.start}:{s.stop}" for s in index) + "]"
