"""The cost of fpclass's training callbacks on a training step, Lightning and the HF Trainer.

    python benchmarks/bench_callbacks.py                  # both frameworks, two models
    python benchmarks/bench_callbacks.py --threads 1      # torch on one thread (a shared machine)

A step is timed from the framework's step-begin hook to its step-end hook (forward, loss,
backward, optimizer step, and the callback's checks of the loss, the gradients and the parameters
inside them), by a timing callback placed after fpclass's. Runs without and with the callback
take turns (--rounds runs of --steps steps each), so drift in the machine's speed reaches both
alike; each row is the best over the runs of a run's median step. Models: a Linear(4, 2) (the
tests' tiny model: the fixed cost of the hooks) and an 8-layer 512-wide MLP (16 parameter
tensors, 2.1 M parameters), batch 16, float32 on CPU, SGD.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table  # noqa: E402


def mlp(layers: int, width: int) -> torch.nn.Sequential:
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


MODELS = {"Linear(4, 2)": (lambda: torch.nn.Linear(4, 2), 4, 2),
          "MLP 8 x 512": (lambda: mlp(8, 512), 512, 512)}


def data(n_in: int, n_out: int, n: int):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, n_in, generator=g), torch.randn(n, n_out, generator=g)


# -- Lightning ---------------------------------------------------------------------------------

def lightning_steps(make, n_in, n_out, steps, callback) -> list:
    import lightning.pytorch as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = make()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return (self.net(x) - y).square().mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-4)

    class Timer(L.Callback):
        def __init__(self):
            self.times, self.t = [], 0.0

        def on_train_batch_start(self, *args):
            self.t = time.perf_counter()

        def on_train_batch_end(self, *args):
            self.times.append(time.perf_counter() - self.t)

    x, y = data(n_in, n_out, 16 * steps)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    timer = Timer()
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False,
                        callbacks=([callback] if callback else []) + [timer])
    trainer.fit(Module(), loader)
    return timer.times[5:]  # the first steps warm up the allocator and fpclass's kernels


# -- Hugging Face Trainer ----------------------------------------------------------------------

def transformers_steps(make, n_in, n_out, steps, callback) -> list:
    import transformers

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = make()

        def forward(self, x, labels):
            return {"loss": (self.net(x) - labels).square().mean()}

    class Timer(transformers.TrainerCallback):
        def __init__(self):
            self.times, self.t = [], 0.0

        def on_step_begin(self, *args, **kwargs):
            self.t = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            self.times.append(time.perf_counter() - self.t)

    x, y = data(n_in, n_out, 16 * steps)
    rows = [{"x": x[i], "labels": y[i]} for i in range(len(x))]
    timer = Timer()
    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            out, max_steps=steps, per_device_train_batch_size=16, use_cpu=True,
            report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
            optim="sgd", learning_rate=1e-4, dataloader_num_workers=0)
        trainer = transformers.Trainer(Model(), args, train_dataset=rows,
                                       callbacks=([callback] if callback else []) + [timer])
        with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its metrics
            trainer.train()
    return timer.times[5:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=60, help="steps per run")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each mode, alternating")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--only", default="lightning,transformers")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")          # the frameworks' advice about workers and logging
    logging.disable(logging.WARNING)         # their banners
    frameworks = {"lightning": lightning_steps, "transformers": transformers_steps}
    callbacks = {"lightning": "fpclass.integrations.lightning",
                 "transformers": "fpclass.integrations.transformers"}
    rows = []
    for framework in args.only.split(","):
        run = frameworks[framework]
        module = __import__(callbacks[framework], fromlist=["NonFiniteCallback"])
        for model, (make, n_in, n_out) in MODELS.items():
            times = {"plain": [], "callback": []}
            for _ in range(args.rounds):
                times["plain"].append(statistics.median(run(make, n_in, n_out, args.steps, None)))
                times["callback"].append(statistics.median(
                    run(make, n_in, n_out, args.steps, module.NonFiniteCallback())))
            plain, hooked = (min(times[k]) for k in ("plain", "callback"))
            rows.append([framework, model, f"{plain * 1e3:.3f} ms", f"{hooked * 1e3:.3f} ms",
                         f"{(hooked - plain) * 1e6:+.0f} µs", f"{(hooked - plain) / plain:+.1%}"])
    print(f"Step time: best of {args.rounds} runs' median step, {args.steps} steps a run, the "
          f"modes alternating run by run; batch 16, "
          f"float32 on CPU, torch threads {torch.get_num_threads()}; the callback checks the "
          "loss, every gradient and every parameter each step\n")
    print(table(["framework", "model", "plain", "with NonFiniteCallback", "cost", "overhead"],
                rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
