#!/usr/bin/env python3
"""The short-row kernel's own speed: per-row queries on one thread with the input in cache, so
that memory does not hide the kernel (bench_axes.py times the same calls on 256 MiB against the
read bandwidth).

    python benchmarks/bench_rows_kernel.py [--mib 8] [--repeat 7]
    PYTHONPATH=/path/to/other/tree/src NUMBA_CACHE_DIR=$(mktemp -d) \\
        python benchmarks/bench_rows_kernel.py          # another tree, its own compiled kernels

An A/B of two trees runs this once per tree in alternating processes, each tree with its own
numba cache (a tree's kernels are cached by function, so two trees sharing one cache would load
each other's). Prints GB/s of input (best of --repeat rounds of 40 calls) per format, row width
and query, after checking each answer against numpy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("FPCLASS_COMPILE", "inline")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table  # noqa: E402

import fpclass  # noqa: E402

CASES = [(np.float32, 4), (np.float32, 6), (np.float32, 8), (ml_dtypes.bfloat16, 6),
         (ml_dtypes.bfloat16, 8), (np.float64, 4), (np.float64, 6), (np.float64, 8),
         (np.float16, 3)]
QUERIES = (("count_nonfinite", {"dtype": np.uint8}), ("any_nan", {}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=8, help="input size (in cache: 8 MiB by default)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    fpclass.set_num_threads(1)
    rows = []
    for dtype, width in CASES:
        dtype = np.dtype(dtype)
        n = (args.mib << 20) // (dtype.itemsize * width)
        x = np.random.default_rng(0).standard_normal((n, width)).astype(dtype)
        x.reshape(-1)[::4097] = np.nan
        wide = x.astype(np.float64)
        np.testing.assert_array_equal(fpclass.count_nonfinite(x, axis=-1, dtype=np.uint8),
                                      (~np.isfinite(wide)).sum(axis=-1))
        np.testing.assert_array_equal(fpclass.any_nan(x, axis=-1), np.isnan(wide).any(axis=-1))
        speeds = []
        for name, flags in QUERIES:
            query = getattr(fpclass, name)
            for _ in range(10):
                query(x, axis=-1, **flags)
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                for _ in range(40):
                    query(x, axis=-1, **flags)
                best = min(best, (time.perf_counter() - start) / 40)
            speeds.append(f"{x.nbytes / best / 1e9:.1f} GB/s")
        rows.append([dtype.name, f"{n}×{width}", *speeds])
    print(f"one thread, {args.mib} MiB inputs, best of {args.repeat} x 40 calls\n")
    print(table(["format", "shape", "count_nonfinite(axis=-1, dtype=uint8)", "any_nan(axis=-1)"],
                rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
