"""The command line's contract with scripts and readers: usage errors exit 4 (2 stays
"inconclusive"), `warmup --help` lists only what warmup uses, the help, README and docs/scan.md
tell what is read as the reader registry says, and every missing-extra hint has one wording."""

import ast
import io
import json
import os
import re

import pytest

from fpclass import _optional
from fpclass.cli import main
from fpclass.scan import ExitCode
from fpclass.scan import detect
from fpclass.scan.readers.registry import READERS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("argv", [
    ("scan",), ("scan", "x", "--bogus"), ("scan", "x", "--threads", "two"),
    ("scan", "x", "--color", "sometimes"), ("scan", "x", "--fail-on", "nope"),
    ("scan", "x", "--fail-on", ""), ("scan", "x", "--threads", "0"), ("frobnicate",), (),
    ("scan", "-"), ("warmup", "--output", "x.json"), ("--output", "x.json", "warmup"),
    ("--color", "never", "warmup")])
def test_usage_errors_exit_4(argv):
    code, out, err = run(*argv)
    assert code == ExitCode.USAGE == 4 and out == "" and err, (code, out, err)


def test_exit_codes_are_documented_everywhere():
    scan_help = " ".join(run("scan", "--help")[1].split())
    assert "2 inconclusive" in scan_help and "4 usage error" in scan_help
    docs = read("docs", "scan.md")
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \| {code.name} \|", docs, re.M), code
    readme = " ".join(read("README.md").split())
    assert "· 4 usage error" in readme and "a named path that does not exist" in readme


def test_warmup_help_lists_only_its_options():
    code, out, _ = run("warmup", "--help")
    options = set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", out.split("options:", 1)[1]))
    assert code == 0 and options == {"-h", "--help", "-q", "--quiet", "--traceback", "--workers"}, options


def normalized(text: str) -> str:
    return " ".join(text.split())


def test_scan_help_names_every_format_and_name_read():
    help_text = normalized(run("scan", "--help")[1])
    for r in READERS:
        assert r.format in help_text, r.format
        for name in r.extensions + r.known_names + tuple(f"*{d}/" for d in r.directories):
            assert name in help_text, name


def scan_section() -> str:
    readme = read("README.md")
    start = readme.index("## Scan checkpoints and array files")
    return readme[start:readme.index("\n## ", start + 1)]


def test_readme_scan_section_does_not_call_a_read_format_unread():
    """Whatever the README's scan section lists as not read names no format a reader reads (the
    first word of each reader's format: PyTorch, HDF5, NetCDF, FITS, zarr, ...)."""
    from fpclass.scan.readers.registry_table import markdown
    section = scan_section()
    assert markdown() in section   # the table of formats read, made from the registry
    words = {r.format.split()[0].rstrip(",") for r in READERS} - {"any"}
    lists = re.findall(r"(?:does not read|cannot read|not read)\s*\(([^()]*)", normalized(section))
    assert lists, "the scan section says what is not read"
    for listed in lists:
        named = {w for w in words if re.search(rf"\b{re.escape(w)}\b", listed)}
        assert not named, (named, listed)


def documented_names(docs: str, marker: str) -> set:
    return set(re.search(rf"<!-- {marker} -->`([^`]*)`<!-- end -->", docs).group(1).split())


def test_docs_lists_of_names_not_read_follow_the_registry():
    """docs/scan.md's names never read and names read only by content are exactly what detection
    and the registry make of the names detection knows as tensor formats."""
    taken = {n.lower() for r in READERS for n in r.extensions + r.directories}
    by_content = {n.lower() for r in READERS for n in r.known_names}
    claimed = set(detect.CLAIMS_BY_EXTENSION)
    docs = read("docs", "scan.md")
    assert documented_names(docs, "names not read") == claimed - taken - by_content
    assert documented_names(docs, "names read by content") == (claimed & by_content) - taken


def hint_strings():
    """(file, line, text) of every string literal in src/ that gives install advice."""
    for folder, _, files in os.walk(os.path.join(ROOT, "src", "fpclass")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
                          and n.body and isinstance(n.body[0], ast.Expr)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        id(node) not in docstrings and re.search(r"pip install|fpclass\[|install \w",
                                                                  node.value):
                    yield os.path.relpath(path, ROOT), node.lineno, node.value


def test_install_advice_is_written_only_by_install_hint():
    # registry_table names each reader's extra in the format table's column: a name, no advice
    outside = [h for h in hint_strings()
               if not h[0].endswith(("_optional.py", "registry_table.py"))]
    assert outside == [], outside


def test_every_missing_extra_message_uses_install_hint(tmp_path, monkeypatch):
    from test_extras import hide
    from fpclass.scan import scan
    for reader in READERS:
        if reader.extra:
            assert reader.extra in _optional.install_hint(reader.extra)
    (tmp_path / "a.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(2048))
    hide(monkeypatch, "h5py")
    [problem] = scan([tmp_path / "a.h5"]).problems
    assert problem.reason.endswith(_optional.install_hint("hdf5")), problem.reason


class Dist:
    def __init__(self, text):
        self.text = text

    def read_text(self, name):
        return self.text if name == "direct_url.json" else None


@pytest.fixture
def installed(monkeypatch):
    import importlib.metadata

    def install(info):
        monkeypatch.setattr(importlib.metadata, "distribution",
                            lambda name: Dist(None if info is None else json.dumps(info)))
        _optional._installed_from.cache_clear()
    yield install
    _optional._installed_from.cache_clear()


def test_install_hint_names_the_clone_or_wheel_fpclass_came_from(installed, tmp_path):
    installed({"url": tmp_path.as_uri(), "dir_info": {"editable": True}})
    assert _optional.install_hint("hdf5") == (
        f"install the extra fpclass[hdf5]: pip install -e '{tmp_path}[hdf5]' (the clone fpclass "
        "was installed from)")
    wheel = tmp_path / "fpclass-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    installed({"url": wheel.as_uri(), "archive_info": {}})
    assert _optional.install_hint("zarr") == (
        f"install the extra fpclass[zarr]: pip install '{wheel}[zarr]' (the wheel fpclass was "
        "installed from)")
    for info in (None, {"url": (tmp_path / "gone").as_uri(), "dir_info": {}},
                 {"url": "https://example.org/fpclass.whl", "archive_info": {}}):
        installed(info)
        hint = _optional.install_hint("fits")
        assert "pip install -e '.[fits]' in a clone of fpclass" in hint and \
            "not on PyPI" in hint and "WHEEL[fits]" in hint, hint


def test_messages_quoting_the_c_library_start_lower_case(tmp_path):
    """strerror's "No such file or directory" was the one capitalised message among lower-case
    ones (a missing path already said "no such file or directory")."""
    code, out, err = run("scan", tmp_path, "--output", tmp_path / "nodir" / "r.json")
    assert code == 4 and err.endswith("cannot write: no such file or directory\n"), err
    from fpclass._oserrors import describe
    assert describe(PermissionError(13, "Permission denied")) == "permission denied"
    assert describe(OSError(5, "I/O error")) == "I/O error"   # an acronym keeps its case
    assert describe(OSError("custom")) == "custom"
