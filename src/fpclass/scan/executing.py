"""Executing tasks on this machine: the reading ones on a pool of threads that take the next
task as they finish, progress callbacks, and Ctrl-C (the unfinished tasks come back unchecked)."""

from __future__ import annotations

import threading

from ..kernels.threads import pool_threads
from .storage import CHUNK_BYTES
from .run import DEFAULT_MAX_LOCATIONS, interrupted_result, needs_reading, run_task


def execute(tasks, *, threads: int | None = None, max_locations: int = DEFAULT_MAX_LOCATIONS,
            chunk_bytes: int = CHUNK_BYTES, progress=None,
            debug: bool = False, maps: bool = False) -> tuple[list, bool]:
    """(results in task order, interrupted?) for `tasks`, the reading ones run on `threads`
    threads (None: kernels.threads.pool_threads: one per core, one inside a foreign worker, at
    most the user's cap). `progress(task, result)` is called as each reading task
    finishes (the others are answered first, without I/O).
    Ctrl-C stops the work and the unfinished tasks come back unchecked. `maps`: gather each
    tensor's density map (run_task)."""
    threads = threads or pool_threads()
    stop = threading.Event()
    results: list = [None] * len(tasks)
    options = dict(chunk_bytes=chunk_bytes, stop=stop, debug=debug, maps=maps)
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
