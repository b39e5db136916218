"""Human output of a ScanReport: plain lines (for pipes, stable and greppable), optionally
colored, or a rich table (for terminals; rich, from fpclass[cli], is imported only here, only
then). It reads reports by their attributes and imports no report type, so the report can print
itself through it without an import cycle."""

from __future__ import annotations

import re

from .._optional import require
from .status import NOT_APPLICABLE, UNCHECKED

#: A not-applicable reason that only names the kind of the data (integers, text, bool, times, ...):
#: not printed, so that ordinary integer tensors do not flood the output. Any other reason (a
#: pickle naming a foreign global, a packed or scaled variable, a structured type) is printed.
_KIND_ONLY = re.compile(
    r"(?:(?:text|strings?|integers?|booleans?|bool|bit fields|time values|"
    r"enumerated integers)(?: \([^)]*\))?[:,]?\s*)?"
    r"(?:not a floating-point type)?", re.IGNORECASE)


def reason_shown(t: "TensorResult") -> bool:
    """Whether plain output and the table list `t` with its reason: every unchecked tensor, and
    every not-applicable one whose reason says more than the kind of its data."""
    if t.status == UNCHECKED:
        return True
    return t.status == NOT_APPLICABLE and not _KIND_ONLY.fullmatch(t.reason)


def printable(text: str) -> str:
    """`text` with every non-printable character (newlines, escape sequences, bytes of file names
    that are not UTF-8) written as a backslash escape, so one item stays on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else (
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _name(t: "TensorResult") -> str:
    return printable(t.name) if t.name else "(array)"


def _shape(t: "TensorResult") -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


def _locations(t: "TensorResult") -> str:
    parts = []
    for loc in t.locations:
        where = "[" + ", ".join(map(str, loc.index)) + "]"
        parts.append(f"{where}{'.' + loc.field if loc.field else ''} {loc.cls}")
    more = t.nonfinite - len(t.locations)
    return ", ".join(parts) + (f", ... {more} more" if more > 0 and parts else "")


def summary_line(report: "ScanReport") -> str:
    """One line: files, tensors, bytes, throughput, counts, unchecked and the verdict."""
    s = report.summary()
    rate = f" ({_size(s['bytes_per_second'])}/s)" if s["bytes_per_second"] else ""
    text = (f"{s['files']} files, {s['tensors']} tensors ({s['checked']} checked, "
            f"{s['not_applicable']} not applicable, {s['unchecked']} unchecked), "
            f"{_size(s['bytes_checked'])} checked in {s['seconds']:.2f} s{rate}; "
            f"{s['nan']} NaN, {s['posinf']} +Inf, {s['neginf']} -Inf"
            + (f", {s['missing']} missing (declared blanks)" if s["missing"] else "")
            + (f", {s['out_of_range']} out of range" if s["out_of_range"] else "")
            + f" in {s['tensors_with_findings']} tensors")
    if s["gate_findings"]:
        text += f"; {s['gate_findings']} gate findings"
    if s["problems"]:
        text += f"; {s['problems']} file problems"
    if s["skipped"]:
        text += f"; {s['skipped']} files skipped"
    if not report.read_any:
        text += "; no tensor was checked"
    if report.interrupted:
        text += "; interrupted"
    return f"summary: {text} -> {report.status} (exit {int(report.exit_code)})"


def plain_lines(report: "ScanReport"):
    """Yield one line per tensor with findings, per unchecked tensor, per not-applicable tensor
    whose reason says more than its kind (reason_shown), per problem, per skipped file, then the
    summary. Names are escaped (`printable`), so each item is one line."""
    def head(t):
        where = f"{printable(t.file)}: " if t.file else ""   # fpclass.check's arrays: no file
        return f"{where}{_name(t)}: {printable(t.dtype)}{_shape(t)}"
    gates: dict = {}
    for t, gate, value in report.gate_findings:
        gates.setdefault(id(t), []).append(f"{gate} ({value:g})")
    for t in report.tensors:
        if t.nonfinite:
            missing = f" missing={t.missing}" if t.missing else ""
            missing += f" out_of_range={t.out_of_range}" if t.out_of_range else ""
            absmax = f", absmax={t.stats.absmax:g}" if t.stats and t.stats.absmax is not None else ""
            yield (f"found: {head(t)}: nan={t.nan} posinf={t.posinf} neginf={t.neginf}{missing} "
                   f"of {t.elements}{absmax}: at {_locations(t)}")
        if t.declared_range and t.range_contradiction:
            low, high, _ = t.declared_range
            yield (f"found: {head(t)}: values from {t.stats.min:g} to {t.stats.max:g} contradict "
                   f"actual_range [{low:g}, {high:g}]")
        if id(t) in gates:
            yield f"gate: {head(t)}: " + ", ".join(gates[id(t)])
        elif not t.nonfinite and reason_shown(t):
            tag = "unchecked" if t.status == UNCHECKED else "not applicable"
            yield f"{tag}: {head(t)}: {printable(t.reason)}"
    for p in report.problems:
        yield f"problem: {printable(p.path)}: {printable(p.reason)}"
    for p in report.skipped:
        yield f"skipped: {printable(p.path)}: {printable(p.reason)}"
    yield summary_line(report)


#: ANSI SGR codes of colored plain lines: the tag of each line, the summary by its verdict.
_TAG_COLORS = {"found": "31", "gate": "31", "unchecked": "33", "problem": "33", "skipped": "2",
               "not applicable": "2"}
_VERDICT_COLORS = {"clean": "32", "found": "31"}   # inconclusive, interrupted: yellow


def colored_lines(report: "ScanReport"):
    """plain_lines with ANSI color on each line's tag and on the summary line; without the color
    codes, the same text."""
    for line in plain_lines(report):
        tag, sep, rest = line.partition(": ")
        if tag == "summary":
            yield f"\x1b[{_VERDICT_COLORS.get(report.status, '33')}m{line}\x1b[0m"
        else:
            yield f"\x1b[{_TAG_COLORS[tag]}m{tag}\x1b[0m{sep}{rest}"


def rich_available() -> bool:
    """Whether rich (fpclass[cli]) can be imported: the table and the progress bar need it."""
    try:
        _rich()
    except ImportError:
        return False
    return True


def _rich(module: str = "console"):
    """rich's `module` (rich.console, rich.table, ...), through require: fpclass[cli]."""
    return require(f"rich.{module}", "cli", "fpclass's terminal table")


def _console(stream, color):
    """A rich Console on `stream`: color True forces color (also off a terminal, and whatever
    NO_COLOR says: the caller has decided), False writes no escape sequence, None lets rich
    decide."""
    Console = _rich().Console
    if color is None:
        return Console(file=stream)
    if color:
        return Console(file=stream, force_terminal=True, no_color=False)
    return Console(file=stream, color_system=None)


def rich_table(report: "ScanReport", stream, color: bool | None = None) -> None:
    """Print a table of findings, unchecked tensors, not-applicable ones whose reason says more
    than their kind, and problems, then the summary, with rich, colored as `color` says (see
    _console)."""
    console = _console(stream, color)
    escape, Table = _rich("markup").escape, _rich("table").Table

    def cell(text: str) -> str:
        return escape(printable(text))

    rows = [t for t in report.tensors if t.nonfinite or reason_shown(t)]
    if rows or report.problems or report.skipped:
        table = Table(show_lines=False)
        blanks = any(t.missing for t in rows)
        counts = ("NaN", "+Inf", "-Inf") + (("missing",) if blanks else ())
        for col in ("", "file", "tensor", "dtype", "shape", *counts, "where / why"):
            table.add_column(col, justify="right" if col in counts else "left", overflow="fold")
        pad = ("",) * len(counts)
        for t in rows:
            bad = bool(t.nonfinite)
            numbers = (t.nan, t.posinf, t.neginf) + ((t.missing,) if blanks else ())
            tag = "[red]found[/]" if bad else "[yellow]unchecked[/]" if t.status == UNCHECKED \
                else "[dim]not applicable[/]"
            table.add_row(tag, cell(t.file),
                          escape(_name(t)), cell(t.dtype), _shape(t), *map(str, numbers),
                          escape(_locations(t)) if bad else cell(t.reason))
        for p in report.problems:
            table.add_row("[yellow]problem[/]", cell(p.path), "", "", "", *pad, cell(p.reason))
        for p in report.skipped:
            table.add_row("[dim]skipped[/]", cell(p.path), "", "", "", *pad, cell(p.reason),
                          style="dim")
        console.print(table)
    style = {"clean": "green", "found": "red"}.get(report.status, "yellow")
    console.print(summary_line(report), style=style, highlight=False, markup=False)


class Progress:
    """A transient rich progress bar of bytes on a terminal stream, colored as `color` says (see
    _console). `start(tasks)` shows it (the total: the bytes the tasks read), `advance(task,
    result)` matches engine.execute's progress callback, `stop()` removes it."""

    def __init__(self, stream, color: bool | None = None):
        console = _console(stream, color)
        rp = _rich("progress")
        BarColumn, DownloadColumn, Bar = rp.BarColumn, rp.DownloadColumn, rp.Progress
        TimeRemainingColumn, TransferSpeedColumn = rp.TimeRemainingColumn, rp.TransferSpeedColumn
        self.bar = Bar("scanning", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                       TimeRemainingColumn(), console=console, transient=True)
        self.id = None

    def start(self, tasks) -> None:
        self.id = self.bar.add_task("scan", total=sum(t.part_bytes for t in tasks
                                                      if t.status == "check"))
        self.bar.start()

    def stop(self) -> None:
        self.bar.stop()

    def advance(self, task, result) -> None:
        self.bar.advance(self.id, result.bytes_checked)
