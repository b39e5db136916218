"""The thread policy: how many threads one kernel call may use (its parts on Python threads:
thread_parts.py; the raw-buffer kernels' on numba's, `parallel`).

A call uses several threads only when it is large enough to repay waking them, and only from the
main thread of a process that no pool started. Inside a foreign worker (a dask, concurrent.futures
or scan thread; a worker *process* of dask's "processes" scheduler, multiprocessing or
concurrent.futures) the pool already spreads work over the cores, and threads inside each of its
workers would multiply: N workers x all cores. The user's cap (`set_num_threads`, or the
environment variable FPCLASS_NUM_THREADS) and numba's own count for the calling thread
(`numba.set_num_threads`, NUMBA_NUM_THREADS) bound the rest; a call on numba's threads lowers
numba's count for its duration only (`parallel`). One buffer too small for every core by that
rule may still be read in one part per thread when reading it so has proved faster
(SplitChoice). Importing this module does not import numba.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
import time

#: The environment variable that caps the threads of one call: checked when fpclass is imported
#: and read again at every call that could use threads, so a change takes effect at once.
ENV = "FPCLASS_NUM_THREADS"
#: Below this many elements one thread is faster than waking others (measured for numba's pool;
#: thread_parts.py's still gain at this size: docs/benchmarks.md, issue 22, fifteenth round).
PARALLEL_MIN = 1 << 22
#: Reads of one buffer from this many words up to PARALLEL_MIN may go in per-thread parts,
#: as SPLIT says (SplitChoice). Not from 2^18: the README's MLP's 1 MiB weight gradients cost
#: its step 2.8-5.0 points more in parts than on one thread in 6 runs of 6 (docs/benchmarks.md,
#: issue 22, eighth round).
SPLIT_MIN = 1 << 19

_cap: int | None = None  # set_num_threads's cap; None: not set
_numba_started = False   # _start_numba's
_numba_lock = threading.Lock()


def _checked(n, what: str) -> int:
    try:
        if isinstance(n, bool):
            raise TypeError
        count = operator.index(n)
    except TypeError:
        raise TypeError(f"{what} must be an integer >= 1 or None (no cap), got {n!r}") from None
    if count < 1:
        raise ValueError(f"{what} must be an integer >= 1 or None (no cap), got {n!r}")
    return count


def _env_cap() -> int | None:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"the environment variable {ENV} must be an integer >= 1, got {text!r}")
    return count


def set_num_threads(n: int | None) -> None:
    """Cap the threads one fpclass call may use at `n` (>= 1), over FPCLASS_NUM_THREADS; None
    removes the cap. Numba's count for the calling thread still bounds it."""
    global _cap
    _cap = None if n is None else _checked(n, "set_num_threads's argument")


def _start_numba() -> None:
    """Start numba's threading layer (once a process) on the calling thread, as numba would,
    then give torch back the thread count it had there. Numba's OpenMP layer sets the starting
    thread's OpenMP thread count to numba's (omp_set_num_threads), and torch, sharing that
    OpenMP runtime, reads its count from the same setting: fpclass's first parallel call
    turned a `torch.set_num_threads(1)` into numba's count. Only torch is asked (when already
    imported: its count read before, set back only where it moved, through the OpenMP
    runtime's own setter, or else torch's, which also sets torch's default for new threads).
    The layer starts on the caller's thread, not one of fpclass's own, because numba's TBB
    layer takes the thread that starts it for the one it may fork from. Every parallel call
    asks get_num_threads first. Imports numba."""
    global _numba_started
    if _numba_started:
        return
    with _numba_lock:
        if _numba_started:
            return
        import numba
        torch = sys.modules.get("torch")
        get, put = (getattr(torch, name, None) for name in ("get_num_threads", "set_num_threads"))
        count = get() if callable(get) and callable(put) else None
        numba.get_num_threads()  # (starts the layer)
        if count is not None and get() != count:
            setter = _openmp_count_setter()
            if setter is not None:  # what numba moved: this thread's OpenMP count, no more
                setter(count)
            if get() != count:  # another runtime: torch's setter, which also sets its
                put(count)      # default for threads that start later
        _numba_started = True


def _openmp_count_setter():
    """omp_set_num_threads as the process's global symbols resolve it (where numba's OpenMP
    layer's own call went when it moved torch's count: torch loads its OpenMP runtime into
    that scope), or None (no such symbol there, or no lookup on this platform)."""
    try:
        import ctypes
        return ctypes.CDLL(None).omp_set_num_threads
    except (OSError, AttributeError, TypeError):
        return None


def get_num_threads() -> int:
    """The threads a large call from this thread would use if it were the main thread of a main
    process: the cap, at most numba's count for this thread (imports numba to read it)."""
    _start_numba()
    import numba
    cap = _cap if _cap is not None else _env_cap()
    available = numba.get_num_threads()
    return available if cap is None else min(cap, available)


def in_foreign_worker() -> bool:
    """Is this call running inside someone else's pool: not on the main thread, or in a process
    that multiprocessing (and so concurrent.futures and dask's process pools) started?"""
    if threading.current_thread() is not threading.main_thread():
        return True
    # a process that multiprocessing started has imported it: no import needed to ask
    process = sys.modules.get("multiprocessing")
    return process is not None and process.parent_process() is not None


def threads_for(elements: int) -> int:
    """How many threads a kernel over `elements` elements may use: 1 below PARALLEL_MIN and in a
    foreign worker, else get_num_threads(). Run the kernel in parts on n threads
    (thread_parts.run), or a prange kernel inside `parallel(n)`."""
    if elements < PARALLEL_MIN or in_foreign_worker():
        return 1
    return get_num_threads()


def pool_threads() -> int:
    """How many threads a pool fpclass starts itself may run (the scan's readers and decoders,
    when the caller names no count): one inside a foreign worker, as for a kernel call (the
    pool it runs in already spreads work over the cores), else one per core, at most the
    user's cap (set_num_threads, FPCLASS_NUM_THREADS)."""
    if in_foreign_worker():
        return 1
    cores = os.cpu_count() or 1
    cap = _cap if _cap is not None else _env_cap()
    return cores if cap is None else min(cap, cores)


class SplitChoice:
    """Whether one buffer of SPLIT_MIN to PARALLEL_MIN words is read on one thread or in one
    part per thread (the k-th part on numba's k-th thread: with numba's OpenMP layer these are
    torch's own threads, and flat loops split alike).

    A buffer that several cores have just written is read back faster by the same threads, each
    its own part, when the cores share no cache, and by one thread, waking no other, when they
    do; which holds depends on the machine's state, which changes while a process runs, and the
    reads' own times do not show it: most of the cost lands in the caller's next operations
    (measured: docs/benchmarks.md). So the caller marks periods of its work (fpclass.torch.watch:
    each forward pass), and the choice times each from its mark to the end of its last such read
    (read_ended; what a way costs the operations after that read goes untimed); a period with
    no such read (a second mark, a pass whose tensors are all smaller) is left out. A trial runs
    PAIRS pairs of periods, one each way in a random order (callers whose periods alternate, two
    models a step, favour neither way); the way the median of the pairs' differences finds
    faster is kept for KEEP periods, then a new trial. Only the main thread of a process that
    multiprocessing did not start marks, times and splits (in_foreign_worker)."""

    WARM, PAIRS, KEEP = 3, 16, 480

    def __init__(self, clock=time.perf_counter, seed: int = 0):
        if min(self.WARM, self.PAIRS, self.KEEP) < 1:
            raise ValueError(f"SplitChoice needs WARM, PAIRS and KEEP >= 1, got {self.WARM}, "
                             f"{self.PAIRS}, {self.KEEP}")
        self.split = False
        self.chosen: list = []  # each trial's way, the last 64
        self._clock = clock
        self._seed, self._order = seed, None  # which way goes first in each trial pair
        self._marks = 0
        self._mark = self._ended = None
        self._trial: list = []  # (split?, seconds) per timed trial period

    def threads(self, elements: int) -> int:
        """How many threads the next read of `elements` words uses (in parts when > 1)."""
        if not self.split or not SPLIT_MIN <= elements < PARALLEL_MIN or in_foreign_worker():
            return 1
        return get_num_threads()

    def read_ended(self) -> None:
        """A read of SPLIT_MIN to PARALLEL_MIN words has just ended."""
        if not in_foreign_worker():
            self._ended = self._clock()

    def mark(self) -> None:
        """A period of the caller's work begins (and the last one ends)."""
        if in_foreign_worker():
            return
        timed = self._ended is not None
        ends = self._position()
        if timed and ends is not None and ends < 2 * self.PAIRS:
            self._trial.append((self.split, self._ended - self._mark))
        self._mark, self._ended = self._clock(), None
        if self._marks and not timed:
            return  # an untimed period takes no place: the next one reads the same way
        self._marks += 1
        begins = self._position()
        if begins is None:
            return
        if begins < 2 * self.PAIRS:
            self.split = self._first_way() if begins % 2 == 0 else not self.split
        elif begins == 2 * self.PAIRS:
            self.split = self._decide(self._trial)
            self.chosen = [*self.chosen[-63:], self.split]
            self._trial = []

    def _first_way(self) -> bool:
        """A trial pair's first way, drawn (random is imported when a trial first needs it, not
        with fpclass)."""
        if self._order is None:
            import random
            self._order = random.Random(self._seed)
        return self._order.random() < 0.5

    def _decide(self, trial: list) -> bool:
        """Split, when the median of the trial's pairs' differences says it is faster."""
        gains = [(a - b if split_first else b - a)
                 for (split_first, a), (_, b) in zip(trial[0::2], trial[1::2])]
        gains.sort()
        middle = len(gains) // 2
        return bool(gains) and gains[middle] + gains[~middle] < 0  # the median, doubled

    def _position(self) -> int | None:
        """The place of the current period in its trial and keep cycle (None while warming)."""
        at = self._marks - 1 - self.WARM
        return None if at < 0 else at % (2 * self.PAIRS + self.KEEP)


#: The process's choice: the screens read it, fpclass.torch.watch marks its passes.
SPLIT = SplitChoice()


class parallel:
    """Numba's thread count for this thread lowered to `n` (from threads_for) for the duration
    of a `with` block, then restored: the user's own numba setting is never changed by a call.
    A class, not a generator: a hook's read enters one per large read, where contextlib's
    machinery cost more than the count it guards."""

    __slots__ = ("n", "before")

    def __init__(self, n: int):
        self.n = n

    def __enter__(self) -> None:
        import numba
        self.before = numba.get_num_threads()
        if self.n < self.before:
            numba.set_num_threads(self.n)

    def __exit__(self, *exc) -> None:
        if self.n < self.before:
            import numba
            numba.set_num_threads(self.before)


_env_cap()  # a bad FPCLASS_NUM_THREADS fails `import fpclass`, not some later large call
