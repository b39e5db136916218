#!/usr/bin/env python3
"""The threaded kernel calls of two fpclass trees, A/B (issue 22: thread_parts against prange).
    python benchmarks/bench_threads_ab.py --base OLD/src [--new NEW/src] [--rounds 4] [--mib 256]
Each tree runs in its own processes with its own numba cache (warmed first, untimed), the trees'
processes in turn, --rounds each. A process times every call below (best of 5 after one
untimed), each on all cores and on float32 arrays of --mib MiB unless said: whole-array queries
on C order, a transposed view and channels_last; element-wise masks into a preallocated answer;
the statistics and the class histogram; per-axis answers on a square, a tall narrow and a
short-rows table; and the same queries at 16 MiB (4 Mi elements, the smallest input that takes
threads). Prints each call's median over the rounds per tree and new / base (below 1: the new
tree is faster).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys, time
import numpy as np
import fpclass
from fpclass.operators.statistics import value_stats
mib = int(sys.argv[1])
n = mib << 18
rng = np.random.default_rng(0)
flat = rng.standard_normal(n, dtype=np.float32)
mid = flat.copy(); mid[n // 2] = np.nan
square = flat.reshape(1 << (n.bit_length() // 2), -1)
mid_t = mid.reshape(square.shape).T
nhwc = flat.reshape(64, -1, 8, 8).transpose(0, 2, 3, 1)
tall = flat.reshape(-1, 8)
rows4 = flat.reshape(-1, 4)
small = flat[:1 << 22]
out = np.empty(n, np.bool_)
calls = {
    "any_nan C": lambda: fpclass.any_nan(flat),
    "any_nan T": lambda: fpclass.any_nan(square.T),
    "all_finite NHWC": lambda: fpclass.all_finite(nhwc),
    "count_nan C": lambda: fpclass.count_nan(flat),
    "count_nan T": lambda: fpclass.count_nan(square.T),
    "first_nan mid T": lambda: fpclass.first_nan(mid_t),
    "isnan out=": lambda: fpclass.isnan(flat, out=out),
    "isnan T": lambda: fpclass.isnan(square.T),
    "value_stats": lambda: value_stats(flat),
    "class_counts": lambda: fpclass.class_counts(flat),
    "count_nan axis=0": lambda: fpclass.count_nan(square, axis=0),
    "any_nan axis=1": lambda: fpclass.any_nan(square, axis=1),
    "count_nan (N,8) axis=0": lambda: fpclass.count_nan(tall, axis=0),
    "count_nan (N,4) axis=1": lambda: fpclass.count_nan(rows4, axis=1),
    "any_nan (N,4) axis=1": lambda: fpclass.any_nan(rows4, axis=1),
    "16 MiB any_nan": lambda: fpclass.any_nan(small),
    "16 MiB count_nan": lambda: fpclass.count_nan(small),
    "16 MiB isnan": lambda: fpclass.isnan(small),
}
best = {}
for name, f in calls.items():
    f()
    ts = []
    for _ in range(5):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    best[name] = min(ts)
print(json.dumps(best))
'''


def run(src: str, cache: str, mib: int) -> dict:
    env = {**os.environ, "PYTHONPATH": src, "NUMBA_CACHE_DIR": cache, "FPCLASS_COMPILE": "inline"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(mib)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other tree's src folder")
    ap.add_argument("--new", default=here, help="this tree's src folder (default)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args()
    trees = {"base": args.base, "new": args.new}
    with tempfile.TemporaryDirectory() as tmp:
        caches = {k: os.path.join(tmp, k) for k in trees}
        for k in trees:  # compile both trees' kernels, untimed
            run(trees[k], caches[k], 16)
        times = {k: [] for k in trees}
        for r in range(args.rounds):
            for k in (("base", "new") if r % 2 == 0 else ("new", "base")):
                times[k].append(run(trees[k], caches[k], args.mib))
    names = list(times["base"][0])
    print(f"| call ({args.mib} MiB float32 unless said) | base ms | new ms | new / base |")
    print("|---|---|---|---|")
    for name in names:
        b = statistics.median(t[name] for t in times["base"]) * 1e3
        n = statistics.median(t[name] for t in times["new"]) * 1e3
        print(f"| {name} | {b:.2f} | {n:.2f} | {n / b:.2f} |")


if __name__ == "__main__":
    main()
