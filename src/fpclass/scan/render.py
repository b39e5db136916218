"""Human output of a ScanReport: plain lines (for pipes, stable and greppable) or a rich table
(for terminals; rich is imported only here, only then)."""

from __future__ import annotations

from .report import ScanReport, TensorResult


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _name(t: TensorResult) -> str:
    return t.name or "(array)"


def _shape(t: TensorResult) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


def _locations(t: TensorResult) -> str:
    parts = []
    for loc in t.locations:
        where = "[" + ", ".join(map(str, loc.index)) + "]"
        parts.append(f"{where}{'.' + loc.field if loc.field else ''} {loc.cls}")
    more = t.nonfinite - len(t.locations)
    return ", ".join(parts) + (f", ... {more} more" if more > 0 and parts else "")


def summary_line(report: ScanReport) -> str:
    """One line: files, tensors, bytes, throughput, counts, unchecked and the verdict."""
    s = report.summary()
    rate = f" ({_size(s['bytes_per_second'])}/s)" if s["bytes_per_second"] else ""
    text = (f"{s['files']} files, {s['tensors']} tensors ({s['checked']} checked, "
            f"{s['not_applicable']} not applicable, {s['unchecked']} unchecked), "
            f"{_size(s['bytes_checked'])} checked in {s['seconds']:.2f} s{rate}; "
            f"{s['nan']} NaN, {s['posinf']} +Inf, {s['neginf']} -Inf in "
            f"{s['tensors_with_findings']} tensors")
    if s["problems"]:
        text += f"; {s['problems']} file problems"
    if report.interrupted:
        text += "; interrupted"
    return f"summary: {text} -> {report.status} (exit {int(report.exit_code)})"


def plain_lines(report: ScanReport):
    """Yield one line per tensor with findings, per unchecked tensor, per problem, then the
    summary."""
    for t in report.tensors:
        head = f"{t.file}: {_name(t)}: {t.dtype}{_shape(t)}"
        if t.nonfinite:
            yield (f"found: {head}: nan={t.nan} posinf={t.posinf} neginf={t.neginf} "
                   f"of {t.elements}: at {_locations(t)}")
        elif t.status == "unchecked":
            yield f"unchecked: {head}: {t.reason}"
    for p in report.problems:
        yield f"problem: {p.path}: {p.reason}"
    yield summary_line(report)


def rich_table(report: ScanReport, stream) -> None:
    """Print a table of findings, unchecked tensors and problems, then the summary, with rich."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream)
    rows = [t for t in report.tensors if t.nonfinite or t.status == "unchecked"]
    if rows or report.problems:
        table = Table(show_lines=False)
        for col in ("", "file", "tensor", "dtype", "shape", "NaN", "+Inf", "-Inf", "where / why"):
            table.add_column(col, justify="right" if col in ("NaN", "+Inf", "-Inf") else "left",
                             overflow="fold")
        for t in rows:
            bad = bool(t.nonfinite)
            table.add_row("[red]found[/]" if bad else "[yellow]unchecked[/]", t.file, _name(t),
                          t.dtype, _shape(t), str(t.nan), str(t.posinf), str(t.neginf),
                          _locations(t) if bad else t.reason, style=None)
        for p in report.problems:
            table.add_row("[yellow]problem[/]", p.path, "", "", "", "", "", "", p.reason)
        console.print(table)
    style = {"clean": "green", "found": "red"}.get(report.status, "yellow")
    console.print(summary_line(report), style=style, highlight=False, markup=False)


class Progress:
    """A transient rich progress bar of bytes on a terminal stream; a context manager whose
    `advance(task, result)` matches engine.execute's progress callback."""

    def __init__(self, stream, total_bytes: int):
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress as Bar,
                                   TimeRemainingColumn, TransferSpeedColumn)
        self.bar = Bar("scanning", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                       TimeRemainingColumn(), console=Console(file=stream), transient=True)
        self.id = self.bar.add_task("scan", total=total_bytes)

    def __enter__(self):
        self.bar.start()
        return self

    def __exit__(self, *exc):
        self.bar.stop()

    def advance(self, task, result) -> None:
        self.bar.advance(self.id, result.bytes_checked)
