"""The thread policy: the user's cap, and one thread inside foreign workers (dask's threads and
processes schedulers), checked by whether numba's thread pool or fpclass's own threads
(kernels/thread_parts.py) were ever started."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fpclass
from fpclass.kernels import threads


@pytest.fixture(autouse=True)
def no_cap(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    yield
    fpclass.set_num_threads(None)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_cap_is_refused(bad):
    with pytest.raises(ValueError if isinstance(bad, int) and not isinstance(bad, bool) else TypeError,
                       match="integer >= 1"):
        fpclass.set_num_threads(bad)
    fpclass.set_num_threads(np.int64(1))  # any integer type
    assert fpclass.get_num_threads() == 1


def test_a_bad_environment_cap_names_the_variable(monkeypatch):
    monkeypatch.setenv(threads.ENV, "many")
    with pytest.raises(ValueError, match=threads.ENV):
        fpclass.get_num_threads()


def test_a_bad_environment_cap_fails_the_import():
    env = {**os.environ, threads.ENV: "0"}
    out = subprocess.run([sys.executable, "-c", "import fpclass"], capture_output=True, text=True,
                         env=env)
    assert out.returncode != 0 and threads.ENV in out.stderr and "'0'" in out.stderr


def test_numbas_own_count_bounds_a_call_and_is_left_as_it_was():
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    x = np.zeros(threads.PARALLEL_MIN, np.float32)
    x[-1] = np.nan
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)                     # the user's own numba setting
        assert threads.threads_for(x.size) == 1
        assert fpclass.count_nan(x) == 1 and numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(before)


def test_the_cap_lowers_numbas_count_for_the_call_only():
    # four numba threads (more than this machine may have: numba allows it), a cap of two
    code = textwrap.dedent("""
        import numba, numpy as np, fpclass
        from fpclass.kernels import threads
        fpclass.set_num_threads(2)
        x = np.zeros(threads.PARALLEL_MIN, np.float16)
        x[-1] = np.nan
        print(threads.threads_for(x.size), fpclass.count_nan(x), fpclass.isnan(x).sum(),
              fpclass.count_nan(x.reshape(1024, -1), axis=1).sum(), numba.get_num_threads())
    """)
    env = {**os.environ, "NUMBA_NUM_THREADS": "4"}
    env.pop(threads.ENV, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "1", "1", "1", "4"]


def test_the_cap_bounds_a_large_call(monkeypatch):
    import numba
    available = numba.get_num_threads()
    assert threads.threads_for(threads.PARALLEL_MIN) == available
    fpclass.set_num_threads(1)
    assert threads.threads_for(threads.PARALLEL_MIN) == 1
    fpclass.set_num_threads(None)
    monkeypatch.setenv(threads.ENV, "1")
    assert fpclass.get_num_threads() == 1 and threads.threads_for(1 << 40) == 1
    fpclass.set_num_threads(available + 5)  # numba's own count still bounds it
    assert fpclass.get_num_threads() == available
    assert threads.threads_for(threads.PARALLEL_MIN - 1) == 1


def test_a_capped_call_still_answers_right():
    x = np.ones(threads.PARALLEL_MIN + 3, np.float16)
    x[-1] = np.nan
    fpclass.set_num_threads(1)
    assert fpclass.count_nan(x) == 1 and fpclass.first_nan(x) == (x.size - 1,)


_TORCH_COUNT = textwrap.dedent("""
    import threading
    import numba, numpy as np, torch

    def on_a_new_thread(then):
        seen = []
        worker = threading.Thread(target=lambda: seen.append(then()))
        worker.start()
        worker.join()
        return seen[0]

    torch.set_num_threads(1)
    torch.get_num_threads()  # torch has run on this thread before fpclass's first call
    # another thread's count, which torch also makes its default for threads started later
    on_a_new_thread(lambda: torch.set_num_threads(3))
    import fpclass
    from fpclass.kernels import threads
    tensors = [torch.ones(threads.PARALLEL_MIN // 4) for _ in range(8)]
    tensors[3][5] = float("nan")
    report = fpclass.check(tensors)  # numba's threads: the raw-buffer kernel's prange
    after_check = torch.get_num_threads()
    x = np.ones(threads.PARALLEL_MIN, np.float16)
    x[-1] = np.nan
    print([t.name for t in report.failing], after_check, fpclass.count_nan(x),
          torch.get_num_threads(), fpclass.get_num_threads(), numba.threading_layer(),
          on_a_new_thread(torch.get_num_threads))
""")


def test_numbas_threads_start_without_changing_torchs_count():
    # numba's OpenMP layer sets the OpenMP thread count of the thread that starts it, and torch
    # reads its own there: a training loop's torch.set_num_threads(1) must survive fpclass
    pytest.importorskip("torch")
    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "NUMBA_THREADING_LAYER": "omp"}
    env.pop(threads.ENV, None)
    layer = subprocess.run([sys.executable, "-c", "import numba.np.ufunc.omppool"],
                           capture_output=True, text=True, env=env, timeout=300)
    if layer.returncode:
        pytest.skip(f"numba has no OpenMP threading layer here: {layer.stderr.strip()[-200:]}")
    out = subprocess.run([sys.executable, "-c", _TORCH_COUNT], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    # this thread's count kept, and the default other threads start with left alone
    assert out.stdout.split() == ["['3']", "1", "1", "1", "2", "omp", "3"]


_PROBE = textwrap.dedent("""
    import sys, threading
    import dask, dask.array as da, numpy as np
    import numba.np.ufunc.parallel as pool
    import fpclass
    from fpclass.kernels import threads

    def crew():
        return any(t.name.startswith("fpclass-part-") for t in threading.enumerate())

    def task(block):
        # what the policy allows here, the answer, and whether numba's pool or fpclass's threads
        # ever started here
        n = fpclass.count_nan(block)
        return np.array([[threads.threads_for(block.size), n, pool._is_initialized, crew()]])

    if __name__ == "__main__":
        scheduler = sys.argv[1]
        size = threads.PARALLEL_MIN
        x = da.from_array(np.full(4 * size, np.nan, np.float16), chunks=size)
        with dask.config.set(scheduler=scheduler, num_workers=2):
            rows = x.map_blocks(task, chunks=((1,) * 4, (4,)), dtype=np.int64, new_axis=1).compute()
        main_before = pool._is_initialized, crew()
        fpclass.count_nan(np.zeros(size, np.float16))  # the control: from here the threads start
        print(rows.tolist(), *main_before, pool._is_initialized, crew())
""")


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_dask_workers_never_start_numba_threads(scheduler, tmp_path):
    pytest.importorskip("dask.array")
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here: there is no pool to start")
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    out = subprocess.run([sys.executable, str(script), scheduler], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    rows, words = out.stdout.rsplit(None, 4)[0], out.stdout.split()
    main_before, main_after = words[-4:-2], words[-2:]
    size = threads.PARALLEL_MIN
    assert eval(rows) == [[1, size, False, False]] * 4
    assert (main_before, main_after) == (["False", "False"], ["True", "True"])
