"""The public API is typed: `mypy --strict` passes on a typed client of it (tests/typing/client.py)
and on the declared types (the .pyi files of the modules built at import, counts, the notebook
view), `reveal_type` shows real types, not Any, and the client run as a script returns what
was revealed. The declarations are compared with the run-time signatures they describe.

mypy keeps its cache in pytest's cache directory: the first run reads numpy's stubs (about 10-35 s
on a loaded 2-core machine), later runs take 1-3 s."""

import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fpclass
from fpclass import catalogue

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CLIENT = ROOT / "tests" / "typing" / "client.py"
#: Checked strictly besides the client: the declarations themselves.
DECLARED = ["src/fpclass/facade.pyi", "src/fpclass/dask/__init__.pyi", "src/fpclass/twin.pyi",
            "src/fpclass/counts.py",
            "src/fpclass/results/notebook.py"]

#: What each reveal_type in the client must show (a regex matched against mypy's note).
REVEALED = {
    "mask": r"numpy\.ndarray\[.*numpy\.dtype\[numpy\.bool\[bool\]\]\]",
    "flag": r"numpy\.bool\[bool\]",
    "count": r"int",
    "per_row": r"numpy\.ndarray\[.*signedinteger\[.*_64Bit\]\]\] \| int",
    "counts": r"tuple\[(int, ){8}int, fallback=fpclass\.counts\.ClassCounts\]",
    "counts.posinf": r"int",
    "first": r"tuple\[int, \.\.\.\] \| None",
    "where": r"numpy\.ndarray\[.*signedinteger\[.*_64Bit\]\]\]",
    "fpclass.isnan(1.5)": r"numpy\.bool\[bool\]",
    "fpclass.isnan(LikeATensor())": r"client\.LikeATensor",
    "fpclass.count_nan(LikeATensor())": r"Any",
    "fpclass.dask.count_nan":
        r"def \(x: Any, axis: Any =, keepdims: bool =, \*, dtype: Any =, split_every: int \| None =\) "
        r"-> Any",
    "twin.count_nan(x)": r"int",
    "twin.class_counts(x)": r"tuple\[int, .*fallback=fpclass\.counts\.ClassCounts\]",
    "report": r"fpclass\.results\.report\.ScanReport",
    "report.exit_code": r"fpclass\.results\.exitcodes\.ExitCode",
    "fpclass.scan.scan":
        r"def \(paths: str \| os\.PathLike\[str\] \| .*\) -> fpclass\.results\.report\.ScanReport",
    "fpclass.torch.watch": r"def \(model: Any, \*, backward: bool =, .*\) -> "
                           r"fpclass\.torch\.(watching\.)?watch",
}


@pytest.fixture(scope="module")
def mypy_output(request, tmp_path_factory):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install '.[test]')")
    cache = getattr(request.config, "cache", None)   # None under -p no:cacheprovider
    folder = cache.mkdir("mypy") if cache is not None else tmp_path_factory.mktemp("mypy")
    env = {**os.environ, "MYPYPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                          "--cache-dir", str(folder), "--no-color-output", "--hide-error-context",
                          str(CLIENT), *DECLARED], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    return out


def test_mypy_strict_passes_on_the_client_and_the_declarations(mypy_output):
    errors = [line for line in mypy_output.stdout.splitlines() if ": error:" in line]
    assert mypy_output.returncode == 0 and not errors, mypy_output.stdout + mypy_output.stderr


def _reveals(stdout: str) -> dict:
    """{expression in the client: revealed type}."""
    lines = CLIENT.read_text().splitlines()
    found = {}
    for line in stdout.splitlines():
        m = re.match(r".*client\.py:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            source = lines[int(m.group(1)) - 1]
            found[re.search(r"reveal_type\((.*)\)\s*$", source).group(1)] = m.group(2)
    return found


def test_reveal_type_shows_real_types(mypy_output):
    found = _reveals(mypy_output.stdout)
    for expression, pattern in REVEALED.items():
        assert expression in found, f"no reveal_type({expression}) in {sorted(found)}"
        assert re.fullmatch(pattern, found[expression]), f"{expression}: {found[expression]}"
    # out= gives back the type of the array it was given
    assert found["written"] == found["twin.isnan(x, out)"] == found["out"]


def test_the_client_returns_what_was_revealed():
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run([sys.executable, str(CLIENT)], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def _declared(path: Path) -> dict:
    """{function name: [(parameter, kind, default source)] of its first declaration} from a .pyi."""
    tree = ast.parse(path.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in out:
            a = node.args
            positional = a.posonlyargs + a.args
            defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
            params = [(p.arg, "positional", d and ast.unparse(d))
                      for p, d in zip(positional, defaults)]
            params += [(p.arg, "keyword", d and ast.unparse(d))
                       for p, d in zip(a.kwonlyargs, a.kw_defaults)]
            out[node.name] = params
    return out


def _runtime(function) -> list:
    kinds = {inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
             inspect.Parameter.KEYWORD_ONLY: "keyword"}
    return [(p.name, kinds.get(p.kind, str(p.kind)),
             None if p.default is inspect.Parameter.empty else repr(p.default))
            for p in inspect.signature(function).parameters.values()]


def _names(path: Path) -> list:
    tree = ast.parse(path.read_text())
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "__all__")


def test_the_facade_declarations_match_the_functions():
    stub = SRC / "fpclass" / "facade.pyi"
    assert _names(stub) == fpclass.facade.__all__
    declared = _declared(stub)
    for name in catalogue.KIND:
        assert declared[name] == _runtime(getattr(fpclass, name)), name


def test_the_dask_declarations_match_the_entry_points():
    import fpclass.dask
    stub = SRC / "fpclass" / "dask" / "__init__.pyi"
    assert _names(stub) == fpclass.dask.__all__
    declared = _declared(stub)
    for name in catalogue.KIND:
        assert declared[name] == _runtime(getattr(fpclass.dask, name)), name


def test_the_twin_declarations_match_the_twin():
    from fpclass import twin
    stub = SRC / "fpclass" / "twin.pyi"
    assert _names(stub) == twin.__all__
    declared = _declared(stub)
    for name in [*catalogue.KIND, "values"]:
        assert declared[name] == _runtime(getattr(twin, name)), name
