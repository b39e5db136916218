"""The cost of fpclass.torch.watch on a training step, next to torch.autograd.detect_anomaly.

    python benchmarks/bench_watch.py                      # 8 layers x 512 wide, batches 128 and 16
    python benchmarks/bench_watch.py --threads 1          # torch on one thread (a shared machine)

A step: zero the grads, forward, mean-square loss, backward, SGD update. The three ways of running
it (plain; inside `with fpclass.torch.watch(model)`, entered and left every step as in the README;
inside `with torch.autograd.detect_anomaly(check_nan=True)`) take turns step by step, so drift in
the machine's speed reaches all three alike; each row is the median over --steps steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table  # noqa: E402

import fpclass.torch as ft  # noqa: E402


def mlp(layers: int, width: int) -> torch.nn.Sequential:
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", default="128,16", help="batch sizes, comma-separated")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for batch in (int(b) for b in args.batch.split(",")):
        run(args, batch)
        print()
    return 0


def run(args, batch: int) -> None:
    torch.manual_seed(0)
    model = mlp(args.layers, args.width)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, args.width)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()

    def plain():
        step()

    def watched():
        with ft.watch(model):
            step()

    def anomaly():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # detect_anomaly warns that it is slow
            with torch.autograd.detect_anomaly(check_nan=True):
                step()

    modes = {"plain": plain, "fpclass.torch.watch": watched, "detect_anomaly(check_nan=True)": anomaly}
    times = {name: [] for name in modes}
    for _ in range(10):  # warm up: kernels compiled and loaded, allocator settled
        for mode in modes.values():
            mode()
    for _ in range(args.steps):
        for name, mode in modes.items():
            t = time.perf_counter()
            mode()
            times[name].append(time.perf_counter() - t)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    base = median["plain"]
    hooked = sum(1 for _ in model.modules())
    print(f"### batch {batch}\n\n{args.layers}-layer {args.width}-wide MLP (Linear + ReLU, "
          f"{hooked} modules hooked), batch {batch}, float32 on CPU, torch threads "
          f"{torch.get_num_threads()}; median of {args.steps} steps each, the three modes "
          "alternating\n")
    rows = [[name, f"{m * 1e3:.2f} ms", "—" if name == "plain" else f"{(m - base) / base:+.1%}"]
            for name, m in median.items()]
    print(table(["step", "median", "overhead"], rows))
    watch_cost = median["fpclass.torch.watch"] - base
    anomaly_cost = median["detect_anomaly(check_nan=True)"] - base
    print(f"\nwatch's overhead is {watch_cost / anomaly_cost:.2f} of detect_anomaly's "
          f"({watch_cost * 1e3:+.2f} ms vs {anomaly_cost * 1e3:+.2f} ms per step).")


if __name__ == "__main__":
    sys.exit(main())
