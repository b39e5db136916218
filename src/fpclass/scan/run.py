"""run_task: one task in, one result out. Reads a CHECK task's bytes in chunks (or blocks), has
each classified and tallied by results.build, and answers every other task without reading. Never
raises for bad data: the result is then unchecked, with the reason."""

from __future__ import annotations

import math
from dataclasses import replace

from .._oserrors import describe
from .storage import CHUNK_BYTES
from .storage.classified import FiniteBlock
from .storage.reads import SourceError
from .dtypes import can_hold_nonfinite, np_dtype
from .density import Gatherer
from .overlap import run_overlap
from .missing import cf
from .readers import ReaderError
from ..operators.read_sieve import read_sieve
from ..results import build
from ..results.report import TensorResult
from ..results.status import CHECKED
from .tasks import CHECK, Task

DEFAULT_MAX_LOCATIONS = 5


class Interrupted(Exception):
    """The scan was asked to stop (Ctrl-C) while this task ran."""


def run_task(task: Task, max_locations: int = DEFAULT_MAX_LOCATIONS, *,
             chunk_bytes: int = CHUNK_BYTES, stop=None, debug: bool = False,
             maps: bool = False) -> TensorResult:
    """Check one task: counts of NaN/+Inf/-Inf and the first `max_locations` locations, read in
    chunks of `chunk_bytes` (with `maps`, also the density map of its findings). Never raises for
    bad data: the result is then unchecked with the reason (with `debug`, unexpected errors
    propagate)."""
    if task.status != CHECK:
        return build.answered(task.file, task.name, task.dtype, task.shape, task.status,
                              task.reason, first=task.first)
    try:
        if not can_hold_nonfinite(task.element):  # checked without reading, counted once
            n = math.prod(task.shape) if task.first == 0 else 0
            return build.answered(task.file, task.name, task.dtype, task.shape, CHECKED,
                                  first=task.first, values=n)
        if not task.part_bytes:
            return _run_empty(task)
        gather = Gatherer(task) if maps else None
        if task.block_bytes:
            return with_map(_run_blocks(task, max_locations, chunk_bytes, stop, gather), gather)
        if task.storage.overlap:
            return with_map(run_overlap(task, max_locations, chunk_bytes, stop, Interrupted),
                           gather)
        if not task.storage.flat:
            return with_map(_run_nd(task, max_locations, chunk_bytes, stop, gather), gather)
        return with_map(_run_elements(task, max_locations, chunk_bytes, stop, gather), gather)
    except Interrupted:
        return _unchecked(task, "interrupted before it was fully checked")
    except (SourceError, ReaderError) as e:
        return _unchecked(task, str(e))
    except OSError as e:
        return _unchecked(task, f"cannot read: {describe(e)}")
    except Exception as e:
        if debug:
            raise
        return _unchecked(task, f"internal error: {type(e).__name__}: {e}")


_unchecked = build.unchecked_item


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
    return build.checked(task.file, task.name, task.dtype, task.shape, first=task.first,
                         stats=build.ValueStats() if task.stats else None,
                         declared_range=task.declared_range)


def new_tally(task: Task, limit: int) -> build.Tally:
    """The tally of one task: its sign flip (torch's lazy negation / conjugation), its blank
    convention (a declared NaN blank is counted as missing, not as NaN), and its broadcast
    dimensions (read once, each value standing for as many as their sizes say)."""
    flip = task.flip
    stats = task.stats or bool(task.declared_range)  # actual_range is checked on them
    repeat = math.prod(task.shape[d] for d in task.broadcast) if task.broadcast else 1
    # positional: one tally per task, and a header may declare 250,000 tasks
    return build.Tally(task.file, task.name, task.dtype, task.shape, limit, task.first,
                       flip == "neg", flip == "conj", task.missing, repeat, True, stats,
                       task.declared_range)


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


def _found(tally: build.Tally) -> int:
    return tally.nan + tally.posinf + tally.neginf + tally.missing


def with_map(result: TensorResult, gather) -> TensorResult:
    """`result` with the gathered map, when maps are asked for and it has findings."""
    if gather is None or not result.nonfinite:
        return result
    return replace(result, density=gather.result())


def _run_elements(task, max_locations, chunk_bytes, stop, gather=None):
    dtype = np_dtype(task.element)
    tally = new_tally(task, max_locations)
    # A chunk the sieve kept (None) is all finite: its statistics join the tally once, at the end.
    # Not for a lazily conjugated tensor: the sieve's one row cannot negate every other value.
    sieve = read_sieve(dtype, task.part_bytes) \
        if task.storage.sieves and task.flip != "conj" else None
    extra = (sieve,) if sieve is not None else ()
    for first, chunk in task.storage.chunks(task, dtype.itemsize, chunk_bytes, *extra):
        if stop is not None and stop.is_set():
            raise Interrupted
        if chunk is not None:
            add_elements(task, tally, first, chunk, gather)
    if sieve is not None and sieve.values:
        tally.add_finite(sieve.stats(), sieve.values, sieve.values * dtype.itemsize)
    return tally.result()


def add_elements(task: Task, tally: build.Tally, first: int, chunk, gather=None) -> None:
    """Classify `chunk` (uint8, whole elements of `task`, the first being item `first`) into
    `tally`; a `gather` (a density-map Gatherer) also bins a chunk that added findings."""
    v = chunk.view(np_dtype(task.element))
    before = _found(tally)
    if task.flip == "conj":  # rows are (element, part)
        tally.add(v.reshape(-1, 2), lambda r, f=first: _index(task, f + 2 * r[0] + r[1]),
                  chunk.size)
    else:
        tally.add(v, lambda r, f=first: _index(task, f + r[0]), chunk.size)
    if gather is not None and _found(tally) != before:
        gather.elements(v, first)


def _run_nd(task, max_locations, chunk_bytes, stop, gather=None):
    """A task read in N-d blocks, each with its origin; the storage maps them to indices."""
    where = task.storage.where(task)
    tally = new_tally(task, max_locations)
    for origin, block in task.storage.blocks(task, chunk_bytes):
        if stop is not None and stop.is_set():
            raise Interrupted
        if isinstance(block, FiniteBlock):  # classified by its reader: nothing to locate
            tally.add_finite(block.stats, block.values, block.nbytes)
            continue
        before = _found(tally)
        tally.add(block, lambda r, o=origin: where(o, r), block.nbytes, cf.out_of_range(block))
        if gather is not None and _found(tally) != before:
            gather.block(origin, block, where)
    return tally.result()


def _run_blocks(task, max_locations, chunk_bytes, stop, gather=None):
    fields = block_fields(task)
    tally = new_tally(task, max_locations)
    for first, chunk in task.storage.chunks(task, task.block_bytes, chunk_bytes):
        if stop is not None and stop.is_set():
            raise Interrupted
        add_blocks(task, tally, fields, first, chunk, gather)
    return tally.result()


def block_fields(task: Task) -> list:
    """(name, offset, numpy dtype) of each float field of a block-quantized task's blocks."""
    return [(f.name, f.offset, np_dtype(f.element)) for f in task.fields]


def add_blocks(task: Task, tally: build.Tally, fields: list, first: int, chunk,
               gather=None) -> None:
    """Classify the `fields` of `chunk` (uint8, whole blocks of `task`, the first being block
    `first`) into `tally`; a `gather` also bins a chunk that added findings."""
    before = _found(tally)
    blocks = chunk.reshape(-1, task.block_bytes)
    tally.add_fields(blocks, fields, lambda k, f=first: _index(task, f + k), chunk.size)
    if gather is not None and _found(tally) != before:
        gather.fields(blocks, fields, first)


def needs_reading(task: Task) -> bool:
    """Whether `task` reads data; every other task is answered at once, without I/O."""
    return task.status == CHECK and task.part_bytes > 0 and can_hold_nonfinite(task.element)
