"""The reader registry is the one list of formats read: every reader module is in it once, and
detection, the directory walk, the CLI help, the problem messages and the docs' table are made
from it (README.md and docs/scan.md must equal the generator's output)."""

import ast
import io
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fpclass.cli import main
from fpclass.scan.detect import identify
from fpclass.scan.readers import registry, registry_table
from fpclass.scan.paths import expand

ROOT = Path(__file__).resolve().parents[1]
READERS_DIR = ROOT / "src" / "fpclass" / "scan" / "readers"


@pytest.mark.parametrize("document", registry_table.DOCUMENTS)
def test_the_docs_table_is_the_registrys(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    assert text.count(registry_table.BEGIN) == text.count(registry_table.END) == 1
    assert registry_table.with_table(text) == text, \
        f"{document}: run python -m fpclass.scan.readers.registry_table --write"
    for reader in registry.READERS:
        assert f"| {reader.format} | `{reader.kind}` |" in text


def _defines_plan(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == "plan" for n in tree.body)


def _imported_plans(path: Path) -> set:
    """Modules of readers/ whose `plan` the module at `path` imports (a part of its reader)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1
            and n.module and any(a.name == "plan" for a in n.names)}


def test_every_reader_module_is_registered_once():
    kinds = [r.kind for r in registry.READERS]
    assert len(kinds) == len(set(kinds)) == len(registry.KINDS)
    plans = [r.load() for r in registry.READERS]
    assert len(set(plans)) == len(plans), "a plan function registered twice"
    assert all(p.__name__.startswith("plan") for p in plans)
    registered = {p.__module__.rpartition(".")[2] for p in plans}
    parts = {m for name in registered for m in _imported_plans(READERS_DIR / f"{name}.py")}
    readers = {p.stem for p in READERS_DIR.glob("*.py") if _defines_plan(p)}
    assert readers - registered - parts == set(), "reader modules missing from the registry"
    claimed = [e for r in registry.READERS for e in r.extensions]
    assert len(claimed) == len(set(claimed)), "an extension routed to two readers"


def test_extras_are_pyproject_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert {r.extra for r in registry.READERS if r.extra} <= set(extras)


@pytest.mark.parametrize("reader", [r for r in registry.READERS if r.magic],
                         ids=lambda r: r.kind)
def test_detection_uses_the_registrys_magic(tmp_path, reader):
    for i, magic in enumerate(reader.magic):
        path = tmp_path / f"file{i}.unknown"   # no name any reader claims
        path.write_bytes(magic + bytes(64))
        assert identify(str(path)).kind == reader.kind


@pytest.mark.parametrize("reader", [r for r in registry.READERS if r.extensions],
                         ids=lambda r: r.kind)
def test_detection_uses_the_registrys_extensions(tmp_path, reader):
    for ext in reader.extensions:
        path = tmp_path / f"damaged{ext}"   # binary, of no kind by content
        path.write_bytes(b"\x00\x01\x02\x03" * 64)
        assert identify(str(path)).kind == reader.kind


def test_the_walk_reads_a_directory_with_a_registered_marker_as_one_store(tmp_path):
    for reader in registry.READERS:
        for marker in reader.markers:
            store = tmp_path / f"store{marker}"
            store.mkdir()
            (store / marker).write_text("{}")
            (store / "sub").mkdir()
            assert expand([store]).found == [(str(store), reader.kind)]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_help_docstring_and_problem_messages_list_every_format(tmp_path):
    out = io.StringIO()
    assert main(["scan", "--help"], stdout=out, stderr=io.StringIO()) == 0
    import fpclass.scan
    notes = tmp_path / "notes.txt"
    notes.write_text("not a tensor file\n")
    (_, reason), = expand([notes]).problems
    assert "accepted" in reason
    for text in (out.getvalue(), fpclass.scan.__doc__, reason):
        for reader in registry.READERS:
            assert reader.format in _words(text)
            assert all(ext in _words(text) for ext in reader.extensions)


def test_importing_the_scan_imports_no_reader():
    code = ("import sys, fpclass.scan\n"
            "print(sorted(m for m in sys.modules if m.startswith('fpclass.scan.readers.')))\n"
            "print([m for m in ('h5py', 'zarr', 'astropy', 'scipy', 'onnx', 'torch') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)
    assert out.returncode == 0, out.stderr
    modules, heavy = out.stdout.splitlines()
    assert modules == repr(["fpclass.scan.readers.contract", "fpclass.scan.readers.registry"])
    assert heavy == "[]"


def test_a_readers_options_reach_only_it():
    seen = []

    def fake(path, **options):
        seen.append(options)
        return []
    gguf, torch = (registry.BY_KIND[k]._replace(load=lambda: fake) for k in ("gguf", "pytorch"))
    assert gguf.plan("x.gguf", allow_globals=("a.B",)) == [] and seen == [{}]
    assert torch.plan("x.pt", allow_globals=("a.B",)) == []
    assert seen[-1] == {"allow_globals": ("a.B",)}


def _scan_imports() -> dict:
    """fpclass.scan's import graph as static tools see it (test_layering's reading of the import
    statements, function-level ones included)."""
    from test_layering import imports, sources
    return {name: {m for _, m, _ in imports(name, path) if m.startswith("fpclass.scan")}
            for name, path in sources("fpclass.scan")}


def test_static_tools_see_every_reader_and_no_cycle():
    graph = _scan_imports()
    prefix = "fpclass.scan.readers."
    registered = {r.load().__module__ for r in registry.READERS}
    assert registered <= graph[prefix + "registry"]
    done = set()

    def visit(node, path):
        assert node not in path, "import cycle: " + " -> ".join(path[path.index(node):] + [node])
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, path + [node])
        done.add(node)
    for node in sorted(graph):
        visit(node, [])


def test_detections_kind_names_are_registered_kinds():
    from fpclass.scan import detect
    names = ("SAFETENSORS", "SAFETENSORS_INDEX", "NPY", "NPZ", "ONNX", "GGUF", "PYTORCH", "HDF5",
             "KERAS", "NETCDF3", "ZARR", "FITS", "MATLAB", "IDL", "COMPRESSED")
    assert {getattr(detect, n) for n in names} == set(registry.KINDS) == set(detect.KINDS)
