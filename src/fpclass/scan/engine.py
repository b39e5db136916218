"""The scan engine: plan (paths → tasks, planning.py), run_task (task → result, run.py),
execute (tasks over a thread pool, executing.py), assemble (results → report, here) and `scan`,
which chains them. Each step takes and returns small picklable values, so another scheduler
(dask) can run the same tasks."""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import replace
import time
from typing import Any, Callable, Iterable

from . import scratch
from .storage import CHUNK_BYTES
from .storage.source import REMOTE_STREAMS, is_url
from .executing import execute
from .planning import TASK_BYTES, PlanInterrupted, _globals, plan
from ..results import build
from ..results.fail_on import fail_on_parameter
from ..results.report import Problem, ScanReport, TensorResult
from .run import DEFAULT_MAX_LOCATIONS, Interrupted, interrupted_result, needs_reading, run_task
from .tasks import CHECK, FILE, PROBLEM, SKIPPED, Task

__all__ = ["DEFAULT_MAX_LOCATIONS", "TASK_BYTES", "Interrupted", "PlanInterrupted", "ScanReport",
           "assemble", "execute", "interrupted_result", "needs_reading", "plan", "run_task", "scan",
           "without_stats"]


def assemble(tasks, results, *, fail_on=frozenset({"nan", "posinf", "neginf"}),
             max_locations: int = DEFAULT_MAX_LOCATIONS, seconds: float = 0.0,
             interrupted: bool = False, integrity=None) -> ScanReport:
    """The report for `results` (one per task, in task order): file markers become the file
    list, problems the problem list, skipped files the skipped list, and the parts of each
    tensor are merged."""
    report = ScanReport(fail_on=frozenset(fail_on), seconds=seconds, interrupted=interrupted,
                        integrity=integrity)
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


def scan(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
         fail_on: str | Iterable[str] = "nan,inf", max_locations: int = DEFAULT_MAX_LOCATIONS,
         threads: int | None = None, chunk_bytes: int = CHUNK_BYTES,
         include: str | Iterable[str] = (), exclude: str | Iterable[str] = (),
         task_bytes: int = TASK_BYTES,
         progress: Callable[[Task, TensorResult], object] | None = None,
         on_planned: Callable[[list[Task]], object] | None = None, debug: bool = False,
         execute_on: Callable[..., Any] | None = None,
         allow_globals: Iterable[str] = (), force_exclude: bool = False,
         verify: bool = False, maps: bool = False, stats: bool = True,
         storage_options: dict[str, Any] | None = None) -> ScanReport:
    """Check every tensor in `paths` (files or directories) for NaN and ±Inf.

    `fail_on` names the classes that make `exit_code` FOUND ("nan", "inf", "posinf", "neginf",
    "any", comma-separated or a list); `include` / `exclude` are glob patterns filtering the files
    found in directories (with `force_exclude`, the paths named too, and a named file that holds
    no tensors is skipped rather than a problem). Returns a ScanReport; bad files are reported
    in it, never raised; Ctrl-C gives the report so far, interrupted. ValueError for bad
    arguments. `execute_on` replaces this machine's threads (`execute`) with another executor taking the same keywords but `threads`,
    e.g. a dask cluster. `on_planned(tasks)` is called once the tasks are planned, before any is
    run; `progress(task, result)` as each finishes. `allow_globals` ("module.Name") are classes a
    PyTorch pickle may name whose objects are walked like dicts (see docs/scan.md). `verify`
    also computes each file's SHA-256 in the same read and checks it against the file's
    references (report.integrity; a mismatch is a finding). `maps`: also gather, in the same
    read, a density map of where each tensor's findings are (for ScanReport.plot and
    write_html; an `execute_on` executor then gets `maps=True`). `stats`
    (the default): gather each tensor's statistics in the same pass (TensorResult.stats: zero /
    subnormal / normal counts, finite min / max / absmax); False leaves them out (None) unless
    a gate in `fail_on` (absmax>X, all-zero, subnormal) needs them. Paths may be
    URLs (s3://, https://, hf://, any fsspec protocol; the `remote` extra), opened with
    `storage_options` (fsspec filesystem arguments; see docs/remote.md)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    classes = fail_on_parameter(fail_on)
    if not isinstance(max_locations, int) or max_locations < 0:
        raise ValueError(f"max_locations must be an integer >= 0, got {max_locations!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
    if threads is None and any(is_url(os.fspath(p)) for p in paths):
        threads = REMOTE_STREAMS
    include, exclude = _patterns(include, "include"), _patterns(exclude, "exclude")
    allow_globals = _globals(allow_globals)
    if verify and execute_on is not None:
        raise ValueError("verify hashes files on this machine; it cannot run on another "
                         "executor (--scheduler)")
    if not isinstance(maps, bool):
        raise ValueError(f"maps must be True or False, got {maps!r}")
    extra = {"maps": True} if maps else {}
    # a compressed file's decompressed copy and the remote sources' scope last until the end
    with scratch.session(), remote_sources(paths, storage_options):
        start = time.perf_counter()
        try:
            tasks = plan(paths, include=include, exclude=exclude, task_bytes=task_bytes,
                         debug=debug, allow_globals=allow_globals,
                         force_exclude=force_exclude)
        except PlanInterrupted as e:
            tasks = e.tasks
            results = [interrupted_result(t) for t in tasks]
            return assemble(tasks, results, fail_on=classes, max_locations=max_locations,
                            seconds=time.perf_counter() - start, interrupted=True)
        if not stats and all(isinstance(c, str) for c in classes):  # no gate needs them
            tasks = without_stats(tasks)
        if on_planned is not None:
            on_planned(tasks)
        integrity = None
        if verify:
            from .verifying import execute_verified  # its hashing and git lookups: on demand
            results, integrity, interrupted = execute_verified(
                tasks, paths, threads=threads, max_locations=max_locations,
                chunk_bytes=chunk_bytes, progress=progress, debug=debug, **extra)
        else:
            run = functools.partial(execute, threads=threads) if execute_on is None \
                else execute_on
            results, interrupted = run(tasks, max_locations=max_locations,
                                       chunk_bytes=chunk_bytes, progress=progress, debug=debug,
                                       **extra)
        return assemble(tasks, results, fail_on=classes, max_locations=max_locations,
                        seconds=time.perf_counter() - start, interrupted=interrupted,
                        integrity=integrity)


def without_stats(tasks: list) -> list:
    """`tasks` with no reading one gathering its values' statistics."""
    return [replace(t, stats=False) if t.status == CHECK else t for t in tasks]


def remote_sources(paths, storage_options):
    """The scope of one scan's remote sources (their options and the identities seen); nothing
    is imported when no path is a URL and no options are given."""
    if storage_options is None and not any(is_url(os.fspath(p)) for p in paths):
        return contextlib.nullcontext()
    from .storage import remote
    if any(is_url(os.fspath(p)) for p in paths):
        remote.fsspec()  # ImportError naming the extra, before any planning
    return remote.configured(storage_options)


def _patterns(patterns, what: str) -> tuple:
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = tuple(patterns)
    if not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"{what} must be glob patterns (non-empty strings), got {patterns!r}")
    return patterns
