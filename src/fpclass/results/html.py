"""`fpclass scan --html`: one self-contained page (inline style, script and data; nothing fetched)
with the summary, a sortable table of every tensor and a density map of each tensor's findings.

The page's data is the report's JSON summary plus, per tensor, its row of the table and its map
as the non-empty cells (bin row, bin column, then one count per class), so a page stays small
whatever the tensors; html_page.py holds the style and the script that draw it. `report` is a
ScanReport (not imported: ScanReport.write_html imports this module).
"""

from __future__ import annotations

import html
import json
import os

import numpy as np

from .html_page import SCRIPT, STYLE

#: Maps drawn at most in one page (the tensors with findings first come first).
MAX_MAPS = 200

#: The table's columns: (key, label, numeric); statistics appear when the results carry them.
COLUMNS = [("file", "file", False), ("name", "tensor", False), ("dtype", "dtype", False),
           ("shape", "shape", False), ("status", "status", False), ("nan", "NaN", True),
           ("posinf", "+Inf", True), ("neginf", "-Inf", True), ("missing", "missing", True),
           ("values_checked", "values", True)]
STATS = [("zero", "zero", True), ("subnormal", "subnormal", True), ("normal", "normal", True),
         ("min", "min", True), ("max", "max", True), ("absmax", "max |x|", True)]
LAYOUT = "two trailing dimensions (rows × columns), the leading ones summed"


def _number(v):
    """A JSON-safe number: NaN and infinities as text (JSON has none)."""
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return str(float(v))
    if isinstance(v, np.generic):
        return v.item()
    return v


def _stats(stats) -> dict:
    """A result's statistics as a dict (a mapping, or an object with to_dict() or attributes)."""
    if not stats:
        return {}
    if isinstance(stats, dict):
        return stats
    if hasattr(stats, "to_dict"):
        return stats.to_dict()
    return {k: getattr(stats, k) for k, _, _ in STATS if hasattr(stats, k)}


def _cells(counts: np.ndarray) -> list:
    """[r, c, nan, posinf, neginf, missing] for each bin holding a count."""
    rows, cols = np.nonzero(counts.sum(axis=0))
    per = counts[:, rows, cols].T
    return [[int(r), int(c), *map(int, k)] for r, c, k in zip(rows, cols, per)]


def page_data(report) -> dict:
    """Everything the page shows, as plain JSON values."""
    doc = report.to_dict(items=False)
    has_stats = any(getattr(t, "stats", None) for t in report.tensors)
    has_range = any(getattr(t, "out_of_range", None) for t in report.tensors)
    columns = COLUMNS + (STATS if has_stats else []) + (
        [("out_of_range", "out of range", True)] if has_range else []) + [
        ("reason", "reason", False)]
    tensors, drawn, skipped_maps = [], 0, 0
    for i, t in enumerate(report.tensors):
        row = {"file": t.file, "name": t.name, "dtype": t.dtype, "shape": list(t.shape),
               "status": t.status, "values_checked": t.values_checked,
               "reason": t.reason or "", **t.counts()}
        stats = _stats(getattr(t, "stats", None))
        for key, _, _ in STATS:
            if key in stats:
                row[key] = _number(stats[key])
        if has_range:
            row["out_of_range"] = getattr(t, "out_of_range", None)
        m = getattr(t, "density", None)
        if m is not None:
            if drawn < MAX_MAPS:
                row["map_id"] = f"map-{i}"
                row["map"] = _map(m, t.shape)
                drawn += 1
            else:
                skipped_maps += 1
        tensors.append(row)
    if not report.with_findings:
        note = "No tensor has findings to map."
    elif not drawn:
        note = ("No maps were gathered: scan with --html (or scan(..., maps=True)) to gather "
                "them in the same read.")
    else:
        note = ""
    if skipped_maps:
        note += f"{skipped_maps} more tensors have maps: a page draws at most {MAX_MAPS}."
    return {"status": doc["status"], "exit_code": doc["exit_code"], "fail_on": doc["fail_on"],
            "summary": doc["summary"], "files": doc["files"],
            "columns": [{"key": k, "label": label, "numeric": num} for k, label, num in columns],
            "tensors": tensors, "maps_note": note, "maps_left_out": skipped_maps,
            "problems": [p.to_dict() for p in report.problems],
            "skipped": [p.to_dict() for p in report.skipped]}


def _layout(shape) -> str:
    n = len(shape)
    if n < 3:
        return ("a scalar", "one row", "rows \u00d7 columns")[n]
    summed = "dim 0" if n == 3 else f"dims 0-{n - 3}"
    return f"dims {n - 2} \u00d7 {n - 1}, {summed} summed"


def _map(m, shape) -> dict:
    """A map's data for the page: to_dict() with its non-empty cells instead of its counts."""
    counts = m.counts
    out = {"rows": m.rows, "columns": m.columns, "layout": _layout(shape)}
    if counts is None:
        out["note"] = m.note
        return out
    row_edges, column_edges = m.bin_edges()
    out["row_edges"], out["column_edges"] = row_edges.tolist(), column_edges.tolist()
    out["cells"] = _cells(counts)
    return out


def render(report) -> str:
    """The page as text."""
    data = json.dumps(page_data(report), separators=(",", ":"), allow_nan=False)
    # inside <script>, "</" would end the element: a tensor may be named "</script>"
    data = data.replace("</", "<\\/").replace("<!--", "<\\!--")
    problems = "".join(f"<li>{html.escape(p.path)}: {html.escape(p.reason)}</li>"
                       for p in report.problems)
    skipped = "".join(f"<li>{html.escape(p.path)}: {html.escape(p.reason)}</li>"
                      for p in report.skipped)
    legend = "".join(f'<span style="background:{c}"></span>{label}' for c, label in
                     (("rgb(255,0,0)", "NaN"), ("rgb(0,255,0)", "+Inf"),
                      ("rgb(0,0,255)", "-Inf"), ("rgb(128,128,128)", "missing")))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fpclass scan report: {html.escape(report.status)}</title>
<style>{STYLE}</style></head>
<body>
<header id="head"></header>
<h2>Where the findings are</h2>
<p class="legend">Each map covers a tensor's {LAYOUT}, cut into at most 128 &times; 128 bins
(hover a bin for its counts); a bin's colour mixes its classes, each on a log scale:{legend}</p>
<div class="maps" id="maps"></div>
<h2>Tensors</h2>
<table id="tensors"></table>
{f'<h2>Problems</h2><ul id="problems">{problems}</ul>' if problems else ''}
{f'<h2>Skipped</h2><ul id="skipped">{skipped}</ul>' if skipped else ''}
<script type="application/json" id="fpclass-data">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def write_html(report, path) -> None:
    """Write the page to `path` (a file name or a text stream)."""
    text = render(report)
    if hasattr(path, "write"):
        path.write(text)
        return
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text)


__all__ = ["MAX_MAPS", "page_data", "render", "write_html"]
