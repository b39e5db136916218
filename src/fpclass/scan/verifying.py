"""Executing a planned scan with `verify`: every file read is hashed (SHA-256) in the same pass
that classifies its raw tensors (streaming.py), the other tasks run as usual (executing.py), and
each hash is compared with the file's references (references.py)."""

from __future__ import annotations

import os
import threading

from .executing import execute
from .references import find_references
from .run import DEFAULT_MAX_LOCATIONS, interrupted_result
from .storage import CHUNK_BYTES
from .storage.source import is_url
from .streaming import hash_files, streams_with
from .tasks import FILE, PROBLEM


def hashed_files(tasks) -> list:
    """The regular files a scan's tasks read (or failed to), each once, in task order."""
    seen: dict = {}
    for t in tasks:
        if t.status in (FILE, PROBLEM) and t.file not in seen and (
                is_url(t.file) or os.path.isfile(t.file)):
            seen[t.file] = None
    return list(seen)


def execute_verified(tasks, roots, *, threads: int | None = None,
                     max_locations: int = DEFAULT_MAX_LOCATIONS, chunk_bytes: int = CHUNK_BYTES,
                     progress=None, debug: bool = False,
                     maps: bool = False) -> tuple[list, list, bool]:
    """(results in task order, [FileIntegrity] per file read, interrupted?) for `tasks` planned
    from `roots`: as `execute`, with each file's SHA-256 from the bytes the scan reads."""
    threads = threads or os.cpu_count() or 1
    files = hashed_files(tasks)
    known = set(files)
    tasks_of: dict = {}
    for i, t in enumerate(tasks):
        if t.source in known and streams_with(t, t.source):
            tasks_of.setdefault(t.source, []).append((i, t))
    streamed = {i for pairs in tasks_of.values() for i, _ in pairs}
    stop = threading.Event()
    interrupted = False
    results: list = [None] * len(tasks)
    integrity: list = []
    try:
        found, integrity = hash_files(files, tasks_of, find_references(files, roots),
                                      max_locations=max_locations, threads=threads, stop=stop,
                                      progress=progress, maps=maps)
        for i, result in found.items():
            results[i] = result
    except KeyboardInterrupt:
        stop.set()
        interrupted = True
    if not interrupted:
        rest = [i for i in range(len(tasks)) if i not in streamed]
        rest_results, interrupted = execute([tasks[i] for i in rest], threads=threads,
                                            max_locations=max_locations,
                                            chunk_bytes=chunk_bytes, progress=progress,
                                            debug=debug, **({"maps": True} if maps else {}))
        for i, result in zip(rest, rest_results):
            results[i] = result
    for i, result in enumerate(results):
        if result is None:
            results[i] = interrupted_result(tasks[i])
    return results, [i for i in integrity if i is not None], interrupted
