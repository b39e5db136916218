"""fpclass.integrations.transformers on real Hugging Face Trainer runs: a torch module with one
Linear layer returning {"loss": ...} as transformers models do, data built in memory, CPU, no
downloads; a NaN / Inf planted in the loss, a gradient (by the backward of an op), a parameter
after the optimizer step or a saved checkpoint at a chosen step. The callback must stop, skip or
raise there, naming what was planted; the truth is the plant itself, torch's isfinite for the
parameters afterwards, and the safetensors library's own reading of the saved file."""

import logging
import math
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("accelerate", reason="the Trainer needs accelerate (fpclass[test])")

from fpclass.integrations.transformers import (  # noqa: E402
    NonFiniteCallback, NonFiniteTrainingError,
)


class Poison(torch.autograd.Function):
    """Identity forward; its backward writes `value` into the gradient's element 1."""

    @staticmethod
    def forward(ctx, x, value):
        ctx.value = value
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        grad[1] = ctx.value
        return grad, None


class Tiny(torch.nn.Module):
    """Linear(4, 2) and a buffer; `plant` = (where, step, value) as in the Lightning test."""

    def __init__(self, plant=None):
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 2)
        self.register_buffer("stats", torch.zeros(3))
        self.plant, self.step = plant, 0

    def planted(self, where):
        return self.plant is not None and self.plant[0] == where and self.plant[1] == self.step

    def forward(self, x, labels=None):
        bias = Poison.apply(self.layer.bias, self.plant[2]) if self.planted("gradient") \
            else self.layer.bias
        loss = (torch.nn.functional.linear(x, self.layer.weight, bias) - labels).square().mean()
        if self.planted("loss"):
            loss = loss * self.plant[2]
        if self.planted("buffer"):
            self.stats[2] = self.plant[2]
        return {"loss": loss}


class Planter(transformers.TrainerCallback):
    """Tells the model which optimizer step (from 1) is under way, keeps the parameters as each
    step began, and plants a parameter value right after the planted step's optimizer step."""

    def __init__(self):
        self.before = {}

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        model.step = state.global_step + 1
        self.before[model.step] = {k: v.detach().clone() for k, v in model.named_parameters()}

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model.planted("parameter"):
            with torch.no_grad():
                model.layer.weight[0, 1] = model.plant[2]


def train(tmp_path, model, callback, max_steps=4, **kwargs):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 2, generator=g)
    data = [{"x": x[i], "labels": y[i]} for i in range(16)]
    options = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True, max_steps=max_steps,
                   per_device_train_batch_size=2, learning_rate=0.01, save_strategy="no",
                   disable_tqdm=True, logging_strategy="no", optim="sgd",
                   lr_scheduler_type="constant")
    options.update(kwargs)
    planter = Planter()
    trainer = transformers.Trainer(model=model, args=transformers.TrainingArguments(**options),
                                   train_dataset=data, callbacks=[planter, callback])
    trainer.train()
    return trainer, planter


def test_a_clean_run_completes(tmp_path):
    model, callback = Tiny(), NonFiniteCallback()
    trainer, _ = train(tmp_path, model, callback)
    assert trainer.state.global_step == 4 and callback.findings == [] and callback.unchecked == {}


def test_a_nan_loss_raises_naming_the_loss_and_its_step(tmp_path):
    model = Tiny(("loss", 2, math.nan))
    with pytest.raises(NonFiniteTrainingError, match=r"step 2: loss 'loss' holds 1 NaN") as e:
        train(tmp_path, model, NonFiniteCallback())
    (finding,) = e.value.findings
    assert (finding.kind, finding.name, finding.step) == ("loss", "loss", 2)
    assert finding.counts == {"nan": 1, "posinf": 0, "neginf": 0}


def test_an_inf_gradient_is_skipped_and_training_goes_on(tmp_path, caplog):
    # gradient clipping (max_grad_norm 1.0, the default) would make every gradient NaN: the
    # callback looks before it
    model, callback = Tiny(("gradient", 2, math.inf)), NonFiniteCallback("skip")
    with caplog.at_level(logging.WARNING, logger="fpclass.integrations"):
        trainer, planter = train(tmp_path, model, callback)
    assert trainer.state.global_step == 4
    (finding,) = callback.findings
    assert (finding.kind, finding.name, finding.step, finding.first) == \
        ("gradient", "layer.bias", 2, (1,))
    assert finding.counts == {"nan": 0, "posinf": 1, "neginf": 0}
    assert "layer.bias" in caplog.text and "skipping the step" in caplog.text
    before = planter.before
    for name in before[2]:
        assert torch.equal(before[2][name], before[3][name]), name
        assert not torch.equal(before[1][name], before[2][name]), name
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_a_nan_gradient_stops_training_without_applying_the_step(tmp_path):
    model, callback = Tiny(("gradient", 3, math.nan)), NonFiniteCallback("stop")
    trainer, planter = train(tmp_path, model, callback, max_steps=6)
    assert [(f.kind, f.name, f.step) for f in callback.findings] == [("gradient", "layer.bias", 3)]
    assert trainer.state.global_step == 3   # the Trainer counts the step it did not apply
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    for name, value in model.named_parameters():
        assert torch.equal(planter.before[3][name], value.detach()), name


def test_a_parameter_made_non_finite_by_the_step_stops_training_naming_it(tmp_path):
    model, callback = Tiny(("parameter", 2, -math.inf)), NonFiniteCallback("skip")
    trainer, _ = train(tmp_path, model, callback, max_steps=6)
    (finding,) = callback.findings   # skip cannot undo a step: it stops
    assert (finding.kind, finding.name, finding.step, finding.first) == \
        ("parameter", "layer.weight", 2, (0, 1))
    assert finding.counts == {"nan": 0, "posinf": 0, "neginf": 1}
    assert trainer.state.global_step == 2


def test_a_saved_checkpoint_holding_a_nan_raises_naming_the_file_and_tensor(tmp_path):
    from safetensors.torch import load_file
    model = Tiny(("buffer", 2, math.nan))
    with pytest.raises(NonFiniteTrainingError, match=r"checkpoint-2.*stats' holds 1 NaN") as e:
        train(tmp_path, model, NonFiniteCallback(), save_strategy="steps", save_steps=2)
    (finding,) = e.value.findings
    path = os.path.join(tmp_path, "checkpoint-2", "model.safetensors")
    assert finding.kind == "checkpoint" and finding.name.endswith("stats") and path in finding.name
    saved = load_file(path)["stats"]
    assert finding.counts["nan"] == int(torch.isnan(saved).sum()) == 1


def test_fail_on_and_ignore_pass_over_what_they_name(tmp_path):
    # in a checkpoint: in training, the Trainer's gradient norm (computed by clip_grad_norm_
    # even when max_grad_norm is 0) turns one Inf gradient into NaN everywhere
    model, callback = Tiny(("buffer", 2, math.inf)), NonFiniteCallback(fail_on="nan")
    trainer, _ = train(tmp_path / "a", model, callback, save_strategy="steps", save_steps=2)
    assert trainer.state.global_step == 4 and callback.findings == []
    assert bool(torch.isposinf(model.stats).any())
    model, callback = Tiny(("buffer", 2, math.nan)), NonFiniteCallback(ignore="stats")
    trainer, _ = train(tmp_path / "b", model, callback, save_strategy="steps", save_steps=2)
    assert trainer.state.global_step == 4 and callback.findings == []
    with pytest.raises(NonFiniteTrainingError, match="stats"):  # the same Inf, looked at
        train(tmp_path / "c", Tiny(("buffer", 2, math.inf)), NonFiniteCallback(fail_on="inf"),
              save_strategy="steps", save_steps=2)


def test_a_tiny_gpt2_built_from_its_config(tmp_path):
    # a real transformers model: its ModelOutput carries the loss the callback reads
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16, n_positions=8)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 16, (8, 6), generator=g)
    ids[:, 0] = 3
    data = [{"input_ids": row, "labels": row} for row in ids]
    options = dict(report_to="none", use_cpu=True, max_steps=2, per_device_train_batch_size=4,
                   save_strategy="no", disable_tqdm=True, logging_strategy="no")

    def train_gpt2(model, callback, out):
        args = transformers.TrainingArguments(str(tmp_path / out), **options)
        transformers.Trainer(model, args, train_dataset=data, callbacks=[callback]).train()

    torch.manual_seed(0)
    callback = NonFiniteCallback()
    train_gpt2(transformers.GPT2LMHeadModel(config), callback, "clean")
    assert callback.findings == []

    model = transformers.GPT2LMHeadModel(config)
    name = "transformer.h.0.mlp.c_fc.bias"
    param = dict(model.named_parameters())[name]
    param.register_hook(lambda grad: grad.index_fill(0, torch.tensor([5]), math.inf))
    with pytest.raises(NonFiniteTrainingError, match=rf"step 1: gradient '{name}' holds 1 \+Inf"):
        train_gpt2(model, NonFiniteCallback(), "gradient")

    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        model.transformer.wte.weight[3, 0] = math.nan   # token 3 starts every sequence
    with pytest.raises(NonFiniteTrainingError, match=r"step 1: loss 'loss' holds 1 NaN"):
        train_gpt2(model, NonFiniteCallback(), "loss")


def test_without_a_checkpoint_folder_on_save_checks_the_model_state(tmp_path):
    # (a hyperparameter search saves under run-<trial>/: the folder on_save looks for is absent)
    from types import SimpleNamespace
    model = Tiny()
    model.stats[1] = -math.inf
    callback = NonFiniteCallback()
    with pytest.raises(NonFiniteTrainingError, match=r"step 5: checkpoint 'stats' holds 1 -Inf"):
        callback.on_save(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=5),
                         transformers.TrainerControl(), model=model)
