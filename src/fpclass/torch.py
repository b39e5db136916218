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
ReLU(inplace=True) working.

Importing this module does not import torch; watching a model does (the model is torch's).
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

__all__ = ["Finding", "NonFiniteError", "watch"]


@dataclass(frozen=True)
class Finding:
    """A tensor holding NaN or Inf: where it was, what it held, and whether it was born there."""

    module: str               # qualified name, as in model.named_modules() ("" for the model)
    module_type: str          # the module's class name
    direction: str            # "forward" or "backward"
    tensor: str               # "output", "output[1]", "input[0]", "gradient of input[0]", ...
    counts: dict = field(default_factory=dict)   # {"nan": n, "posinf": n, "neginf": n}
    first: tuple | None = None                   # index of the first NaN / Inf in C order
    inputs_nonfinite: bool | None = None         # were the module's inputs already non-finite?

    @property
    def born_here(self) -> bool:
        """True when the module made the first NaN / Inf from finite inputs."""
        return self.inputs_nonfinite is False

    def __str__(self) -> str:
        where = f"{self.module or '(model)'} ({self.module_type}), {self.direction}, {self.tensor}"
        counts = ", ".join(f"{n} {k}" for k, n in (("NaN", self.counts.get("nan", 0)),
                                                     ("+Inf", self.counts.get("posinf", 0)),
                                                     ("-Inf", self.counts.get("neginf", 0))))
        origin = {False: "its inputs were finite: born here",
                  True: "its inputs were already non-finite: passed along",
                  None: "its inputs were not checked"}[self.inputs_nonfinite]
        return f"{where}: {counts}, first at {list(self.first or ())}; {origin}"


class NonFiniteError(FloatingPointError):
    """Raised by watch() at the first module whose output or gradient holds NaN or Inf; carries
    the Finding's fields (module, module_type, direction, tensor, counts, first,
    inputs_nonfinite, born_here)."""

    def __init__(self, finding: Finding):
        super().__init__(str(finding))
        self.finding = finding

    def __reduce__(self):
        return type(self), (self.finding,)

    def __getattr__(self, name):
        if name == "finding":
            raise AttributeError(name)
        return getattr(self.finding, name)


class watch:
    """Context manager: hook every module of `model` (or those whose qualified names match
    `names`: a glob, a list of globs, or a predicate) and check each output as it is produced,
    and with `backward` each gradient flowing back through a module's outputs and inputs.
    `check_inputs` also checks what each module receives, before it runs. The first non-finite
    tensor raises NonFiniteError, or with `raise_on=False` is recorded in `.findings` (at most
    `max_findings`) and the step goes on. Leaving the context removes every hook."""

    def __init__(self, model: Any, *, backward: bool = True, raise_on: bool = True,
                 names: str | Iterable[str] | Callable[[str], bool] | None = None,
                 check_inputs: bool = False, max_findings: int = 1000) -> None:
        self.model, self.backward, self.raise_on = model, backward, raise_on
        self.check_inputs, self.max_findings = check_inputs, max_findings
        self.selected = _selector(names)
        self.findings: list[Finding] = []
        self._handles: list = []
        self._tensor_handles: list = []
        self._active = False

    # -- the context ---------------------------------------------------------------------------

    def __enter__(self) -> "watch":
        import torch
        from .adapters import torch as adapter
        self._torch, self._adapter = torch, adapter
        self._counters: dict = {}
        self._seen: dict = {}          # id(tensor) -> _Seen, for the forward pass under way
        self._checked: dict = {}       # id(tensor) -> (tensor, finite?), the pass's latest ones
        self._bad_outputs: set = set()  # modules whose output gradients were non-finite
        self._active = True
        self._tensor_handles: list = []
        register = []
        for name, module in self.model.named_modules():
            if not self.selected(name):
                continue
            kind = type(module).__name__
            if self.check_inputs:
                register.append(module.register_forward_pre_hook(
                    functools.partial(self._before, name, kind), with_kwargs=True))
            register.append(module.register_forward_hook(
                functools.partial(self._after, name, kind), with_kwargs=True))
        # the model's own hooks bracket each forward pass: a new pass forgets the last one's tensors
        register.append(self.model.register_forward_pre_hook(self._start, prepend=True))
        register.append(self.model.register_forward_hook(self._end))
        self._handles = register
        return self

    def __exit__(self, *exc) -> None:
        self._active = False
        for handle in self._handles + self._tensor_handles:
            handle.remove()
        self._handles = self._tensor_handles = []
        self._seen.clear()
        self._checked.clear()

    # -- forward -------------------------------------------------------------------------------

    def _start(self, module, args):
        # an earlier pass's tensor hooks stay with its graph, disarmed once the context is left
        self._tensor_handles = []
        self._seen.clear()
        self._checked.clear()
        self._bad_outputs.clear()

    def _end(self, module, args, output):
        self._seen.clear()
        self._checked.clear()

    def _known(self, t):
        """(finite?, first time?) for a tensor of this forward pass: a container returns its
        last child's output, which is then neither checked nor reported twice."""
        known = self._checked.get(id(t))
        if known is not None and known[0] is t:
            return known[1], False
        finite = self._finite(t)
        if len(self._checked) >= _RECENT:  # bounded: in inference, activations are freed as
            del self._checked[next(iter(self._checked))]  # the pass goes on; keep only recent ones
        self._checked[id(t)] = (t, finite)
        return finite, True

    def _before(self, name, kind, module, args, kwargs):
        if not self._active:
            return
        for label, t in _tensors(args, kwargs, "input"):
            finite, first = self._known(t)
            if not finite and first:
                self._found(Finding(name, kind, "forward", label, *self._describe(t), True))

    def _after(self, name, kind, module, args, kwargs, output):
        if not self._active:
            return
        outputs = list(_tensors(output, None, "output"))
        if self.backward:
            for label, t in outputs:
                self._role(t, ("output", name, kind, label))
            for label, t in _tensors(args, kwargs, "input"):
                self._role(t, ("input", name, kind, label))
        for label, t in outputs:
            finite, first = self._known(t)
            if not finite and first:
                inputs = any(not self._known(i)[0] for _, i in _tensors(args, kwargs, "input"))
                self._found(Finding(name, kind, "forward", label, *self._describe(t), inputs))

    # -- backward ------------------------------------------------------------------------------

    def _role(self, t, role) -> None:
        """Note what `t` is to a module; its first role in this pass hooks its gradient."""
        if not t.requires_grad:
            return
        seen = self._seen.get(id(t))
        if seen is None or seen.tensor is not t:
            if len(self._seen) >= _ROLES:  # submodules called on their own: no pass to end
                del self._seen[next(iter(self._seen))]
            seen = self._seen[id(t)] = _Seen(t)
            self._tensor_handles.append(
                t.register_hook(functools.partial(self._gradient, seen.roles)))
        seen.roles.append(role)

    def _gradient(self, roles, grad):
        if not self._active or grad is None or self._finite(grad):
            return
        consumers = [r for r in roles if r[0] == "input"]
        for r in roles:
            if r[0] == "output":
                self._bad_outputs.add(r[1])
        if consumers:  # computed by the backward of the innermost module that took it
            _, name, kind, label = max(consumers, key=_depth)
            inputs = name in self._bad_outputs
        else:          # arrived from outside the watched modules
            _, name, kind, label = max(roles, key=_depth)
            inputs = True
        self._found(Finding(name, kind, "backward", f"gradient of {label}", *self._describe(grad),
                            inputs))

    # -- checking ------------------------------------------------------------------------------

    def _finite(self, t) -> bool:
        """No NaN and no Inf in `t` (a tensor). The stored words decide, so lazy negation and
        conjugation need no resolving; tensors off the host are checked by torch on their device
        (one bool comes back, no data)."""
        torch = self._torch
        if not (t.is_floating_point() or t.is_complex()):
            return True
        if t.is_cpu and t.layout is torch.strided:
            if t.is_contiguous():
                count = self._counters.get(t.dtype)
                if count is None:
                    count = self._counters[t.dtype] = self._counter(t.dtype)
                if count is not None:
                    return count(t.data_ptr(), t.numel()) == 0
            from .facade import any_nonfinite
            return not any_nonfinite(t)
        try:
            return bool(torch.isfinite(t).all())
        except (RuntimeError, NotImplementedError):  # no isfinite kernel for this dtype there
            return bool(torch.isfinite(t.float()).all())

    def _counter(self, dtype):
        from .operators.buffers import nonfinite_counter
        np_dtype = self._adapter.numpy_dtype(dtype)
        return None if np_dtype is None else nonfinite_counter(np_dtype)

    def _describe(self, t) -> tuple:
        """(counts, first index) of a non-finite tensor; a complex one's counts are of its parts."""
        torch = self._torch
        t = t.detach()
        parts = torch.view_as_real(t.resolve_conj()) if t.is_complex() else t
        if t.is_cpu and t.layout is torch.strided:
            from .facade import count_inf, count_nan, first_nonfinite
            counts = {"nan": int(count_nan(parts)),
                      "posinf": int(count_inf(parts, detect_negative=False)),
                      "neginf": int(count_inf(parts, detect_positive=False))}
            return counts, first_nonfinite(t)
        wide = parts.float()
        counts = {"nan": int(torch.isnan(wide).sum()), "posinf": int(torch.isposinf(wide).sum()),
                  "neginf": int(torch.isneginf(wide).sum())}
        bad = torch.nonzero(~torch.isfinite(wide))
        return counts, tuple(bad[0].tolist()[:t.dim()]) if len(bad) else None

    def _found(self, finding: Finding) -> None:
        if self.raise_on:
            raise NonFiniteError(finding)
        if len(self.findings) < self.max_findings:
            self.findings.append(finding)


#: How many recently checked tensors a forward pass remembers (a container's output is its last
#: child's, checked just before).
_RECENT = 16
#: How many tensors' roles a forward pass remembers (a tensor is met as one module's output and
#: the next one's input; the bound only matters when submodules are called outside the model).
_ROLES = 4096


class _Seen:
    """A tensor met in this forward pass and its roles: ("output" | "input", module name,
    module class, label)."""

    __slots__ = ("tensor", "roles")

    def __init__(self, tensor):
        self.tensor, self.roles = tensor, []


def _depth(role) -> int:
    name = role[1]
    return name.count(".") + 1 if name else 0


def _selector(names):
    if names is None:
        return lambda name: True
    if callable(names):
        return names
    patterns = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"names must be a glob, a list of globs or a predicate, got {names!r}")
    return lambda name: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _tensors(value, kwargs, label):
    """(label, tensor) for every tensor in a module's arguments or output, however nested."""
    if kwargs is not None:
        for i, item in enumerate(value):
            yield from _tensors(item, None, f"{label}[{i}]")
        for key, item in kwargs.items():
            yield from _tensors(item, None, f"{label}[{key!r}]")
        return
    if hasattr(value, "data_ptr") and hasattr(value, "requires_grad"):
        yield label, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _tensors(item, None, f"{label}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, None, f"{label}[{key!r}]")
