"""What `fpclass scan` prints for large and edge-case reports: skipped files as a count unless
--show-skipped, a terminal table bounded by --max-rows, singular counts, an honest verdict when
--fail-on leaves a finding out, and no dangling "at" with --max-locations 0."""

import io
import re

import numpy as np
import pytest

from fpclass.cli import main
from fpclass.results.report import Problem, ScanReport, TensorResult
from fpclass.results.status import CHECKED, UNCHECKED
from test_scan_support import safetensors_bytes

pytest.importorskip("rich")

N = 30_000


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")   # rich's width off a real terminal: tags stay unfolded


def run(*argv, stdout=None):
    out, err = stdout or io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def big_report() -> ScanReport:
    """One clean tensor, N unchecked tensors, N skipped files and 3 problems."""
    report = ScanReport(fail_on=frozenset({"nan", "posinf", "neginf"}))
    report.files.append(("m.safetensors", "safetensors"))
    report.tensors.append(TensorResult("m.safetensors", "ok", "F32", (2,), CHECKED,
                                       values_checked=2, bytes_checked=8))
    report.tensors += [TensorResult("m.safetensors", f"t{i}", "F32", (2,), UNCHECKED,
                                    reason="truncated") for i in range(N)]
    report.skipped += [Problem(f"d/f{i}.txt", "text file") for i in range(N)]
    report.problems += [Problem(f"p{i}.bin", "unrecognized binary file") for i in range(3)]
    return report


@pytest.fixture
def big(monkeypatch):
    from fpclass.scan import engine
    report = big_report()
    monkeypatch.setattr(engine, "scan", lambda *a, **k: report)
    return report


def test_skipped_files_are_one_count_line_unless_asked(big):
    code, out, _ = run("x")
    lines = out.splitlines()
    assert code == 2
    skipped = [line for line in lines if line.startswith("skipped: ")]
    assert skipped == [f"skipped: {N} files holding no tensors or filtered out (text file: {N}); "
                       "--show-skipped lists them"]
    assert len(lines) == N + 3 + 2   # unchecked tensors and problems stay listed in a pipe
    code, out, _ = run("x", "--show-skipped")
    assert sum(line.startswith("skipped: d/f") for line in out.splitlines()) == N


def test_skipped_count_names_the_commonest_reasons():
    report = ScanReport()
    report.skipped += [Problem(f"f{i}", f"reason {i % 7}") for i in range(70)]
    report.skipped += [Problem("g", "reason 3")]
    line = [x for x in str(report).splitlines() if x.startswith("skipped:")]
    assert line == ["skipped: 71 files holding no tensors or filtered out (reason 3: 11; "
                    "reason 0: 10; reason 1: 10; reason 2: 10; reason 4: 10; 2 other reasons); "
                    "--show-skipped lists them"]


def table_rows(text: str) -> int:
    """Rows of a rich table: lines whose first cell holds a tag (a folded cell's further lines
    leave the first cell blank)."""
    return len(re.findall(r"^│ (?:found|problem|unchecked|not applicable|skipped)", text, re.M))


def test_a_large_report_renders_a_bounded_table(big):
    code, out, _ = run("x", "--color", "never", stdout=Terminal())
    assert code == 2 and "┃" in out
    assert table_rows(out) == 100   # --max-rows's default
    assert len(out.splitlines()) < 1000   # bounded output, whatever the report's size
    assert f"{N + 3 - 100} more rows not shown ({N + 3 - 100} unchecked)" in out
    assert f"skipped: {N} files" in out and out.rstrip().splitlines()[-1].startswith("summary:")
    # problems come before unchecked tensors, whatever the cut
    assert out.index("p0.bin") < out.index("t0")
    code, out, _ = run("x", "--color", "never", "--max-rows", "5", stdout=Terminal())
    assert table_rows(out) == 5 and f"{N - 2} more rows not shown ({N - 2} unchecked)" in out


def test_max_rows_zero_shows_every_row_of_a_small_report(tmp_path):
    for i in range(120):
        a = np.array([np.nan], np.float32)
        (tmp_path / f"m{i:03}.safetensors").write_bytes(
            safetensors_bytes({"w": ("F32", a, a.shape)}))
    code, out, _ = run(tmp_path, "--color", "never", "--max-rows", "0", stdout=Terminal())
    assert code == 1 and out.count("m1") >= 20 and "not shown" not in out
    assert len(re.findall(r"│ found", out)) == 120
    code, out, _ = run(tmp_path, "--color", "never", stdout=Terminal())
    assert len(re.findall(r"│ found", out)) == 100 and "20 more rows not shown (20 found)" in out


def test_negative_max_rows_is_a_usage_error(tmp_path):
    code, out, err = run(tmp_path, "--max-rows", "-1")
    assert code == 4 and out == "" and "--max-rows" in err


@pytest.fixture
def nan_file(tmp_path):
    a = np.array([1, np.nan, np.nan], np.float32)
    path = tmp_path / "n.safetensors"
    path.write_bytes(safetensors_bytes({"w": ("F32", a, a.shape)}))
    return path


def test_singular_counts(nan_file, tmp_path):
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x05\0\0\0\0\0\0\0{")
    (tmp_path / "notes.txt").write_text("text")
    code, out, _ = run(tmp_path)
    summary = out.splitlines()[-1]
    assert summary.startswith("summary: 1 file, 1 tensor (1 checked"), summary
    assert "in 1 tensor;" in summary and "; 1 file problem;" in summary
    assert "; 1 file skipped" in summary and "skipped: 1 file holding" in out
    assert not re.search(r"\b1 (files|tensors|file problems)\b", out)


def test_fail_on_that_leaves_a_finding_out_says_so(nan_file):
    code, out, _ = run(nan_file, "--fail-on", "inf")
    summary = out.splitlines()[-1]
    assert code == 0 and out.startswith("found: ")
    assert summary.endswith("-> no --fail-on class (+Inf, -Inf) found, NaN found but not in "
                            "--fail-on: clean (exit 0)"), summary
    code, out, _ = run(nan_file)   # a finding that fails: the verdict alone
    assert code == 1 and out.splitlines()[-1].endswith("-> found (exit 1)")


def test_empty_fail_on_is_a_usage_error(nan_file):
    for spec in ("", ",", " , "):
        code, out, err = run(nan_file, "--fail-on", spec)
        assert code == 4 and out == "" and "--fail-on" in err and "accepted" in err


def test_max_locations_zero_leaves_no_dangling_at(nan_file):
    code, out, _ = run(nan_file, "--max-locations", "0", "--no-stats")
    found = out.splitlines()[0]
    assert code == 1 and found == f"found: {nan_file}: w: F32[3]: nan=2 posinf=0 neginf=0 of 3"
    code, out, _ = run(nan_file, "--max-locations", "1", "--no-stats")
    assert out.splitlines()[0].endswith("of 3: at [1] nan, ... 1 more")
