"""fpclass.integrations.lightning: a Lightning callback that stops, skips or raises at the first
NaN / Inf in the loss, a gradient, a parameter or a checkpoint, naming the tensor.

    trainer = lightning.Trainer(callbacks=[NonFiniteCallback()])      # raise at the first one

Where it looks (hooks of lightning.pytorch.Callback):
- the loss: on_before_backward, before backward runs (the loss as Lightning will backpropagate
  it, already divided by accumulate_grad_batches);
- the gradients: on_before_optimizer_step, after the closure's backward and before gradient
  clipping and the optimizer step (every parameter's .grad, named as in named_parameters());
- the parameters: on_train_batch_end after a batch whose optimizer step ran;
- checkpoints: on_save_checkpoint, the whole dict Lightning is about to write (state_dict,
  optimizer states, callbacks' and loops' states), before anything is written.
"""

from __future__ import annotations

from .._optional import require
from .guard import Guard, GuardResults, NonFiniteTrainingError, TrainingFinding, skip_step

require("lightning.pytorch", "lightning", "fpclass.integrations.lightning")
from lightning.pytorch import Callback  # noqa: E402  (once require has said what to install)

__all__ = ["NonFiniteCallback", "NonFiniteTrainingError", "TrainingFinding"]


class NonFiniteCallback(GuardResults, Callback):
    """Check the loss, the gradients, the parameters after each optimizer step and each
    checkpoint for NaN / Inf (fpclass.check: one batched pass per dtype over all the tensors).

    `on_nonfinite`: "raise" (NonFiniteTrainingError out of trainer.fit; a checkpoint holding one
    is not written), "stop" (the step in hand is not applied where it still can be, then
    `trainer.should_stop`), or "skip" (a non-finite loss or gradient: the optimizer step is
    skipped, every parameter left as it was, and training goes on; a parameter already updated
    or a checkpoint cannot be skipped: training stops). Stop and skip log each finding on the
    "fpclass.integrations" logger. `fail_on` names the classes that count ("nan,inf", "nan",
    "posinf", "neginf", "any"; as for fpclass.check), `ignore` globs of tensor names to pass
    over; `loss`, `gradients`, `parameters`, `checkpoints` turn each check off. Every finding
    (the first `max_findings`) is kept in `.findings`, as TrainingFinding objects; tensors that
    could not be read in `.unchecked`. The step of a finding is the optimizer step it belongs
    to, counted from 1 (the trainer's global_step once that step is done)."""

    def __init__(self, on_nonfinite: str = "raise", *, fail_on="nan,inf", ignore=(),
                 loss: bool = True, gradients: bool = True, parameters: bool = True,
                 checkpoints: bool = True, max_findings: int = 1000):
        super().__init__()
        self.guard = Guard(on_nonfinite, fail_on=fail_on, ignore=ignore, loss=loss,
                           gradients=gradients, parameters=parameters, checkpoints=checkpoints,
                           max_findings=max_findings)
        self._skip = False      # the optimizer step in hand is not to be applied
        self._stepped = False   # an optimizer step ran since the parameters were last checked

    def on_train_start(self, trainer, pl_module) -> None:
        self._skip = self._stepped = False

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if self.guard.loss and not self._skip:
            found = self.guard.tensors("loss", [("loss", loss)], trainer.global_step + 1)
            self._act(trainer, found, can_skip=True)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if self.guard.gradients and not self._skip:
            grads = [(name, p.grad) for name, p in self.guard.named(pl_module)]
            self._act(trainer, self.guard.tensors("gradient", grads, trainer.global_step + 1),
                      can_skip=True)
        if self._skip:
            self._skip = False
            skip_step(p for group in optimizer.param_groups for p in group["params"])
        else:
            self._stepped = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._stepped and self.guard.parameters:
            self._stepped = False
            found = self.guard.tensors("parameter", self.guard.named(pl_module),
                                       trainer.global_step)
            self._act(trainer, found, can_skip=False)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        if self.guard.checkpoints:
            found = self.guard.objects("checkpoint", checkpoint, trainer.global_step)
            self._act(trainer, found, can_skip=False)

    def _act(self, trainer, found, *, can_skip: bool) -> None:
        action = self.guard.respond(found, can_skip=can_skip)
        if action is None:
            return
        if can_skip:  # stopping too: the step in hand is not applied
            self._skip = True
        if action == "stop":
            trainer.should_stop = True
