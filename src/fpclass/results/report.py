"""The scan's data model: per-tensor results, file problems, the summary, the exit code, and the
JSON document (schema "fpclass.scan/2", documented in docs/scan.md)."""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field

from .._records import stored_through_slots
from .._version import __version__
from .exitcodes import ExitCode
from .status import CHECKED, NOT_APPLICABLE, UNCHECKED

SCHEMA = "fpclass.scan/2"

#: The classes a scan counts, as named in --fail-on, JSON keys and locations. "missing" is a NaN
#: where the format declares NaN a blank (a CF _FillValue, a zarr fill_value, a FITS image).
CLASSES = ("nan", "posinf", "neginf", "missing")
#: --fail-on spellings and the classes they stand for.
FAIL_ON_NAMES = {"nan": {"nan"}, "inf": {"posinf", "neginf"}, "posinf": {"posinf"},
                 "+inf": {"posinf"}, "neginf": {"neginf"}, "-inf": {"neginf"},
                 "missing": {"missing"}, "any": set(CLASSES)}


def parse_fail_on(spec) -> frozenset:
    """The classes named by `spec` ("nan,inf" or an iterable of names); ValueError naming the
    accepted names otherwise. An empty spec fails on nothing."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: set = set()
    for name in (n.strip().lower() for n in names):
        if not name:
            continue
        if name not in FAIL_ON_NAMES:
            raise ValueError(f"unknown --fail-on class {name!r}; accepted: "
                             + ", ".join(FAIL_ON_NAMES))
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

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf + self.missing

    def counts(self) -> dict:
        return {"nan": self.nan, "posinf": self.posinf, "neginf": self.neginf,
                "missing": self.missing}

    def to_dict(self) -> dict:
        return {"file": self.file, "name": self.name, "dtype": self.dtype,
                "shape": list(self.shape), "elements": self.elements, "status": self.status,
                "nan": self.nan, "posinf": self.posinf, "neginf": self.neginf,
                "missing": self.missing, "locations": [loc.to_dict() for loc in self.locations],
                "values_checked": self.values_checked, "bytes_checked": self.bytes_checked,
                "reason": self.reason or None}


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
        return [t for t in self.tensors if t.nonfinite]

    @property
    def failing(self) -> list[TensorResult]:
        """Tensors holding a value of a class named by fail_on."""
        classes = [c for c in CLASSES if c in self.fail_on]
        return [t for t in self.with_findings if any(getattr(t, c) for c in classes)]

    @property
    def bytes_checked(self) -> int:
        return sum(t.bytes_checked for t in self.tensors)

    @property
    def exit_code(self) -> ExitCode:
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if self.failing:
            return ExitCode.FOUND
        if self.problems or not self.read_any or any(
                t.status == UNCHECKED for t in self.tensors):
            return ExitCode.INCONCLUSIVE
        return ExitCode.CLEAN

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
            "fail_on": [c for c in CLASSES if c in self.fail_on],
            "summary": self.summary(),
            "files": [{"path": p, "format": f} for p, f in self.files],
        }
        if items:
            doc["tensors"] = [t.to_dict() for t in self.tensors]
            doc["problems"] = [p.to_dict() for p in self.problems]
            doc["skipped"] = [p.to_dict() for p in self.skipped]
        return doc


__all__ = ["CHECKED", "CLASSES", "Location", "Problem", "ScanReport", "TensorResult",
           "parse_fail_on"]
