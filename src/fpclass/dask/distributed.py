"""`fpclass scan` over a dask.distributed cluster: the same tasks, report and exit code as a local
scan; the workers read the files themselves and only small results travel back.

The client plans (file headers only), so the paths must be visible to it and, under the same
names, to every worker (a shared filesystem). A task whose worker dies is retried by the scheduler
(`distributed.scheduler.allowed-failures` times); one that still fails becomes an unchecked tensor
with the reason, so the report exits 2 naming what was not checked instead of dropping it.
"""

from __future__ import annotations

import functools
import uuid

from distributed import Client, as_completed, wait

from ..scan import engine
from ..scan.chunks import CHUNK_BYTES
from ..scan.report import TensorResult
from ..scan.tasks import CHECK, UNCHECKED

#: Extra attempts for a task whose function raised (worker deaths are retried by the scheduler).
RETRIES = 2


def _unchecked(task, reason: str) -> TensorResult:
    return TensorResult(task.file, task.name, task.dtype, task.shape, UNCHECKED, reason=reason,
                        first=task.first)


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


def _run_all(client, run, tasks, remote, results, progress, options, scan_id) -> list:
    """Run tasks `remote` at once; store the successes, return the indices that failed."""
    futures = client.map(run, [tasks[i] for i in remote], **options,
                         key=[f"fpclass-scan-{scan_id}-{i}" for i in remote])
    index = {f.key: i for f, i in zip(futures, remote)}
    failed = []
    try:
        for future in as_completed(futures, loop=client.loop):
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


def _run_alone(client, run, tasks, i, results, progress, options, scan_id) -> None:
    future = client.submit(run, tasks[i], **options, key=f"fpclass-scan-{scan_id}-{i}-alone")
    try:
        wait(future)
        results[i] = future.result() if future.status == "finished" else \
            _unchecked(tasks[i], _failure(future))
    finally:
        client.cancel([future])
    if progress is not None:
        progress(tasks[i], results[i])


def execute(tasks, scheduler, *, max_locations: int = engine.DEFAULT_MAX_LOCATIONS,
            chunk_bytes: int = CHUNK_BYTES, progress=None,
            retries: int = RETRIES, debug: bool = False, run=engine.run_task) -> tuple[list, bool]:
    """(results in task order, interrupted?) like fpclass.scan.engine.execute, with each CHECK
    task run by `run` (default fpclass.scan.run_task; it must be importable on the workers) on
    the cluster at `scheduler`. Tasks that fail together are retried one at a time; a task that
    still fails comes back unchecked with the reason, never missing."""
    results: list = [None] * len(tasks)
    remote = [i for i, t in enumerate(tasks) if t.status == CHECK]
    for i, t in enumerate(tasks):
        if t.status != CHECK:  # markers, problems, not-applicable: nothing to read
            results[i] = engine.run_task(t, max_locations)
    if not remote:
        return results, False
    client, opened = _connect(scheduler)
    options = dict(max_locations=max_locations, chunk_bytes=chunk_bytes, debug=debug,
                   retries=retries, pure=False)
    scan_id = uuid.uuid4().hex[:12]
    interrupted = False
    try:
        failed = _run_all(client, run, tasks, remote, results, progress, options, scan_id)
        # A dying worker takes the tasks queued behind the culprit down with it; alone, each
        # innocent task now succeeds and only the culprit stays unchecked.
        for i in failed:
            _run_alone(client, run, tasks, i, results, progress, options, scan_id)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if opened:
            client.close()
    for i in remote:
        if results[i] is None:
            results[i] = _unchecked(tasks[i], "interrupted before it was checked")
    return results, interrupted


def scan(paths, scheduler, *, fail_on="nan,inf", max_locations: int = engine.DEFAULT_MAX_LOCATIONS,
         threads=None, chunk_bytes: int = CHUNK_BYTES,
         task_bytes: int = engine.TASK_BYTES, progress=None, retries: int = RETRIES,
         debug: bool = False) -> "engine.ScanReport":
    """fpclass.scan.scan(paths, ...) with the tensors checked on the dask cluster at `scheduler`
    (an address like 'tcp://host:8786', or a distributed.Client). Same report; `threads` is
    accepted for symmetry and ignored: each worker's own thread count applies."""
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    return engine.scan(paths, fail_on=fail_on, max_locations=max_locations, chunk_bytes=chunk_bytes,
                       task_bytes=task_bytes, progress=progress, debug=debug,
                       execute_on=functools.partial(execute, scheduler=scheduler, retries=retries))


__all__ = ["RETRIES", "execute", "scan"]
