"""What watch reports and what it does about it: the Finding, the error and warning that carry
one, and the policy (which classes fail, which names are ignored, raise / warn / pdb)."""

from __future__ import annotations

import fnmatch
import warnings
from dataclasses import dataclass, field

from ..results.report import parse_fail_on

#: The actions watch takes at a finding.
ACTIONS = ("raise", "warn", "pdb")


@dataclass(frozen=True)
class Finding:
    """A tensor holding NaN or Inf: where it was, what it held, and whether it was born there."""

    module: str               # qualified name, as in model.named_modules() ("" for the model)
    module_type: str          # the module's class name
    direction: str            # "forward", "backward" or "step" (the optimizer's)
    tensor: str               # "output", "output[1]", "input[0]", "gradient of input[0]",
    #                           "gradient of weight", "weight after step", "exp_avg of weight", ...
    counts: dict = field(default_factory=dict)   # {"nan": n, "posinf": n, "neginf": n}
    first: tuple | None = None                   # index of the first NaN / Inf in C order
    inputs_nonfinite: bool | None = None         # were the module's inputs already non-finite?
    thread: int | None = field(default=None, compare=False)  # threading.get_ident() of the pass

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
    inputs_nonfinite, born_here) and `findings`: every finding of the context when it collected
    them (`collect=True`), else the one."""

    def __init__(self, finding: Finding, findings=None):
        more = f" (and {len(findings) - 1} more findings)" if findings and len(findings) > 1 else ""
        super().__init__(str(finding) + more)
        self.finding = finding
        self.findings = list(findings) if findings else [finding]

    def __reduce__(self):
        return type(self), (self.finding, self.findings)

    def __getattr__(self, name):
        if name in ("finding", "findings"):
            raise AttributeError(name)
        return getattr(self.finding, name)


class NonFiniteWarning(RuntimeWarning):
    """Warned by watch(action="warn") at the first finding of a pass; `.finding` is the Finding."""

    def __init__(self, finding: Finding):
        super().__init__(str(finding))
        self.finding = finding


#: fail_on strings parsed before -> the classes watch checks. A watch is made every step, and
#: parsing after a step (its data out of the caches) cost ~40 µs of it; only the immutable result
#: is kept, per string (a spec that fails to parse is not kept: it raises each time).
_CLASSES: dict = {}


def watched_classes(fail_on) -> frozenset:
    """The classes among nan, posinf, neginf that `fail_on` names; ValueError when it names
    none of them (an empty spec names nothing, and fails on nothing)."""
    known = _CLASSES.get(fail_on) if isinstance(fail_on, str) else None
    if known is not None:
        return known
    classes = frozenset(parse_fail_on(fail_on) & {"nan", "posinf", "neginf"})
    if not classes and fail_on:
        raise ValueError(f"fail_on={fail_on!r} names no class watch checks; accepted: nan, "
                         "inf, posinf, neginf")
    if isinstance(fail_on, str) and len(_CLASSES) < 64:  # bounded: specs made on the fly
        _CLASSES[fail_on] = classes
    return classes


class Policy:
    """Which classes fail (`fail_on`, as in `fpclass scan`: "nan", "inf", "posinf", "neginf"),
    which findings are ignored (globs or a predicate over module and parameter names), and the
    action taken at the first finding of a pass."""

    def __init__(self, fail_on="nan,inf", ignore=None, action="raise"):
        classes = watched_classes(fail_on)
        if action not in ACTIONS:
            raise ValueError(f"action={action!r}; accepted: " + ", ".join(map(repr, ACTIONS)))
        self.classes, self.action = classes, action
        self.everything = self.classes == {"nan", "posinf", "neginf"}
        self.ignored = selector(ignore, "ignore", default=False)
        self.ignoring = ignore is not None

    def failing(self, counts: dict, mask: bool = False) -> bool:
        """Does a tensor with these counts fail? A mask's -Inf is its masking value, never a
        finding; its NaN and +Inf are."""
        return any(counts.get(c) for c in self.classes if not (mask and c == "neginf"))

    def act(self, finding: Finding, module, tensor) -> None:
        """The action at the first finding of a pass (raise is the caller's)."""
        if self.action == "warn":
            warnings.warn(NonFiniteWarning(finding), stacklevel=3)
        elif self.action == "pdb":
            debug(finding, module, tensor)


def debug(finding, module, tensor) -> None:
    """pdb stops here, at the module that made the first finding of the pass: `finding`,
    `module` (the nn.Module, None for a tensor outside every module) and `tensor` are in scope;
    `c` goes on with the step."""
    import pdb
    print(f"fpclass.torch.watch: {finding}")
    pdb.set_trace()


def selector(names, what: str = "names", default: bool = True):
    """A predicate over names: None is `default` for every name; a glob or a list of globs
    matches with fnmatch (case-sensitive); a callable is used as it is."""
    if names is None:
        return _every if default else _none
    if callable(names):
        return names
    patterns = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"{what} must be a glob, a list of globs or a predicate, got {names!r}")
    return lambda name, *rest: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _every(*name) -> bool:
    return True


def _none(*name) -> bool:
    return False
