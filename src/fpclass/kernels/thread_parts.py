"""Run the parts of one kernel call on several threads: the caller's own and Python threads of
a pool, each calling a serial kernel, which releases the GIL (walk.JIT's nogil).

Not numba's `prange`: each parallel kernel costs numba a second compile of its whole callee tree
four times over (the gufunc, its wrappers, the kernel), about half of every word width's warm-up
(measured: docs/startup.md), where these threads call kernels the serial path compiles anyway. The
raw-buffer kernels of fpclass.check and fpclass.torch.watch keep `prange` (kernels/buffers.py):
there numba's OpenMP threads are torch's own, idle between torch's operators.

A sleeping thread (or virtual CPU) takes 0.1-0.2 ms to wake (measured on the 2-core VM), so, as
numba's OpenMP threads do, these spin for about a millisecond after a call before they sleep
(in a nogil kernel: the GIL stays free), the caller spins on their parts' flags, and parts are
taken in turn, not dealt out: a thread that wakes late takes fewer.
"""

from __future__ import annotations

import atexit
import os
import threading
import time

import numpy as np

#: Parts a call is cut into per thread, where the kernel takes any cut (counts, masks): enough
#: that a thread waking 0.2 ms late still takes its share of a 16 MiB call.
PARTS_PER_THREAD = 4
#: Rounds a thread spins (about a millisecond) on the other threads' flags, or on the next call,
#: before it sleeps.
SPINS = 1 << 20

_lock = threading.Lock()
_crew = None   # the pool's threads, and the process they were started in (a fork has none)


class _Crew:
    """The pool's threads. Each waits for the next call (spinning SPINS rounds, then asleep) and
    runs that call's `take`; a call that wants fewer threads than the crew has turns the rest
    away (its take returns at once), and so does a call that has ended."""

    def __init__(self):
        self.pid = os.getpid()
        self.calls = np.zeros(1, np.int64)   # calls posted so far: a change wakes the spinners
        self.take = None
        self.posted = threading.Condition()
        self.threads: list = []

    def post(self, take, helpers: int) -> None:
        """Run take() on `helpers` threads of the crew (more are started as needed)."""
        with self.posted:
            self.take = take
            self.calls[0] += 1
            self.posted.notify_all()
            while len(self.threads) < helpers:   # a new thread: this call is its first
                thread = threading.Thread(target=self._serve, args=(int(self.calls[0]) - 1,),
                                          name=f"fpclass-part-{len(self.threads)}", daemon=True)
                thread.start()
                self.threads.append(thread)

    def done(self, take) -> None:
        """The call of `take` has ended: the crew holds nothing of it (its arrays are freed)."""
        with self.posted:
            if self.take is take:
                self.take = _nothing

    def _serve(self, seen: int) -> None:
        while True:
            if int(self.calls[0]) == seen:   # no call yet: spin (numba loaded, not before)
                from .waits import moved
                if not moved(self.calls, seen, SPINS):
                    with self.posted:
                        self.posted.wait_for(lambda: int(self.calls[0]) != seen)
            with self.posted:
                seen, take = int(self.calls[0]), self.take
            if take is None:
                return
            take()
            take = None   # nothing of a call kept while waiting for the next

    def stop(self) -> None:
        """End the threads (at exit: none may spin on this crew's memory while it is freed)."""
        with self.posted:
            self.take = None
            self.calls[0] += 1
            self.posted.notify_all()


def _nothing() -> None:
    """The take of a call that has ended."""


def _helpers() -> _Crew:
    global _crew
    with _lock:
        if _crew is None or _crew.pid != os.getpid():
            if _crew is None:
                atexit.register(_stop)
            _crew = _Crew()
        return _crew


def _stop() -> None:
    """Stop this process's crew; a later call starts a new one."""
    global _crew
    with _lock:
        if _crew is not None and _crew.pid == os.getpid():
            _crew.stop()
            _crew = None


def run(kernel, parts: list, threads: int) -> None:
    """Call kernel(*args) for each tuple of arguments in `parts` on up to `threads` threads, this
    one among them, each taking the next part not yet taken; return when every part taken has
    returned, raising the first error one raised (an interrupt of this thread: no part starts
    after it, and it is raised once the parts already started have ended). Nothing for no
    parts."""
    threads = min(threads, len(parts))
    if threads <= 1:
        for args in parts:
            kernel(*args)
        return
    from .waits import all_set
    order = iter(range(len(parts)))   # next() on these is atomic: the GIL holds
    seats = iter(range(threads - 1))
    # who started each part (1: a helper, 2: this thread), and which have ended
    started, ended = np.zeros(len(parts), np.int8), np.zeros(len(parts), np.int64)
    guard = threading.Lock()           # a part starts, or the call is cancelled: not both
    cancelled, errors, left = [], [], [len(parts)]
    finished = threading.Event()

    def take(helper=True):
        if helper and next(seats, None) is None:
            return
        for i in order:
            with guard:
                if cancelled:
                    return
                started[i] = 1 if helper else 2
            try:
                kernel(*parts[i])
            except BaseException as e:
                if not (helper or isinstance(e, Exception)):
                    raise   # an interrupt of the caller: cancel the call
                errors.append(e)
            finally:
                ended[i] = 1
                with guard:
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()

    crew = _helpers()
    try:
        crew.post(take, threads - 1)
        take(helper=False)
        if not all_set(ended, SPINS):
            finished.wait()
    except BaseException:
        with guard:
            cancelled.append(True)
        while not ended[started == 1].all():   # no helper's part of this call outlives it
            time.sleep(1e-4)
        raise
    finally:
        crew.done(take)
    if errors:
        raise errors[0]


def parts_for(threads: int) -> int:
    """How many parts to cut a call that takes any cut into, for `threads` threads."""
    return threads * PARTS_PER_THREAD if threads > 1 else 1


def cuts(total: int, parts: int, align: int = 1) -> list:
    """Bounds 0 = b0 < b1 < ... = total cutting range(total) into at most `parts` contiguous parts
    of about equal size, each bound but the last a multiple of `align`; [0] when total is 0."""
    bounds = [0]
    for t in range(1, parts):
        b = min(total, -(-total * t // parts // align) * align)
        if b > bounds[-1]:
            bounds.append(b)
    if total > bounds[-1]:
        bounds.append(total)
    return bounds
