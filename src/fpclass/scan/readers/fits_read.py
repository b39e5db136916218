"""Reading FITS data planned by `fits`: table columns in bands of rows (raw floats seen as
strided views; scaled columns decoded to their physical values), scaled images decoded per box
of elements, and tile-compressed images through astropy's `section`, whole tiles at a time.
Memory follows `chunk_bytes`, never an HDU's size."""

from __future__ import annotations

import io
import itertools
import math
import os
import threading
import warnings

import numpy as np

from ..storage.reads import READ_FLAGS, SourceError, Window, read_exactly
from ..tasks import Task
from .fits_scaling import Scaling, _astropy, _line

_QUIET = threading.Lock()



def read_blocks(task: Task, chunk_bytes: int):
    """Yield (origin, block) over the blocks [first, first + count) of a DATASET task: table rows
    (read here) or tiles / elements of an image read through astropy's `section`."""
    stop = task.blocks if task.count < 0 else task.first + task.count
    scaling = Scaling.decode(task.member) if task.member else None
    if task.strides and scaling:
        for origin, raw in _rows(task, task.first, stop, chunk_bytes, scaling.raw):
            yield origin, scaling.values(raw)
    elif task.strides:
        yield from _rows(task, task.first, stop, chunk_bytes, task.element)
    elif scaling:
        yield from _scaled_image(task, scaling, task.first, stop, chunk_bytes)
    else:
        yield from _sections(task, task.first, stop, chunk_bytes)


def _scaled_image(task, scaling, first, stop, chunk_bytes):
    """Elements [first, stop) of a scaled image (its blocks are its elements, stored in C order
    from `task.offset`) in boxes of about `chunk_bytes` stored bytes, as physical values."""
    raw = np.dtype(scaling.raw)
    limit = max(1, chunk_bytes // raw.itemsize)
    fd = os.open(task.source, READ_FLAGS)
    try:
        size = os.fstat(fd).st_size
        if task.offset + task.nbytes > size:
            raise SourceError(f"data ends at byte {task.offset + task.nbytes} but "
                              f"{task.source} has {size} bytes (truncated?)")
        for start, extent in boxes(task.shape, first, stop, limit):
            flat = int(np.ravel_multi_index(start, task.shape))
            buf = np.empty(math.prod(extent) * raw.itemsize, np.uint8)
            read_exactly(fd, memoryview(buf), task.offset + flat * raw.itemsize, task.source)
            yield start, scaling.values(buf.view(raw).reshape(extent))
    finally:
        os.close(fd)


def _rows(task, first, stop, chunk_bytes, element):
    """Rows [first, stop) of a table column of stored `element`s in bands of about
    `chunk_bytes`, each a strided view of the band's bytes (unaligned when the row length is not
    a multiple of the element)."""
    (row,) = task.strides
    item = np.dtype(element)
    inner = task.grid[1:]  # a complex column's parts are a last axis of 2
    field = math.prod(inner) * item.itemsize
    strides, step = [], item.itemsize
    for n in reversed(inner):
        strides.insert(0, step)
        step *= n
    strides = (row,) + tuple(strides)
    per = max(1, chunk_bytes // max(row, 1))
    fd = os.open(task.source, READ_FLAGS)
    try:
        size = os.fstat(fd).st_size
        end = task.offset + (task.shape[0] - 1) * row + field
        if task.shape[0] and end > size:
            raise SourceError(f"data ends at byte {end} but {task.source} has {size} bytes "
                              "(truncated?)")
        buf = None
        for a in range(first, stop, per):
            n = min(per, stop - a)
            nbytes = (n - 1) * row + field
            if buf is None or buf.size < nbytes:
                buf = np.empty(nbytes, np.uint8)
            read_exactly(fd, memoryview(buf)[:nbytes], task.offset + a * row, task.source)
            block = np.ndarray((n,) + inner, item, buf, 0, strides)
            yield (a,) + (0,) * len(inner), block
    finally:
        os.close(fd)


def _sections(task, first, stop, chunk_bytes):
    """Blocks [first, stop) of an image read through astropy: whole tiles of a compressed image
    (its blocks are its tiles), or elements of a scaled one (its blocks are its elements),
    grouped into boxes of about `chunk_bytes`."""
    fits = _astropy()
    with io.BufferedReader(Window(task.source, task.offset)) as window:
        try:
            # catch_warnings swaps process-wide state: one thread at a time.
            with _QUIET, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hdul = fits.open(window, memmap=False, lazy_load_hdus=True,
                                 ignore_missing_simple=True)
                hdu = hdul[0]
        except Exception as e:
            raise SourceError(f"astropy cannot read the HDU at byte {task.offset}: "
                              f"{_line(e)}") from None
        with hdul:
            shape = getattr(hdu, "shape", None)
            if shape is None or tuple(shape) != task.shape:
                raise SourceError(f"the HDU at byte {task.offset} is not the image of shape "
                                  f"{list(task.shape)} planned")
            if isinstance(hdu, fits.CompImageHDU):
                tile = tuple(int(t) for t in hdu.tile_shape)
            else:
                tile = (1,) * len(task.shape)
            grid = tuple(-(-n // t) for n, t in zip(task.shape, tile))
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


def boxes(grid: tuple, first: int, stop: int, limit: int):
    """Yield (start, extent) boxes of an array of shape `grid` that cover its items [first, stop)
    in C order, in order, each contiguous in C order and of at most `limit` items (a box of one
    item along every axis may be the most that fits)."""
    if first >= stop:
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
