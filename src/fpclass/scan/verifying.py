"""Executing a planned scan with `verify`: every file read is hashed (SHA-256) in the same pass
that classifies its raw tensors (streaming.py), the other tasks run as usual (executing.py), and
each hash is compared with the file's references (references.py)."""

from __future__ import annotations

import os
import threading

from ..kernels.threads import pool_threads
from .executing import execute
from .references import find_references
from .run import DEFAULT_MAX_LOCATIONS, interrupted_result
from .storage import CHUNK_BYTES
from . import scratch
from .storage.source import is_url, real
from .streaming import hash_files, streams_with
from .tasks import FILE, PROBLEM


def hashed_files(tasks) -> dict:
    """{real path: the name it is reported by} of the files a scan's tasks read (or failed to),
    each once, in task order: the files scanned and those their tensors are stored in (external
    data, shards), not a scan's own decompressed copies."""
    seen: dict = {}
    looked: set = set()  # a header of many tensors names its file many times: look once
    for t in tasks:
        for path in (t.file if t.status in (FILE, PROBLEM) else "", t.source):
            if path and path not in looked:
                looked.add(path)
                if (is_url(path) or os.path.isfile(path)) and not scratch.holds(path):
                    seen.setdefault(real(path), path)
    return seen


def execute_verified(tasks, roots, *, threads: int | None = None,
                     max_locations: int = DEFAULT_MAX_LOCATIONS, chunk_bytes: int = CHUNK_BYTES,
                     progress=None, debug: bool = False,
                     maps: bool = False) -> tuple[list, list, bool]:
    """(results in task order, [FileIntegrity] per file read, interrupted?) for `tasks` planned
    from `roots`: as `execute`, with each file's SHA-256 from the bytes the scan reads."""
    threads = threads or pool_threads()
    named = hashed_files(tasks)
    files = list(named.values())
    name_of = {path: named.get(real(path)) for path in {t.source for t in tasks if t.source}}
    tasks_of: dict = {}
    for i, t in enumerate(tasks):
        if name_of.get(t.source) and streams_with(t, t.source):
            tasks_of.setdefault(name_of[t.source], []).append((i, t))
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
