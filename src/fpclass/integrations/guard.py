"""What the training callbacks share: which tensors to check, how (fpclass.check, or fpclass.scan
for files), what a finding is, and what to do about it. Imports no training framework.

A Guard is told, by the framework's hooks, "here are the loss / the gradients / the parameters /
a checkpoint of step N"; it answers with the findings (already recorded and logged) and the
action to take: None (nothing found), "skip" or "stop" (the hook does it), or it raises.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass, field

from ..checking import check
from ..results.report import parse_fail_on

__all__ = ["ACTIONS", "Guard", "NonFiniteTrainingError", "TrainingFinding"]

log = logging.getLogger("fpclass.integrations")

#: on_nonfinite values: raise NonFiniteTrainingError; stop training after this step (the step
#: in hand is not applied where it can still be refused); skip the step (no parameter moves)
#: and go on.
ACTIONS = ("raise", "stop", "skip")
#: What a finding was found in.
KINDS = ("loss", "gradient", "parameter", "checkpoint")


@dataclass(frozen=True)
class TrainingFinding:
    """A non-finite value met in training: in what (`kind`: loss, gradient, parameter,
    checkpoint), the tensor's name (a parameter's qualified name; a checkpoint's entry, or
    "file: tensor" for saved files), the optimizer step, the counts of each class and the index
    of the first one."""

    kind: str
    name: str
    step: int
    counts: dict = field(default_factory=dict)   # {"nan": n, "posinf": n, "neginf": n}
    first: tuple | None = None

    def __str__(self) -> str:
        held = ", ".join(f"{self.counts.get(key, 0)} {label}" for key, label in
                         (("nan", "NaN"), ("posinf", "+Inf"), ("neginf", "-Inf"))
                         if self.counts.get(key, 0))
        at = f", first at {list(self.first)}" if self.first else ""
        return f"step {self.step}: {self.kind} {self.name!r} holds {held}{at}"


class NonFiniteTrainingError(FloatingPointError):
    """Raised by a callback with on_nonfinite="raise": `findings`, the TrainingFindings of the
    check that failed (every tensor it found, the first one named in the message)."""

    def __init__(self, findings):
        self.findings = tuple(findings)
        more = len(self.findings) - 1
        super().__init__(str(self.findings[0]) + (f" (and {more} more)" if more > 0 else ""))

    def __reduce__(self):
        return type(self), (self.findings,)


class Guard:
    """The callbacks' policy (their keyword arguments, validated here): `on_nonfinite` one of
    ACTIONS; `fail_on` the classes that count, spelled as for fpclass.check ("nan,inf", "nan",
    "posinf", "neginf", "any", or a list); `ignore` glob patterns (or one) of tensor names never
    reported; `loss`, `gradients`, `parameters`, `checkpoints` turn each check on or off.
    `findings` keeps the first `max_findings`; `unchecked` maps names of tensors that could not
    be read (sparse, ...) to the reason."""

    def __init__(self, on_nonfinite: str = "raise", *, fail_on="nan,inf", ignore=(),
                 loss: bool = True, gradients: bool = True, parameters: bool = True,
                 checkpoints: bool = True, max_findings: int = 1000):
        if on_nonfinite not in ACTIONS:
            raise ValueError(f"on_nonfinite must be one of {', '.join(map(repr, ACTIONS))}, "
                             f"got {on_nonfinite!r}")
        patterns = [ignore] if isinstance(ignore, str) else list(ignore)
        if not all(isinstance(p, str) for p in patterns):
            raise TypeError(f"ignore must be a glob or a list of globs, got {ignore!r}")
        if not isinstance(max_findings, int) or max_findings < 0:
            raise ValueError(f"max_findings must be an integer >= 0, got {max_findings!r}")
        self.on_nonfinite = on_nonfinite
        self.fail_on = parse_fail_on(fail_on)
        self.ignore = tuple(patterns)
        self.loss, self.gradients = loss, gradients
        self.parameters, self.checkpoints = parameters, checkpoints
        self.max_findings = max_findings
        self.findings: list[TrainingFinding] = []
        self.unchecked: dict = {}
        self._selected: dict = {}

    # -- what to check ---------------------------------------------------------------------

    def ignored(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self.ignore)

    def named(self, module) -> list:
        """(name, parameter) of `module`'s parameters that are not ignored, worked out once per
        module (and again if its parameters change)."""
        params = list(module.named_parameters())
        known = self._selected.get(id(module))
        if known is None or len(known[0]) != len(params) or \
                any(a[1] is not b[1] for a, b in zip(known[0], params)):
            known = self._selected[id(module)] = (
                params, [(n, p) for n, p in params if not self.ignored(n)])
        return known[1]

    # -- checking ---------------------------------------------------------------------------

    def tensors(self, kind: str, named, step: int) -> list:
        """The findings in the (name, tensor) pairs `named` (None tensors skipped). Host tensors
        are read in place, all in one fpclass.check; tensors on a device are first screened
        there by torch (one bool each, one transfer for all), and those that are not all finite
        are copied to the host and classified by fpclass.check like the others."""
        host, device = {}, []
        for name, t in named:
            if t is None:
                continue
            if getattr(t, "is_cpu", True):
                host[name] = t
            else:
                device.append((name, t))
        if device:
            host.update(_screened(device))
        if not host:
            return []
        return self._record(kind, step, check(host, self.fail_on, max_locations=1))

    def objects(self, kind: str, obj, step: int) -> list:
        """The findings in anything fpclass.check reads (a checkpoint dict, a state dict)."""
        return self._record(kind, step, check(obj, self.fail_on, max_locations=1))

    def files(self, kind: str, path, step: int) -> list:
        """The findings in the files under `path`, read by fpclass.scan as written."""
        from ..scan import scan
        return self._record(kind, step, scan([str(path)], fail_on=self.fail_on, max_locations=1))

    def _record(self, kind: str, step: int, report) -> list:
        found = []
        for t in report.tensors:
            name = f"{t.file}: {t.name}" if t.file else t.name
            if self.ignored(name) or (t.file and self.ignored(t.name)):
                continue
            if t.status == "unchecked":
                self.unchecked[name] = t.reason
            elif any(getattr(t, c) for c in self.fail_on):
                first = t.locations[0].index if t.locations else None
                found.append(TrainingFinding(kind, name, step, {
                    "nan": t.nan, "posinf": t.posinf, "neginf": t.neginf}, first))
        room = self.max_findings - len(self.findings)
        self.findings.extend(found[:max(room, 0)])
        return found

    # -- acting -----------------------------------------------------------------------------

    def respond(self, findings, *, can_skip: bool):
        """What to do about `findings`: None when empty; raises NonFiniteTrainingError with
        on_nonfinite="raise"; else logs them and answers "skip" or "stop" ("stop" where the
        step cannot be skipped any more: a parameter already updated, a checkpoint)."""
        if not findings:
            return None
        if self.on_nonfinite == "raise":
            raise NonFiniteTrainingError(findings)
        action = "skip" if self.on_nonfinite == "skip" and can_skip else "stop"
        verb = {"skip": "skipping the step", "stop": "stopping training"}[action]
        for finding in findings:
            log.warning("fpclass: %s; %s", finding, verb)
        return action


class GuardResults:
    """The callbacks' read-only view of their Guard (`self.guard`): the findings kept and the
    tensors that could not be read."""

    @property
    def findings(self) -> list:
        return self.guard.findings

    @property
    def unchecked(self) -> dict:
        return self.guard.unchecked


def _screened(device) -> dict:
    """{name: host copy} of the device tensors holding a value that is not finite."""
    import torch
    flags = []
    for _, t in device:
        try:
            flags.append(torch.isfinite(t).all())
        except (RuntimeError, NotImplementedError):  # no isfinite kernel for this dtype there
            flags.append(torch.isfinite(t.float()).all())
    finite = torch.stack(flags).cpu().tolist()
    return {name: t.detach().cpu() for (name, t), ok in zip(device, finite) if not ok}


def skip_step(params) -> None:
    """Make the optimizer step that follows leave `params` alone: torch's optimizers skip a
    parameter whose .grad is None (no update, no momentum, no weight decay)."""
    for p in params:
        p.grad = None
