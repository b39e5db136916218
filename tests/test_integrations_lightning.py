"""fpclass.integrations.lightning on real Lightning training runs: a one-layer module on CPU,
data built in memory, a NaN / Inf planted in the loss, a gradient, a parameter after the optimizer
step or a checkpoint at a chosen step; the callback must stop, skip or raise there, naming what
was planted (the truth is the plant itself, and torch's own isfinite for what the parameters
hold afterwards)."""

import logging
import math
import os

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning.pytorch", reason="lightning is not installed (fpclass[test])")

from fpclass.integrations.lightning import NonFiniteCallback, NonFiniteTrainingError  # noqa: E402

pytestmark = [
    # Lightning's advice about dataloader workers and tiny logging intervals, not errors
    pytest.mark.filterwarnings("ignore::lightning.fabric.utilities.warnings.PossibleUserWarning"),
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
    # lightning 2.6 on torch 2.13: its own use of a deprecated torch name
    pytest.mark.filterwarnings("ignore:.*treespec, LeafSpec.*:FutureWarning"),
]


class Tiny(L.LightningModule):
    """Linear(4, 2) and a buffer, trained by SGD; `plant` = (where, step, value): "loss"
    multiplies the loss of that optimizer step (counted from 1) by value, "gradient" writes it
    into layer.bias.grad[1] after backward, "parameter" into layer.weight[0, 1] after the
    optimizer step, "buffer" into stats[2] (seen only by checkpoints)."""

    def __init__(self, plant=None):
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 2)
        self.register_buffer("stats", torch.zeros(3))
        self.plant = plant
        self.before = {}   # optimizer step -> parameters as that step began

    def _planted(self, where):
        return self.plant is not None and self.plant[0] == where \
            and self.plant[1] == self.global_step + 1

    def training_step(self, batch, batch_idx):
        self.before[self.global_step + 1] = {k: v.detach().clone()
                                             for k, v in self.named_parameters()}
        x, y = batch
        loss = (self.layer(x) - y).square().mean()
        if self._planted("loss"):
            loss = loss * self.plant[2]
        if self._planted("buffer"):
            self.stats[2] = self.plant[2]
        return loss

    def on_after_backward(self):
        if self._planted("gradient"):
            self.layer.bias.grad[1] = self.plant[2]

    def optimizer_step(self, *args, **kwargs):
        planted = self._planted("parameter")
        super().optimizer_step(*args, **kwargs)
        if planted:
            with torch.no_grad():
                self.layer.weight[0, 1] = self.plant[2]

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(1)
        data = torch.utils.data.TensorDataset(torch.randn(16, 4, generator=g),
                                              torch.randn(16, 2, generator=g))
        return torch.utils.data.DataLoader(data, batch_size=2)


def fit(model, callback, max_steps=4, **kwargs):
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=max_steps, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[callback], **kwargs)
    trainer.fit(model)
    return trainer


def params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_a_clean_run_completes():
    model, callback = Tiny(), NonFiniteCallback()
    trainer = fit(model, callback)
    assert trainer.global_step == 4 and callback.findings == [] and callback.unchecked == {}


def test_a_nan_loss_raises_naming_the_loss_and_its_step():
    model = Tiny(("loss", 2, math.nan))
    with pytest.raises(NonFiniteTrainingError, match=r"step 2: loss 'loss' holds 1 NaN") as e:
        fit(model, NonFiniteCallback())
    (finding,) = e.value.findings
    assert (finding.kind, finding.name, finding.step) == ("loss", "loss", 2)
    assert finding.counts == {"nan": 1, "posinf": 0, "neginf": 0}
    assert model.global_step == 1   # the NaN step was never applied


def test_an_inf_gradient_is_skipped_and_training_goes_on(caplog):
    model, callback = Tiny(("gradient", 2, math.inf)), NonFiniteCallback("skip")
    with caplog.at_level(logging.WARNING, logger="fpclass.integrations"):
        trainer = fit(model, callback)
    assert trainer.global_step == 4
    (finding,) = callback.findings
    assert (finding.kind, finding.name, finding.step, finding.first) == \
        ("gradient", "layer.bias", 2, (1,))
    assert finding.counts == {"nan": 0, "posinf": 1, "neginf": 0}
    assert "layer.bias" in caplog.text and "skipping the step" in caplog.text
    # step 2 moved nothing; the others did; nothing non-finite reached the parameters
    for name in model.before[2]:
        assert torch.equal(model.before[2][name], model.before[3][name]), name
        assert not torch.equal(model.before[1][name], model.before[2][name]), name
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_a_nan_gradient_stops_training_without_applying_the_step():
    model, callback = Tiny(("gradient", 3, math.nan)), NonFiniteCallback("stop")
    trainer = fit(model, callback, max_steps=6)
    assert [(f.kind, f.name, f.step) for f in callback.findings] == [("gradient", "layer.bias", 3)]
    assert trainer.should_stop and trainer.global_step < 6
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    for name, value in params(model).items():
        assert torch.equal(model.before[3][name], value), name


def test_a_parameter_made_non_finite_by_the_step_stops_training_naming_it():
    model, callback = Tiny(("parameter", 2, -math.inf)), NonFiniteCallback("skip")
    trainer = fit(model, callback, max_steps=6)
    (finding,) = callback.findings   # skip cannot undo a step: it stops
    assert (finding.kind, finding.name, finding.step, finding.first) == \
        ("parameter", "layer.weight", 2, (0, 1))
    assert finding.counts == {"nan": 0, "posinf": 0, "neginf": 1}
    assert trainer.should_stop and trainer.global_step == 2


def test_a_checkpoint_holding_a_nan_is_refused(tmp_path):
    model = Tiny(("buffer", 2, math.nan))
    callback = NonFiniteCallback(parameters=True)  # a buffer: only the checkpoint holds it
    trainer = fit(model, callback, max_steps=3)
    assert callback.findings == []
    path = tmp_path / "model.ckpt"
    with pytest.raises(NonFiniteTrainingError, match=r"checkpoint 'state_dict\.stats' holds 1 NaN"):
        trainer.save_checkpoint(path)
    assert not os.path.exists(path)
    clean = Tiny()
    trainer = fit(clean, NonFiniteCallback(), max_steps=1)
    trainer.save_checkpoint(path)
    assert os.path.getsize(path) > 0


def test_fail_on_and_ignore_pass_over_what_they_name():
    # planted in the last step: one step later the loss itself would not be finite
    model, callback = Tiny(("gradient", 4, math.inf)), NonFiniteCallback(fail_on="nan")
    assert fit(model, callback).global_step == 4 and callback.findings == []
    assert bool(torch.isneginf(model.layer.bias).any())   # SGD: minus the +Inf gradient
    model, callback = Tiny(("gradient", 4, math.nan)), NonFiniteCallback(ignore="*.bias")
    assert fit(model, callback).global_step == 4 and callback.findings == []
    assert bool(torch.isnan(model.layer.bias).any())   # ignored means not looked at
    with pytest.raises(NonFiniteTrainingError, match="layer.bias"):  # the same NaN, looked at
        fit(Tiny(("gradient", 4, math.nan)), NonFiniteCallback(fail_on="nan"))
