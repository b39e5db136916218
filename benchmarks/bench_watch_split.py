"""How watch reads large tensors: on one thread, in one part per thread, or as its choice says
(kernels/threads.py, SplitChoice), on bench_watch.py's models.

    python benchmarks/bench_watch_split.py                     # the CNN, 300 rounds
    python benchmarks/bench_watch_split.py --models mlp,transformer,cnn --steps 200 --repeat 3

Five ways of running a training step take turns, in an order shuffled every round: plain; watch
with its own choice; watch held to one thread; watch held to parts (every read of SPLIT_MIN words
up to the parallel threshold); watch reading nothing (its screens answer "finite" unread: torch's
hooks and watch's own Python). The held and unread ways neither mark passes nor time reads, so the
choice sees only its own passes. Each row is the median of the step's time minus the plain step's
of the same round, as a share of the plain step (the paired column of bench_watch.py); "chose"
lists the way each trial of the run picked (a fresh choice after 10 warm-up rounds: its first trial
ends 35 watched passes in, its second after 515). With --repeat, each repeat is a fresh model and a
fresh choice: the machine's state may change between them (docs/torch.md, Cost)."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_watch  # noqa: E402
from common import table  # noqa: E402

import fpclass.torch as ft  # noqa: E402
from fpclass.kernels import threads  # noqa: E402
from fpclass.torch import tensors  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="cnn", help="mlp, transformer, cnn")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    args.models, args.layers, args.width = args.models.split(","), 8, 512
    rows = []
    for repeat in range(args.repeat):
        for name, (what, model, inputs) in bench_watch.models(args, args.batch).items():
            rows.append([name, time.strftime("%H:%M:%S"), *run(model, inputs, args.steps)])
            print(f"{name}: {what}", file=sys.stderr)
    print(table(["model", "at", "watch (its choice)", "one thread", "parts", "reading nothing",
                 "chose"], rows))
    return 0


def run(model, inputs, steps: int) -> list:
    kept_choice = threads.SPLIT
    threads.SPLIT = choice = threads.SplitChoice()
    checks = tensors.checker(torch)
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        model(*inputs).square().mean().backward()
        opt.step()

    def watched():
        with ft.watch(model):
            step()

    def unseen(split=None, finite=None):
        """A watched step the choice does not see: read as `split` says (None: as the choice
        reads now), by `finite` (None: the screens)."""
        def run_unseen():
            kept = choice.split, checks.finite
            choice.mark = choice.read_ended = _nothing
            choice.split = kept[0] if split is None else split
            checks.finite = kept[1] if finite is None else finite
            try:
                with ft.watch(model):
                    step()
            finally:
                choice.split, checks.finite = kept
                del choice.mark, choice.read_ended
        return run_unseen

    ways = {"plain": step, "watch": watched, "one": unseen(split=False),
            "parts": unseen(split=True), "unread": unseen(finite=_finite_unread)}
    try:
        for _ in range(10):
            for way in ways.values():
                way()
        # a fresh choice: the warm-up's passes (loading kernels, the allocator) feed no trial
        threads.SPLIT = choice = threads.SplitChoice()
        times = {name: [] for name in ways}
        order, turns = list(ways.items()), random.Random(0)
        for _ in range(steps):
            turns.shuffle(order)
            for name, way in order:
                start = time.perf_counter()
                way()
                times[name].append(time.perf_counter() - start)
    finally:
        threads.SPLIT = kept_choice
    plain = statistics.median(times["plain"])

    def paired(name):
        cost = statistics.median(t - p for t, p in zip(times[name], times["plain"]))
        return f"{cost / plain:+.1%}"
    return [paired("watch"), paired("one"), paired("parts"), paired("unread"),
            ", ".join("parts" if split else "one" for split in choice.chosen) or "—"]


def _nothing(*_):
    return None


def _finite_unread(t):
    return True


if __name__ == "__main__":
    sys.exit(main())
