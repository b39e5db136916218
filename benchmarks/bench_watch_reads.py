"""Two ways watch could read that it does not, against the way it does, on bench_watch.py's models
(issue 22, twelfth round: both measured, neither adopted; docs/benchmarks.md).

    python benchmarks/bench_watch_reads.py                          # the three models, batch 128
    python benchmarks/bench_watch_reads.py --models mlp --steps 400

Four ways of running a training step take turns, in an order shuffled every round, as in
bench_watch.py (each row: the median of the step's time minus the plain step's of the same round,
as a share of the plain step):
- plain;
- watch (with parameter grads), as shipped: each tensor read in place by fpclass's screen as its
  hook sees it;
- "torch.sum first": every tensor of --sum-min elements or more that watch reads for "finite?"
  (gradients; not the reads that also bound magnitudes) is first summed by torch on its own
  threads, and read by the screen only when that sum is not finite (a sum of IEEE values is
  finite only when each of them is: an exact proof, not a second test of what a NaN is);
- "small grads at the end": parameters under --small elements get no gradient hook; their
  gradients are read together, in one count over every buffer, when the backward ends (a
  callback queued by a hook on the model's output), the larger ones as shipped.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_watch  # noqa: E402
from common import table  # noqa: E402

import fpclass.torch as ft  # noqa: E402
from fpclass.operators.buffers import count_nonfinite_words  # noqa: E402
from fpclass.torch import parameters  # noqa: E402
from fpclass.torch.tensors import checker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="mlp,transformer,cnn", help="mlp, transformer, cnn")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sum-min", type=int, default=1 << 18,
                    help="the least elements a tensor needs to be summed by torch first")
    ap.add_argument("--small", type=int, default=1 << 14,
                    help="parameters under this many elements are read at the backward's end")
    args = ap.parse_args()
    args.models, args.layers, args.width = args.models.split(","), 8, 512
    for name, (what, model, inputs) in bench_watch.models(args, args.batch).items():
        run(args, name, what, model, inputs)
        print()
    return 0


def run(args, name, what, model, inputs) -> None:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    check = checker(torch)
    screen = check.finite

    def step(on_output=None):
        opt.zero_grad(set_to_none=True)
        out = model(*inputs)
        if on_output is not None:
            out.register_hook(on_output)
        out.square().mean().backward()
        opt.step()

    def summed_first(t) -> bool:
        if t.numel() >= args.sum_min and type(t) is torch.Tensor and screen(torch.sum(t)):
            return True
        return screen(t)

    def shipped():
        with ft.watch(model):
            step()

    def sum_first():
        check.finite = summed_first  # watch takes the checker's functions as it is entered
        try:
            with ft.watch(model):
                step()
        finally:
            check.finite = screen

    small = [p for p in model.parameters() if p.numel() < args.small]
    if any(p.dtype != torch.float32 or not p.is_cpu for p in small):
        raise SystemExit("small grads at the end reads float32 CPU gradients only")
    hook_all = parameters.hook_gradients

    def hook_large(params, hook, handles):
        return hook_all([p for p in params if p.numel() >= args.small], hook, handles)

    def read_small():
        grads = [p.grad for p in small if p.grad is not None]
        counts = count_nonfinite_words(np.float32, [g.data_ptr() for g in grads],
                                       [g.numel() for g in grads])
        if counts.any():
            raise AssertionError("a small parameter's gradient is not finite")

    queue = torch.autograd.Variable._execution_engine.queue_callback

    def at_the_end(grad):
        queue(read_small)

    def small_at_end():
        parameters.hook_gradients = hook_large
        try:
            with ft.watch(model):
                step(at_the_end)
        finally:
            parameters.hook_gradients = hook_all

    modes = {"plain": step, "watch, as shipped": shipped,
             f"torch.sum first (from {args.sum_min} elements)": sum_first,
             f"small grads at the end ({len(small)} under {args.small} elements)": small_at_end}
    times = {mode: [] for mode in modes}
    for _ in range(10):
        for fn in modes.values():
            fn()
    order = list(modes.items())
    turns = random.Random(0)
    for _ in range(args.steps):
        turns.shuffle(order)
        for mode, fn in order:
            t = time.perf_counter()
            fn()
            times[mode].append(time.perf_counter() - t)
    base = statistics.median(times["plain"])
    print(f"### {name}: {what}\n\nplain step {base * 1e3:.2f} ms (median of {args.steps}), "
          f"torch threads {torch.get_num_threads()}, the {len(modes)} modes alternating\n")
    rows = []
    for mode, ts in times.items():
        if mode == "plain":
            continue
        paired = statistics.median(t - p for t, p in zip(ts, times["plain"]))
        rows.append([mode, f"{paired * 1e3:+.2f} ms", f"{paired / base:+.1%}"])
    print(table(["step", "paired: median of differences", "of the plain step"], rows))


if __name__ == "__main__":
    sys.exit(main())
