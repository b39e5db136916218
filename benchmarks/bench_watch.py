"""The cost of fpclass.torch.watch on a training step, next to torch.autograd.detect_anomaly.

    python benchmarks/bench_watch.py                      # the three models, batches 128 and 16
    python benchmarks/bench_watch.py --threads 1          # torch on one thread (a shared machine)
    python benchmarks/bench_watch.py --models mlp --steps 50
    python benchmarks/bench_watch.py --threads 1 --clock cpu --batch 16,4  # a loaded machine
    python benchmarks/bench_watch.py --base /work/main/src     # an A/B against another tree

A step: zero the grads, forward, mean-square loss, backward, SGD update. The models: the README's
8-layer 512-wide MLP, a two-layer transformer encoder with a causal float mask, and a small
channels_last CNN (conv, batch norm, ReLU, pooling). Four ways of running a step (plain; inside
`with fpclass.torch.watch(model, grads=False)`: activations and their gradients; inside
`with fpclass.torch.watch(model)`: also every parameter's gradient; inside
`with torch.autograd.detect_anomaly(check_nan=True)`) take turns step by step, entered and left
every step as in the README, so drift in the machine's speed reaches all alike; each row is the
median over --steps steps, and the paired column the median over rounds of each step's time
minus the plain step's of the same round (steadier on a loaded machine). A fifth mode, "hooks
alone", registers the hooks a watch of one hook a module would register (a forward hook on every
module, a gradient hook on each module output that requires grad, a post-accumulate hook on every
parameter) with empty bodies and removes them after the step: torch's own cost of calling hooks
that way, as watch registers them. `--clock cpu` times the
stepping thread's CPU time instead of the wall clock (with `--threads 1` all of a CPU step's
work runs on that thread): time lost to other processes on a shared machine is left out.
`--base SRC` adds a sixth mode, the watch (with parameter grads) of the fpclass package under SRC
(another tree's src/), copied to a temporary folder and imported as a second package: an A/B of
two trees in one process, their steps alternating with the others.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table  # noqa: E402

import fpclass.torch as ft  # noqa: E402


def mlp(layers: int = 8, width: int = 512):
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


class Encoder(torch.nn.Module):
    """Two pre-norm transformer encoder layers over a causal float mask (-inf above the
    diagonal)."""

    def __init__(self, width=256, heads=4, layers=2):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                                 batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x, mask):
        return self.encoder(x, mask=mask)


def cnn():
    def block(cin, cout):
        return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(inplace=True)]
    return torch.nn.Sequential(*block(3, 32), *block(32, 32), torch.nn.MaxPool2d(2),
                               *block(32, 64), *block(64, 64), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(64, 10))


def models(args, batch: int) -> dict:
    """name -> (description, model, the step's inputs)."""
    out = {}
    if "mlp" in args.models:
        out["mlp"] = (f"{args.layers}-layer {args.width}-wide MLP (Linear + ReLU), batch {batch}",
                      mlp(args.layers, args.width), (torch.randn(batch, args.width),))
    if "transformer" in args.models:
        seq = 64
        mask = torch.nn.Transformer.generate_square_subsequent_mask(seq)
        out["transformer"] = (f"2-layer transformer encoder (width 256, 4 heads, causal float "
                              f"mask), batch {max(1, batch // 8)} x {seq} tokens", Encoder(),
                              (torch.randn(max(1, batch // 8), seq, 256), mask))
    if "cnn" in args.models:
        x = torch.randn(max(1, batch // 4), 3, 32, 32).to(memory_format=torch.channels_last)
        model = cnn().to(memory_format=torch.channels_last)
        out["cnn"] = (f"channels_last CNN (4 conv + batch norm blocks), batch "
                      f"{max(1, batch // 4)} x 3 x 32 x 32", model, (x,))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", default="128,16", help="batch sizes, comma-separated")
    ap.add_argument("--models", default="mlp,transformer,cnn", help="mlp, transformer, cnn")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall clock, or the stepping thread's CPU time (use with --threads 1)")
    ap.add_argument("--base", default=None,
                    help="a source folder holding another fpclass (e.g. /work/main/src): its "
                         "watch alternates with this one's")
    args = ap.parse_args()
    args.models = args.models.split(",")
    args.base_watch = base_watch(args.base) if args.base else None
    if args.threads:
        torch.set_num_threads(args.threads)
    for batch in (int(b) for b in args.batch.split(",")):
        for name, (what, model, inputs) in models(args, batch).items():
            run(args, name, what, model, inputs)
            print()
    return 0


def base_watch(src: str):
    """watch from the fpclass package under `src`, imported as `fpclass_base` from a copy."""
    if not os.path.isdir(os.path.join(src, "fpclass")):
        raise SystemExit(f"--base {src}: no fpclass package there")
    folder = tempfile.mkdtemp(prefix="bench_watch_base_")
    atexit.register(shutil.rmtree, folder, True)
    shutil.copytree(os.path.join(src, "fpclass"), os.path.join(folder, "fpclass_base"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, folder)
    return importlib.import_module("fpclass_base.torch").watch


def run(args, name, what, model, inputs) -> None:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(*inputs).square().mean()
        loss.backward()
        opt.step()

    def plain():
        step()

    def nothing(*_):
        return None

    def on_output(module, args, kwargs, output):
        for t in output if isinstance(output, (tuple, list)) else (output,):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(nothing)

    def hooks_alone():
        handles = [m.register_forward_hook(on_output, with_kwargs=True) for m in model.modules()]
        handles += [p.register_post_accumulate_grad_hook(nothing) for p in model.parameters()]
        step()
        for handle in handles:
            handle.remove()

    def watched():
        with ft.watch(model, grads=False):
            step()

    def watched_grads():
        with ft.watch(model):
            step()

    def anomaly():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # detect_anomaly warns that it is slow
            with torch.autograd.detect_anomaly(check_nan=True):
                step()

    modes = {"plain": plain, "hooks alone (empty bodies)": hooks_alone,
             "watch(grads=False)": watched, "watch (+ parameter grads)": watched_grads,
             "detect_anomaly(check_nan=True)": anomaly}
    if args.base_watch is not None:
        def base_grads():
            with args.base_watch(model):
                step()
        modes[f"base: watch (+ parameter grads) from {args.base}"] = base_grads
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    times = {mode: [] for mode in modes}
    for _ in range(10):  # warm up: kernels compiled and loaded, allocator settled
        for mode in modes.values():
            mode()
    for _ in range(args.steps):
        for mode, fn in modes.items():
            t = clock()
            fn()
            times[mode].append(clock() - t)
    median = {mode: statistics.median(ts) for mode, ts in times.items()}
    base = median["plain"]
    hooked = sum(1 for _ in model.modules())
    params = sum(1 for _ in model.parameters())
    clocked = "thread CPU time" if args.clock == "cpu" else "wall clock"
    print(f"### {name}: {what}\n\n{hooked} modules and {params} parameters hooked, float32 on "
          f"CPU, torch threads {torch.get_num_threads()}; median of {args.steps} steps each "
          f"({clocked}), the {len(modes)} modes alternating\n")
    # each step against the plain step of its own round: drift between rounds cancels
    paired = {mode: statistics.median(t - p for t, p in zip(ts, times["plain"]))
              for mode, ts in times.items()}
    rows = [[mode, f"{m * 1e3:.2f} ms", "—" if mode == "plain" else f"{(m - base) / base:+.1%}",
             "—" if mode == "plain" else f"{paired[mode] * 1e3:+.2f} ms ({paired[mode] / base:+.1%})"]
            for mode, m in median.items()]
    print(table(["step", "median", "overhead", "paired: median of differences"], rows))
    watch_cost = median["watch (+ parameter grads)"] - base
    anomaly_cost = median["detect_anomaly(check_nan=True)"] - base
    print(f"\nwatch's overhead (with parameter grads) is {watch_cost / anomaly_cost:.2f} of "
          f"detect_anomaly's ({watch_cost * 1e3:+.2f} ms vs {anomaly_cost * 1e3:+.2f} ms per "
          "step).")


if __name__ == "__main__":
    sys.exit(main())
