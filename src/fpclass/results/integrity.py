"""The integrity answer of `fpclass scan --verify`: each file's SHA-256 and how it compares with
what the file should hash to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    """One expected digest of a file (`algorithm` "sha256" or "git-sha1", from `source`) and the
    digest the file's bytes have."""

    source: str
    algorithm: str
    expected: str
    actual: str

    @property
    def matches(self) -> bool:
        return self.expected == self.actual

    def to_dict(self) -> dict:
        return {"source": self.source, "algorithm": self.algorithm, "expected": self.expected,
                "actual": self.actual, "match": self.matches}


@dataclass(frozen=True, slots=True)
class FileIntegrity:
    """A file's SHA-256 (None when it could not be read whole: `reason` says why) and the checks
    against its references (empty: nothing said what it should be)."""

    path: str
    sha256: str | None
    checks: tuple = ()
    reason: str = ""

    @property
    def mismatches(self) -> list:
        return [c for c in self.checks if not c.matches]

    @property
    def verified(self) -> bool:
        """Whether the file matched at least one reference and contradicted none."""
        return bool(self.checks) and not self.mismatches

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256,
                "status": ("mismatch" if self.mismatches else "verified" if self.checks
                           else "unreadable" if self.sha256 is None else "no reference"),
                "checks": [c.to_dict() for c in self.checks], "reason": self.reason}


def integrity_summary(items) -> dict:
    """Counts of verified, mismatched, unreferenced and unreadable files."""
    items = list(items)
    return {"files": len(items),
            "verified": sum(1 for i in items if i.verified),
            "mismatch": sum(1 for i in items if i.mismatches),
            "no_reference": sum(1 for i in items if not i.checks and i.sha256 is not None),
            "unreadable": sum(1 for i in items if i.sha256 is None)}


def integrity_lines(items):
    """One line per file whose hash contradicts a reference or could not be computed (each
    reference's source and both digests)."""
    for item in items or ():
        for c in item.mismatches:
            yield (f"mismatch: {item.path}: {c.algorithm} is {c.actual}, {c.source} says "
                   f"{c.expected}")
        if item.sha256 is None:
            yield f"unverified: {item.path}: {item.reason}"


def integrity_clause(items) -> str:
    """The summary line's part about hashes ("" when the scan did not verify)."""
    if items is None:
        return ""
    s = integrity_summary(items)
    text = f"; sha256 of {s['files']} file{'s' if s['files'] != 1 else ''}: {s['verified']} " \
           f"verified, {s['mismatch']} mismatched, {s['no_reference']} without a reference"
    return text + (f", {s['unreadable']} unreadable" if s["unreadable"] else "")
