"""The scan engine: plan (paths → tasks), execute (tasks over a thread pool, each run by
run.run_task: task → result), assemble (results → report). Each step takes and returns small
picklable values, so another scheduler (dask) can run the same tasks."""

from __future__ import annotations

import functools
import os
import threading
import time

from . import scratch
from .chunks import CHUNK_BYTES
from .dtypes import np_dtype
from .reader_options import reader_options
from .readers import ReaderError
from .readers.registry import planner
from ..results import build
from ..results.report import Problem, ScanReport, parse_fail_on
from .run import DEFAULT_MAX_LOCATIONS, Interrupted, interrupted_result, needs_reading, run_task
from .tasks import CHECK, DATASET, FILE, PROBLEM, RAW, SKIPPED, Task, problem, skipped
from .paths import expand

#: Raw tensors larger than this are split into parts that run in parallel.
TASK_BYTES = 256 << 20

__all__ = ["DEFAULT_MAX_LOCATIONS", "TASK_BYTES", "Interrupted", "PlanInterrupted", "assemble",
           "execute", "interrupted_result", "needs_reading", "plan", "run_task", "scan"]


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
            options = reader_options(kind, allow_globals)
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
    places: dict = {}  # tensor key -> its place in `tensors`
    parts: dict = {}   # tensor key -> its parts' results
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
            parts[task.key].append(result)
        else:
            places[task.key] = len(tensors)
            parts[task.key] = [result]
            tensors.append(None)
    for key, group in parts.items():
        tensors[places[key]] = build.merge_parts(group, max_locations) if len(group) > 1 \
            else group[0]
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
