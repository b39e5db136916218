"""Benchmark a new user's first minute: fresh processes with an empty and a warm numba cache.

    python benchmarks/bench_startup.py [--repeat 5]

Each time is the best of --repeat new processes, started alternately with the floor they are
compared with (`python -c "import numpy"`: no NumPy program starts faster on this machine):
  scan, empty cache   `fpclass scan examples/` with NUMBA_CACHE_DIR pointing at an empty folder
  scan, warm cache    the same with the cache left by an earlier run
  first call          isnan / any_nonfinite / class_counts / first_nan on 100 bfloat16 values,
                      empty cache, measured inside the process after `import fpclass`
  10-element call     a warm call vs numpy's equivalent (in process, best of 7 x 1000 calls
                      each, the two alternated)
  large input         isnan / any_nonfinite / class_counts on 64 Mi bfloat16 values, warm cache,
                      as % of the speed before the small-input path (measured in benchmarks/
                      bench_core.py and bench_queries; quoted here from the same run of run_all)
  cold large call     the first call on a large input, empty cache, default policy
                      (FPCLASS_COMPILE=background: NumPy answers, a warm-up started in the
                      background), against numpy's expression as the first call of another new
                      process: isnan / any_nan / count_nan / first_nan on 1 Mi float32,
                      count_nan(axis=0) on 1024 x 1024 bfloat16 (numpy: ml_dtypes' isnan)
  cold warmup         `fpclass warmup --workers N` into an empty cache, N = 1 and 2 (--warmup:
                      takes minutes)
Targets (issue 15): scan empty <= 1.0 s, warm <= 0.4 s; first call <= 0.15 s beyond import;
10-element call <= 2x numpy. Issue 22: a cold large call <= 2x numpy's; warmup <= 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FIRST_CALLS = r"""
import sys, time
import numpy as np, ml_dtypes
t = time.perf_counter()
import fpclass
imported = time.perf_counter()
x = np.linspace(-2, 2, 100).astype(ml_dtypes.bfloat16)
x[7] = np.nan
out = []
for name in ("isnan", "any_nonfinite", "class_counts", "first_nan"):
    t0 = time.perf_counter()
    getattr(fpclass, name)(x)
    out.append(time.perf_counter() - t0)
print(imported - t, *out, "numba" in sys.modules)
"""


# The first call on a large input in a new process, empty cache: fpclass's or numpy's. The
# process leaves by os._exit, before the background warm-up would start (SPAWN_DELAY later):
# a benchmark must not leave compiling processes behind.
COLD_CALL = r"""
import os, sys, time
import numpy as np, ml_dtypes
import fpclass
name, side = sys.argv[1], sys.argv[2]
if name == "bf16 count_nan(axis=0)":
    x = np.linspace(-2, 2, 1 << 20).astype(ml_dtypes.bfloat16).reshape(1024, 1024)
    ours, theirs = (lambda: fpclass.count_nan(x, axis=0),
                    lambda: np.count_nonzero(np.isnan(x), axis=0))
else:
    x = np.linspace(-2, 2, 1 << 20).astype(np.float32)
    x[-7] = np.nan
    ours, theirs = {
        "isnan": (lambda: fpclass.isnan(x), lambda: np.isnan(x)),
        "any_nan": (lambda: fpclass.any_nan(x), lambda: np.isnan(x).any()),
        "count_nan": (lambda: fpclass.count_nan(x), lambda: np.count_nonzero(np.isnan(x))),
        "first_nan": (lambda: fpclass.first_nan(x), lambda: np.argwhere(np.isnan(x))[:1]),
    }[name]
t0 = time.perf_counter()
(ours if side == "fpclass" else theirs)()
print(time.perf_counter() - t0, "numba" in sys.modules, flush=True)
os._exit(0)
"""
COLD_CALLS = ("isnan", "any_nan", "count_nan", "first_nan", "bf16 count_nan(axis=0)")


def run(argv, env=None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{argv} failed: {proc.stderr[-800:]}")
    return elapsed


def env_with_cache(cache: str) -> dict:
    return {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONDONTWRITEBYTECODE": "0"}


def startup(repeat: int) -> list:
    py = sys.executable
    floor, scan_cold, scan_warm = [], [], []
    warm_cache = tempfile.mkdtemp(prefix="fpclass-numba-warm-")
    run([py, "-m", "fpclass", "scan", "examples"], env_with_cache(warm_cache))
    for _ in range(repeat):
        floor.append(run([py, "-c", "import numpy"]))
        with tempfile.TemporaryDirectory(prefix="fpclass-numba-empty-") as empty:
            scan_cold.append(run([py, "-m", "fpclass", "scan", "examples"], env_with_cache(empty)))
        scan_warm.append(run([py, "-m", "fpclass", "scan", "examples"], env_with_cache(warm_cache)))
    return [("python -c 'import numpy' (the floor)", min(floor), None),
            ("fpclass scan examples/, empty numba cache", min(scan_cold), 1.0),
            ("fpclass scan examples/, warm numba cache", min(scan_warm), 0.4)]


def first_calls(repeat: int) -> list:
    best = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="fpclass-numba-empty-") as empty:
            proc = subprocess.run([sys.executable, "-c", FIRST_CALLS], env=env_with_cache(empty),
                                  capture_output=True, text=True, cwd=ROOT, check=True)
        values = proc.stdout.split()
        times = [float(v) for v in values[:5]]
        best = times if best is None else [min(a, b) for a, b in zip(best, times)]
        numba_loaded = values[5]
    names = ["import fpclass", "first isnan", "first any_nonfinite", "first class_counts",
             "first first_nan"]
    return [(f"{n} (100 bf16, empty cache)", t, None if i == 0 else 0.15)
            for i, (n, t) in enumerate(zip(names, best))] + [("numba imported", numba_loaded, None)]


def cold_calls(repeat: int) -> list:
    """(call, fpclass seconds, numpy seconds, numba imported): best of `repeat` new processes
    each, the two sides alternated, every process on its own empty cache."""
    rows = []
    env_base = {k: v for k, v in os.environ.items() if k != "FPCLASS_COMPILE"}
    for name in COLD_CALLS:
        best = {"fpclass": float("inf"), "numpy": float("inf")}
        numba = False
        for _ in range(repeat):
            for side in best:
                with tempfile.TemporaryDirectory(prefix="fpclass-numba-empty-") as empty:
                    proc = subprocess.run([sys.executable, "-c", COLD_CALL, name, side],
                                          env={**env_base, "NUMBA_CACHE_DIR": empty},
                                          capture_output=True, text=True, cwd=ROOT, check=True)
                seconds, imported = proc.stdout.split()
                best[side] = min(best[side], float(seconds))
                numba |= side == "fpclass" and imported == "True"
        rows.append((name, best["fpclass"], best["numpy"], numba))
    return rows


# A cold warm-up with N workers, in a new process on an empty cache: its wall time, its own CPU
# time and each worker's (on a busy machine, CPU time shows what an idle one would take).
COLD_WARMUP = r"""
import resource, sys, time
t0 = time.perf_counter()
from fpclass.operators import warmup, warmup_workers
workers = int(sys.argv[1])
warmup.compile_kernels(workers=workers)
wall = time.perf_counter() - t0
own = resource.getrusage(resource.RUSAGE_SELF)
cpu = warmup_workers.worker_cpu_seconds if workers > 1 else []
print(wall, own.ru_utime + own.ru_stime, *cpu)
"""


def cold_warmups() -> list:
    """(workers, wall seconds, estimate on an idle machine with as many cores: the parent's CPU
    seconds plus its busiest worker's) of a cold warm-up, N = 1, 2."""
    rows = []
    for workers in (1, 2):
        with tempfile.TemporaryDirectory(prefix="fpclass-numba-empty-") as empty:
            proc = subprocess.run([sys.executable, "-c", COLD_WARMUP, str(workers)],
                                  env=env_with_cache(empty), capture_output=True, text=True,
                                  cwd=ROOT, check=True)
        wall, own, *cpu = (float(v) for v in proc.stdout.split())
        rows.append((workers, wall, own + max(cpu, default=0.0), cpu))
    return rows


def small_calls() -> list:
    import numpy as np
    import fpclass
    from common import alternated
    x = np.linspace(-1, 1, 10)
    x[3] = np.nan
    pairs = [("isnan", lambda: fpclass.isnan(x), lambda: np.isnan(x)),
             ("any_nan", lambda: fpclass.any_nan(x), lambda: np.isnan(x).any()),
             ("count_nan", lambda: fpclass.count_nan(x), lambda: np.count_nonzero(np.isnan(x))),
             ("all_finite", lambda: fpclass.all_finite(x), lambda: np.isfinite(x).all()),
             ("first_nan", lambda: fpclass.first_nan(x), lambda: np.argwhere(np.isnan(x))[:1])]
    rows = []
    for name, ours, theirs in pairs:
        def many(f):
            return lambda: [f() for _ in range(1000)]
        t_ours, t_np = (t / 1000 for t in alternated(many(ours), many(theirs), repeat=7))
        rows.append((name, t_ours, t_np))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only-cold", action="store_true",
                        help="only the cold large calls (and --warmup's rows)")
    parser.add_argument("--warmup", action="store_true",
                        help="also time cold `fpclass warmup` with 1 and 2 workers (minutes)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import table

    print("### A cold large call (new processes, empty cache each; best of", args.repeat, "each)\n")
    rows = [[name, f"{ours * 1000:.2f} ms", f"{np_t * 1000:.2f} ms", f"{ours / np_t:.2f}x",
             "met" if ours <= 2 * np_t else "MISSED", str(numba)]
            for name, ours, np_t, numba in cold_calls(args.repeat)]
    print(table(["first call", "fpclass", "numpy's expression", "fpclass / numpy", "<= 2x",
                 "numba imported"], rows))
    if args.warmup:
        print("\n### Cold `fpclass warmup` (empty cache; one run each)\n")
        print("idle estimate: the warm-up process's own CPU seconds plus its busiest worker's "
              "(what the wall time is with a core per worker)\n")
        print(table(["workers", "wall", "workers' CPU", "idle estimate", "<= 60 s"],
                    [[w, f"{t:.1f} s", " + ".join(f"{c:.1f}" for c in cpu) or "-",
                      f"{est:.1f} s", "met" if est <= 60 else "MISSED"]
                     for w, t, est, cpu in cold_warmups()]))
    if args.only_cold:
        return 0
    print("\n### Start-up (new processes; best of", args.repeat, "each)\n")
    rows = []
    for name, t, target in startup(args.repeat) + first_calls(args.repeat):
        if isinstance(t, str):
            rows.append([name, t, ""])
            continue
        ok = "" if target is None else ("met" if t <= target else "MISSED")
        rows.append([name, f"{t * 1000:.0f} ms", f"<= {target * 1000:.0f} ms {ok}" if target else ""])
    print(table(["what", "time", "target"], rows))
    print("\n### A 10-element call, warm (in process, best of 7 x 1000 calls each, alternated)\n")
    rows = [[name, f"{ours * 1e6:.2f} us", f"{np_t * 1e6:.2f} us", f"{ours / np_t:.2f}x",
             "met" if ours <= 2 * np_t else "MISSED"] for name, ours, np_t in small_calls()]
    print(table(["call", "fpclass", "numpy equivalent", "fpclass / numpy", "<= 2x"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
