"""Gathering a tensor's density map in the scan's one read (scan(maps=True), `scan --html`).

run.py hands each chunk that held a finding to a Gatherer while the chunk is in memory; the
Gatherer says where the chunk's items sit in the tensor's 2-D layout (results.density) and
kernels.density bins them by the format table's bit tests. Chunks without findings cost nothing.
A tensor whose values cannot be placed this way gets a map that says why instead of counts.
"""

from __future__ import annotations

import math

import numpy as np

from ..formats import Query
from ..kernels.constants import table
from ..operators.inputs import as_source
from ..results.build import complex_parts
from ..results.density import MAP_CLASSES, DensityMap, bins, edges, layout

_NAN, _POSINF, _NEGINF, _MISSING = (MAP_CLASSES.index(c) for c in ("nan", "posinf", "neginf",
                                                                "missing"))


def _channels(task) -> np.ndarray:
    """channel[part, class]: the map channel of a NaN / +Inf / -Inf read in part 0 or 1 of a
    value, after the task's sign flip (as build.Tally counts them) and its blank convention."""
    plain = [_MISSING if task.missing else _NAN, _POSINF, _NEGINF]
    swapped = [plain[0], _NEGINF, _POSINF]
    if task.flip == "neg":
        return np.array([swapped, swapped], np.int64)
    if task.flip == "conj":  # the imaginary parts change sign
        return np.array([plain, swapped], np.int64)
    return np.array([plain, plain], np.int64)


class Gatherer:
    """The density map of one task (a tensor or a part of one), chunk by chunk."""

    __slots__ = ("task", "rows", "columns", "_counts", "note", "channel", "_edges", "_items")

    def __init__(self, task):
        self.task = task
        self.rows, self.columns = layout(task.shape)
        self._counts = self._edges = self._items = None  # made at the first finding
        self.channel = _channels(task)
        self.note = ""
        if task.storage is not None and task.storage.overlap:
            self.note = "views that overlap in storage"
        elif task.block_bytes and task.order != "C":
            self.note = "block-quantized data in Fortran order"

    @property
    def counts(self) -> np.ndarray:
        """The counts gathered so far, (len(MAP_CLASSES), bins, bins) int64."""
        if self._counts is None:
            self._counts = np.zeros((len(MAP_CLASSES), bins(self.rows), bins(self.columns)),
                                    np.int64)
            self._edges = edges(self.rows), edges(self.columns)
        return self._counts

    # -- the three shapes of chunk run.py reads ----------------------------------------------

    def elements(self, values: np.ndarray, first: int) -> None:
        """Items first, first + 1, ... of the task's grid, in its storage order."""
        if self._items is None:
            self._items = self._item_place()
        self._bin(values, first, self._items)

    def fields(self, blocks: np.ndarray, fields, first: int) -> None:
        """Block-quantized rows (blocks first, first + 1, ...): each float field of a block is
        placed at the block's first column."""
        if self.note:
            return
        task = self.task
        grid, n = task.grid, len(task.shape)
        rows, columns = self.rows, self.columns
        place = _place(1, grid[-1], rows if n >= 2 else 1, 0, 1, grid[-1], task.block, 0,
                       rows, columns)
        for _, offset, dtype in fields:
            values = blocks[:, offset:offset + dtype.itemsize].view(dtype)[:, 0]
            self._bin(values, first, place)

    def block(self, origin: tuple, values, where) -> None:
        """An N-d block at `origin` (the storage's order), `where(origin, row)` giving the tensor
        index of a row of it (an origin plus the row, its axes permuted)."""
        if self.note:
            return
        if np.ma.isMaskedArray(values):
            mask = np.ma.getmaskarray(values)
            data = np.where(mask, 0, np.ma.getdata(values))
        else:
            mask, data = None, np.asarray(values)
        parts = 1
        if data.dtype.kind == "c":
            data = complex_parts(data)
            parts = 2
        place = self._block_place(origin, data.shape, where, parts)
        if place is None:
            return
        self._bin(data, 0, place)
        if mask is not None and mask.any():
            mask = np.ascontiguousarray(mask, dtype=np.uint8)
            if parts == 2:
                mask = np.repeat(mask.reshape(-1), 2)
            counts = self.counts
            _kernels().bin_mask(mask.reshape(-1), 0, place, *self._edges, _MISSING, counts)

    def result(self) -> DensityMap:
        if self.note:
            return DensityMap(self.rows, self.columns, None, f"no map: {self.note}")
        counts = self.counts
        if self.task.broadcast:
            counts = _spread(counts, self.task, self.rows, self.columns)
        return DensityMap.from_counts(self.rows, self.columns, counts)

    # -- placing ------------------------------------------------------------------------------

    def _item_place(self) -> np.ndarray:
        """Where item i of the task's grid sits (elements in C or Fortran order, complex parts
        last)."""
        task = self.task
        shape, n = task.shape, len(task.shape)
        parts = task.grid[-1] if len(task.grid) > n else 1
        rows, columns = self.rows, self.columns
        if task.order == "F":
            div_r = math.prod(shape[:n - 2]) if n >= 2 else 1
            div_c = math.prod(shape[:n - 1]) if n >= 1 else 1
        else:  # (a 1-D tensor's one row: its row step is the whole row too)
            div_r, div_c = columns, 1
        return _place(parts, div_r, rows if n >= 2 else 1, 0, div_c, columns if n else 1, 1, 0,
                      rows, columns)

    def _block_place(self, origin, shape, where, parts):
        """The place of a C-order block of `shape` at `origin`: a last axis of 2 beyond the
        origin's when `parts` is 2 (complex values split here), or one the origin has when the
        storage reads complex parts; None (and a note) if its axes are not a permutation of the
        tensor's."""
        n = len(self.task.shape)
        rank = len(origin)
        axes = shape[:rank]
        if len(shape) != rank + (parts == 2):
            self.note = f"blocks of rank {len(shape)} for a tensor of rank {n}"
            return None
        zero = (0,) * rank
        start = where(origin, zero)
        dims = []
        for a in range(rank):
            moved = where(zero, tuple(int(a == b) for b in range(rank)))
            dims.append(next((d for d, v in enumerate(moved) if v), None))
        if dims and dims[-1] is not None and dims[-1] >= n:  # the storage's own parts axis
            if parts == 2 or axes[-1] != 2:
                self.note = "an unexpected last block axis"
                return None
            parts, axes, dims = 2, axes[:-1], dims[:-1]
        rows, columns = self.rows, self.columns
        found = {}
        for a, d in enumerate(dims):
            found[d] = (math.prod(axes[a + 1:]), axes[a], int(start[d]))
        div_r, mod_r, row0 = found.get(n - 2, (1, 1, 0)) if n >= 2 else (1, 1, 0)
        div_c, mod_c, col0 = found.get(n - 1, (1, 1, 0)) if n >= 1 else (1, 1, 0)
        return _place(parts, div_r, mod_r, row0, div_c, mod_c, 1, col0, rows, columns)

    def _bin(self, values: np.ndarray, first: int, place: np.ndarray) -> None:
        if self.note:
            return
        a = values
        if a.dtype.kind == "c":  # block() gives complex blocks as their parts
            self.note = "complex values read whole"
            return
        if not (a.flags.c_contiguous and a.flags.aligned):
            a = np.array(a, order="C", copy=True)
        src = as_source(a)
        if src.by_value or src.word.itemsize != a.dtype.itemsize:
            self.note = f"values of type {a.dtype} are not classified by their bits"
            return
        tests = table([src.test(q) for q in (Query.NAN, Query.POSINF, Query.NEGINF,
                                             Query.NONFINITE)], src.word)
        counts = self.counts
        _kernels().bin_words(a.reshape(-1).view(src.word), tests, first, place, *self._edges,
                             self.channel, counts)


def _spread(counts: np.ndarray, task, rows: int, columns: int) -> np.ndarray:
    """The counts of a broadcast view from those of the values read (each read once, at index 0
    of its broadcast dimensions): a leading broadcast dimension multiplies the counts by its
    size, a broadcast row or column dimension spreads them over every row or column."""
    shape, n = task.shape, len(task.shape)
    counts = counts * math.prod(shape[d] for d in task.broadcast if d < n - 2)
    if n >= 2 and n - 2 in task.broadcast:
        counts = counts[:, :1, :] * np.diff(edges(rows))[None, :, None]
    if n >= 1 and n - 1 in task.broadcast:
        counts = counts[:, :, :1] * np.diff(edges(columns))[None, None, :]
    return counts


def _place(parts, div_r, mod_r, row0, div_c, mod_c, col_scale, col0, rows, columns):
    return _kernels().place_array((parts, div_r, mod_r, row0, div_c, mod_c, col_scale, col0,
                                   rows, columns, bins(rows), bins(columns)))


def _kernels():
    """The binning kernels (numba), imported only when a map is gathered: a scan without maps,
    and a small one, never loads numba."""
    from ..kernels import density
    return density
