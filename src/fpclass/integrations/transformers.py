"""fpclass.integrations.transformers: a Hugging Face Trainer callback that stops, skips or raises
at the first NaN / Inf in the loss, a gradient, a parameter or a checkpoint, naming the tensor.

    trainer = transformers.Trainer(..., callbacks=[NonFiniteCallback()])

Where it looks. The Trainer hands callbacks neither the loss nor the gradients before it clips
them, and its gradient norm (clip_grad_norm_, run even when max_grad_norm is 0) turns every
gradient NaN as soon as one is Inf or NaN, losing which one it was; so hooks go on the model
from on_train_begin to on_train_end:
- the loss: a forward hook on the model, reading the `loss` of its output (a ModelOutput or a
  dict) in training mode; a loss computed outside the model (a custom compute_loss) is not
  seen, only its gradients;
- the gradients: a post-accumulate-grad hook on each parameter that requires grad; the first
  one of a backward queues one check of every .grad for the end of that backward (torch's
  autograd engine callback, as DDP uses), before the Trainer clips (under gradient
  accumulation: after each micro-batch, of the sum so far);
- the parameters: on_optimizer_step, right after the optimizer step;
- checkpoints: on_save, after the Trainer has written them: the files of the checkpoint folder
  are read by fpclass.scan (model weights, optimizer state), or the model's state dict where
  no such folder is found.
Skipping a step clears the gradients in on_pre_optimizer_step, before optimizer.step().
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .._optional import require
from .guard import Guard, GuardResults, NonFiniteTrainingError, TrainingFinding, skip_step

require("transformers", "transformers", "fpclass.integrations.transformers")
from transformers import TrainerCallback  # noqa: E402  (once require has said what to install)

__all__ = ["NonFiniteCallback", "NonFiniteTrainingError", "TrainingFinding"]


class NonFiniteCallback(GuardResults, TrainerCallback):
    """Check the loss, the gradients, the parameters after each optimizer step and each
    checkpoint for NaN / Inf (fpclass.check: one batched pass per dtype over all the tensors).

    `on_nonfinite`: "raise" (NonFiniteTrainingError out of trainer.train(); for a checkpoint,
    after its files are written: the error names them), "stop" (the step in hand is not applied
    where it still can be, then `control.should_training_stop`), or "skip" (a non-finite loss or
    gradient: the optimizer step is skipped, every parameter left as it was, and training goes
    on; a parameter already updated or a checkpoint cannot be skipped: training stops). Stop and
    skip log each finding on the "fpclass.integrations" logger. `fail_on`, `ignore`, `loss`,
    `gradients`, `parameters`, `checkpoints`, `max_findings`, `.findings` and `.unchecked` as in
    fpclass.integrations.lightning.NonFiniteCallback. The step of a finding is the optimizer
    step it belongs to, counted from 1 (state.global_step once that step is done)."""

    def __init__(self, on_nonfinite: str = "raise", *, fail_on="nan,inf", ignore=(),
                 loss: bool = True, gradients: bool = True, parameters: bool = True,
                 checkpoints: bool = True, max_findings: int = 1000):
        self.guard = Guard(on_nonfinite, fail_on=fail_on, ignore=ignore, loss=loss,
                           gradients=gradients, parameters=parameters, checkpoints=checkpoints,
                           max_findings=max_findings)
        self._handles: list = []
        self._skip = self._skipped = self._queued = False
        self._state = self._control = self._model = None

    # -- the model's hooks -----------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._remove()
        self._skip = self._skipped = self._queued = False
        self._state, self._control = state, control
        if model is None:
            return
        if self.guard.loss:
            self._handles.append(model.register_forward_hook(self._loss))
        if self.guard.gradients:
            self._model = model
            self._handles += [p.register_post_accumulate_grad_hook(self._accumulated)
                              for p in model.parameters() if p.requires_grad]

    def on_train_end(self, args, state, control, **kwargs):
        self._remove()

    def _remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _loss(self, module, args, output) -> None:
        if not module.training or self._skip:
            return
        loss = output.get("loss") if isinstance(output, Mapping) else None
        if loss is not None:
            self._act(self.guard.tensors("loss", [("loss", loss)], self._step(1)), can_skip=True)

    def _accumulated(self, param) -> None:
        # the first parameter whose .grad is complete: check them all once this backward ends
        if not self._queued:
            import torch
            self._queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._gradients)

    def _gradients(self) -> None:
        self._queued = False
        if not self._skip:
            grads = [(name, p.grad) for name, p in self.guard.named(self._model)]
            self._act(self.guard.tensors("gradient", grads, self._step(1)), can_skip=True)

    # -- the Trainer's events ----------------------------------------------------------------

    def on_step_begin(self, args, state, control, **kwargs):
        self._queued = False   # a backward that raised never ran its end-of-backward check

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, model=None, **kwargs):
        if self._skip:
            self._skip = False
            params = (p for group in optimizer.param_groups for p in group["params"]) \
                if optimizer is not None else model.parameters()
            skip_step(params)
            self._skipped = True
        else:
            self._skipped = False

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.guard.parameters and model is not None and not self._skipped:
            found = self.guard.tensors("parameter", self.guard.named(model), self._step(1))
            self._act(found, can_skip=False)

    def on_save(self, args, state, control, model=None, **kwargs):
        if not self.guard.checkpoints:
            return
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if os.path.isdir(folder):
            found = self.guard.files("checkpoint", folder, state.global_step)
        elif model is not None:
            found = self.guard.objects("checkpoint", model.state_dict(), state.global_step)
        else:
            return
        self._act(found, can_skip=False)

    # -- acting ------------------------------------------------------------------------------

    def _step(self, ahead: int) -> int:
        return (self._state.global_step if self._state is not None else 0) + ahead

    def _act(self, found, *, can_skip: bool) -> None:
        action = self.guard.respond(found, can_skip=can_skip)
        if action is None:
            return
        if can_skip:  # stopping too: the step in hand is not applied
            self._skip = True
        if action == "stop" and self._control is not None:
            self._control.should_training_stop = True
