"""Jupyter's view of results: ScanReport._repr_html_ and ClassCounts._repr_html_, read back with
the standard library's HTML parser and compared with the objects; names from files are escaped."""

from html.parser import HTMLParser

import numpy as np

import fpclass
from fpclass.results import Problem, ScanReport, TensorResult
from fpclass.results import notebook


class Tables(HTMLParser):
    """Every table's rows as lists of cell texts, by the table's class; every tag seen."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict = {}
        self.tags: list = []
        self.text: list = []
        self._table = self._row = self._cell = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("class"), [])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr":
            self._table.append(self._row)

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def test_class_counts_html_holds_its_fields():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1.0, -2.0], np.float64)
    counts = fpclass.class_counts(x)
    page = Tables(counts._repr_html_())
    rows = page.tables["fpclass-class-counts"]
    assert {name: int(n) for name, n in rows} == counts._asdict()
    assert f"{counts.total} values" in "".join(page.text)


HOSTILE = "<script>alert('x')</script>&amp;"


def _report():
    tensors = [
        TensorResult(file=f"dir/{HOSTILE}.safetensors", name=HOSTILE, dtype="float32",
                     shape=(2, 3), status="checked", nan=1, posinf=2, values_checked=6),
        TensorResult(file="a.npy", name="ok", dtype="float32", shape=(4,), status="checked",
                     values_checked=4),
        TensorResult(file="b.pt", name="w", dtype="bfloat16", shape=(), status="unchecked",
                     reason=f"cannot read <{HOSTILE}>"),
    ]
    return ScanReport(tensors=tensors, problems=[Problem(HOSTILE, "truncated <b>")],
                      files=[("a.npy", "npy")], skipped=[Problem("README.md", "not a tensor file")],
                      seconds=0.5)


def test_scan_report_html_matches_the_report():
    report = _report()
    html = report._repr_html_()
    page = Tables(html)
    # names from files are text, never markup
    assert "script" not in page.tags and "b" not in page.tags[page.tags.index("table"):]
    assert HOSTILE not in html
    summary = {k: v for k, v in page.tables["fpclass-summary"][1:]}
    assert summary == {k: "" if v is None else str(v) for k, v in report.summary().items()}
    head, *rows = page.tables["fpclass-tensors"]
    assert head == ["file", "name", "dtype", "shape", "status", "nan", "posinf", "neginf",
                    "missing", "reason"]
    shown = [dict(zip(head, row)) for row in rows]
    assert [(r["name"], r["nan"], r["posinf"], r["status"], r["reason"]) for r in shown] == [
        (t.name, str(t.nan), str(t.posinf), t.status, t.reason)
        for t in report.tensors if t.nonfinite or t.status == "unchecked"]
    assert page.tables["fpclass-problems"][1:] == [[p.path, p.reason] for p in report.problems]
    assert page.tables["fpclass-skipped"][1:] == [[p.path, p.reason] for p in report.skipped]
    assert f"fpclass: {report.status}" in "".join(page.text)
    assert f"exit code {int(report.exit_code)}" in "".join(page.text)


def test_long_lists_are_cut_and_counted():
    many = [TensorResult(file="f", name=str(i), dtype="float32", shape=(1,), status="checked",
                         nan=1, values_checked=1) for i in range(notebook.MAX_ROWS + 7)]
    page = Tables(ScanReport(tensors=many)._repr_html_())
    assert len(page.tables["fpclass-tensors"]) == notebook.MAX_ROWS + 1
    assert "7 more tensors not shown" in "".join(page.text)


def test_a_real_check_renders():
    report = fpclass.check({"w": np.array([1.0, np.nan], np.float32)})
    page = Tables(report._repr_html_())
    assert [row[1] for row in page.tables["fpclass-tensors"][1:]] == ["w"]
