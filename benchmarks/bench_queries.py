#!/usr/bin/env python3
"""Per-axis queries against numpy's equivalents and the machine's read bandwidth (issue 16).

    python benchmarks/bench_queries.py [--rows 4096] [--cols 8192] [--repeat 7]

For each format, query and axis: fpclass and numpy's expression timed alternately (best of the
same number of runs each), and fpclass alternated with a read of the same bytes over all cores.
Then: a hit at the start of every row (any_nan, axis=1) against the clean array, and
axis=(all axes) against axis=None.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import fpclass
from common import paired_times, read_baseline, table

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
from comparisons import COMPARISONS  # noqa: E402  (the table the tests read too)

#: The queries timed, each against numpy's expression from the comparison table.
NUMPY = {name: COMPARISONS[name]["numpy"] for name in ("any_nan", "count_nonfinite")}
TARGETS = {"float32": (1.5, 0.8), "float16": (5.0, None)}  # (x numpy, share of read bandwidth)


def sample(dtype, shape, seed=0):
    """Finite random values with a NaN and an Inf as the last two elements: whole-array and
    per-row searches read everything before they find them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    x[-1, -1] = np.nan
    x[-1, -2] = np.inf
    return x


def axes_section(rows, cols, repeat):
    out = []
    for dtype in (np.float32, np.float16):
        x = sample(dtype, (rows, cols))
        read = read_baseline(x.nbytes)
        speed_target, read_target = TARGETS[np.dtype(dtype).name]
        for name, peer in NUMPY.items():
            ours = getattr(fpclass, name)
            for axis in (0, 1, None):
                np.testing.assert_array_equal(ours(x, axis=axis), peer(x, axis=axis))
                t, t_numpy = paired_times(lambda: ours(x, axis=axis), lambda: peer(x, axis=axis), repeat)
                t2, t_read = paired_times(lambda: ours(x, axis=axis), read, repeat)
                speed, share = t_numpy / t, t_read / t2
                met = speed >= speed_target and (read_target is None or axis is None or share >= read_target)
                out.append([np.dtype(dtype).name, name, str(axis), f"{speed:.1f}×", f"{share:.0%}",
                            f"≥ {speed_target}×" + (f", ≥ {read_target:.0%}" if read_target else ""),
                            "met" if met else "NOT met"])
    return table(["format", "query", "axis", "vs numpy", "% read bw", "target", ""], out)


def early_section(rows, cols, repeat):
    out = []
    for dtype in (np.float32, np.float16):
        clean = sample(dtype, (rows, cols))
        clean[:, -1] = 1  # no NaN anywhere: every row is read to its end
        hit = clean.copy()
        hit[:, 0] = np.nan
        assert fpclass.any_nan(hit, axis=1).all() and not fpclass.any_nan(clean, axis=1).any()
        t_hit, t_clean = paired_times(lambda: fpclass.any_nan(hit, axis=1),
                                      lambda: fpclass.any_nan(clean, axis=1), repeat)
        out.append([np.dtype(dtype).name, "any_nan(axis=1), NaN first in every row", f"{t_hit / t_clean:.2f}",
                    "≤ 0.50", "met" if t_hit / t_clean <= 0.5 else "NOT met"])
        x = sample(dtype, (rows, cols))
        for name in NUMPY:
            ours = getattr(fpclass, name)
            t_all, t_none = paired_times(lambda: ours(x, axis=(0, 1)), lambda: ours(x), repeat)
            out.append([np.dtype(dtype).name, f"{name}(axis=(0, 1)) / {name}(axis=None)",
                        f"{t_all / t_none:.2f}", "≈ 1", "met" if t_all / t_none <= 1.15 else "NOT met"])
    return table(["format", "time ratio", "ratio", "target", ""], out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=8192)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    print(f"{args.rows}×{args.cols} arrays; numba threads {fpclass.get_num_threads()}; best of "
          f"{args.repeat}, fpclass alternated with each baseline\n")
    print(axes_section(args.rows, args.cols, args.repeat))
    print()
    print(early_section(args.rows, args.cols, args.repeat))


if __name__ == "__main__":
    main()
