"""Human output of a ScanReport: plain lines (for pipes, stable and greppable), optionally
colored, or a rich table (for terminals; rich, from fpclass[cli], is imported only here, only
then). It reads reports by their attributes and imports no report type, so the report can print
itself through it without an import cycle."""

from __future__ import annotations

import re
from collections import Counter

from .._optional import require
from .integrity import integrity_clause, integrity_lines
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


def _at(t: "TensorResult") -> str:
    """": at LOCATIONS" for a found line, or "" when no location is listed (--max-locations 0)."""
    where = _locations(t)
    return f": at {where}" if where else ""


def plural(n: int, word: str, many: str = "") -> str:
    """`n` and `word`, in the plural (`many`, else word + "s") unless n is 1: "1 file", "2 files"."""
    return f"{n} {word if n == 1 else many or word + 's'}"


#: The classes of report.fail_on, as the summary names them.
_CLASS_NAMES = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf", "missing": "missing",
                "out_of_range": "out of range"}


def _verdict(report: "ScanReport", s: dict) -> str:
    """The summary's end: the status and exit code, and, when values were found of classes
    --fail-on does not name, that they were found but not failed on (so a clean exit after
    `found:` lines says why)."""
    end = f"{report.status} (exit {int(report.exit_code)})"
    ignored = [_CLASS_NAMES[c] for c in _CLASS_NAMES if s[c] and c not in report.fail_on]
    if not ignored or report.failing:
        return end
    gates = sorted(str(g) for g in report.fail_on if not isinstance(g, str))
    failing = ", ".join([_CLASS_NAMES[c] for c in _CLASS_NAMES if c in report.fail_on]
                        + gates) or "none"
    return f"no --fail-on class ({failing}) found, {', '.join(ignored)} found but not in " \
        f"--fail-on: {end}"


def summary_line(report: "ScanReport") -> str:
    """One line: files, tensors, bytes, throughput, counts, unchecked and the verdict."""
    s = report.summary()
    rate = f" ({_size(s['bytes_per_second'])}/s)" if s["bytes_per_second"] else ""
    text = (f"{plural(s['files'], 'file')}, {plural(s['tensors'], 'tensor')} "
            f"({s['checked']} checked, "
            f"{s['not_applicable']} not applicable, {s['unchecked']} unchecked), "
            f"{_size(s['bytes_checked'])} checked in {s['seconds']:.2f} s{rate}; "
            f"{s['nan']} NaN, {s['posinf']} +Inf, {s['neginf']} -Inf"
            + (f", {s['missing']} missing (declared blanks)" if s["missing"] else "")
            + (f", {s['out_of_range']} out of range" if s["out_of_range"] else "")
            + f" in {plural(s['tensors_with_findings'], 'tensor')}")
    if s["gate_findings"]:
        text += f"; {plural(s['gate_findings'], 'gate finding')}"
    if s["problems"]:
        text += f"; {plural(s['problems'], 'file problem')}"
    if s["skipped"]:
        text += f"; {plural(s['skipped'], 'file')} skipped"
    text += integrity_clause(report.integrity)
    if not report.read_any:
        text += "; no tensor was checked"
    if report.interrupted:
        text += "; interrupted"
    return f"summary: {text} -> {_verdict(report, s)}"


def skipped_count(report: "ScanReport") -> str:
    """The one line that stands for the skipped files unless they are listed: how many, by
    reason (the commonest first, five at most)."""
    reasons = Counter(p.reason for p in report.skipped)
    shown = [f"{printable(r)}: {n}" for r, n in reasons.most_common(5)]
    if len(reasons) > 5:
        shown.append(f"{plural(len(reasons) - 5, 'other reason')}")
    return (f"{plural(len(report.skipped), 'file')} holding no tensors or filtered out "
            f"({'; '.join(shown)}); --show-skipped lists them")


def plain_lines(report: "ScanReport", show_skipped: bool = False):
    """Yield one line per tensor with findings, per unchecked tensor, per not-applicable tensor
    whose reason says more than its kind (reason_shown), per problem, per skipped file (with
    `show_skipped`; else one line counting them), then the summary. Names are escaped
    (`printable`), so each item is one line."""
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
                   f"of {t.elements}{absmax}{_at(t)}")
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
    if show_skipped:
        for p in report.skipped:
            yield f"skipped: {printable(p.path)}: {printable(p.reason)}"
    elif report.skipped:
        yield f"skipped: {skipped_count(report)}"
    yield from map(printable, integrity_lines(report.integrity))
    yield summary_line(report)


#: ANSI SGR codes of colored plain lines: the tag of each line, the summary by its verdict.
_TAG_COLORS = {"found": "31", "gate": "31", "unchecked": "33", "problem": "33", "skipped": "2",
               "not applicable": "2", "mismatch": "31", "unverified": "33"}
_VERDICT_COLORS = {"clean": "32", "found": "31"}   # inconclusive, interrupted: yellow


def colored_lines(report: "ScanReport", show_skipped: bool = False):
    """plain_lines with ANSI color on each line's tag and on the summary line; without the color
    codes, the same text."""
    for line in plain_lines(report, show_skipped):
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


#: Rows of the terminal table by default (`--max-rows`): a table is read, not searched; a long
#: one costs rich seconds to lay out, and the piped lines and the JSON keep every row.
TABLE_ROWS = 100


def _table_rows(report: "ScanReport", show_skipped: bool):
    """(tag, tensor or problem) for each row, the most important first: findings, problems,
    unchecked tensors, not-applicable ones with a reason, then skipped files when asked."""
    rows = [("found", t) for t in report.tensors if t.nonfinite]
    rows += [("problem", p) for p in report.problems]
    rows += [("unchecked" if t.status == UNCHECKED else "not applicable", t)
             for t in report.tensors if not t.nonfinite and reason_shown(t)]
    if show_skipped:
        rows += [("skipped", p) for p in report.skipped]
    return rows


_TAG_STYLES = {"found": "[red]found[/]", "problem": "[yellow]problem[/]",
               "unchecked": "[yellow]unchecked[/]", "not applicable": "[dim]not applicable[/]",
               "skipped": "[dim]skipped[/]"}


def rich_table(report: "ScanReport", stream, color: bool | None = None,
               max_rows: int = TABLE_ROWS, show_skipped: bool = False) -> None:
    """Print a table of findings, problems, unchecked tensors and not-applicable ones whose reason
    says more than their kind (and skipped files with `show_skipped`), at most `max_rows` of them
    (0: all) in that order, a line counting the rows left out and the skipped files not listed,
    then the summary; with rich, colored as `color` says (see _console)."""
    console = _console(stream, color)
    escape, Table = _rich("markup").escape, _rich("table").Table

    def cell(text: str) -> str:
        return escape(printable(text))

    rows = _table_rows(report, show_skipped)
    shown = rows[:max_rows] if max_rows else rows
    if shown:
        table = Table(show_lines=False)
        blanks = any(t.missing for tag, t in shown if tag not in ("problem", "skipped"))
        counts = ("NaN", "+Inf", "-Inf") + (("missing",) if blanks else ())
        for col in ("", "file", "tensor", "dtype", "shape", *counts, "where / why"):
            table.add_column(col, justify="right" if col in counts else "left", overflow="fold")
        pad = ("",) * len(counts)
        for tag, t in shown:
            if tag in ("problem", "skipped"):
                table.add_row(_TAG_STYLES[tag], cell(t.path), "", "", "", *pad, cell(t.reason),
                              style="dim" if tag == "skipped" else None)
                continue
            numbers = (t.nan, t.posinf, t.neginf) + ((t.missing,) if blanks else ())
            table.add_row(_TAG_STYLES[tag], cell(t.file), escape(_name(t)), cell(t.dtype),
                          _shape(t), *map(str, numbers),
                          escape(_locations(t)) if tag == "found" else cell(t.reason))
        console.print(table)
    for line in integrity_lines(report.integrity):
        console.print(printable(line), style="red", highlight=False, markup=False)
    if len(shown) < len(rows):
        left = Counter(tag for tag, _ in rows[len(shown):])
        what = ", ".join(plural(n, tag) if tag == "problem" else f"{n} {tag}"
                         for tag, n in left.items())
        console.print(f"{plural(len(rows) - len(shown), 'more row')} not shown ({what}): "
                      "--max-rows 0 shows all; piped output and --json list every one",
                      highlight=False, markup=False)
    if report.skipped and not show_skipped:
        console.print(f"skipped: {skipped_count(report)}", style="dim", highlight=False,
                      markup=False)
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
