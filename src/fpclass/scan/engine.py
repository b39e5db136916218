"""The scan engine: plan (paths → tasks), run_task (task → result), execute (tasks over a thread
pool), assemble (results → report). Each step takes and returns small picklable values, so another
scheduler (dask) can run the same tasks."""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace

import numpy as np

from .. import count_inf, count_nan, count_nonfinite, isnan, isposinf, locate_nonfinite
from .chunks import CHUNK_BYTES, SourceError, chunks
from .dtypes import can_hold_nonfinite, np_dtype
from .readers import ReaderError, planner
from .report import CHECKED, Location, Problem, ScanReport, TensorResult, merge_parts, parse_fail_on
from .tasks import CHECK, FILE, PROBLEM, RAW, UNCHECKED, Task, problem
from .walk import expand

#: Raw tensors larger than this are split into parts that run in parallel.
TASK_BYTES = 256 << 20
DEFAULT_MAX_LOCATIONS = 5


class Interrupted(Exception):
    """The scan was asked to stop (Ctrl-C) while this task ran."""


def plan(paths, *, task_bytes: int = TASK_BYTES, debug: bool = False) -> list:
    """Tasks for every tensor in `paths` (files or directories), plus FILE markers and file
    problems. Reads headers only. Shards reached through an index are planned once."""
    found, bad = expand(paths)
    tasks = [problem(p, r) for p, r in bad]
    # Indexes first, so a shard listed by an index and also found directly is planned once.
    found.sort(key=lambda f: f[1] != "safetensors-index")
    seen: set = set()
    for path, kind in found:
        real = os.path.realpath(path)
        if real in seen:
            continue
        try:
            file_tasks = planner(kind)(path)
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
    return tasks


def _split(task: Task, task_bytes: int) -> list:
    """A RAW CHECK task cut into parts of about `task_bytes`."""
    if task.status != CHECK or task.storage != RAW or task.nbytes <= task_bytes or not task.grid:
        return [task]
    item = task.block_bytes or np_dtype(task.element).itemsize
    total = task.nbytes // item
    per = max(1, task_bytes // item)
    return [task.part(first, min(per, total - first)) for first in range(0, total, per)]


def run_task(task: Task, max_locations: int = DEFAULT_MAX_LOCATIONS, *,
             chunk_bytes: int = CHUNK_BYTES, io: str = "mmap", stop=None,
             debug: bool = False) -> TensorResult:
    """Check one task: counts of NaN/+Inf/-Inf and the first `max_locations` locations, read in
    chunks of `chunk_bytes`. Never raises for bad data: the result is then unchecked with the
    reason (with `debug`, unexpected errors propagate)."""
    base = TensorResult(task.file, task.name, task.dtype, task.shape, task.status,
                        reason=task.reason, first=task.first)
    if task.status != CHECK:
        return base
    try:
        if not can_hold_nonfinite(task.element):
            n = math.prod(task.shape)
            return replace(base, status=CHECKED, values_checked=n if task.first == 0 else 0)
        if task.block_bytes:
            return _run_blocks(task, base, max_locations, chunk_bytes, io, stop)
        return _run_elements(task, base, max_locations, chunk_bytes, io, stop)
    except Interrupted:
        return replace(base, status=UNCHECKED, reason="interrupted before it was fully checked")
    except (SourceError, ReaderError) as e:
        return replace(base, status=UNCHECKED, reason=str(e))
    except OSError as e:
        return replace(base, status=UNCHECKED, reason=f"cannot read: {e.strerror or e}")
    except Exception as e:
        if debug:
            raise
        return replace(base, status=UNCHECKED, reason=f"internal error: {type(e).__name__}: {e}")


def _classify(values, limit):
    """(nan, +inf, -inf, flat positions, classes) of a 1-D chunk, positions at most `limit`."""
    nonfinite = int(count_nonfinite(values))
    if not nonfinite:
        return 0, 0, 0, (), ()
    nan = int(count_nan(values))
    pinf = int(count_inf(values, detect_negative=False))
    ninf = nonfinite - nan - pinf  # values are real: non-finite is exactly NaN, +Inf or -Inf
    if limit <= 0:
        return nan, pinf, ninf, (), ()
    pos = locate_nonfinite(values, limit)[:, 0]
    hit = values[pos]
    classes = np.where(isnan(hit), "nan", np.where(isposinf(hit), "posinf", "neginf"))
    return nan, pinf, ninf, pos.tolist(), classes.tolist()


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


def _run_elements(task, base, max_locations, chunk_bytes, io, stop):
    dtype = np_dtype(task.element)
    nan = pinf = ninf = nbytes = values = 0
    locations: list = []
    for first, chunk in chunks(task, dtype.itemsize, chunk_bytes, io):
        if stop is not None and stop.is_set():
            raise Interrupted
        v = chunk.view(dtype)
        a, b, c, pos, classes = _classify(v, max_locations - len(locations))
        nan, pinf, ninf = nan + a, pinf + b, ninf + c
        locations += [Location(_index(task, first + p), cls) for p, cls in zip(pos, classes)]
        nbytes += chunk.size
        values += v.size
    return replace(base, status=CHECKED, nan=nan, posinf=pinf, neginf=ninf,
                   locations=tuple(locations), values_checked=values, bytes_checked=nbytes)


def _run_blocks(task, base, max_locations, chunk_bytes, io, stop):
    fields = [(f, np_dtype(f.element)) for f in task.fields]
    nan = pinf = ninf = nbytes = values = 0
    locations: list = []
    for first, chunk in chunks(task, task.block_bytes, chunk_bytes, io):
        if stop is not None and stop.is_set():
            raise Interrupted
        blocks = chunk.reshape(-1, task.block_bytes)
        found = []
        for order, (f, dt) in enumerate(fields):
            v = blocks[:, f.offset:f.offset + dt.itemsize].view(dt)[:, 0]
            a, b, c, pos, classes = _classify(v, max_locations - len(locations))
            nan, pinf, ninf = nan + a, pinf + b, ninf + c
            found += [(p, order, cls, f.name) for p, cls in zip(pos, classes)]
            values += v.size
        found.sort()
        room = max_locations - len(locations)
        locations += [Location(_index(task, first + p), cls, name)
                      for p, _, cls, name in found[:room]]
        nbytes += chunk.size
    return replace(base, status=CHECKED, nan=nan, posinf=pinf, neginf=ninf,
                   locations=tuple(locations), values_checked=values, bytes_checked=nbytes)


def execute(tasks, *, threads: int | None = None, max_locations: int = DEFAULT_MAX_LOCATIONS,
            chunk_bytes: int = CHUNK_BYTES, io: str = "mmap", progress=None,
            debug: bool = False) -> tuple[list, bool]:
    """(results in task order, interrupted?) for `tasks`, run on `threads` threads (None: one
    per core). `progress(task, result)` is called as each task finishes. Ctrl-C stops the work
    and the unfinished tasks come back unchecked."""
    threads = threads or os.cpu_count() or 1
    stop = threading.Event()
    results: list = [None] * len(tasks)
    options = dict(chunk_bytes=chunk_bytes, io=io, stop=stop, debug=debug)

    def done(i, result):
        results[i] = result
        if progress is not None:
            progress(tasks[i], result)

    interrupted = False
    if threads == 1:
        try:
            for i, t in enumerate(tasks):
                done(i, run_task(t, max_locations, **options))
        except KeyboardInterrupt:
            interrupted = True
    else:
        pool = ThreadPoolExecutor(threads, thread_name_prefix="fpclass-scan")
        futures = {}
        try:
            futures = {pool.submit(run_task, t, max_locations, **options): i
                       for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                done(futures[fut], fut.result())
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        for fut, i in futures.items():
            if results[i] is None and fut.done() and not fut.cancelled() and not fut.exception():
                results[i] = fut.result()
    for i, t in enumerate(tasks):
        if results[i] is None:
            results[i] = TensorResult(t.file, t.name, t.dtype, t.shape,
                                      UNCHECKED if t.status == CHECK else t.status,
                                      reason="interrupted before it was checked"
                                      if t.status == CHECK else t.reason, first=t.first)
    return results, interrupted


def assemble(tasks, results, *, fail_on=frozenset({"nan", "posinf", "neginf"}),
             max_locations: int = DEFAULT_MAX_LOCATIONS, seconds: float = 0.0,
             interrupted: bool = False) -> ScanReport:
    """The report for `results` (one per task, in task order): file markers become the file
    list, problems the problem list, and the parts of each tensor are merged."""
    report = ScanReport(fail_on=frozenset(fail_on), seconds=seconds, interrupted=interrupted)
    groups: dict = {}
    for task, result in zip(tasks, results):
        if task.status == FILE:
            report.files.append((task.file, task.dtype))
        elif task.status == PROBLEM:
            report.problems.append(Problem(task.file, task.reason))
        else:
            groups.setdefault(task.key, []).append(result)
    report.tensors = [merge_parts(parts, max_locations) if len(parts) > 1 else parts[0]
                      for parts in groups.values()]
    return report


def scan(paths, *, fail_on="nan,inf", max_locations: int = DEFAULT_MAX_LOCATIONS,
         threads: int | None = None, chunk_bytes: int = CHUNK_BYTES, io: str = "mmap",
         task_bytes: int = TASK_BYTES, progress=None, debug: bool = False,
         execute_on=None) -> ScanReport:
    """Check every tensor in `paths` (files or directories) for NaN and ±Inf.

    `fail_on` names the classes that make `exit_code` FOUND ("nan", "inf", "posinf", "neginf",
    "any", comma-separated or a list). Returns a ScanReport; bad files are reported in it, never
    raised. ValueError for bad arguments. `execute_on` replaces this machine's threads
    (`execute`) with another executor taking the same keywords but `threads`, e.g. a dask cluster."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    classes = parse_fail_on(fail_on)
    if not isinstance(max_locations, int) or max_locations < 0:
        raise ValueError(f"max_locations must be an integer >= 0, got {max_locations!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
    if io not in ("mmap", "read"):
        raise ValueError(f"io must be 'mmap' or 'read', got {io!r}")
    start = time.perf_counter()
    tasks = plan(paths, task_bytes=task_bytes, debug=debug)
    run = functools.partial(execute, threads=threads) if execute_on is None else execute_on
    results, interrupted = run(tasks, max_locations=max_locations, chunk_bytes=chunk_bytes, io=io,
                               progress=progress, debug=debug)
    return assemble(tasks, results, fail_on=classes, max_locations=max_locations,
                    seconds=time.perf_counter() - start, interrupted=interrupted)
