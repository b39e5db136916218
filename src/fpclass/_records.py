"""Small frozen records made fast: the scan makes a task and a result per tensor, and a hostile
header (or fpclass.check of a large model) makes hundreds of thousands of each."""

from __future__ import annotations

from dataclasses import MISSING, fields


def stored_through_slots(cls):
    """`cls`, a frozen dataclass with slots, with an __init__ that stores each field through its
    slot descriptor: same signature, defaults and result, and the instances stay frozen. The one
    dataclass writes calls object.__setattr__ per field (2.3 us per Task, against 1.4 us; 0.9 us
    per TensorResult, against 0.5 us). Not for classes with __post_init__ or default factories."""
    names = [f.name for f in fields(cls)]
    scope = {f"_set_{n}": getattr(cls, n).__set__ for n in names}
    scope.update({f"_default_{f.name}": f.default for f in fields(cls) if f.default is not MISSING})
    params = ", ".join(f"{n}=_default_{n}" if f"_default_{n}" in scope else n for n in names)
    body = "".join(f"\n    _set_{n}(self, {n})" for n in names)
    exec(f"def __init__(self, {params}):{body}", scope)
    cls.__init__ = scope["__init__"]
    return cls
