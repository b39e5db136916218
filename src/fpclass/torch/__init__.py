"""fpclass.torch: find the first module whose output, or whose gradient, holds NaN or Inf.

    with fpclass.torch.watch(model):
        loss = model(x)
        loss.backward()        # raises fpclass.torch.NonFiniteError at the first non-finite tensor

Forward hooks check every module's outputs as it returns. For the backward pass, each tensor a
module returns or receives (when it requires grad) gets one tensor hook, which checks the
gradient flowing back through it: a gradient w.r.t. a module's input that turns non-finite was
born in that module's backward (its output gradients were still finite); one that arrives at a
module's output non-finite came from outside the watched modules (the loss, or code between
modules). Tensor hooks, unlike torch's full backward hooks, leave in-place operations such as
ReLU(inplace=True) working. Each parameter's gradient is checked once autograd has accumulated
it, named with the module that owns it; an optimizer's states after its step on request.

Importing this module does not import torch; watching a model does (the model is torch's).
"""

from __future__ import annotations

from .findings import Finding, NonFiniteError, NonFiniteWarning
from .watching import watch

__all__ = ["Finding", "NonFiniteError", "NonFiniteWarning", "watch"]
