"""Running one task: its bytes read chunk by chunk (or block by block) and classified, the
counts, first locations and sign flips tallied into its result."""

from __future__ import annotations

import math

import numpy as np

from .. import count_inf, count_nan, count_nonfinite, isnan, isposinf, locate_nonfinite
from .storage import CHUNK_BYTES
from .storage.reads import SourceError
from .dtypes import can_hold_nonfinite, np_dtype
from .overlap import run_overlap
from .readers import ReaderError
from ..results.report import CHECKED, Location, TensorResult
from .tasks import CHECK, UNCHECKED, Task

DEFAULT_MAX_LOCATIONS = 5


class Interrupted(Exception):
    """The scan was asked to stop (Ctrl-C) while this task ran."""


def run_task(task: Task, max_locations: int = DEFAULT_MAX_LOCATIONS, *,
             chunk_bytes: int = CHUNK_BYTES, stop=None, debug: bool = False) -> TensorResult:
    """Check one task: counts of NaN/+Inf/-Inf and the first `max_locations` locations, read in
    chunks of `chunk_bytes`. Never raises for bad data: the result is then unchecked with the
    reason (with `debug`, unexpected errors propagate)."""
    if task.status != CHECK:
        return TensorResult(task.file, task.name, task.dtype, task.shape, task.status,
                            reason=task.reason, first=task.first)
    try:
        if not can_hold_nonfinite(task.element):
            n = math.prod(task.shape)
            return TensorResult(task.file, task.name, task.dtype, task.shape, CHECKED,
                                values_checked=n if task.first == 0 else 0, first=task.first)
        if not task.part_bytes:
            return _run_empty(task)
        if task.block_bytes:
            return _run_blocks(task, max_locations, chunk_bytes, stop)
        if task.storage.overlap:
            return run_overlap(task, max_locations, chunk_bytes, stop, Interrupted)
        if not task.storage.flat:
            return _run_nd(task, max_locations, chunk_bytes, stop)
        return _run_elements(task, max_locations, chunk_bytes, stop)
    except Interrupted:
        return _unchecked(task, "interrupted before it was fully checked")
    except (SourceError, ReaderError) as e:
        return _unchecked(task, str(e))
    except OSError as e:
        return _unchecked(task, f"cannot read: {e.strerror or e}")
    except Exception as e:
        if debug:
            raise
        return _unchecked(task, f"internal error: {type(e).__name__}: {e}")


def _unchecked(task: Task, reason: str) -> TensorResult:
    return TensorResult(task.file, task.name, task.dtype, task.shape, UNCHECKED, reason=reason,
                        first=task.first)


def interrupted_result(task: Task) -> TensorResult:
    """The result of a task that Ctrl-C stopped before it ran: unchecked for a CHECK task, the
    task's own answer otherwise."""
    if task.status == CHECK:
        return _unchecked(task, "interrupted before it was checked")
    return run_task(task)


def _run_empty(task: Task) -> TensorResult:
    """A part with no stored bytes: checked when it has no items, which needs no reading."""
    items = task.items if task.count < 0 else task.count
    if items:
        return _unchecked(task, f"{items} items but no data bytes")
    return TensorResult(task.file, task.name, task.dtype, task.shape, CHECKED, first=task.first)


def _classify(values, limit):
    """(nan, +inf, -inf, index rows, classes) of an array of any shape and strides, index rows
    (tuples, C order) at most `limit`."""
    nonfinite = int(count_nonfinite(values))
    if not nonfinite:
        return 0, 0, 0, [], []
    nan = int(count_nan(values))
    pinf = int(count_inf(values, detect_negative=False))
    ninf = nonfinite - nan - pinf  # values are real: non-finite is exactly NaN, +Inf or -Inf
    if limit <= 0:
        return nan, pinf, ninf, [], []
    rows = locate_nonfinite(values, limit)
    hit = values[tuple(rows.T)] if values.ndim else values.reshape(1)
    classes = np.where(isnan(hit), "nan", np.where(isposinf(hit), "posinf", "neginf"))
    return nan, pinf, ninf, [tuple(r) for r in rows.tolist()], classes.tolist()


_SWAPPED = {"posinf": "neginf", "neginf": "posinf", "nan": "nan"}


class _Tally:
    """The counts and first locations of one task, as its blocks are classified. Applies the
    task's sign flip (torch's lazy negation / conjugation) and its blank convention (a declared
    NaN blank is counted as missing, not as NaN)."""

    def __init__(self, task: Task, limit: int):
        self.task, self.limit = task, limit
        # Values of a broadcast dimension are read once and stand for `repeat` values each.
        self.repeat = math.prod(task.shape[d] for d in task.broadcast)
        self.nan = self.posinf = self.neginf = self.missing = 0
        self.values = self.bytes = 0
        self.locations: list = []

    def add(self, values, where, nbytes: int) -> None:
        """Classify `values` (the last axis holds the complex parts when the task flips
        conjugates); `where(row)` gives the location index of an index row of `values`. The
        masked values of a masked array are a reader's blanks (FITS BLANK, TNULL; decoded CF
        values outside the valid range or equal to a fill value): missing."""
        room = self.limit - len(self.locations)
        blank = np.ma.getmaskarray(values) if np.ma.isMaskedArray(values) else None
        if blank is not None:
            values = np.where(blank, 0, np.ma.getdata(values))
        if self.task.flip == "conj":  # only the imaginary parts change sign
            re = _classify(values[..., 0], room)
            im = _classify(values[..., 1], room)
            counts = (re[0] + im[0], re[1] + im[2], re[2] + im[1])
            hits = sorted([(r + (0,), c) for r, c in zip(re[3], re[4])]
                          + [(r + (1,), _SWAPPED[c]) for r, c in zip(im[3], im[4])])[:room]
        else:
            nan, pinf, ninf, rows, classes = _classify(values, room)
            if self.task.flip == "neg":
                pinf, ninf, classes = ninf, pinf, [_SWAPPED[c] for c in classes]
            counts, hits = (nan, pinf, ninf), list(zip(rows, classes))
        nan, pinf, ninf = (c * self.repeat for c in counts)
        if self.task.missing:
            self.missing += nan
            hits = [(r, "missing" if c == "nan" else c) for r, c in hits]
        else:
            self.nan += nan
        self.posinf += pinf
        self.neginf += ninf
        if blank is not None and blank.any():
            self.missing += int(np.count_nonzero(blank))
            rows = [(tuple(r), "missing") for r in np.argwhere(blank)[:room].tolist()]
            hits = sorted(hits + rows)[:room]
        self.locations += [Location(where(r), c) for r, c in hits]
        self.values += values.size * self.repeat
        self.bytes += nbytes

    def result(self) -> TensorResult:
        t = self.task
        return TensorResult(t.file, t.name, t.dtype, t.shape, CHECKED, self.nan, self.posinf,
                            self.neginf, tuple(self.locations), self.values, self.bytes,
                            first=t.first, missing=self.missing)


def _index(task: Task, item: int) -> tuple:
    """The index in the tensor of flat item `item`: the element's index, then the complex part
    (a block's first element for blocks). Pure Python: numpy unravels at most 64 dimensions."""
    grid = task.grid
    if not grid:
        return ()
    rank = len(task.shape) if task.order == "F" else len(grid)
    # The axes from fastest to slowest: a complex element's parts are adjacent in either order.
    fastest_first = [*range(len(grid) - 1, rank - 1, -1),
                     *(range(rank) if task.order == "F" else range(rank - 1, -1, -1))]
    idx = [0] * len(grid)
    for axis in fastest_first:
        item, idx[axis] = divmod(item, grid[axis])
    if task.block_bytes:
        idx[-1] *= task.block
    return tuple(idx)


def _run_elements(task, max_locations, chunk_bytes, stop):
    dtype = np_dtype(task.element)
    tally = _Tally(task, max_locations)
    for first, chunk in task.storage.chunks(task, dtype.itemsize, chunk_bytes):
        if stop is not None and stop.is_set():
            raise Interrupted
        v = chunk.view(dtype)
        if task.flip == "conj":  # rows are (element, part)
            tally.add(v.reshape(-1, 2), lambda r, f=first: _index(task, f + 2 * r[0] + r[1]),
                      chunk.size)
        else:
            tally.add(v, lambda r, f=first: _index(task, f + r[0]), chunk.size)
    return tally.result()


def _run_nd(task, max_locations, chunk_bytes, stop):
    """A task read in N-d blocks, each with its origin; the storage maps them to indices."""
    where = task.storage.where(task)
    tally = _Tally(task, max_locations)
    for origin, block in task.storage.blocks(task, chunk_bytes):
        if stop is not None and stop.is_set():
            raise Interrupted
        tally.add(block, lambda r, o=origin: where(o, r), block.nbytes)
    return tally.result()


def _run_blocks(task, max_locations, chunk_bytes, stop):
    fields = [(f, np_dtype(f.element)) for f in task.fields]
    nan = pinf = ninf = nbytes = values = 0
    locations: list = []
    for first, chunk in task.storage.chunks(task, task.block_bytes, chunk_bytes):
        if stop is not None and stop.is_set():
            raise Interrupted
        blocks_ = chunk.reshape(-1, task.block_bytes)
        found = []
        for order, (f, dt) in enumerate(fields):
            v = blocks_[:, f.offset:f.offset + dt.itemsize].view(dt)[:, 0]
            a, b, c, rows, classes = _classify(v, max_locations - len(locations))
            nan, pinf, ninf = nan + a, pinf + b, ninf + c
            found += [(r[0], order, cls, f.name) for r, cls in zip(rows, classes)]
            values += v.size
        found.sort()
        room = max_locations - len(locations)
        locations += [Location(_index(task, first + p), cls, name)
                      for p, _, cls, name in found[:room]]
        nbytes += chunk.size
    return TensorResult(task.file, task.name, task.dtype, task.shape, CHECKED, nan, pinf, ninf,
                        tuple(locations), values, nbytes, first=task.first)


def needs_reading(task: Task) -> bool:
    """Whether `task` reads data; every other task is answered at once, without I/O."""
    return task.status == CHECK and task.part_bytes > 0 and can_hold_nonfinite(task.element)
