"""A ScanReport as a SARIF 2.1.0 log (`fpclass scan --format sarif`), for code-scanning services
(GitHub, GitLab, Azure DevOps) and SARIF viewers.

One result per class found in a tensor (rules nan, posinf, neginf, missing), per unchecked tensor
and per file problem; level "error" for a class --fail-on names, "note" for one it does not,
"warning" for what could not be checked. Skipped files are tool notifications, not results. The
file is the result's artifactLocation, the tensor its logical location."""

from __future__ import annotations

import hashlib
import json
import os
from urllib.parse import quote

from .._version import __version__
from .status import UNCHECKED

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")

#: rule id -> (name, short description, full description).
RULES = {
    "nan": ("TensorHoldsNaN", "NaN in a tensor", "A floating-point tensor holds NaN values."),
    "posinf": ("TensorHoldsPosInf", "+Inf in a tensor",
               "A floating-point tensor holds +Inf values."),
    "neginf": ("TensorHoldsNegInf", "-Inf in a tensor",
               "A floating-point tensor holds -Inf values."),
    "missing": ("TensorHoldsNaNBlanks", "NaN blanks in a tensor",
                "A tensor holds NaN where its format declares NaN a blank (a CF _FillValue, a "
                "zarr fill_value, a FITS image)."),
    "out_of_range": ("TensorOutOfValidRange", "Values outside a CF valid range",
                     "A variable holds values outside its valid_min / valid_max / valid_range "
                     "(CF), which a CF reader masks."),
    "gate": ("TensorFailsGate", "A --fail-on gate fires on a tensor",
             "A gate on the tensor's statistics (absmax>X, absmax>=X, all-zero, subnormal) "
             "named by --fail-on fires."),
    "unchecked": ("TensorNotChecked", "Tensor not checked",
                  "A tensor could not be checked for NaN and Inf; the scan is inconclusive."),
    "problem": ("FileNotRead", "File not read",
                "A file could not be read as a whole; its tensors were not checked and the scan "
                "is inconclusive."),
    "sha256-mismatch": ("FileHashMismatch", "File differs from its reference hash",
                        "With --verify: the file's SHA-256 (or git blob id) differs from what "
                        "a reference says it should be (a Hugging Face cache blob name, a Git "
                        "LFS pointer, a SHA256SUMS file)."),
}
#: How the class is named in a message.
_SHOWN = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf", "missing": "missing (NaN blank)",
          "out_of_range": "out of range (CF valid range)"}


def _uri(path: str) -> str:
    """A URI reference for `path`: relative paths stay relative (code scanning resolves them from
    the repository root), absolute ones become file:// URIs."""
    posix = path.replace(os.sep, "/")
    # surrogateescape: a name's bytes that are not UTF-8 are percent-encoded as they are
    if os.path.isabs(path):
        return "file://" + quote(posix if posix.startswith("/") else "/" + posix,
                                 errors="surrogateescape")
    return quote(posix, errors="surrogateescape")


def _location(file: str, name: str | None) -> dict:
    loc: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(file)}}}
    if name is not None:
        loc["logicalLocations"] = [{"name": name or "(array)", "kind": "variable"}]
    return loc


def _fingerprint(*parts: str) -> dict:
    """A stable identity across runs, so that services match a result to the one before it."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()
    return {"fpclass/v1": digest[:32]}


def _where(locations) -> str:
    shown = [f"[{', '.join(map(str, loc.index))}]{'.' + loc.field if loc.field else ''}"
             for loc in locations]
    return f" at {', '.join(shown)}" if shown else ""


def _finding_results(t, fail_on) -> list:
    out = []
    head = f"{t.name or '(array)'}: {t.dtype}[{', '.join(map(str, t.shape))}]"
    for cls, count in t.counts().items():
        if not count:
            continue
        mine = [loc for loc in t.locations if loc.cls == cls]
        out.append({
            "ruleId": cls, "level": "error" if cls in fail_on else "note",
            "message": {"text": f"{head}: {count} {_SHOWN[cls]} of {t.elements}{_where(mine)}"},
            "locations": [_location(t.file, t.name)],
            "partialFingerprints": _fingerprint(cls, t.file, t.name, str(t.first)),
            "properties": {"count": count, "elements": t.elements, "dtype": t.dtype,
                           "shape": list(t.shape),
                           "locations": [loc.to_dict() for loc in mine]},
        })
    return out


def to_sarif(report) -> dict:
    """The SARIF 2.1.0 log of `report` (a ScanReport) as a dict."""
    results = []
    for t in report.tensors:
        if t.nonfinite:
            results += _finding_results(t, report.fail_on)
        elif t.status == UNCHECKED:
            results.append({
                "ruleId": "unchecked", "level": "warning",
                "message": {"text": f"{t.name or '(array)'}: {t.dtype}"
                            f"[{', '.join(map(str, t.shape))}]: not checked: {t.reason}"},
                "locations": [_location(t.file, t.name)],
                "partialFingerprints": _fingerprint("unchecked", t.file, t.name, str(t.first)),
            })
    for p in report.problems:
        results.append({
            "ruleId": "problem", "level": "warning", "message": {"text": p.reason},
            "locations": [_location(p.path, None)],
            "partialFingerprints": _fingerprint("problem", p.path),
        })
    for t, gate, value in report.gate_findings:
        results.append({
            "ruleId": "gate", "level": "error",
            "message": {"text": f"{t.name or '(array)'}: {t.dtype}"
                        f"[{', '.join(map(str, t.shape))}]: {gate} ({value:g})"},
            "locations": [_location(t.file, t.name)],
            "partialFingerprints": _fingerprint("gate", str(gate), t.file, t.name),
            "properties": {"gate": str(gate), "value": value},
        })
    for item in report.integrity or ():
        for c in item.mismatches:
            results.append({
                "ruleId": "sha256-mismatch", "level": "error",
                "message": {"text": f"{c.algorithm} is {c.actual}, {c.source} says {c.expected}"},
                "locations": [_location(item.path, None)],
                "partialFingerprints": _fingerprint("sha256-mismatch", item.path, c.source),
            })
    for r in results:
        r["ruleIndex"] = list(RULES).index(r["ruleId"])
    rules = [{"id": rid, "name": name, "shortDescription": {"text": short},
              "fullDescription": {"text": full},
              "defaultConfiguration": {"level": "warning" if rid in ("unchecked", "problem")
                                       else "error" if rid in report.fail_on
                                       or rid in ("sha256-mismatch", "gate") else "note"}}
             for rid, (name, short, full) in RULES.items()]
    notes = [{"level": "note", "message": {"text": f"skipped: {p.reason}"},
              "locations": [_location(p.path, None)]} for p in report.skipped]
    invocation = {"executionSuccessful": not report.interrupted,
                  "exitCode": int(report.exit_code)}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    run: dict = {}
    if report.integrity is not None:  # every file hashed, as SARIF's artifact hashes
        run["artifacts"] = [{"location": {"uri": _uri(i.path)}, "hashes": {"sha-256": i.sha256}}
                            for i in report.integrity if i.sha256]
    return {
        "$schema": SARIF_SCHEMA, "version": SARIF_VERSION,
        "runs": [{**run,
            "tool": {"driver": {"name": "fpclass", "version": __version__,
                                "semanticVersion": __version__, "rules": rules}},
            "invocations": [invocation],
            "results": results,
            "properties": {"status": report.status, "summary": report.summary()},
        }],
    }


def write_sarif(report, stream) -> None:
    """Write the SARIF log of `report` to the text `stream`."""
    json.dump(to_sarif(report), stream, indent=2)
    stream.write("\n")
