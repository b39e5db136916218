"""Training callbacks that stop, skip or raise at the first NaN / Inf of a training run:

- fpclass.integrations.lightning.NonFiniteCallback: a Lightning `Callback` (extra: lightning);
- fpclass.integrations.transformers.NonFiniteCallback: a Hugging Face `TrainerCallback`
  (extra: transformers).

Both check the loss, every gradient before the optimizer step, every parameter after it and
every checkpoint, through fpclass.check (one batched pass per dtype over all the tensors), and
share one policy (integrations.guard). Importing this package imports neither framework; each
module imports its own, or raises an ImportError naming the extra. See docs/integrations.md.
"""
