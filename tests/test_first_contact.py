"""A new user's first minute: answers before any compile, the same answers as the kernels."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_first_scan_with_an_empty_numba_cache_needs_no_compile(tmp_path):
    code = ("import sys\n"
            "from fpclass.scan import scan\n"
            "r = scan(['examples'])\n"
            "nan = {t.name: t.nan for t in r.tensors if t.nan}\n"
            "print(int(r.exit_code), sorted(nan.items()), 'numba' in sys.modules)")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == (
        "1 [('blk.0.attn_q.weight', 1), ('layer.0.weight', 1), ('state.0.exp_avg', 1)] False")
    cache = tmp_path / "empty-cache"
    assert not cache.exists() or not os.listdir(cache)   # nothing was compiled


def test_warmup_fills_an_empty_numba_cache_once(tmp_path, session_warmup):
    # the one full cold warm-up of the suite: in two worker processes, merged into one cache.
    # A run of the whole suite on a fresh clone made it before its tests (conftest.py), into
    # numba's own cache, then empty: that run is checked; otherwise one into an empty folder.
    if session_warmup is not None and session_warmup["empty"]:
        # its cache as it left it, copied before the tests compiled into the real one
        assert session_warmup["returncode"] == 0, session_warmup["stderr"]
        snapshot = session_warmup["snapshot"]
        env = {**os.environ, "NUMBA_CACHE_DIR": str(snapshot)}
        cache = snapshot
        returncode, stdout, stderr = (session_warmup[k] for k in ("returncode", "stdout",
                                                                   "stderr"))
    else:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
        cache = tmp_path / "cache"
        first = subprocess.run([sys.executable, "-m", "fpclass", "warmup", "--workers", "2"],
                               capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200)
        returncode, stdout, stderr = first.returncode, first.stdout, first.stderr
    assert returncode == 0, stderr
    assert "every kernel compiled or loaded" in stdout
    # progress: a line as each part ends, numbered, naming the dtype and the launch mode
    steps = [line for line in stdout.splitlines() if line.startswith("fpclass warmup: [")]
    assert len(steps) >= 8
    assert [s.split("[")[1].split("]")[0] for s in steps] == [
        f"{k}/{len(steps)}" for k in range(1, len(steps) + 1)]
    assert any("float16" in s and "threaded" in s for s in steps)
    assert any("codecs" in s for s in steps) and any("density" in s for s in steps)
    cached = sorted(p.name for p in cache.rglob("*.nbi"))
    assert cached   # numba's index files: the kernels are in the cache
    assert list(cache.rglob("fpclass-warm.txt"))   # the cache is said warm
    # a fresh process running every unit (every kernel the warm-up knows), then the public
    # calls on read-only and broadcast (stride-0) arrays of each word width, which the units do
    # not make, compiles nothing: numba's own count of cache misses, over every kernel dispatcher
    code = ("import gc\n"
            "import ml_dtypes, numpy as np\n"
            "from numba.core.dispatcher import Dispatcher\n"
            "import fpclass\n"
            "from fpclass.kernels import numpy_bits\n"
            "from fpclass.operators import warmup\n"
            "for unit in warmup.units():\n"
            "    warmup.compile_unit(*unit)\n"
            "numpy_bits.SMALL_BYTES = -1\n"   # the kernels, however small the input
            "for name in ('float64', 'float32', 'float16', 'bfloat16', 'float8_e4m3fn',\n"
            "             'complex64', 'complex128', '>f4'):\n"
            "    x = np.zeros((64, 48), getattr(ml_dtypes, name, name))\n"
            "    x.flags.writeable = False\n"
            "    for a in (x, np.broadcast_to(x[:1], x.shape)):\n"
            "        fpclass.any_nan(a), fpclass.count_nan(a), fpclass.first_nonfinite(a)\n"
            "        fpclass.isnan(a), fpclass.locate_nan(a, 2)\n"
            "        if a.dtype.kind != 'c':\n"
            "            fpclass.class_counts(a)\n"
            "    fpclass.isnan(np.zeros(100_000, x.dtype))\n"   # past the small path
            # the HDF5 decoders, on the writable buffers the reader hands them
            "from fpclass.kernels.lzf import lzf_decompress\n"
            "from fpclass.kernels.unshuffle import unshuffle\n"
            "out = np.zeros(64, np.uint8)\n"
            "assert lzf_decompress(memoryview(bytearray(b'\\x03abcd')), out) == 4\n"
            "for size in (2, 4, 8, 3):\n"
            "    unshuffle(memoryview(bytearray(64)), size, out)\n"
            "print(sum(sum(d.stats.cache_misses.values()) for d in gc.get_objects()\n"
            "          if isinstance(d, Dispatcher) and d.py_func.__module__.startswith('fpclass')))")
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, env=env, timeout=600)
    assert again.returncode == 0 and again.stdout.split() == ["0"], again.stderr
    assert sorted(p.name for p in cache.rglob("*.nbi")) == cached
