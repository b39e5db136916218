"""The thread policy: how many of numba's threads one kernel call may use.

A call uses several threads only when it is large enough to repay waking them, and only from the
main thread of a process that no pool started. Inside a foreign worker (a dask, concurrent.futures
or scan thread; a worker *process* of dask's "processes" scheduler, multiprocessing or
concurrent.futures) the pool already spreads work over the cores, and threads inside each of its
workers would multiply: N workers x all cores. The user's cap (`set_num_threads`, or the
environment variable FPCLASS_NUM_THREADS) bounds the rest. Importing this module does not import
numba.
"""

from __future__ import annotations

import multiprocessing
import os
import threading

#: The environment variable that caps the threads of one call (read once, at first use).
ENV = "FPCLASS_NUM_THREADS"
#: Below this many elements one thread is faster than waking numba's pool (measured: see
#: docs/benchmarks.md).
PARALLEL_MIN = 1 << 22

_cap: int | None = None  # set_num_threads's cap; None: not set


def _checked(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what} must be an integer >= 1 (or None: no cap), got {n!r}")
    return int(n)


def _env_cap() -> int | None:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        return _checked(int(text), ENV)
    except ValueError:
        raise ValueError(f"{ENV} must be an integer >= 1, got {text!r}") from None


def set_num_threads(n: int | None) -> None:
    """Cap the threads one fpclass call may use at `n` (>= 1), over FPCLASS_NUM_THREADS; None
    removes the cap. Numba's own count (NUMBA_NUM_THREADS, the cores by default) still bounds it."""
    global _cap
    _cap = None if n is None else _checked(n, "set_num_threads's argument")


def get_num_threads() -> int:
    """The threads a large call from the main thread would use now: the cap, at most numba's
    thread count (imports numba to read it)."""
    import numba
    cap = _cap if _cap is not None else _env_cap()
    available = numba.config.NUMBA_NUM_THREADS
    return available if cap is None else min(cap, available)


def in_foreign_worker() -> bool:
    """Is this call running inside someone else's pool: not on the main thread, or in a process
    that multiprocessing (and so concurrent.futures and dask's process pools) started?"""
    return (threading.current_thread() is not threading.main_thread()
            or multiprocessing.parent_process() is not None)


def threads_for(elements: int) -> int:
    """How many threads a kernel over `elements` elements may use: 1 below PARALLEL_MIN and in a
    foreign worker, else get_num_threads(). Applies the count to numba's pool when it is > 1, so
    the caller's parallel kernel uses exactly that many."""
    if elements < PARALLEL_MIN or in_foreign_worker():
        return 1
    import numba
    n = get_num_threads()
    if n > 1 and numba.get_num_threads() != n:  # numba's count is per calling thread
        numba.set_num_threads(n)
    return n
