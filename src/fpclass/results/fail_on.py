"""The `fail_on=` parameter of the Python API (scan() and check()), checked with errors that name
it as the caller wrote it; the command line's --fail-on is parsed by report.parse_fail_on."""

from __future__ import annotations

from .gates import GATE_GRAMMAR, Gate, parse_gate
from .report import FAIL_ON_NAMES, parse_fail_on


def fail_on_parameter(fail_on: object) -> frozenset:
    """The classes the Python parameter `fail_on=` of scan() and check() names: a comma-separated
    str or a list / tuple / set of names; TypeError or ValueError speaking of `fail_on=` (not the
    command line's --fail-on) otherwise."""
    accepted = ", ".join(FAIL_ON_NAMES)
    if isinstance(fail_on, str):
        names = fail_on.split(",")
    elif isinstance(fail_on, (list, tuple, set, frozenset)) and all(isinstance(n, (str, Gate))
                                                                    for n in fail_on):
        names = list(fail_on)  # names, and gates already parsed (the command line's)
    else:
        raise TypeError(f"fail_on= must be a str of comma-separated class names (\"nan,inf\") or a "
                        f"list of them, from: {accepted}; got {fail_on!r}")
    for name in names:
        if isinstance(name, Gate):
            continue
        text = name.strip().lower()
        if text and text not in FAIL_ON_NAMES and parse_gate(text) is None:
            raise ValueError(f"fail_on= names an unknown class {name.strip()!r}; accepted: "
                             f"{accepted}; gates: {GATE_GRAMMAR}")
    return parse_fail_on(names)
