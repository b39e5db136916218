"""Gates: `--fail-on` entries that test a tensor's statistics rather than count a class, and the
CF actual_range check, both read from the statistics of one pass (TensorResult.stats).

Grammar (case-insensitive, spaces allowed around the operator):
    absmax>X  absmax>=X   the largest |finite value| exceeds (or reaches) X, a finite number
    all-zero              every value read is zero (±0), at least one value
    subnormal             at least one subnormal value
A gate that fires is a finding: the tensor and the value that made it fire (the absmax, the zero
count, the subnormal count).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

GATE_GRAMMAR = ("absmax>X or absmax>=X (X a finite number, e.g. absmax>1e4), all-zero, "
                "subnormal")
_ABSMAX = re.compile(r"absmax\s*(>=|>)\s*(\S+)")


@dataclass(frozen=True)
class Gate:
    """One gate: `kind` is "absmax", "all-zero" or "subnormal"; absmax has `op` and `limit`."""

    kind: str
    op: str = ""
    limit: float = 0.0

    def __str__(self) -> str:
        return f"absmax{self.op}{self.limit:g}" if self.kind == "absmax" else self.kind

    def value(self, t):
        """The statistic of result `t` that makes this gate fire, or None when it does not (or
        `t` has no statistics: not read, or not a floating-point tensor)."""
        s = t.stats
        if s is None:
            return None
        if self.kind == "absmax":
            a = s.absmax
            if a is not None and (a > self.limit if self.op == ">" else a >= self.limit):
                return a
            return None
        if self.kind == "all-zero":
            return s.zero if s.values and s.zero == s.values else None
        return s.subnormal or None


def parse_gate(text: str) -> Gate | None:
    """The gate `text` names (lower case, stripped), None when it names none; ValueError for an
    absmax gate whose threshold is not a finite number."""
    if text in ("all-zero", "subnormal"):
        return Gate(text)
    if not text.startswith("absmax"):
        return None
    m = _ABSMAX.fullmatch(text)
    try:
        limit = float(m.group(2)) if m else math.nan
    except ValueError:
        limit = math.nan
    if not m or not math.isfinite(limit):
        raise ValueError(f"bad --fail-on gate {text!r}: accepted gates are {GATE_GRAMMAR}")
    return Gate("absmax", m.group(1), limit)


def findings(tensors, fail_on) -> list:
    """(tensor, gate, value) for every gate in `fail_on` that fires, tensor by tensor."""
    gates = sorted((g for g in fail_on if isinstance(g, Gate)), key=str)
    if not gates:
        return []
    out = []
    for t in tensors:
        for g in gates:
            v = g.value(t)
            if v is not None:
                out.append((t, g, v))
    return out


def contradicts(t) -> bool:
    """Whether result `t`'s finite, non-missing values contradict its declared actual_range
    (low, high, precision dtype name): their min or max differs from the declared one by more
    than one unit in the last place of that dtype (exact for integer types). False when there
    is no declared range or no such value."""
    if not t.declared_range or t.stats is None or t.stats.min is None:
        return False
    low, high, precision = t.declared_range
    return _differs(t.stats.min, low, precision) or _differs(t.stats.max, high, precision)


def _differs(actual: float, declared: float, precision: str) -> bool:
    dt = np.dtype(precision) if precision else np.dtype(np.float64)
    if dt.kind != "f":
        return actual != declared
    with np.errstate(all="ignore"):
        ulp = abs(float(np.spacing(np.asarray(declared, dt))))
    return abs(actual - declared) > ulp
