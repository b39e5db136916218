"""The scan engine: plan (paths → tasks), run_task (task → result), execute (tasks over a thread
pool), assemble (results → report). Each step takes and returns small picklable values, so another
scheduler (dask) can run the same tasks."""

from __future__ import annotations

import functools
import math
import os
import threading
import time

import numpy as np

from .. import count_inf, count_nan, count_nonfinite, isnan, isposinf, locate_nonfinite
from . import scratch, views
from .chunks import CHUNK_BYTES, SourceError, blocks, chunks, strided_layout
from .dtypes import can_hold_nonfinite, np_dtype
from .overlap import run_overlap
from .readers import ReaderError, planner
from ..results.report import CHECKED, Location, Problem, ScanReport, TensorResult, merge_parts, parse_fail_on
from .tasks import (CHECK, DATASET, FILE, PROBLEM, RAW, SKIPPED, STRIDED, UNCHECKED, Task, problem,
                    skipped)
from .paths import expand

#: Raw tensors larger than this are split into parts that run in parallel.
TASK_BYTES = 256 << 20
DEFAULT_MAX_LOCATIONS = 5


class Interrupted(Exception):
    """The scan was asked to stop (Ctrl-C) while this task ran."""


class PlanInterrupted(KeyboardInterrupt):
    """Ctrl-C while planning; `tasks` holds what was planned so far (a report can still be made)."""

    def __init__(self, tasks: list):
        super().__init__("interrupted while reading file headers")
        self.tasks = tasks


def plan(paths, *, include=(), exclude=(), task_bytes: int = TASK_BYTES,
         debug: bool = False, allow_globals=()) -> list:
    """Tasks for every tensor in `paths` (files or directories), plus FILE markers, file problems
    and skipped files. Reads headers only. Shards reached through an index are planned once; a
    file another file reads (external data, a shard) is not reported again. Ctrl-C raises
    PlanInterrupted holding the tasks planned so far. `allow_globals` go to the PyTorch reader."""
    tasks: list = []
    try:
        walk = expand(paths, include, exclude)
        tasks += [problem(p, r) for p, r in walk.problems]
        _plan_files(walk.found, tasks, task_bytes, debug, _globals(allow_globals))
        read = {os.path.realpath(f) for f in {t.source or t.file for t in tasks
                                              if t.status != PROBLEM}}
        unread = [problem(p, r) for p, r in walk.unreadable if os.path.realpath(p) not in read]
        unread += [skipped(p, r) for p, r in walk.skipped if os.path.realpath(p) not in read]
    except KeyboardInterrupt:
        raise PlanInterrupted(tasks) from None
    return tasks + unread


def _globals(names) -> tuple:
    """`allow_globals` as a tuple of "module.Name" strings; ValueError otherwise."""
    names = (names,) if isinstance(names, str) else tuple(names)
    for n in names:
        if not (isinstance(n, str) and "." in n.strip(".") and " " not in n):
            raise ValueError(f"allow_globals must name globals as 'module.Name', got {n!r}")
    return names


def _plan_files(found, tasks, task_bytes, debug, allow_globals=()) -> None:
    # Indexes first, so a shard listed by an index and also found directly is planned once.
    found = sorted(found, key=lambda f: f[1] != "safetensors-index")
    seen: set = set()
    for path, kind in found:
        real = os.path.realpath(path)
        if real in seen:
            continue
        try:
            options = {"allow_globals": allow_globals} if allow_globals and kind == "pytorch" \
                else {}
            file_tasks = planner(kind)(path, **options)
        except ReaderError as e:
            seen.add(real)
            tasks.append(problem(path, str(e)))
            continue
        except OSError as e:
            seen.add(real)
            tasks.append(problem(path, f"cannot read: {e.strerror or e}"))
            continue
        except Exception as e:  # a reader bug must not stop the other files
            if debug:
                raise
            seen.add(real)
            tasks.append(problem(path, f"internal error: {type(e).__name__}: {e}"))
            continue
        dropped = set()
        for t in file_tasks:
            if t.status == FILE:
                r = os.path.realpath(t.file)
                if r in seen:
                    dropped.add(t.file)
                seen.add(r)
        tasks += [p for t in file_tasks if t.file not in dropped for p in _split(t, task_bytes)]


def _split(task: Task, task_bytes: int) -> list:
    """A RAW CHECK task cut into parts of about `task_bytes`; a DATASET task into parts of
    whole blocks (its reader's chunks) of about `task_bytes`."""
    if task.status == CHECK and task.storage == DATASET and task.blocks > 1 \
            and task.nbytes > task_bytes:
        per = max(1, task.blocks * task_bytes // task.nbytes)
        return [task.part(first, min(per, task.blocks - first))
                for first in range(0, task.blocks, per)]
    if task.status != CHECK or task.storage != RAW or task.nbytes <= task_bytes or not task.grid:
        return [task]
    item = task.block_bytes or np_dtype(task.element).itemsize
    total = task.nbytes // item
    per = max(1, task_bytes // item)
    return [task.part(first, min(per, total - first)) for first in range(0, total, per)]


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
        if task.overlap:
            return run_overlap(task, max_locations, chunk_bytes, stop, Interrupted)
        if task.storage in (STRIDED, DATASET):
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
    for first, chunk in chunks(task, dtype.itemsize, chunk_bytes):
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
    """A STRIDED or DATASET task: blocks with their origin in the task's grid."""
    if task.storage == STRIDED:
        order = views.storage_order(*strided_layout(task))

        def where(origin, row):
            return views.to_view(tuple(o + r for o, r in zip(origin, row)), order)
    else:
        def where(origin, row):
            return tuple(o + r for o, r in zip(origin, row))
    tally = _Tally(task, max_locations)
    for origin, block in blocks(task, chunk_bytes):
        if stop is not None and stop.is_set():
            raise Interrupted
        tally.add(block, lambda r, o=origin: where(o, r), block.nbytes)
    return tally.result()


def _run_blocks(task, max_locations, chunk_bytes, stop):
    fields = [(f, np_dtype(f.element)) for f in task.fields]
    nan = pinf = ninf = nbytes = values = 0
    locations: list = []
    for first, chunk in chunks(task, task.block_bytes, chunk_bytes):
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


def execute(tasks, *, threads: int | None = None, max_locations: int = DEFAULT_MAX_LOCATIONS,
            chunk_bytes: int = CHUNK_BYTES, progress=None,
            debug: bool = False) -> tuple[list, bool]:
    """(results in task order, interrupted?) for `tasks`, the reading ones run on `threads`
    threads (None: one per core). `progress(task, result)` is called as each reading task
    finishes (the others are answered first, without I/O).
    Ctrl-C stops the work and the unfinished tasks come back unchecked."""
    threads = threads or os.cpu_count() or 1
    stop = threading.Event()
    results: list = [None] * len(tasks)
    options = dict(chunk_bytes=chunk_bytes, stop=stop, debug=debug)
    reads = []
    interrupted = False
    try:
        for i, t in enumerate(tasks):
            if needs_reading(t):
                reads.append(i)
            else:
                results[i] = run_task(t, max_locations)
        _run_reads(tasks, reads, results, min(threads, len(reads)), max_locations, options,
                   progress)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    for i, t in enumerate(tasks):
        if results[i] is None:
            results[i] = interrupted_result(t)
    return results, interrupted


def _run_reads(tasks, reads, results, threads, max_locations, options, progress) -> None:
    """Run tasks[i] for i in `reads` on `threads` threads that take the next index as they
    finish (no future per task: a header of a million tensors costs no more than its reads)."""
    stop = options["stop"]
    if threads <= 1:
        for i in reads:
            results[i] = run_task(tasks[i], max_locations, **options)
            if progress is not None:
                progress(tasks[i], results[i])
        return
    lock = threading.Lock()
    pending = iter(reads)
    errors: list = []

    def work():
        try:
            while not stop.is_set():
                with lock:
                    i = next(pending, None)
                if i is None:
                    return
                results[i] = run_task(tasks[i], max_locations, **options)
                if progress is not None:
                    with lock:
                        progress(tasks[i], results[i])
        except BaseException as e:  # surfaced in the calling thread (debug mode, callbacks)
            errors.append(e)
            stop.set()

    workers = [threading.Thread(target=work, name=f"fpclass-scan-{k}", daemon=True)
               for k in range(threads)]
    for w in workers:
        w.start()
    try:
        for w in workers:
            while w.is_alive():
                w.join(0.2)  # a timed join lets Ctrl-C reach this thread
    finally:
        stop.set()  # after Ctrl-C: the workers stop at their next chunk
        for w in workers:
            w.join()
    if errors:
        raise errors[0]


def assemble(tasks, results, *, fail_on=frozenset({"nan", "posinf", "neginf"}),
             max_locations: int = DEFAULT_MAX_LOCATIONS, seconds: float = 0.0,
             interrupted: bool = False) -> ScanReport:
    """The report for `results` (one per task, in task order): file markers become the file
    list, problems the problem list, skipped files the skipped list, and the parts of each
    tensor are merged."""
    report = ScanReport(fail_on=frozenset(fail_on), seconds=seconds, interrupted=interrupted)
    tensors = report.tensors
    parts: dict = {}  # tensor key -> (its place in `tensors`, its part results)
    for task, result in zip(tasks, results):
        status = task.status
        if status == FILE:
            report.files.append((task.file, task.dtype))
        elif status == PROBLEM:
            report.problems.append(Problem(task.file, task.reason))
        elif status == SKIPPED:
            report.skipped.append(Problem(task.file, task.reason))
        elif task.count < 0:
            tensors.append(result)
        elif task.key in parts:
            parts[task.key][1].append(result)
        else:
            parts[task.key] = (len(tensors), [result])
            tensors.append(None)
    for place, group in parts.values():
        tensors[place] = merge_parts(group, max_locations) if len(group) > 1 else group[0]
    return report


def scan(paths, *, fail_on="nan,inf", max_locations: int = DEFAULT_MAX_LOCATIONS,
         threads: int | None = None, chunk_bytes: int = CHUNK_BYTES, include=(), exclude=(),
         task_bytes: int = TASK_BYTES, progress=None, on_planned=None, debug: bool = False,
         execute_on=None, allow_globals=()) -> ScanReport:
    """Check every tensor in `paths` (files or directories) for NaN and ±Inf.

    `fail_on` names the classes that make `exit_code` FOUND ("nan", "inf", "posinf", "neginf",
    "any", comma-separated or a list); `include` / `exclude` are glob patterns filtering the files
    found in directories. Returns a ScanReport; bad files are reported in it, never raised; Ctrl-C
    gives the report so far, interrupted. ValueError for bad arguments. `execute_on` replaces this
    machine's threads (`execute`) with another executor taking the same keywords but `threads`,
    e.g. a dask cluster. `on_planned(tasks)` is called once the tasks are planned, before any is
    run; `progress(task, result)` as each finishes. `allow_globals` ("module.Name") are classes a
    PyTorch pickle may name whose objects are walked like dicts (see docs/scan.md)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    classes = parse_fail_on(fail_on)
    if not isinstance(max_locations, int) or max_locations < 0:
        raise ValueError(f"max_locations must be an integer >= 0, got {max_locations!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
    include, exclude = _patterns(include, "include"), _patterns(exclude, "exclude")
    allow_globals = _globals(allow_globals)
    with scratch.session():  # a compressed file's decompressed copy lives until the end
        start = time.perf_counter()
        try:
            tasks = plan(paths, include=include, exclude=exclude, task_bytes=task_bytes,
                         debug=debug, allow_globals=allow_globals)
        except PlanInterrupted as e:
            tasks = e.tasks
            results = [interrupted_result(t) for t in tasks]
            return assemble(tasks, results, fail_on=classes, max_locations=max_locations,
                            seconds=time.perf_counter() - start, interrupted=True)
        if on_planned is not None:
            on_planned(tasks)
        run = functools.partial(execute, threads=threads) if execute_on is None else execute_on
        results, interrupted = run(tasks, max_locations=max_locations, chunk_bytes=chunk_bytes,
                                   progress=progress, debug=debug)
        return assemble(tasks, results, fail_on=classes, max_locations=max_locations,
                        seconds=time.perf_counter() - start, interrupted=interrupted)


def _patterns(patterns, what: str) -> tuple:
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = tuple(patterns)
    if not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"{what} must be glob patterns (non-empty strings), got {patterns!r}")
    return patterns
