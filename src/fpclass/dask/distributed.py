"""`fpclass scan` over a dask.distributed cluster: the same tasks, report and exit code as a local
scan; the workers read the files themselves and only small results travel back.

The client plans (file headers only), so the paths must be visible to it and, under the same
names, to every worker (a shared filesystem). A task whose worker dies is retried by the scheduler
(`distributed.scheduler.allowed-failures` times); one that still fails becomes an unchecked tensor
with the reason, so the report exits 2 naming what was not checked instead of dropping it. A
cluster left with no workers for `no_workers_timeout` seconds ends the scan the same way.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
import uuid

from .._optional import require

require("distributed", "dask", "fpclass.dask.distributed")   # the extra installs dask[distributed]
from distributed import Client, as_completed  # noqa: E402

from ..scan import engine
from ..scan.storage import CHUNK_BYTES
from ..results import build
from ..scan.tasks import CHECK
from ..scan.storage.source import is_url

#: Extra attempts for a task whose function raised (worker deaths are retried by the scheduler).
RETRIES = 2
#: Seconds a cluster may have no workers before the scan gives up on its unfinished tasks: a
#: nanny restarts a dead worker in seconds, and an adaptive or cloud cluster usually brings up a
#: replacement within a minute or two; a batch-queue cluster (dask-jobqueue) may need more.
NO_WORKERS_TIMEOUT = 120.0
#: While no task finishes, the scheduler is asked for its worker count this often (seconds).
WORKER_POLL_SECONDS = 1.0
#: How long the client sleeps between looks at its finished futures when none is ready: the
#: longest a result waits to be collected (the tasks are all submitted, so the cluster never waits).
IDLE_SECONDS = 0.02


#: How long to wait for a scheduler that does not answer.
CONNECT_TIMEOUT = "30s"


def _connect(scheduler):
    """(client, whether we opened it): `scheduler` is an address or a distributed.Client."""
    if isinstance(scheduler, Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not scheduler:
        raise TypeError("scheduler must be a dask.distributed scheduler address such as "
                        f"'tcp://10.0.0.5:8786' or a distributed.Client, got {scheduler!r}")
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False), True
    except OSError as e:
        raise ConnectionError(f"cannot reach the dask scheduler at {scheduler}: {e}") from None


def _failure(future) -> str:
    why = future.exception() if future.status == "error" else future.status
    return f"unchecked: worker failed ({type(why).__name__}: {why})"


class _NoWorkers(Exception):
    """The cluster has had no workers for the allowed time; str() is the unchecked reason."""


class _WorkerWatch:
    """Raises _NoWorkers from `check()` once the scheduler has reported no workers for `timeout`
    seconds (None: never), asking it at most every WORKER_POLL_SECONDS. The clock runs across
    calls, so the bound holds for the whole scan, not per task."""

    def __init__(self, client, timeout: float | None):
        self.client, self.timeout = client, timeout
        self.since: float | None = None  # when the scheduler was first seen without workers
        self.next_poll = -math.inf

    def check(self) -> None:
        if self.timeout is None:
            return
        now = time.monotonic()
        if now >= self.next_poll:
            self.next_poll = now + WORKER_POLL_SECONDS
            if _worker_count(self.client):
                self.since = None
            elif self.since is None:
                self.since = now
        if self.since is not None and now - self.since >= self.timeout:
            raise _NoWorkers(f"unchecked: no dask workers for {self.timeout:g} s")


def _worker_count(client) -> int:
    # n_workers=0: the count without every worker's description (older distributed ignores the
    # argument, sends them all and has no "n_workers" key).
    info = client.scheduler_info(n_workers=0)
    return info.get("n_workers", len(info.get("workers", ())))


def _finished(futures, watch: _WorkerWatch, loop):
    """Each of `futures` as it finishes (any status). While none is ready the watch is checked,
    so a cluster without workers raises _NoWorkers instead of waiting forever."""
    pending = as_completed(futures, loop=loop)
    while not pending.is_empty():
        batch = pending.next_batch(block=False)
        if batch:
            yield from batch
        else:
            watch.check()
            time.sleep(IDLE_SECONDS)


def _run_all(client, run, tasks, remote, results, progress, options, scan_id, watch) -> list:
    """Run tasks `remote` at once; store the successes, return the indices that failed."""
    futures = client.map(run, [tasks[i] for i in remote], **options,
                         key=[f"fpclass-scan-{scan_id}-{i}" for i in remote])
    index = {f.key: i for f, i in zip(futures, remote)}
    failed = []
    try:
        for future in _finished(futures, watch, client.loop):
            i = index[future.key]
            if future.status == "finished":
                results[i] = future.result()
                if progress is not None:
                    progress(tasks[i], results[i])
            else:
                failed.append(i)
    finally:
        client.cancel([f for f in futures if not f.done()])
    return sorted(failed)


def _run_alone(client, run, tasks, i, results, progress, options, scan_id, watch) -> None:
    watch.check()  # already past the bound: the remaining retries give up without submitting
    future = client.submit(run, tasks[i], **options, key=f"fpclass-scan-{scan_id}-{i}-alone")
    try:
        for _ in _finished([future], watch, client.loop):
            pass
        results[i] = future.result() if future.status == "finished" else \
            build.unchecked_item(tasks[i], _failure(future))
    finally:
        client.cancel([future])
    if progress is not None:
        progress(tasks[i], results[i])


def _remote_run(run, tasks):
    """`run`, or for tasks reading URLs, `run` inside the scan's storage options and the file
    identities seen while planning, so each worker reads its ranges straight from the source
    and checks them against the same versions."""
    if not any(is_url(t.source) for t in tasks):
        return run
    from ..scan.storage import remote
    return functools.partial(remote.run_with, run, remote.options(), remote.seen())


def _check_no_workers_timeout(value) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
        raise ValueError("no_workers_timeout must be a finite number of seconds >= 0, or None to "
                         f"wait for workers indefinitely, got {value!r}")


def execute(tasks, scheduler, *, max_locations: int = engine.DEFAULT_MAX_LOCATIONS,
            chunk_bytes: int = CHUNK_BYTES, progress=None,
            retries: int = RETRIES, no_workers_timeout: float | None = NO_WORKERS_TIMEOUT,
            debug: bool = False, run=engine.run_task, maps: bool = False) -> tuple[list, bool]:
    """(results in task order, interrupted?) like fpclass.scan.engine.execute, with each CHECK
    task run by `run` (default fpclass.scan.run_task; it must be importable on the workers) on
    the cluster at `scheduler`. Tasks that fail together are retried one at a time; a task that
    still fails, or is unfinished once the cluster has had no workers for `no_workers_timeout`
    seconds (None: wait indefinitely), comes back unchecked with the reason, never missing.
    `maps`: `run` gathers density maps (run_task's maps=True)."""
    _check_no_workers_timeout(no_workers_timeout)
    results: list = [None] * len(tasks)
    remote = [i for i, t in enumerate(tasks) if t.status == CHECK]
    for i, t in enumerate(tasks):
        if t.status != CHECK:  # markers, problems, not-applicable: nothing to read
            results[i] = engine.run_task(t, max_locations)
    if not remote:
        return results, False
    run = _remote_run(run, [tasks[i] for i in remote])
    client, opened = _connect(scheduler)
    options = dict(max_locations=max_locations, chunk_bytes=chunk_bytes, debug=debug,
                   retries=retries, pure=False, **({"maps": True} if maps else {}))
    scan_id = uuid.uuid4().hex[:12]
    watch = _WorkerWatch(client, no_workers_timeout)
    interrupted = False
    unfinished = "interrupted before it was checked"
    try:
        failed = _run_all(client, run, tasks, remote, results, progress, options, scan_id, watch)
        # A dying worker takes the tasks queued behind the culprit down with it; alone, each
        # innocent task now succeeds and only the culprit stays unchecked.
        for i in failed:
            _run_alone(client, run, tasks, i, results, progress, options, scan_id, watch)
    except _NoWorkers as e:
        unfinished = str(e)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if opened:
            client.close()
    for i in remote:
        if results[i] is None:
            results[i] = build.unchecked_item(tasks[i], unfinished)
    return results, interrupted


def scan(paths, scheduler, *, fail_on="nan,inf", max_locations: int = engine.DEFAULT_MAX_LOCATIONS,
         threads=None, chunk_bytes: int = CHUNK_BYTES,
         task_bytes: int = engine.TASK_BYTES, progress=None, retries: int = RETRIES,
         no_workers_timeout: float | None = NO_WORKERS_TIMEOUT,
         debug: bool = False, allow_globals=(), storage_options=None) -> "engine.ScanReport":
    """fpclass.scan.scan(paths, ...) with the tensors checked on the dask cluster at `scheduler`
    (an address like 'tcp://host:8786', or a distributed.Client). Same report; `threads` is
    accepted for symmetry and ignored: each worker's own thread count applies. A cluster with no
    workers for `no_workers_timeout` seconds (None: wait indefinitely) leaves the unfinished
    tensors unchecked (exit code 2) instead of waiting forever. URL paths are read by the
    workers straight from their source, with `storage_options`."""
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    _check_no_workers_timeout(no_workers_timeout)
    return engine.scan(paths, fail_on=fail_on, max_locations=max_locations, chunk_bytes=chunk_bytes,
                       task_bytes=task_bytes, progress=progress, debug=debug,
                       allow_globals=allow_globals, storage_options=storage_options,
                       execute_on=functools.partial(execute, scheduler=scheduler, retries=retries,
                                                    no_workers_timeout=no_workers_timeout))


__all__ = ["NO_WORKERS_TIMEOUT", "RETRIES", "execute", "scan"]
