"""`fpclass scan --html`: the page rendered by a real browser (headless Chromium, from the
distribution's packages; .ci/run installs it where missing). The test reads the DOM the page's own
script built: each map's cells against numpy's isnan / isposinf / isneginf binned the same way,
the table's rows, and their order after the page sorts by a column (the `#sort=` address clicks
the column's header)."""

import html.parser
import os
import shutil
import subprocess

import numpy as np
import pytest

from density_truth import plant, truth
from fpclass.cli import main
from fpclass.results.html import render
from fpclass.scan import scan

CLASSES = ("nan", "posinf", "neginf", "missing")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium to render the HTML report (Debian: apt-get install chromium; "
                ".ci/run installs it)")


def dump_dom(page, fragment, tmp_path) -> str:
    """The DOM of `page` once its scripts ran, as Chromium serializes it."""
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    out = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
         "--dump-dom", page.as_uri() + fragment],
        capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


class DOM(html.parser.HTMLParser):
    """The parts of the rendered page the tests read: maps (figure -> cells), table rows in
    order, and a few attributes."""

    def __init__(self, text):
        super().__init__()
        self.maps, self.rows, self.attrs_of = {}, [], {}
        self._figure = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.attrs_of[a["id"]] = a
        if tag == "body":
            self.attrs_of["body"] = a
        if tag == "figure" and "map" in a.get("class", ""):
            self._figure = (a["data-file"], a["data-name"])
            self.maps[self._figure] = {"attrs": a, "cells": []}
        elif tag == "rect" and self._figure is not None and "data-r" in a:
            self.maps[self._figure]["cells"].append(
                (int(a["data-r"]), int(a["data-c"]), *(int(a[f"data-{c}"]) for c in CLASSES)))
        elif tag == "tr" and "data-index" in a:
            self.rows.append((a["data-file"], a["data-name"]))

    def handle_endtag(self, tag):
        if tag == "figure":
            self._figure = None

    def counts(self, key) -> dict:
        m = self.maps[key]
        shape = (int(m["attrs"]["data-bin-rows"]), int(m["attrs"]["data-bin-columns"]))
        out = {c: np.zeros(shape, np.int64) for c in CLASSES}
        for r, c, *k in m["cells"]:
            for cls, n in zip(CLASSES, k):
                out[cls][r, c] = n
        return out


@pytest.fixture
def tensors(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    arrays = {"wide.npy": plant((300, 517)), "cube.npy": plant((4, 50, 70), seed=1),
              "row.npy": plant((900,), seed=2, rate=0.05), "few.npy": np.ones((8, 8), np.float32),
              "clean.npy": np.zeros((3, 3), np.float32)}
    arrays["few.npy"][2, 5] = np.nan
    for name, a in arrays.items():
        np.save(data / name, a)
    return data, arrays


def test_the_browser_draws_the_maps_the_numpy_truth_gives(tensors, tmp_path):
    data, arrays = tensors
    page = tmp_path / "report.html"
    out, err = open(tmp_path / "out", "w"), open(tmp_path / "err", "w")
    with out, err:
        code = main(["scan", str(data), "--html", str(page)], stdout=out, stderr=err)
    assert code == 1
    dom = DOM(dump_dom(page, "", tmp_path))
    assert dom.attrs_of["body"].get("data-ready") == "1"  # the script ran to its end
    assert dom.attrs_of["status"] is not None
    by_file = {os.path.basename(f): (f, n) for f, n in dom.rows}
    assert set(by_file) == set(arrays)
    mapped = {os.path.basename(f) for f, _ in dom.maps}
    assert mapped == {n for n, a in arrays.items() if not np.isfinite(a).all()}
    for name in mapped:
        got = dom.counts(by_file[name])
        expected = truth(arrays[name])
        for cls in CLASSES:
            np.testing.assert_array_equal(got[cls], expected[cls], err_msg=f"{name} {cls}")
    assert dom.counts(by_file["wide.npy"])["nan"].shape == (128, 128)


@pytest.mark.parametrize("fragment, key, descending", [
    ("#sort=nan:desc", "nan", True), ("#sort=name", "file", False),
    ("#sort=posinf", "posinf", False)])
def test_sorting_by_a_column(tensors, tmp_path, fragment, key, descending):
    data, arrays = tensors
    report = scan(data, maps=True)
    page = tmp_path / "report.html"
    report.write_html(page)
    dom = DOM(dump_dom(page, fragment, tmp_path))
    listed = [(t.file, t.name) for t in report.tensors]
    assert sorted(dom.rows) == sorted(listed)
    value = {(t.file, t.name): (t.file if key == "file" else getattr(t, key))
             for t in report.tensors}
    if key == "file":  # the name column: every .npy tensor is named "", ties keep the listing
        expected = listed
    else:
        order = sorted(range(len(listed)), key=lambda i: value[listed[i]], reverse=descending)
        # Python's reverse keeps ties in their listed order, as the page does
        expected = [listed[i] for i in order]
    assert dom.rows == expected
    sorted_as = dom.attrs_of["tensors"].get("data-sorted")
    assert sorted_as == fragment.removeprefix("#sort=").split(":")[0] + (
        ":desc" if descending else ":asc")


def test_the_page_needs_no_network_and_escapes_names(tmp_path):
    a = np.full((2, 2), np.nan, np.float32)
    np.savez(tmp_path / "x.npz", **{"</script><b>": a})
    text = render(scan(tmp_path, maps=True))
    assert "</script><b>" not in text
    fetched = text.replace('"http://www.w3.org/2000/svg"', "")  # a name, never fetched
    for fetch in ("http://", "https://", "src=", "@import", "url("):
        assert fetch not in fetched, fetch
    page = tmp_path / "r.html"
    page.write_text(text, encoding="utf-8")
    dom = DOM(dump_dom(page, "", tmp_path))
    assert [n for _, n in dom.rows] == ["</script><b>"]
    (key,) = dom.maps
    np.testing.assert_array_equal(dom.counts(key)["nan"], truth(a)["nan"])


def test_statistics_columns_appear_when_the_results_carry_them(tmp_path):
    # per-tensor statistics come from another part of the scan; any result that carries them
    # (a `stats` dict, an `out_of_range` count) gets the columns
    from fpclass.results.report import TensorResult

    class WithStats(TensorResult):
        pass

    np.save(tmp_path / "a.npy", np.array([[1.0, -3.0], [0.0, np.inf]], np.float32))
    report = scan(tmp_path, maps=True)
    (t,) = report.tensors
    rich = WithStats(*(getattr(t, f) for f in TensorResult.__dataclass_fields__))
    object.__setattr__(rich, "stats", {"zero": 1, "subnormal": 0, "normal": 2, "min": -3.0,
                                       "max": 1.0, "absmax": 3.0})
    object.__setattr__(rich, "out_of_range", 4)
    report.tensors[:] = [rich]
    page = tmp_path / "r.html"
    report.write_html(page)
    text = dump_dom(page, "#sort=absmax:desc", tmp_path)
    cells = {}

    class Cells(html.parser.HTMLParser):
        key = None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            self.key = a.get("data-key") if tag == "td" else None

        def handle_data(self, data):
            if self.key:
                cells[self.key] = data

    Cells().feed(text)
    assert (cells["zero"], cells["normal"], cells["min"], cells["absmax"],
            cells["out_of_range"]) == ("1", "2", "-3", "3", "4")
    assert DOM(text).attrs_of["tensors"]["data-sorted"] == "absmax:desc"
    # without them (--no-stats), no such columns; the scan's own statistics fill them
    plain = scan(tmp_path, maps=True, stats=False)
    assert "absmax" not in render(plain)
    assert "absmax" in render(scan(tmp_path, maps=True))


def test_an_unwritable_html_path_fails_before_the_scan(tmp_path):
    import io
    np.save(tmp_path / "a.npy", np.zeros(3, np.float32))
    err = io.StringIO()
    code = main(["scan", str(tmp_path), "--html", str(tmp_path / "no" / "such" / "r.html")],
                stdout=io.StringIO(), stderr=err)
    assert code == 4 and "--html" in err.getvalue() and "cannot write" in err.getvalue()


def test_a_page_draws_at_most_max_maps_and_says_how_many_it_left_out(tmp_path, monkeypatch):
    from fpclass.results import html as page
    monkeypatch.setattr(page, "MAX_MAPS", 2)
    np.savez(tmp_path / "x.npz", **{f"t{k}": np.full((2, 3), np.nan, np.float32)
                                   for k in range(5)})
    data = page.page_data(scan(tmp_path, maps=True))
    assert sum("map" in t for t in data["tensors"]) == 2 and data["maps_left_out"] == 3
    assert "3 more tensors" in data["maps_note"]
    assert "No maps were gathered" in page.page_data(scan(tmp_path))["maps_note"]
