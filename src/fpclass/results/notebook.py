"""ScanReport as HTML for Jupyter (`_repr_html_`): the verdict, the summary, and the tensors and
files that need a look. Every value from the report is escaped: tensor names and paths come from
files and models, and a notebook runs any script it is shown."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from .status import CHECKED, NOT_APPLICABLE

if TYPE_CHECKING:
    from .report import ScanReport

#: Rows shown per table; the rest are counted, not listed (the JSON document holds them all).
MAX_ROWS = 50
_TENSOR_COLUMNS = ("file", "name", "dtype", "shape", "status", "nan", "posinf", "neginf",
                   "missing", "reason")


def _table(kind: str, header: Sequence[object], rows: Sequence[Sequence[object]],
           total: int) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    more = total - len(rows)
    foot = f"<p class=\"fpclass-more\">{more} more {kind} not shown</p>" if more > 0 else ""
    return (f"<table class=\"fpclass-{kind}\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{foot}")


def report_html(report: ScanReport) -> str:
    """The report as an HTML fragment: status and exit code, the summary, then the tensors that
    hold a value or were not checked, the file problems and the skipped files (each table at
    most MAX_ROWS rows)."""
    parts = [f"<div class=\"fpclass-report\"><p><b>fpclass: {escape(report.status)}</b> "
             f"(exit code {int(report.exit_code)})</p>"]
    summary = report.summary()
    parts.append(_table("summary", ("", "value"),
                        [(k, "" if v is None else v) for k, v in summary.items()], len(summary)))
    notable = [t for t in report.tensors
               if t.nonfinite or t.status not in (CHECKED, NOT_APPLICABLE)]
    if notable:
        rows = [(t.file, t.name, t.dtype, "x".join(map(str, t.shape)) or "()", t.status, t.nan,
                 t.posinf, t.neginf, t.missing, t.reason) for t in notable[:MAX_ROWS]]
        parts.append(_table("tensors", _TENSOR_COLUMNS, rows, len(notable)))
    for kind, items in (("problems", report.problems), ("skipped", report.skipped)):
        if items:
            parts.append(_table(kind, ("path", "reason"),
                                [(p.path, p.reason) for p in items[:MAX_ROWS]], len(items)))
    parts.append("</div>")
    return "".join(parts)
