"""Plain output (and the table) show the reason of every unchecked item and of every
not-applicable item whose reason says more than the kind of its data — a pickle naming a foreign
global, a packed or scaled variable — and stay quiet about ordinary integer and text tensors."""

import io
import zipfile

import pytest

from fpclass.scan import ScanReport, scan
from fpclass.scan.engine import run_task
from fpclass.scan.readers.reporting import not_applicable, unchecked, values_task
from fpclass.results.render import colored_lines, plain_lines, rich_available, rich_table

GLOBAL = "holds no tensor or array data; it names os.system (never called)"
PACKED = "packed short: scale_factor 0.5 and add_offset 1.0 are finite and no value overflows"


def report_of(tasks) -> ScanReport:
    return ScanReport(tensors=[run_task(t) for t in tasks], files=[("m.nc", "netcdf")])


def test_reasons_beyond_the_kind_are_printed_ordinary_ones_are_not():
    tasks = [not_applicable("m.nc", "counts", "int32", (3,)),
             not_applicable("m.nc", "labels", "char", (2, 4), "text, not a floating-point type"),
             not_applicable("m.fits", "", "int16", (5,), "integers (BLANK is an integer blank)"),
             not_applicable("m.h5", "names", "string", (2,), "strings"),
             not_applicable("m.pt", "", "pickle", (), GLOBAL),
             not_applicable("m.nc", "temp", "short", (4,), PACKED),
             unchecked("m.nc", "blob", "opaque", (2,), "opaque data cannot be classified"),
             values_task("m.nc", "ok", [1.0, 2.0])]
    lines = list(plain_lines(report_of(tasks)))
    assert lines[:-1] == [
        f"not applicable: m.pt: (array): pickle[]: {GLOBAL}",
        f"not applicable: m.nc: temp: short[4]: {PACKED}",
        "unchecked: m.nc: blob: opaque[2]: opaque data cannot be classified"]
    assert lines[-1].startswith("summary: 1 file, 8 tensors (1 checked, 6 not applicable, "
                                "1 unchecked)")
    plain = [line.replace("\x1b[2m", "").replace("\x1b[33m", "").replace("\x1b[0m", "")
             for line in colored_lines(report_of(tasks))]
    assert plain[:-1] == lines[:-1]


def test_the_table_lists_them_too():
    if not rich_available():
        pytest.skip("rich (fpclass[cli]) is not installed")
    out = io.StringIO()
    rich_table(report_of([not_applicable("m.nc", "counts", "int32", (3,)),
                          not_applicable("m.pt", "", "pickle", (), GLOBAL)]), out, color=False)
    text = out.getvalue()
    assert "os.system" in text and "not applicable" in text and "counts" not in text


def test_a_pickle_naming_a_foreign_global_is_visible_in_plain_output(tmp_path):
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:  # torch's zip layout; data.pkl only names os.system
        z.writestr("archive/data.pkl", b"\x80\x02cos\nsystem\nq\x00.")
        z.writestr("archive/version", b"3\n")
    lines = list(plain_lines(scan([str(path)])))
    assert any(str(path) in line and "os.system" in line for line in lines[:-1]), lines
