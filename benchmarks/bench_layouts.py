#!/usr/bin/env python3
"""Whole-array queries on strided layouts against the same data C-contiguous and numpy (issue 22).

    python benchmarks/bench_layouts.py [--mib 256] [--repeat 7] [--threads N]

For each layout of a float32 array of about --mib MiB (transposed, Fortran order, channels_last,
negative strides, a stride-0 axis): any_nan and all_finite on clean data (they read everything)
against the same call on a C-contiguous copy and against numpy's expression; first_nan with one
NaN in the middle in C order against count_nan on that input and against numpy's expression.
Every side of a row is timed in turn (`alternated`, best of --repeat; first_nan and count_nan
each right after numpy's expression). "limit vs numpy": numpy's
expression over the time to just read the layout's distinct bytes over all cores (a uint64 sum,
timed in the same rounds): the most any reading of the data can beat numpy by, so a "≥ 2× numpy"
missed where this is below 2× is the machine's memory bandwidth, not fpclass.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import fpclass
from common import alternated, read_baseline, table

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
from comparisons import COMPARISONS  # noqa: E402  (the table the tests read too)

NUMPY = {name: COMPARISONS[name]["numpy"] for name in ("any_nan", "all_finite", "first_nan")}
#: (within x of C-contiguous for any/all, within x of count for first, x numpy)
TARGETS = (1.25, 2.0, 2.0)


def layouts(mib: int) -> dict:
    """(base array, view of it) of about `mib` MiB of clean float32 values, by layout name."""
    rng = np.random.default_rng(0)
    side = int((mib << 18) ** 0.5)           # float32: mib << 18 elements
    square = rng.standard_normal((side, side), dtype=np.float32)
    cube = int((mib << 18) ** (1 / 3))
    hw = int(((mib << 18) // (8 * 64)) ** 0.5)
    return {
        "transposed (2-D)": (square, lambda a: a.T),
        "Fortran order (3-D)": (rng.standard_normal((cube,) * 3, dtype=np.float32), lambda a: a.T),
        "channels_last (NCHW, 64 ch)": (rng.standard_normal((8, hw, hw, 64), dtype=np.float32),
                                        lambda a: a.transpose(0, 3, 1, 2)),
        "negative strides [::-1, ::-1]": (square, lambda a: a[::-1, ::-1]),
        "negative inner stride [:, ::-1]": (square, lambda a: a[:, ::-1]),
        "transposed, reversed [::-1].T": (square, lambda a: a[::-1].T),
        "stride 0 (broadcast row)": (square[0].copy(), lambda a: np.broadcast_to(a, (side, side))),
    }


def rows(mib: int, repeat: int):
    out = []
    for name, (base, view) in layouts(mib).items():
        x = view(base)
        c = np.ascontiguousarray(x)
        line = [name]
        # the bytes any/all read (a stride-0 axis is read once); a read of a few KiB times the
        # threads' wake-up, not memory: no limit then
        read = read_baseline(base.nbytes) if base.nbytes >= 1 << 20 else lambda: None
        limits = []
        for query in ("any_nan", "all_finite"):
            ours, peer = getattr(fpclass, query), NUMPY[query]
            assert ours(x) == ours(c) == peer(x)
            t, t_c, t_np, t_read = alternated(lambda: ours(x), lambda: ours(c), lambda: peer(x), read,
                                              repeat=repeat)
            line += [f"{t * 1e3:.2f}", f"{t / t_c:.2f}", f"{t_np / t:.1f}×"]
            limits.append(t_np / t_read if base.nbytes >= 1 << 20 else float("inf"))
        read = None
        c = None  # the copy freed before the next layout is made
        marked = base.copy()  # the same layout, one NaN in the middle of its C order
        hit = view(marked)
        mid = np.unravel_index(hit.size // 2, hit.shape)
        if hit.flags.writeable:
            hit[mid] = np.nan
        else:  # the broadcast row
            marked[mid[-1]] = np.nan
        assert fpclass.first_nan(hit) == NUMPY["first_nan"](hit) is not None
        # first and count each timed right after numpy's expression: a call that follows another
        # large pass pays about 0.1 ms of cold caches, all of a broadcast row's time, so the
        # one that always came second looked 2.5x faster (either way round, measured)
        t_first, t_np, t_count, t_np2 = alternated(
            lambda: fpclass.first_nan(hit), lambda: NUMPY["first_nan"](hit),
            lambda: fpclass.count_nan(hit), lambda: NUMPY["first_nan"](hit), repeat=repeat)
        t_np = min(t_np, t_np2)
        line += [f"{t_first * 1e3:.2f}", f"{t_first / t_count:.2f}", f"{t_np / t_first:.1f}×"]
        any_ratio = max(float(line[2]), float(line[5]))
        speed = min(float(s.rstrip("×")) for s in (line[3], line[6], line[9]))
        met = any_ratio <= TARGETS[0] and float(line[8]) <= TARGETS[1] and speed >= TARGETS[2]
        verdict = "met" if met else "NOT met"
        if not met and min(limits) < TARGETS[2]:
            verdict += f" (limit < {TARGETS[2]}×)"
        limit = "—" if min(limits) == float("inf") else f"{limits[0]:.1f}× / {limits[1]:.1f}×"
        out.append(line + [limit, verdict])
    headers = ["layout", "any ms", "any / C", "any vs numpy", "all ms", "all / C", "all vs numpy",
               "first ms", "first / count", "first vs numpy", "limit vs numpy (any / all)", ""]
    return table(headers, out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--threads", type=int, default=None,
                   help="cap fpclass's threads (on a loaded machine, 1 keeps the timings steady)")
    args = p.parse_args()
    fpclass.set_num_threads(args.threads)
    print(f"float32, about {args.mib} MiB a layout; fpclass threads {fpclass.get_num_threads()}; best of "
          f"{args.repeat}, alternated. Targets: any/all ≤ {TARGETS[0]}× the C-contiguous copy, "
          f"first ≤ {TARGETS[1]}× count, all ≥ {TARGETS[2]}× numpy\n")
    print(rows(args.mib, args.repeat))


if __name__ == "__main__":
    main()
