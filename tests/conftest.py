import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
# The kernel tests test the kernels: compile on first use, never NumPy answers while numba's cache
# is cold, and never a background warm-up started by the suite (also in its subprocesses, which
# inherit this). tests/test_compile_policy.py sets its own policy in its own subprocesses.
os.environ["FPCLASS_COMPILE"] = "inline"

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_split_choice(monkeypatch):
    """Every test starts with a fresh choice of how watch's screen reads large tensors (one
    thread, warming up): the passes an earlier test watched do not decide a later test's reads."""
    from fpclass.kernels import threads
    monkeypatch.setattr(threads, "SPLIT", threads.SplitChoice())


@pytest.fixture(params=["numpy", "kernels"])
def both_launchers(request, monkeypatch):
    """Runs a test once with every input classified by NumPy bit tests (the path small inputs
    take, with nothing to compile) and once by the numba kernels: both must answer the same."""
    from fpclass.kernels import numpy_bits
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", 1 << 62 if request.param == "numpy" else -1)
    return request.param


@pytest.fixture(params=["numpy", "serial", "threaded"])
def launcher(request, monkeypatch):
    """NumPy's bit tests (small inputs), the numba kernels on one thread, and in parts on several
    threads with every input over the threshold, the parts as small as the launchers allow.
    (A test module may define its own `launcher`.)"""
    from fpclass.kernels import numpy_bits, threads
    monkeypatch.setattr(numpy_bits, "SMALL_BYTES", 1 << 62 if request.param == "numpy" else -1)
    if request.param == "threaded":
        from fpclass.kernels import launch_elementwise, launch_reduce, launch_stats
        monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
        for module in (launch_elementwise, launch_reduce, launch_stats):   # parts of 256 elements
            monkeypatch.setattr(module, "BLOCK", 256)
    return request.param


def pytest_collection_modifyitems(items):
    # Once the adapter tests have imported JAX, JAX warns at every os.fork() in this process (its
    # threads would not survive into the child); tests that fork a worker later say nothing
    # about fpclass by it, and -W error would fail them.
    if "jax" in sys.modules:
        ignore = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
        for item in items:
            item.add_marker(ignore)


#: A run of at least this many tests warms numba's cache first when it is cold (a fresh clone):
#: one `fpclass warmup` on two processes takes about 65 s there, where the tests compiling each
#: kernel as they first call it, on one core, took 190 s of the suite's 650.
WARM_FIRST_AT = 1000
#: What that warm-up did (None: it did not run): its command's output and whether numba's cache
#: held no kernel before it (tests/test_first_contact.py checks such a run instead of its own).
SESSION_WARMUP: dict | None = None


def pytest_collection_finish(session):
    global SESSION_WARMUP
    config = session.config
    # not for a listing, nor in a pytest-xdist worker (each would warm the same cache)
    if (len(session.items) < WARM_FIRST_AT or config.option.collectonly
            or hasattr(config, "workerinput")):
        return
    from fpclass.kernels import compile_cache
    if compile_cache.is_warm():
        return
    folder = compile_cache.cache_dir()
    empty = not (folder.is_dir() and any(folder.glob("*.nbi")))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:  # a minute with nothing on the screen otherwise
        reporter.write_line("numba's cache is cold: `fpclass warmup --workers 2` first ...")
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "fpclass", "warmup", "--workers", "2"],
                              capture_output=True, text=True, timeout=1200,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:  # the tests compile as they go, as without it
        returncode, stdout, stderr = None, str(e.stdout or ""), f"timed out: {e}"
    snapshot = None
    if empty and returncode == 0:
        # the cache as the warm-up left it, before the tests add to it: what the first-contact
        # test checks (a NUMBA_CACHE_DIR holding the kernels' folder under numba's own name)
        snapshot = Path(tempfile.mkdtemp(prefix="fpclass-suite-warmup-"))
        shutil.copytree(folder, snapshot / compile_cache.cache_subpath())
        atexit.register(shutil.rmtree, snapshot, True)
    SESSION_WARMUP = {"returncode": returncode, "stdout": stdout, "stderr": stderr,
                      "empty": empty, "folder": folder, "snapshot": snapshot,
                      "seconds": time.perf_counter() - start}


def pytest_terminal_summary(terminalreporter):
    if SESSION_WARMUP is not None:
        w = SESSION_WARMUP
        terminalreporter.write_line(
            f"numba's cache was cold: `fpclass warmup --workers 2` ran before the tests "
            f"({w['seconds']:.0f} s, exit {w['returncode']}, into {w['folder']})")


@pytest.fixture
def session_warmup():
    """The warm-up this run made before its tests on a cold cache (see pytest_collection_finish),
    or None."""
    return SESSION_WARMUP
