"""The cost of fpclass.torch.watch on a training step, next to torch.autograd.detect_anomaly.

    python benchmarks/bench_watch.py                      # the three models, batches 128 and 16
    python benchmarks/bench_watch.py --threads 1          # torch on one thread (a shared machine)
    python benchmarks/bench_watch.py --models mlp --steps 50
    python benchmarks/bench_watch.py --threads 1 --clock cpu --batch 16,4  # a loaded machine
    python benchmarks/bench_watch.py --base /work/main/src     # an A/B against another tree
    python benchmarks/bench_watch.py --malloc default  # glibc's adaptive malloc thresholds
    python benchmarks/bench_watch.py --models transformer --transformer-width 1024 --batch 64

A step: zero the grads, forward, mean-square loss, backward, SGD update. The models: the README's
8-layer 512-wide MLP, a two-layer transformer encoder with a causal float mask, and a small
channels_last CNN (conv, batch norm, ReLU, pooling). Four ways of running a step (plain; inside
`with fpclass.torch.watch(model, grads=False)`: activations and their gradients; inside
`with fpclass.torch.watch(model)`: also every parameter's gradient; inside
`with torch.autograd.detect_anomaly(check_nan=True)`) take turns step by step, in an order shuffled
every round (no mode always runs after the same one: what the mode before left in the caches and
torch's spinning workers), entered and left every step as in the README, so drift in the machine's
speed reaches all alike; each row is the
median over --steps steps, and the paired column the median over rounds of each step's time
minus the plain step's of the same round (steadier on a loaded machine), with the standard error
of that median (from the quartiles): a run-to-run spread to read the 10% line against. A fifth mode, "hooks
alone", registers the hooks a watch of one hook a module would register (a forward hook on every
module, a gradient hook on each module output that requires grad, a post-accumulate hook on every
parameter) with empty bodies and removes them after the step: torch's own cost of calling hooks
that way, registered as watch registers them (fpclass.torch.hook_tables: into torch's tables,
without a handle each). A sixth, "hooks reading in them", gives the same hooks bodies
that read, with watch's own checker (a magnitude bound for outputs, the screen for gradients
after torch's sum from 2^16 elements),
what a watch of one hook a module must read (every output but those of the classes watch proves
finite from a finite input, every output's gradient, every parameter's gradient) and do nothing
else: the least a watch of one hook a module costs in a real step (the byte count is printed
under the table, with a line setting watch's paired cost and that floor's against the target of
at most +10% a step). On the MLP at batch 128 watch (a chain: fpclass.torch.chain) reads less:
the input, each Linear's output and the gradients the Linears make. Before the first step glibc's malloc gets fixed thresholds
(`--malloc fixed`, the default: freed memory stays with the process) so that no mode's
time depends on how many pages the heap gave back and faulted in again that step; the last
column counts each mode's minor page faults a step. `--clock cpu` times the
stepping thread's CPU time instead of the wall clock (with `--threads 1` all of a CPU step's
work runs on that thread): time lost to other processes on a shared machine is left out.
On the MLP one more mode, "one exact-watch design for this model" (mlp_design_watch), is a
watch written for that one model: it makes the reads that design needs and registers the
hooks its proofs of the rest would need with empty bodies, an estimate of what an exact watch
of that design would cost here with nothing else to do (a line under the table sets it against
the target). Three more split watch's own cost on the MLP: "the chain's hooks alone" and "the
chain's hooks and reads alone" (chain_alone: the hooks watch's chain registers, registered as it
registers them but before the timed step, as watch's entering adds them, with empty bodies or
making the chain's reads and nothing else) and "entering and leaving watch alone" (the context
entered and left, then a plain step); a line under the table puts the rest down to watch's
Python in its hooks (printed only where watch read what the chain reads: it took the chain).
`--base SRC` adds two more modes, the watch (with parameter grads) of the fpclass package under SRC
(another tree's src/) and that of this tree's own package, each copied to a temporary folder and
imported as a package of its own: an A/B of two trees in one process, their steps alternating
with the others, and a line under the table sets the two copies against each other. The
copies, not the "watch" row, make the A/B: with one tree on both sides, the watch row (the
package the other modes share) ran 0.8 and 0.9 points cheaper than the copy in two runs and
0.1 in a third, while two copies differed by 0.3 ± 0.4 (docs/benchmarks.md, thirtieth round).

After each model, the floor (unless --no-floor): the tensors one watched step checks (recorded
from the watch itself), each rewritten by torch and read straight after, as a hook reads what a
layer has just written, by fpclass's screen (what watch calls, on the raw buffer), by fpclass's
counter (the full count watch took before), by NumPy on one thread and by torch.sum on torch's
threads; "hooks alone" plus the best pass of the fastest of those reads is the least a watch
that reads every tensor once could cost on this machine.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib
import math
import os
import random
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
from fpclass.kernels import threads  # noqa: E402
from fpclass.operators.buffers import nonfinite_counter, nonfinite_screen  # noqa: E402
from fpclass.torch import hook_tables  # noqa: E402
from fpclass.torch.tensors import checker  # noqa: E402
from fpclass.torch.watching import KEEP_FINITE_NAMES  # noqa: E402


#: issue 22's target for watch (with parameter gradients): at most this much a step.
TARGET = 0.10
#: With --base: this tree's watch from a copy of its package, as the base's is run.
HEAD = "this tree's watch (+ parameter grads), from a copy"
#: The MLP's extra mode: mlp_design_watch.
DESIGN = "one exact-watch design for this model (its reads, empty proof hooks)"
#: The MLP's split of watch's cost: chain_alone, and watch entered and left around a plain step.
CHAIN_ALONE = "the chain's hooks and reads alone (no logic)"
CHAIN_HOOKS = "the chain's hooks alone (empty bodies)"
ENTER_ALONE = "entering and leaving watch alone (the step unwatched)"


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
        width = args.transformer_width
        out["transformer"] = (f"2-layer transformer encoder (width {width}, 4 heads, causal "
                              f"float mask), batch {max(1, batch // 8)} x {seq} tokens",
                              Encoder(width), (torch.randn(max(1, batch // 8), seq, width), mask))
    if "cnn" in args.models:
        x = torch.randn(max(1, batch // 4), 3, 32, 32).to(memory_format=torch.channels_last)
        model = cnn().to(memory_format=torch.channels_last)
        out["cnn"] = (f"channels_last CNN (4 conv + batch norm blocks), batch "
                      f"{max(1, batch // 4)} x 3 x 32 x 32", model, (x,))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512, help="the MLP's width")
    ap.add_argument("--transformer-width", type=int, default=256,
                    help="the transformer's width (its feed-forward Linears 4 times as wide)")
    ap.add_argument("--batch", default="128,16", help="batch sizes, comma-separated")
    ap.add_argument("--models", default="mlp,transformer,cnn", help="mlp, transformer, cnn")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall clock, or the stepping thread's CPU time (use with --threads 1)")
    ap.add_argument("--no-floor", dest="floor", action="store_false",
                    help="skip the floor (reading the tensors one watched step checks)")
    ap.add_argument("--malloc", choices=("fixed", "default"), default="fixed",
                    help="fixed: glibc's mmap and trim thresholds set high before the first step "
                         "(no page faults from the heap shrinking and growing each step); "
                         "default: glibc's own adaptive thresholds")
    ap.add_argument("--base", default=None,
                    help="a source folder holding another fpclass (e.g. /work/main/src): its "
                         "watch alternates with this one's")
    args = ap.parse_args()
    args.models = args.models.split(",")
    print(fix_malloc() if args.malloc == "fixed" else
          "glibc's malloc as it comes: its adaptive thresholds decide each step's page faults\n")
    args.base_watch = args.head_watch = None
    if args.base:
        args.base_watch = copied_watch(args.base, "fpclass_base")
        args.head_watch = copied_watch(HOME, "fpclass_head")
    if args.threads:
        torch.set_num_threads(args.threads)
    for batch in (int(b) for b in args.batch.split(",")):
        for name, (what, model, inputs) in models(args, batch).items():
            run(args, name, what, model, inputs)
            print()
    return 0


def fix_malloc() -> str:
    """Set glibc's mmap threshold to 1 GiB (32 MiB where a glibc caps it there) and its trim
    threshold to 2**31 - 1 bytes (mallopt), so the heap keeps what a step freed for the next:
    with glibc's adaptive defaults, a step's tensors go back to the system and fault in again
    (thousands of minor faults a step), and how many depends on the order of frees, which
    differs per process and per mode (the same tree's watch cost the MLP +6% to +16% in five
    processes, a steady +16-17% with these settings: docs/benchmarks.md, issue 22,
    twenty-third round). jemalloc and TCMalloc, which PyTorch's CPU tuning guide suggests,
    also keep freed memory for reuse. The line that says what was done."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return "no mallopt in this C library: the allocator as it comes\n"
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    mmap = next((f"{size >> 20} MiB" for size in (1 << 30, 32 << 20)
                 if mallopt(m_mmap_threshold, size) == 1), None)
    trim = mallopt(m_trim_threshold, 2**31 - 1) == 1
    if mmap is None and not trim:
        return "mallopt refused both thresholds: the allocator as it comes\n"
    return (f"glibc's malloc with fixed thresholds (mmap {mmap or 'adaptive'}, trim "
            f"{'2 GiB' if trim else 'adaptive'}: freed memory kept for the next step; "
            "--malloc default for glibc's adaptive ones)\n")


#: The source folder of the fpclass package this script runs.
HOME = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ft.__file__))))


def copied_watch(src: str, package: str):
    """watch from the fpclass package under `src`, imported as `package` from a copy."""
    if not os.path.isdir(os.path.join(src, "fpclass")):
        raise SystemExit(f"--base {src}: no fpclass package there")
    folder = tempfile.mkdtemp(prefix="bench_watch_base_")
    atexit.register(shutil.rmtree, folder, True)
    shutil.copytree(os.path.join(src, "fpclass"), os.path.join(folder, package),
                    ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, folder)
    return importlib.import_module(f"{package}.torch").watch


def _timed(mode, clock) -> float:
    """The time `mode()` takes; a mode with `prepare` and `finish` methods (chain_alone's) has
    them called just before and just after, untimed."""
    prepare, finish = getattr(mode, "prepare", None), getattr(mode, "finish", None)
    if prepare is not None:
        prepare()
    try:
        t = clock()
        mode()
        return clock() - t
    finally:
        if finish is not None:
            finish()


def _minor_faults() -> int:
    """The process's minor page faults so far (0 where the resource module is missing)."""
    try:
        import resource
    except ImportError:  # (no such count here: the column reads 0)
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def run(args, name, what, model, inputs) -> None:
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(*inputs).square().mean()
        loss.backward()
        opt.step()

    def plain():
        step()

    def on_output(module, args, kwargs, output):
        for t in output if isinstance(output, (tuple, list)) else (output,):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                hook_tables.add_tensor_hook(t, _nothing)

    def hooks_alone():  # registered as watch registers its hooks
        added = []
        hook_tables.add_forward_hooks(added, [(m, on_output) for m in model.modules()])
        hook_tables.add_post_accumulate_hooks(added, list(model.parameters()), _nothing)
        step()
        hook_tables.remove(added)

    reading = in_step_reader(model)

    def hooks_reading():
        reading.register()
        step()
        reading.remove()

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
             "hooks reading in them (no other logic)": hooks_reading,
             "watch(grads=False)": watched, "watch (+ parameter grads)": watched_grads,
             "detect_anomaly(check_nan=True)": anomaly}
    if mlp_design_watch.applies(model):
        modes[DESIGN] = functools.partial(mlp_design_watch(model).step, step)
        alone, hooks = chain_alone(model, inputs[0], step), chain_alone(model, inputs[0], step,
                                                                        read=False)
        modes[CHAIN_ALONE], modes[CHAIN_HOOKS] = alone, hooks

        def entered_alone():
            with ft.watch(model):
                pass
            step()
        modes[ENTER_ALONE] = entered_alone
    if args.base_watch is not None:
        def base_grads():
            with args.base_watch(model):
                step()

        def head_grads():
            with args.head_watch(model):
                step()
        modes[HEAD] = head_grads
        modes[f"base: watch (+ parameter grads) from {args.base}"] = base_grads
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    times = {mode: [] for mode in modes}
    faults = {mode: 0 for mode in modes}
    for _ in range(10):  # warm up: kernels compiled and loaded, allocator settled
        for mode in modes.values():
            _timed(mode, clock)
    order = list(modes.items())
    turns = random.Random(0)
    for _ in range(args.steps):
        turns.shuffle(order)  # no mode always follows the same one (caches, torch's workers)
        for mode, fn in order:
            f = _minor_faults()
            times[mode].append(_timed(fn, clock))
            faults[mode] += _minor_faults() - f
    if torch.get_num_threads() != threads:  # (fpclass's first parallel read once moved it)
        raise RuntimeError(f"torch's thread count moved from {threads} to "
                           f"{torch.get_num_threads()} during the run: its modes are not timed "
                           "alike")
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
    spread = {mode: _spread([t - p for t, p in zip(ts, times["plain"])])
              for mode, ts in times.items()}
    # the fastest tenth of each mode's steps: those least slowed by other processes
    fast = {mode: statistics.quantiles(ts, n=10)[0] if len(ts) > 1 else ts[0]
            for mode, ts in times.items()}
    rows = [[mode, f"{m * 1e3:.2f} ms", "—" if mode == "plain" else f"{(m - base) / base:+.1%}",
             "—" if mode == "plain" else f"{paired[mode] * 1e3:+.2f} ms ({paired[mode] / base:+.1%})"
             f" ± {spread[mode] / base:.1%}",
             f"{fast[mode] * 1e3:.2f} ms" + ("" if mode == "plain" else
                                            f" ({fast[mode] / fast['plain'] - 1:+.1%})"),
             f"{faults[mode] / args.steps:.0f}"]
            for mode, m in median.items()]
    print(table(["step", "median", "overhead", "paired: median of differences ± its error",
                 "10th percentile", "minor faults a step"], rows))
    watch_cost = median["watch (+ parameter grads)"] - base
    anomaly_cost = median["detect_anomaly(check_nan=True)"] - base
    print(f"\nwatch's overhead (with parameter grads) is {watch_cost / anomaly_cost:.2f} of "
          f"detect_anomaly's ({watch_cost * 1e3:+.2f} ms vs {anomaly_cost * 1e3:+.2f} ms per "
          "step).")
    seen = watched_reads(model, step)
    read = sum(math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
               for shape, _, dtype in seen)
    ours, least = (paired[m] / base for m in ("watch (+ parameter grads)",
                                              "hooks reading in them (no other logic)"))
    if least <= TARGET:
        floor_says = "below the target"
    elif read >= reading.nbytes:  # watch proves nothing more finite than those hooks do here
        floor_says = ("above it, and watch reads what they read: no watch of one hook a module "
                      "meets the target here")
    else:
        floor_says = (f"above it; watch reads {read / 2**20:.1f} of their "
                      f"{reading.nbytes / 2**20:.1f} MiB (its proofs)")
    print(f"\ntarget (at most {TARGET:+.0%} a step, paired): watch {ours:+.1%}, "
          f"{'met' if ours <= TARGET else 'NOT met'}; hooks reading in them {least:+.1%}, "
          + floor_says)
    if DESIGN in paired:
        cost, err = paired[DESIGN] / base, spread[DESIGN] / base
        verdict = (f"below the target by over twice its error: this design could meet it, with "
                   f"{TARGET - cost:.1%} of the step left for its bodies"
                   if cost + 2 * err <= TARGET else
                   "above the target by over twice its error: this design cannot meet it here"
                   if cost - 2 * err > TARGET else "not clearly on either side of the target")
        print(f"\none exact-watch design for this model (mlp_design_watch: its reads, its "
              f"proofs' hooks with empty bodies): {cost:+.1%} ± {err:.1%}, {verdict}")
    if CHAIN_ALONE in paired:
        calls, reads = alone.count()
        if reads == len(seen):
            chain_split(paired, spread, base, calls)
        else:
            print(f"\nno split of watch's cost: it read {len(seen)} tensors in a step, the "
                  f"chain's hooks {reads} (not watched as a chain here?)")
    print(f"\nthe hooks reading in them read {reading.nbytes / 2**20:.1f} MiB a step (the last "
          "step's): outputs but those of " + ", ".join(KEEP_FINITE_NAMES) + ", each output's "
          "gradient, each parameter's gradient")
    if args.base_watch is not None:
        other = f"base: watch (+ parameter grads) from {args.base}"
        change = paired[HEAD] - paired[other]
        error = math.sqrt(spread[HEAD] ** 2 + spread[other] ** 2)
        print(f"\nA/B, both trees as copies: this tree {paired[HEAD] / base:+.1%}, the base "
              f"{paired[other] / base:+.1%}: {change / base:+.1%} ± {error / base:.1%} of the "
              f"step (the watch row, this tree's own package: {paired['watch (+ parameter grads)'] / base:+.1%})")
    if args.floor:
        floor(seen, base, paired["hooks alone (empty bodies)"], clock)


def chain_split(paired: dict, spread: dict, base: float, calls: int) -> None:
    """Print watch's cost on the MLP split into torch calling the chain's hooks, the chain's
    reads, entering and leaving the context and the rest (watch's Python in its hooks), and
    what the target leaves for that rest: spread over the `calls` hook calls of a step, against
    what torch's call of one of those hooks costs with an empty body. chain_alone's modes
    register their hooks outside the timed step: entering pays for that in watch."""
    watched = "watch (+ parameter grads)"
    total, alone, hooks, entering = (paired[m] / base for m in (
        watched, CHAIN_ALONE, CHAIN_HOOKS, ENTER_ALONE))
    rest = total - alone - entering
    error = math.sqrt(sum((spread[m] / base) ** 2
                          for m in (watched, CHAIN_ALONE, ENTER_ALONE)))
    print(f"\nwatch's {total:+.1%} split (each part paired on its own, so they need not add up): "
          f"torch calling the chain's hooks {hooks:+.1%} ({calls} calls a step, "
          f"{paired[CHAIN_HOOKS] / calls * 1e6:.1f} µs a call with an empty body), the chain's "
          f"reads in them {alone - hooks:+.1%} (chain_alone), entering and leaving the context "
          f"{entering:+.1%}; the rest, {rest:+.1%} ± {error:.1%}, is watch's Python in its hooks "
          "(the pass's state, the proofs' checks, the claims)")
    room = TARGET - alone - entering
    if room > 0:
        print(f"at the target that rest may take {room:+.1%} of the step, "
              f"{room * base / calls * 1e6:.1f} µs a hook call, against "
              f"{paired[CHAIN_HOOKS] / calls * 1e6:.1f} µs for torch's call of an empty one")
    else:
        print(f"at the target nothing is left for that rest: the chain's hooks, its reads and "
              f"entering already take {alone + entering:+.1%}")


class in_step_reader:
    """The hooks of "hooks alone" with bodies that read, with watch's own reads (its checker: a
    magnitude bound for outputs, the screen for gradients after torch's sum), what a
    hook-per-module watch must read and nothing else: each module's output tensors (once a
    version; not those of a class watch proves finite from a finite input, KEEP_FINITE_NAMES),
    the gradient of each, and each parameter's gradient; no other logic. Where watch has no proof
    beyond that rule (the MLP below 2^17 elements an activation, where its mask and sum proofs
    start: batch 128 at width 512) it reads the same bytes as watch, in the same hooks: the least
    such a watch costs in a real step, on data just written by torch's threads. Its reads time
    no pass of watch's (threads.SPLIT): it reads the way watch reads now, on a choice of its
    own."""

    def __init__(self, model):
        self.model, self.handles, self.nbytes, self.last = model, [], 0, None
        self.checks, self.saved_choice = checker(torch), None

    def counted(self, t) -> None:
        if t.is_floating_point():
            self.nbytes += t.numel() * t.element_size()

    def gradient(self, g) -> None:
        if not self.checks.finite(g):
            raise RuntimeError("a non-finite gradient in a benchmark step")
        self.counted(g)

    def output(self, module, args, kwargs, output):
        for t in output if isinstance(output, (tuple, list)) else (output,):
            if not isinstance(t, torch.Tensor):
                continue
            version = t._version
            if self.last is not None and t is self.last[0] and version == self.last[1]:
                continue  # a container's output: its last child's
            if type(module).__name__ not in KEEP_FINITE_NAMES:
                if self.checks.magnitude(t) is None:
                    raise RuntimeError("a non-finite output in a benchmark step")
                self.counted(t)
            if t.requires_grad:
                hook_tables.add_tensor_hook(t, self.gradient)
            self.last = (t, version)

    def parameter(self, p):
        self.gradient(p.grad)

    def register(self) -> None:
        self.nbytes, self.last = 0, None
        self.saved_choice = threads.SPLIT
        threads.SPLIT = threads.SplitChoice()
        threads.SPLIT.split = self.saved_choice.split
        hook_tables.add_forward_hooks(self.handles,
                                      [(m, self.output) for m in self.model.modules()])
        hook_tables.add_post_accumulate_hooks(
            self.handles, [p for p in self.model.parameters() if p.requires_grad],
            self.parameter)

    def remove(self) -> None:
        hook_tables.remove(self.handles)
        self.last = None
        threads.SPLIT = self.saved_choice


class mlp_design_watch:
    """One exact watch written for the MLP (Linear and ReLU alternating, Linear first and last,
    2-d input), its reads made and its proofs' hooks registered with empty bodies: an estimate
    of what that design would cost, not a lower bound over all watches. Its reads, each for a
    magnitude bound (the proofs below need bounds): the model's input, each Linear's output, and
    in one post-hook on each Linear's AddmmBackward0 node the gradient it makes for its input (a
    ReLU's output) or, at the last Linear, the gradient it receives (the model output's, from
    the loss). Reading each Linear's output and that gradient costs less than reading the weight
    whose bound would prove both while 2 x batch < width (at batch 128, width 512, the weight is
    twice their size). Its proofs, whose checks, bookkeeping and reports it takes as free:
    - each Linear output's gradient is the mask ReLU's backward makes from the ReLU output's
      gradient read finite, so finite (the Linear output having the ReLU as its one consumer,
      and the ReLU output the next Linear, which a real watch would have to check);
    - each parameter's gradient is bounded from the bounds of the Linear's input and output
      gradient (dW = g^T x, db = the sum of g over the batch) when what a pre-hook on the
      parameter receives is exactly the contribution the AddmmBackward0 node made (its
      data_ptr() and _version, compared without keeping a reference: a kept one makes
      AccumulateGrad copy the gradient) and .grad is None there (set_to_none=True); else it
      would be read. The pre-hooks are registered empty;
    - the model's own forward hook ends the pass, where a real watch drops the bounds it kept."""

    def __init__(self, model):
        self.model, self.checks = model, checker(torch)
        self.linears = [m for m in model if isinstance(m, torch.nn.Linear)]
        self.handles, self.added = [], []

    @staticmethod
    def applies(model) -> bool:
        """Does the design fit `model`: a Sequential of Linear and ReLU alternating, Linear first
        and last, every parameter requiring grad?"""
        mods = list(model) if isinstance(model, torch.nn.Sequential) else []
        return (len(mods) % 2 == 1 and all(p.requires_grad for p in model.parameters())
                and all(isinstance(m, torch.nn.ReLU if i % 2 else torch.nn.Linear)
                        for i, m in enumerate(mods)))

    def bounded(self, t) -> None:
        if t is not None and self.checks.magnitude(t) is None:
            raise RuntimeError("a non-finite tensor in a benchmark step")

    def addmm_ran(self, grad_inputs, grad_outputs) -> None:
        self.bounded(grad_inputs[1])  # (bias's, input's, weight's transposed)

    def last_ran(self, grad_inputs, grad_outputs) -> None:
        self.bounded(grad_outputs[0])

    def linear(self, module, args, kwargs, output) -> None:
        if module is self.linears[0]:
            self.bounded(args[0])
        self.bounded(output)
        node = output.grad_fn
        if type(node).__name__ != "AddmmBackward0":
            raise RuntimeError("mlp_design_watch takes 2-d inputs (a Linear's addmm), got "
                               f"{type(node).__name__}")
        self.handles.append(node.register_hook(
            self.last_ran if module is self.linears[-1] else self.addmm_ran))

    def step(self, step) -> None:
        try:
            for m in self.linears:
                hook_tables.add_module_hook(self.added, m, self.linear, with_kwargs=True)
            hook_tables.add_module_hook(self.added, self.model, _nothing, with_kwargs=True)
            self.added += [p.register_hook(_nothing) for p in self.model.parameters()]
            step()
        finally:
            hook_tables.remove(self.added)
            hook_tables.remove(self.handles)


class chain_alone:
    """watch's chain (fpclass.torch.chain) with its logic taken out: the hooks it registers on
    the MLP, registered as watch registers them (a forward hook on every layer, the model's
    pre-hook, its forward hook and its always-called end hook, a post-accumulate hook on every
    parameter: `prepare`, untimed, as watch's entering adds them; `finish` removes them), then
    in each pass a post-hook on each Linear's node and a hook on the model output's gradient,
    each making the chain's reads (`read`) and nothing else: the model's input (where watch
    reads it: no larger than the first weight), each Linear's output (with a magnitude bound),
    the output's gradient and the gradient each Linear's node makes for its input. Without
    `read`, torch's own cost of calling those hooks. Called, one training step (`step`)."""

    def __init__(self, model, x, step, read: bool = True):
        self.model, self.checks, self.added, self.read = model, checker(torch), [], read
        self.layers, self.training_step = list(model), step
        self.first = self.layers[0]
        self.input_read = x.numel() <= self.first.weight.numel()
        self.calls = self.reads = 0
        self.counting = False

    def bounded(self, t) -> None:
        if t is None:
            return
        if self.counting:
            self.reads += 1
        if self.read and self.checks.magnitude(t) is None:
            raise RuntimeError("a non-finite tensor in a benchmark step")

    def made(self, grad_inputs, grad_outputs) -> None:
        self.counted()
        self.bounded(grad_inputs[1])  # (addmm's: bias's, input's, weight's transposed; the
                                      # input's is None at the first Linear)

    def output_gradient(self, grad) -> None:
        self.counted()
        self.bounded(grad)

    def linear(self, module, args, kwargs, output) -> None:
        self.counted()
        if module is self.first and self.input_read:
            self.bounded(args[0])
        self.bounded(output)
        output.grad_fn.register_hook(self.made)

    def relu(self, module, args, kwargs, output) -> None:
        self.counted()

    def model_output(self, module, args, kwargs, output) -> None:
        self.counted()
        hook_tables.add_tensor_hook(output, self.output_gradient)

    def other(self, *_) -> None:
        self.counted()

    def first_weight(self, p) -> None:  # unclaimed where the input is not read: watch reads it
        self.counted()
        if self.counting:
            self.reads += 1
        if self.read and not self.checks.finite(p.grad):
            raise RuntimeError("a non-finite gradient in a benchmark step")

    def counted(self) -> None:
        if self.counting:
            self.calls += 1

    def count(self) -> tuple:
        """(hook calls, tensors read) in one step (untimed)."""
        self.calls = self.reads = 0
        self.counting = True
        try:
            _timed(self, time.perf_counter)
        finally:
            self.counting = False
        return self.calls, self.reads

    def prepare(self) -> None:
        added = self.added
        for at, layer in enumerate(self.layers):
            hook_tables.add_module_hook(added, layer, self.relu if at & 1 else self.linear,
                                        with_kwargs=True)
        hook_tables.add_module_hook(added, self.model, self.other, pre=True, prepend=True)
        hook_tables.add_module_hook(added, self.model, self.model_output, with_kwargs=True)
        hook_tables.add_module_hook(added, self.model, self.other, always_call=True)
        for p in self.model.parameters():
            hook_tables.add_post_accumulate_hooks(
                added, [p], self.first_weight if p is self.first.weight and not self.input_read
                else self.other)

    def finish(self) -> None:
        hook_tables.remove(self.added)

    def __call__(self) -> None:
        self.training_step()


def _nothing(*_):
    """An empty hook body: torch's own cost of calling a hook."""
    return None


def _spread(diffs: list) -> float:
    """The standard error of a median of `diffs`, from their quartiles (1.2533 IQR / 1.349 /
    sqrt(n)): how far the paired column may move from run to run."""
    if len(diffs) < 2:
        return float("nan")
    q = statistics.quantiles(diffs, n=4)
    return 1.2533 * (q[2] - q[0]) / 1.349 / len(diffs) ** 0.5


def watched_reads(model, step) -> list:
    """(shape, stride, dtype) of each CPU tensor one watched step reads, recorded from watch's
    checker."""
    checks = checker(torch)
    reads, seen = {"finite": checks.finite, "magnitude": checks.magnitude}, []

    def recording(read):
        def record(t):
            if t.is_floating_point() and t.layout is torch.strided and t.is_cpu:
                seen.append((tuple(t.shape), tuple(t.stride()), t.dtype))
            return read(t)
        return record
    for name, read in reads.items():  # gradients are screened, outputs read with a bound
        setattr(checks, name, recording(read))
    try:
        with ft.watch(model):
            step()
    finally:
        for name, read in reads.items():
            setattr(checks, name, read)
    return seen


def floor(seen: list, plain: float, hooks: float, clock) -> None:
    """What no watch can go below here: torch calling the hooks (the "hooks alone" mode) plus
    reading once every tensor one watched step checks (`seen`: watched_reads), each just written
    by torch (on its threads, as a layer writes it) and read straight after, as a hook reads it.
    The same bytes are read by fpclass's screen (what watch calls, on the raw buffer), by
    fpclass's counter, by NumPy on one thread (bitwise or over 8-byte words: no arithmetic to
    wait on) and by torch.sum on torch's threads (the machine's read)."""
    import numpy as np
    tensors = [torch.empty_strided(shape, stride, dtype=dtype) for shape, stride, dtype in seen
               if dtype in (torch.float16, torch.float32, torch.float64)]
    sources = [torch.randn(t.shape, dtype=t.dtype).to(memory_format=_format(t)) for t in tensors]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)

    def words(t):
        flat = t.detach().as_strided((t.numel(),), (1,)).numpy()  # dense: one block
        return flat.view(np.uint64) if flat.nbytes % 8 == 0 else flat.view(np.uint8)

    views = [words(t) for t in tensors]
    threads = torch.get_num_threads()
    dtypes = {t.dtype: np.dtype(str(t.dtype).removeprefix("torch.")) for t in tensors}
    counters = {d: nonfinite_counter(n) for d, n in dtypes.items()}
    screens = {d: nonfinite_screen(n) for d, n in dtypes.items()}
    # both called on the raw buffer (watch adds the same layout checks in front of either)
    readers = {"fpclass's screen (watch's read)":
                   lambda i: screens[tensors[i].dtype](tensors[i].data_ptr(), tensors[i].numel()),
               "fpclass's counter (a count: watch before watch5)":
                   lambda i: counters[tensors[i].dtype](tensors[i].data_ptr(),
                                                        tensors[i].numel()),
               "NumPy, one thread (bitwise or of the words)":
                   lambda i: np.bitwise_or.reduce(views[i]),
               f"torch.sum, {threads} thread{'s' if threads > 1 else ''}": lambda i: torch.sum(tensors[i])}
    totals = {name: [] for name in readers}
    for rep in range(22):
        for name, read in readers.items():
            spent = 0.0
            for i, (t, src) in enumerate(zip(tensors, sources)):
                t.copy_(src)  # just written by torch, as a layer's output is
                s = clock()
                read(i)
                spent += clock() - s
            if rep >= 2:
                totals[name].append(spent)
    big = sorted(nbytes_of(t) for t in tensors)[-3:]
    print(f"\nfloor: one watched step checks {len(tensors)} tensors, {nbytes / 2**20:.1f} MiB "
          f"(largest {', '.join(f'{b / 2**20:.1f}' for b in reversed(big))} MiB), each read "
          "just after torch wrote it; 20 passes:\n")
    rows = []
    for name, ts in totals.items():
        m, best = statistics.median(ts), min(ts)
        rows.append([name, f"{m * 1e3:.2f} ms", f"{best * 1e3:.2f} ms",
                     f"{nbytes / best / 1e9:.1f} GB/s", f"{(hooks + best) / plain:+.1%}"])
    print(table(["reading them once", "median", "best pass", "bandwidth (best)",
                 "hooks alone + best, of the plain step"], rows))
    # a floor is a bound from below: the best pass of the fastest reader (another process
    # taking a core slows a pass, never speeds one)
    fastest = min(min(ts) for ts in totals.values())
    print(f"\nfloor = hooks alone ({hooks * 1e3:+.2f} ms) + reading {nbytes / 2**20:.1f} MiB at "
          f"the fastest read ({nbytes / fastest / 1e9:.1f} GB/s, {fastest * 1e3:.2f} ms) "
          f"= {(hooks + fastest) * 1e3:.2f} ms = {(hooks + fastest) / plain:+.1%} of the plain "
          f"step ({plain * 1e3:.2f} ms)")


def nbytes_of(t) -> int:
    return t.numel() * t.element_size()


def _format(t):
    if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(
            memory_format=torch.channels_last):
        return torch.channels_last
    return torch.contiguous_format


if __name__ == "__main__":
    sys.exit(main())
