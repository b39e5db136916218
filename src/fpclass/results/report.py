"""The scan's data model: per-tensor results, file problems, the summary, the exit code, and the
JSON document (schema "fpclass.scan/3", documented in docs/scan.md)."""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field

from .._records import stored_through_slots
from .._version import __version__
from .exitcodes import ExitCode
from .integrity import integrity_summary
from .status import CHECKED, NOT_APPLICABLE, UNCHECKED

SCHEMA = "fpclass.scan/3"

#: The classes a scan counts, as named in --fail-on, JSON keys and locations. "missing" is a NaN
#: where the format declares NaN a blank (a CF _FillValue, a zarr fill_value, a FITS image).
CLASSES = ("nan", "posinf", "neginf", "missing")
#: "out_of_range" is a value outside a CF variable's valid range (valid_min / valid_max /
#: valid_range), which a CF reader masks: counted apart from NaN, Inf and missing.
CLASSES = CLASSES + ("out_of_range",)
#: --fail-on spellings and the classes they stand for.
FAIL_ON_NAMES = {"nan": {"nan"}, "inf": {"posinf", "neginf"}, "posinf": {"posinf"},
                 "+inf": {"posinf"}, "neginf": {"neginf"}, "-inf": {"neginf"},
                 "missing": {"missing"}, "out-of-range": {"out_of_range"},
                 "out_of_range": {"out_of_range"}, "any": set(CLASSES)}


def parse_fail_on(spec) -> frozenset:
    """The classes and gates named by `spec` ("nan,inf,absmax>1e4" or an iterable of names):
    class names (FAIL_ON_NAMES) and gates (results/gates.py: absmax>X, absmax>=X, all-zero,
    subnormal); ValueError naming what is accepted otherwise. An empty spec fails on nothing."""
    from .gates import GATE_GRAMMAR, Gate, parse_gate
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: set = set()
    for name in (n.strip().lower() if isinstance(n, str) else n for n in names):
        if isinstance(name, Gate):  # a parsed spec, given again
            out.add(name)
            continue
        if not name:
            continue
        if not isinstance(name, str):
            raise ValueError(f"--fail-on entries must be strings, got {name!r}")
        gate = parse_gate(name)
        if gate is not None:
            out.add(gate)
        elif name not in FAIL_ON_NAMES:
            raise ValueError(f"unknown --fail-on class {name!r}; accepted classes: "
                             + ", ".join(FAIL_ON_NAMES) + "; gates: " + GATE_GRAMMAR)
        else:
            out |= FAIL_ON_NAMES[name]
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Location:
    """A non-finite value: its N-d index in the tensor, its class, and for block-quantized
    tensors the block field that holds it."""

    index: tuple
    cls: str
    field: str = ""

    def to_dict(self) -> dict:
        out = {"index": list(self.index), "class": self.cls}
        if self.field:
            out["field"] = self.field
        return out


@stored_through_slots
@dataclass(frozen=True, slots=True)
class TensorResult:
    """What run_task found for one task: counts, first locations (C order, or block order), or
    why nothing could be checked. Small and picklable."""

    file: str
    name: str
    dtype: str
    shape: tuple
    status: str                 # checked | not_applicable | unchecked | file | problem
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    locations: tuple = ()
    values_checked: int = 0
    bytes_checked: int = 0
    reason: str = ""
    first: int = 0              # first item of the part this result covers
    missing: int = 0            # NaN where the format declares NaN a blank (fill value)
    stats: object = None        # operators.statistics.ValueStats of the values read; None: none
    out_of_range: int = 0       # values outside a CF valid range (never counted as missing)
    declared_range: tuple = ()  # a CF actual_range (low, high, dtype name) the data should meet
    # where the findings are (results.density.DensityMap), gathered when the scan asks for maps
    density: object = field(default=None, compare=False, repr=False)

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nonfinite(self) -> int:
        """Values of a counted class: NaN, ±Inf, missing, out of range."""
        return self.nan + self.posinf + self.neginf + self.missing + self.out_of_range

    @property
    def range_contradiction(self) -> bool:
        """Whether the finite, non-missing values contradict the declared actual_range."""
        from .gates import contradicts
        return contradicts(self)

    def counts(self) -> dict:
        return {"nan": self.nan, "posinf": self.posinf, "neginf": self.neginf,
                "missing": self.missing, "out_of_range": self.out_of_range}

    def to_dict(self) -> dict:
        return {"file": self.file, "name": self.name, "dtype": self.dtype,
                "shape": list(self.shape), "elements": self.elements, "status": self.status,
                "nan": self.nan, "posinf": self.posinf, "neginf": self.neginf,
                "missing": self.missing, "out_of_range": self.out_of_range,
                "stats": stats_dict(self.stats),
                "actual_range": _actual_range(self),
                "locations": [loc.to_dict() for loc in self.locations],
                "values_checked": self.values_checked, "bytes_checked": self.bytes_checked,
                "reason": self.reason or None}


def stats_dict(s) -> dict | None:
    """The JSON `stats` object of a ValueStats (None: null)."""
    if s is None:
        return None
    return {"zero": s.zero, "subnormal": s.subnormal, "normal": s.normal, "min": s.min,
            "max": s.max, "absmax": s.absmax}


def _actual_range(t) -> dict | None:
    if not t.declared_range:
        return None
    low, high, _ = t.declared_range
    return {"declared": [low, high], "contradicted": t.range_contradiction}


@dataclass(frozen=True, slots=True)
class Problem:
    """A file (or directory entry) that could not be read as a whole, or was skipped, with a
    one-line reason."""

    path: str
    reason: str

    def to_dict(self) -> dict:
        return {"path": self.path, "reason": self.reason}


@dataclass
class ScanReport:
    """Everything a scan found. `exit_code` follows ExitCode; `to_json()` gives the documented
    JSON document as text, `to_dict()` as a dict, `write_json(stream)` streams it."""

    tensors: list[TensorResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (path, format) of each file opened
    skipped: list[Problem] = field(default_factory=list)        # files not read, and why
    fail_on: frozenset[str] = frozenset(CLASSES)
    seconds: float = 0.0
    interrupted: bool = False
    integrity: list | None = None  # [FileIntegrity] when the scan verified hashes, else None

    @property
    def checked(self) -> list[TensorResult]:
        return [t for t in self.tensors if t.status == CHECKED]

    @property
    def unchecked(self) -> list[TensorResult]:
        return [t for t in self.tensors if t.status == UNCHECKED]

    @property
    def not_applicable(self) -> list[TensorResult]:
        return [t for t in self.tensors if t.status == NOT_APPLICABLE]

    @property
    def with_findings(self) -> list[TensorResult]:
        """Tensors holding a value of a counted class, or contradicting their actual_range."""
        return [t for t in self.tensors
                if t.nonfinite or (t.declared_range and t.range_contradiction)]

    @property
    def failing(self) -> list[TensorResult]:
        """Tensors holding a value of a class named by fail_on, or on which a gate of fail_on
        fires (gate_findings)."""
        classes = [c for c in CLASSES if c in self.fail_on]
        gated = {id(t) for t, _, _ in self.gate_findings}
        ranges = "out_of_range" in classes
        return [t for t in self.tensors if id(t) in gated
                or (t.nonfinite and any(getattr(t, c) for c in classes))
                or (ranges and t.declared_range and t.range_contradiction)]

    @property
    def gate_findings(self) -> list:
        """(tensor, gate, value) for every gate of fail_on that fires, in tensor order: the
        tensor's statistic that makes it fire (results/gates.py)."""
        from .gates import findings
        return findings(self.tensors, self.fail_on)

    @property
    def bytes_checked(self) -> int:
        return sum(t.bytes_checked for t in self.tensors)

    @property
    def exit_code(self) -> ExitCode:
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if self.failing or self.mismatched:
            return ExitCode.FOUND
        if self.problems or not self.read_any or any(
                t.status == UNCHECKED for t in self.tensors):
            return ExitCode.INCONCLUSIVE
        return ExitCode.CLEAN

    @property
    def mismatched(self) -> list:
        """Files whose SHA-256 contradicts a reference (with `verify`)."""
        return [i for i in self.integrity or () if i.mismatches]

    @property
    def read_any(self) -> bool:
        """Whether any tensor was checked or found not applicable: a scan that read none is
        never clean."""
        return any(t.status in (CHECKED, NOT_APPLICABLE) for t in self.tensors)

    @property
    def status(self) -> str:
        return {ExitCode.CLEAN: "clean", ExitCode.FOUND: "found",
                ExitCode.INCONCLUSIVE: "inconclusive",
                ExitCode.INTERRUPTED: "interrupted"}[self.exit_code]

    def summary(self) -> dict:
        status = Counter(t.status for t in self.tensors)
        return {
            "files": len(self.files), "tensors": len(self.tensors),
            "checked": status[CHECKED], "not_applicable": status[NOT_APPLICABLE],
            "unchecked": status[UNCHECKED], "problems": len(self.problems),
            "skipped": len(self.skipped),
            "tensors_with_findings": len(self.with_findings),
            "nan": sum(t.nan for t in self.tensors),
            "posinf": sum(t.posinf for t in self.tensors),
            "neginf": sum(t.neginf for t in self.tensors),
            "missing": sum(t.missing for t in self.tensors),
            "out_of_range": sum(t.out_of_range for t in self.tensors),
            "gate_findings": len(self.gate_findings),
            "bytes_checked": self.bytes_checked,
            "seconds": round(self.seconds, 6),
            "bytes_per_second": round(self.bytes_checked / self.seconds, 1) if self.seconds else None,
        }

    def _repr_html_(self) -> str:
        """The report as HTML, for Jupyter (results.notebook)."""
        from .notebook import report_html
        return report_html(self)

    def __str__(self) -> str:
        """The plain lines `fpclass scan` prints into a pipe (render.plain_lines)."""
        from .render import plain_lines
        return "\n".join(plain_lines(self))

    def write_json(self, stream) -> None:
        """Write the JSON document to the text `stream`, indented, with one tensor, problem or
        skipped file per line: the document of to_dict(), at a cost that stays linear and small
        for reports of a million tensors."""
        doc = self.to_dict(items=False)
        head = json.dumps(doc, indent=2)[:-2]  # without the closing "\n}"
        stream.write(head)
        for key, items in (("tensors", self.tensors), ("problems", self.problems),
                           ("skipped", self.skipped)):
            stream.write(f',\n  "{key}": [')
            for i, item in enumerate(items):
                stream.write(("\n    " if i == 0 else ",\n    ") + json.dumps(item.to_dict()))
            stream.write("\n  ]" if items else "]")
        stream.write("\n}\n")

    def plot(self, name: str, *, file=None, ax=None):
        """Draw where tensor `name`'s findings are (its density map, gathered by
        scan(..., maps=True)) with matplotlib (fpclass[plot]); returns the Figure."""
        from .plot import plot
        return plot(self, name, file=file, ax=ax)

    def write_html(self, path) -> None:
        """Write the self-contained HTML report (what `fpclass scan --html` writes) to `path`
        (a file name or a text stream)."""
        from .html import write_html
        write_html(self, path)

    def to_json(self) -> str:
        """The JSON document as text, exactly what write_json writes."""
        out = io.StringIO()
        self.write_json(out)
        return out.getvalue()

    def to_dict(self, items: bool = True) -> dict:
        """The JSON document as a dict (without the tensor, problem and skipped lists unless
        `items`)."""
        doc = {
            "schema": SCHEMA, "fpclass_version": __version__,
            "status": self.status, "exit_code": int(self.exit_code),
            "interrupted": self.interrupted,
            "fail_on": [c for c in CLASSES if c in self.fail_on] + sorted(
                str(g) for g in self.fail_on if not isinstance(g, str)),
            "summary": self.summary(),
            "files": [{"path": p, "format": f} for p, f in self.files],
        }
        doc["gate_findings"] = [{"file": t.file, "name": t.name, "gate": str(g), "value": v}
                                for t, g, v in self.gate_findings]
        if self.integrity is not None:
            doc["integrity"] = {"summary": integrity_summary(self.integrity),
                                "files": [i.to_dict() for i in self.integrity]}
        if items:
            doc["tensors"] = [t.to_dict() for t in self.tensors]
            doc["problems"] = [p.to_dict() for p in self.problems]
            doc["skipped"] = [p.to_dict() for p in self.skipped]
        return doc


__all__ = ["CHECKED", "CLASSES", "Location", "Problem", "ScanReport", "TensorResult",
           "parse_fail_on"]
