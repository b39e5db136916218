"""kernels/thread_parts.py: every part of a call runs once and has ended when the call returns,
on as many threads as asked and no more; errors reach the caller; a forked child and the
interpreter's exit are safe."""

import _thread
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

from fpclass.kernels import thread_parts


def _record(log, i, pause=0.0):
    """A part that takes `pause` seconds (GIL released while it sleeps) and notes its thread."""
    time.sleep(pause)
    log.append((i, threading.get_ident()))


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 40])
def test_every_part_runs_once_and_has_ended_at_return(threads, n):
    log = []
    thread_parts.run(_record, [(log, i, 0.001 * (i % 3)) for i in range(n)], threads)
    assert sorted(i for i, _ in log) == list(range(n))   # none left running, none twice
    assert len({t for _, t in log}) <= max(1, min(threads, n))


def test_parts_go_to_other_threads_and_the_callers():
    # the first two parts meet at a barrier: they run at once, so on two threads
    meet = threading.Barrier(2, timeout=60)
    log = []

    def part(i):
        if i < 2:
            meet.wait()
        _record(log, i)
    for _ in range(3):   # a new helper, then one spinning or asleep
        log.clear()
        thread_parts.run(part, [(i,) for i in range(6)], 2)
        workers = {t for _, t in log}
        assert sorted(i for i, _ in log) == list(range(6))
        assert threading.get_ident() in workers and len(workers) == 2


def test_one_thread_runs_in_order_on_the_caller():
    log = []
    thread_parts.run(_record, [(log, i) for i in range(5)], 1)
    assert log == [(i, threading.get_ident()) for i in range(5)]


def test_a_part_that_raises_reaches_the_caller_after_the_others_end():
    log = []

    def part(i):
        if i == 3:
            raise ValueError("part 3")
        _record(log, i, 0.005)

    with pytest.raises(ValueError, match="part 3"):
        thread_parts.run(part, [(i,) for i in range(8)], 2)
    assert sorted(i for i, _ in log) == [0, 1, 2, 4, 5, 6, 7]


def test_numba_kernels_write_their_own_parts():
    # the launchers' use: serial nogil kernels, each writing the cells of its own part
    from fpclass.kernels import reductions
    x = np.zeros(1 << 16, np.uint32)
    x[::7] = 0x7FC00000   # NaN every 7th word
    bounds = thread_parts.cuts(x.size, 8, 64)
    rows = np.zeros((len(bounds) - 1, 1), np.int64)
    tests = np.array([[0x7F800000, 0x7F800000, 0x7FFFFF, 0]], np.uint32)
    one, shape = np.array([1], np.int64), np.array([x.size], np.int64)
    for _ in range(20):   # helpers spinning, asleep, late
        rows[:] = 0
        thread_parts.run(reductions.count_range, [(x, 0, one, shape, b0, b1, tests, 1, row)
                                                  for b0, b1, row in zip(bounds, bounds[1:], rows)], 2)
        assert rows[:, 0].tolist() == [len(range(-(-b0 // 7) * 7, b1, 7))
                                       for b0, b1 in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("total, parts, align", [(0, 4, 1), (1, 4, 64), (100, 1, 1), (100, 3, 1),
                                                 (1000, 8, 64), (64, 8, 64), (10**9 + 7, 16, 1 << 16)])
def test_cuts_cover_the_range_in_aligned_growing_parts(total, parts, align):
    bounds = thread_parts.cuts(total, parts, align)
    assert bounds[0] == 0 and bounds[-1] == total
    assert all(a < b for a, b in zip(bounds, bounds[1:]))
    assert len(bounds) - 1 <= parts and all(b % align == 0 for b in bounds[:-1])
    if total >= parts * align:   # enough to cut: about equal parts
        sizes = np.diff(bounds)
        assert len(sizes) == parts and sizes.max() - sizes.min() <= 2 * align


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_runs_parts_on_threads_of_its_own():
    log = []
    thread_parts.run(_record, [(log, i, 0.01) for i in range(4)], 2)   # the parent's threads
    code = textwrap.dedent("""
        import os, sys, threading, time
        from fpclass.kernels import thread_parts
        def part(i, log, meet):
            if i < 2:
                meet.wait()   # the first two parts at once: on two threads
            log.append(threading.get_ident())
        log, meet = [], threading.Barrier(2, timeout=60)
        thread_parts.run(part, [(i, log, meet) for i in range(4)], 2)
        pid = os.fork()
        if pid == 0:   # the child: the parent's helper threads are not here
            child, meet = [], threading.Barrier(2, timeout=60)
            try:
                thread_parts.run(part, [(i, child, meet) for i in range(6)], 2)
            finally:
                os._exit(0 if len(child) == 6 and len(set(child)) == 2 else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"]


def test_the_interpreter_exits_cleanly_after_threaded_calls():
    code = textwrap.dedent("""
        import numpy as np, fpclass
        from fpclass.kernels import threads
        x = np.zeros(threads.PARALLEL_MIN, np.float32)
        x[-1] = np.nan
        for _ in range(3):
            assert fpclass.count_nan(x) == 1 and fpclass.any_nan(x)
        print("done")
    """)
    env = {**os.environ, "FPCLASS_COMPILE": "inline"}
    for _ in range(3):   # helpers spinning at exit
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                             timeout=300)
        assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "done", "")


def test_nothing_of_a_call_is_kept_after_it():
    # the crew's threads hold no part's arguments once the call has returned: a large input or
    # answer is freed when its last user drops it
    data = np.zeros(1 << 10)
    gone = weakref.ref(data)
    thread_parts.run(_record, [([], i, 0.002 * i, ) for i in range(4)] + [(data.tolist(), 9)], 2)
    thread_parts.run(lambda a, i: a.sum(), [(data, i) for i in range(4)], 2)
    del data
    # (a helper may still be leaving its last part for a moment after the call returned: the
    # scheduler can pause it there; kept is what outlives that)
    deadline = time.monotonic() + 2.0
    gc.collect()
    while gone() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
        gc.collect()
    assert gone() is None


@pytest.fixture
def sigint_raises():
    """Python's own SIGINT handler for the test, as an interactive run has it: a process started
    in the background of a non-interactive shell inherits SIGINT ignored, and interrupt_main()
    then does nothing."""
    import signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupt_raises_after_the_started_parts_end_and_starts_no_more(sigint_raises):
    # the caller is interrupted while a helper is in a long part: the interrupt reaches the
    # caller only once that part has ended, and no part starts after it
    ends = {}

    def part(i):
        if i == 0:   # the caller's: interrupt it while the helper works
            threading.Timer(0.05, _thread.interrupt_main).start()
            time.sleep(0.3)
        else:
            time.sleep(0.2)
        ends[i] = time.perf_counter()

    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        thread_parts.run(part, [(i,) for i in range(20)], 2)
    raised = time.perf_counter()
    assert ends and all(t <= raised for t in ends.values())
    time.sleep(0.5)
    assert max(ends.values()) <= raised   # nothing ran on after the call
    assert len(ends) < 10 and raised - start < 10   # and nothing more started once interrupted


def test_stopping_the_crew_ends_its_threads_and_a_later_call_starts_a_new_one():
    thread_parts.run(_record, [([], i, 0.01) for i in range(4)], 2)
    crew = thread_parts._crew
    assert crew is not None and crew.threads
    thread_parts._stop()          # what the interpreter's exit does
    for thread in crew.threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    test_parts_go_to_other_threads_and_the_callers()
    assert thread_parts._crew is not crew
