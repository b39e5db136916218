"""The compile policy (FPCLASS_COMPILE): while numba's cache is cold, large calls are answered by
NumPy (the same answers as the twin), one background warm-up starts per cache, calls switch to
the kernels once the warm-up's stamp appears; and the parallel warm-up's cache merge keeps every
worker's entries (checked by numba's own cache-miss counts in a fresh process, not by timing)."""

import io
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import fpclass
from fpclass import cli
from fpclass.kernels import cache_merge, compile_cache
from fpclass.operators.statistics import value_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")

#: Prints how many signatures of fpclass's kernels this process compiled (numba's cache misses;
#: a C callback's, one not loaded from the cache).
MISSES = """
import gc
from numba.core.ccallback import CFunc
from numba.core.dispatcher import Dispatcher
print("misses", sum(sum(d.stats.cache_misses.values()) for d in gc.get_objects()
                    if isinstance(d, Dispatcher)
                    and d.py_func.__module__.startswith("fpclass.kernels"))
      + sum(not f.cache_hits for f in gc.get_objects()
            if isinstance(f, CFunc) and f._pyfunc.__module__.startswith("fpclass.kernels")))
"""


def python(code: str, cache, policy="inline", timeout=600, **extra):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "FPCLASS_COMPILE": policy,
           "PYTHONPATH": SRC, **extra}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def cold(tmp_path, monkeypatch):
    """This process on a cold cache in tmp_path, under the "background" policy, with the
    background start recorded instead of run."""
    monkeypatch.setattr(compile_cache, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(compile_cache, "_forced", None)
    monkeypatch.setenv(compile_cache.ENV, "background")
    started = []
    monkeypatch.setattr(compile_cache, "_spawn", lambda: started.append(1))
    compile_cache.reset()
    yield started
    compile_cache.reset()


def test_cold_large_calls_are_numpy_answers_and_import_no_numba(tmp_path):
    code = """
import sys, numpy as np, ml_dtypes, fpclass
from fpclass import twin
from fpclass.operators.statistics import value_stats
rng = np.random.default_rng(0)
ok = []
for dtype in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
              np.complex64, np.dtype(">f4")):
    x = (rng.standard_normal((300, 200)) * 1e3).astype(dtype)
    x.reshape(-1)[::97] = np.nan
    x.reshape(-1)[5::89] = np.inf
    for v in (x, x.T, x[::-2]):
        ok.append((fpclass.isnan(v) == twin.isnan(v)).all())
        ok.append((fpclass.isfinite(v) == twin.isfinite(v)).all())
        ok.append(fpclass.count_nan(v) == np.count_nonzero(twin.isnan(v)))
        ok.append((fpclass.count_nonfinite(v, axis=0) == (~twin.isfinite(v)).sum(axis=0)).all())
        ok.append(fpclass.first_nan(v) == tuple(np.argwhere(twin.isnan(v))[0]))
        if np.dtype(dtype).kind != "c":
            ok.append(fpclass.class_counts(v).nan == np.count_nonzero(twin.isnan(v)))
            ok.append(value_stats(v).nonfinite == np.count_nonzero(~twin.isfinite(v)))
print(all(ok), len(ok), "numba" in sys.modules)
"""
    out = python(code, tmp_path / "cache", policy="numpy")
    assert out.split() == ["True", str(7 * 3 * 5 + 6 * 3 * 2), "False"]
    # nothing compiled, and under "numpy" nothing was started either
    assert not list((tmp_path / "cache").rglob("*.nb*"))
    assert not list((tmp_path / "cache").rglob(compile_cache.LOG))


def test_inline_compiles_on_first_use(tmp_path):
    out = python("import numpy as np, fpclass, sys; fpclass.isnan(np.zeros(1 << 16));"
                 "print('numba' in sys.modules)", tmp_path / "cache", policy="inline")
    assert out.split() == ["True"]
    assert list((tmp_path / "cache").rglob("*.nbi"))


def test_background_starts_once_and_switches_when_the_stamp_appears(cold, tmp_path,
                                                                     monkeypatch):
    from types import SimpleNamespace
    from fpclass.operators import elementwise
    # the cache's clock moved by the test alone: no pause of this process between two calls
    # can pass for the time between two checks
    now = [1000.0]
    monkeypatch.setattr(compile_cache, "time", SimpleNamespace(
        monotonic=lambda: now[0], strftime=time.strftime))
    x = np.zeros(1 << 16, np.float32)
    assert elementwise.launcher(x) is elementwise.numpy_bits    # cold: a start is asked for
    for _ in range(50):                       # many calls, no switch without a stamp
        assert elementwise.launcher(x) is elementwise.numpy_bits
    assert cold == []                         # not from the first call: it costs milliseconds
    for _ in range(3):                        # the next checks start it, once
        now[0] += compile_cache.RECHECK_SECONDS + 0.02
        assert elementwise.launcher(x) is elementwise.numpy_bits
        for thread in compile_cache._threads:
            thread.join()
    assert cold == [1]
    compile_cache.write_stamp(1)              # what a finished warm-up leaves
    assert elementwise.launcher(x) is elementwise.numpy_bits    # (before the next check)
    now[0] += compile_cache.RECHECK_SECONDS + 0.02
    assert elementwise.launcher(x) is not elementwise.numpy_bits
    assert cold == [1]
    assert (fpclass.isnan(x) == np.isnan(x)).all()


def test_a_short_process_starts_the_warmup_as_it_exits(tmp_path):
    code = ("import numpy as np, fpclass\n"
            "from fpclass.kernels import compile_cache\n"
            "compile_cache._spawn = lambda: print('started')\n"
            "print(int(fpclass.count_nan(np.zeros(1 << 16))))")
    assert python(code, tmp_path / "cache", policy="background").split() == ["0", "started"]
    assert python(code, tmp_path / "cache", policy="numpy").split() == ["0"]


def test_small_calls_never_look_at_the_cache(cold, monkeypatch):
    def looked():
        raise AssertionError("a small call looked for the stamp")
    monkeypatch.setattr(compile_cache, "is_warm", looked)
    x = np.arange(100, dtype=np.float32)
    fpclass.isnan(x), fpclass.any_nan(x), fpclass.count_nan(x, axis=0), value_stats(x)
    assert cold == []


def test_a_stale_stamp_is_cold(cold, tmp_path):
    compile_cache.write_stamp(1)
    assert compile_cache.is_warm()
    stamp = tmp_path / compile_cache.STAMP
    stamp.write_text("0" * 64 + "\n")          # left by other kernel sources or versions
    assert not compile_cache.is_warm()


def test_a_full_warmup_starts_from_nothing_unless_a_valid_stamp_vouches(cold, tmp_path):
    # numba would keep serving a kernel whose inlined helper module (rows.py) was edited
    cached = [tmp_path / "slices.reduce_plan-151.py311.nbi", tmp_path / "slices.x-1.py311.1.nbc"]
    other = tmp_path / "notes.txt"
    for path in cached + [other]:
        path.write_bytes(b"old")
    compile_cache.write_stamp(1)
    assert compile_cache.purge_unstamped() == 0 and all(p.exists() for p in cached)
    (tmp_path / compile_cache.STAMP).write_text("0" * 64 + "\n")   # other sources
    assert compile_cache.purge_unstamped() == 2
    assert not any(p.exists() for p in cached) and other.exists()


def test_a_warmup_holding_the_lock_means_no_second_one(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "cache_dir", lambda: tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from fpclass.kernels import compile_cache as c\n"
         f"c.cache_dir = lambda: __import__('pathlib').Path({str(tmp_path)!r})\n"
         "with c.warmup_lock():\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert compile_cache._spawn() is None            # nothing started
        assert not (tmp_path / compile_cache.LOG).exists()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert compile_cache._lock_free(tmp_path)


def test_the_background_warmup_is_a_detached_quiet_one_worker_warmup(tmp_path, monkeypatch):
    folder = tmp_path / compile_cache.cache_subpath()    # where the child will look
    monkeypatch.setattr(compile_cache, "cache_dir", lambda: folder)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    proc = compile_cache._spawn()
    try:
        assert proc is not None
        assert proc.args[1:] == ["-m", "fpclass", "warmup", "-q", "--workers", "1"]
        assert os.getsid(proc.pid) == proc.pid            # its own session: outlives its parent
        deadline = time.monotonic() + 120
        while compile_cache._lock_free(folder):             # the child holds the lock
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_the_policy_is_checked(monkeypatch):
    monkeypatch.setattr(compile_cache, "_forced", None)
    monkeypatch.setenv(compile_cache.ENV, "later")
    accepted = "FPCLASS_COMPILE must be one of background, numpy, inline"
    with pytest.raises(ValueError, match=accepted):
        compile_cache.policy()
    with pytest.raises(ValueError, match="policy must be one of"):
        compile_cache.set_policy("eager")


def test_the_cache_folder_is_the_one_numba_uses(tmp_path):
    code = ("from fpclass.kernels import compile_cache as c\n"
            "before = c.cache_dir()\n"
            "from fpclass.kernels import elementwise\n"
            "print(before == c.cache_dir()\n"
            "      and str(before) == elementwise.mask_flat._cache.cache_path)")
    assert python(code, tmp_path / "cache").split() == ["True"]


def test_a_cold_scan_says_so_once_and_answers(cold, tmp_path, monkeypatch):
    x = np.ones((200, 100), np.float32)
    x[3, 4] = np.nan
    np.save(tmp_path / "big.npy", x)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["scan", "--json", str(tmp_path / "big.npy")], stdout=out, stderr=err)
    assert code == 1
    assert err.getvalue().count("kernel cache is cold") == 1, err.getvalue()
    assert "fpclass warmup" in err.getvalue()


def test_warmup_refuses_no_workers():
    err = io.StringIO()
    assert cli.main(["warmup", "--workers", "0"], stdout=io.StringIO(), stderr=err) == 4
    assert "--workers must be >= 1" in err.getvalue()


def test_merging_keeps_every_workers_entries(tmp_path):
    # two workers compile two signatures of one kernel: each names its data file ".1.nbc", and
    # writing both into one cache directly would keep one
    def compile_in(private, word):
        python("import numpy as np\nfrom fpclass.kernels import unshuffle\n"
               f"unshuffle._kernel(0)(np.zeros(4, np.{word}), np.zeros(4, np.{word}), 2, 2)",
               private)
    compile_in(tmp_path / "w0", "uint8")
    compile_in(tmp_path / "w1", "uint16")
    sub = compile_cache.cache_subpath()
    target = tmp_path / "cache" / sub
    keys = [cache_merge.index_keys(tmp_path / w / sub) for w in ("w0", "w1")]
    assert sum(cache_merge.merge_into(tmp_path / w, target) for w in ("w0", "w1")) == 2
    merged = cache_merge.index_keys(target)
    assert len(keys[0]) == len(keys[1]) == len(merged) == 1
    name = next(iter(merged))
    assert merged[name] == keys[0][name] | keys[1][name] and len(merged[name]) == 2
    out = python("import numpy as np\nfrom fpclass.kernels import unshuffle\n"
                 "for w in (np.uint8, np.uint16):\n"
                 "    unshuffle._kernel(0)(np.zeros(4, w), np.zeros(4, w), 2, 2)\n" + MISSES,
                 tmp_path / "cache")
    assert out.split() == ["misses", "0"]


def test_a_parallel_warmup_of_some_units_leaves_nothing_to_compile(tmp_path):
    code = ("from fpclass.operators import warmup\n"
            "seen = []\n"
            "warmup.compile_kernels(lambda *a: seen.append(a), workers=2,\n"
            "                       todo=[warmup.CODECS, warmup.DENSITY])\n"
            "print(len(seen), sorted(u for _, _, u, _ in seen))")
    out = python(code, tmp_path / "cache")
    assert out.strip() == "2 [('codecs', 'serial'), ('density', 'serial')]"
    # a subset writes no stamp: only a complete warm-up makes the cache warm
    assert not list((tmp_path / "cache").rglob(compile_cache.STAMP))
    again = python("from fpclass.operators import warmup\n"
                   "warmup.compile_unit(*warmup.CODECS); warmup.compile_unit(*warmup.DENSITY)\n"
                   "from fpclass.kernels import index_rows\n"
                   "print('callback', index_rows.collect.cache_hits)\n"
                   + MISSES, tmp_path / "cache")
    assert again.split() == ["callback", "1", "misses", "0"]
