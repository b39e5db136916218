"""Where a fresh process's first `fpclass.scan.scan` of one file spends its time (issue 22).

    python benchmarks/bench_scan_first.py FILE [FILE ...] [--runs 3]

Each FILE is scanned in --runs fresh processes (alternated over the files), each reporting wall
and CPU milliseconds of: numba's machinery started (a first `count_nonfinite`) and the format's
library imported (both untimed in bench_scan_formats, as imports); the file's reader imported
and the statistics kernels loaded from numba's cache (bench_scan_formats' untimed "fpclass
start-up"); then the first scan's planning and running (reading + classifying), a second
scan's the same (what is paid once per process is the difference), and reading the file's
bytes on one thread (bench_scan_formats' "read"). Medians over the runs. Run with
FPCLASS_COMPILE=inline and a warm numba cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import READ_SOURCE  # noqa: E402

CHILD = r"""
import json, os, sys, time
path, kind = sys.argv[1:3]
out = {}
def timed(name, f):
    w, c = time.perf_counter(), time.process_time()
    r = f()
    out[name] = (1000 * (time.perf_counter() - w), 1000 * (time.process_time() - c))
    return r
import numpy as np, fpclass
from fpclass.scan import engine, scan
from fpclass.scan.readers.registry import BY_KIND
timed("numba machinery", lambda: fpclass.count_nonfinite(np.ones(1 << 20, np.float32)))
timed("library import", lambda: __import__(
    {"hdf5": "h5py", "zarr": "zarr", "fits": "astropy.io.fits"}.get(kind, "json")))
timed("reader import", lambda: BY_KIND[kind].load())
def kernels():
    from fpclass.operators.statistics import value_stats
    from ml_dtypes import bfloat16
    for dt in ("<f4", ">f4", bfloat16):
        value_stats(np.ones(1 << 20, dt))
timed("stats kernels", kernels)
plan, execute = engine.plan, engine.execute
for n in (1, 2):
    engine.plan = lambda *a, **k: timed(f"plan {n}", lambda: plan(*a, **k))
    engine.execute = lambda *a, **k: timed(f"read+classify {n}", lambda: execute(*a, **k))
    timed(f"scan {n}", lambda: scan([path]))
timed("read (1 thread)", lambda: read_one_thread(path))
print(json.dumps(out))
"""


def kind_of(path: str) -> str:
    """The reader kind of `path`, as the scan detects it."""
    from fpclass.scan.paths import expand
    found = expand([path], (), (), False).found
    if not found:
        raise SystemExit(f"{path}: not a file the scan reads")
    return found[0][1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    kinds = {p: kind_of(p) for p in args.files}
    runs: dict = {p: [] for p in args.files}
    # the children keep compiled modules (as an installed package has them), made by an untimed
    # first run per file, even where PYTHONDONTWRITEBYTECODE is set
    cache = tempfile.mkdtemp(prefix="fpclass-first-pycache-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    try:
        for r in range(args.runs + 1):
            for p in args.files:
                out = subprocess.run([sys.executable, "-c", READ_SOURCE + CHILD, p, kinds[p]],
                                     capture_output=True, text=True, env=env)
                if out.returncode:
                    raise SystemExit(f"{p}: {out.stderr[-600:]}")
                if r:
                    runs[p].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    for p in args.files:
        print(f"{os.path.basename(p)} ({kinds[p]}), wall / CPU ms, median of {args.runs}:")
        for step in runs[p][0]:
            wall = statistics.median(r[step][0] for r in runs[p])
            cpu = statistics.median(r[step][1] for r in runs[p])
            print(f"  {step:18s} {wall:8.1f} {cpu:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
