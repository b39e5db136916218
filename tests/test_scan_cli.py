"""The `fpclass scan` command line: exit codes, plain / rich / JSON output (validated against the
schema documented in docs/scan.md), the shipped examples, and `python -m fpclass`."""

import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from fpclass.cli import main
from fpclass.scan import ExitCode
from test_scan_support import safetensors_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def run(*argv, stdout=None):
    out, err = stdout or io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path):
    def st(name, a):
        (tmp_path / name).write_bytes(safetensors_bytes({"w": ("F32", a, a.shape)}))
        return tmp_path / name
    clean = st("clean.safetensors", np.ones(3, np.float32))
    bad = st("bad.safetensors", np.array([1, np.nan, -np.inf, np.nan], np.float32))
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x05\0\0\0\0\0\0\0{")
    return clean, bad, broken


def test_exit_codes(files):
    clean, bad, broken = files
    assert run(clean)[0] == ExitCode.CLEAN == 0
    assert run(bad)[0] == ExitCode.FOUND == 1
    assert run(broken)[0] == ExitCode.INCONCLUSIVE == 2
    assert run(clean, broken)[0] == ExitCode.INCONCLUSIVE   # clean but incomplete is never 0
    assert run(bad, broken)[0] == ExitCode.FOUND            # mixed: the finding wins
    assert run(bad, "--fail-on", "posinf")[0] == ExitCode.CLEAN
    assert run(bad, "--fail-on=-inf")[0] == ExitCode.FOUND
    assert ExitCode.INTERRUPTED == 130


def test_plain_output(files):
    _, bad, broken = files
    code, out, err = run(bad, broken, "--max-locations", "2")
    lines = out.splitlines()
    # absmax: of the finite values (1.0), from the statistics the scan gathers by default
    assert lines[0] == (f"found: {bad}: w: F32[4]: nan=2 posinf=0 neginf=1 of 4, absmax=1: "
                        "at [1] nan, [2] neginf, ... 1 more")
    _, out, _ = run(bad, "--no-stats")
    assert out.splitlines()[0] == (f"found: {bad}: w: F32[4]: nan=2 posinf=0 neginf=1 of 4: "
                                   "at [1] nan, [2] neginf, [3] nan")
    assert lines[1].startswith(f"problem: {broken}: ")
    assert lines[-1].startswith("summary: 1 file, 1 tensor (1 checked")
    assert lines[-1].endswith("-> found (exit 1)")
    assert err == ""
    code, out, _ = run(bad, "--quiet")
    assert not any(line.startswith("summary") for line in out.splitlines())


def test_rich_table_on_a_terminal(files):
    _, bad, _ = files
    code, out, _ = run(bad, stdout=Terminal())
    assert code == 1 and "┃" in out and "F32" in out and "summary:" in out


def test_bad_arguments(files):
    clean, _, _ = files
    code, out, err = run(clean, "--fail-on", "nope")
    assert code == ExitCode.USAGE == 4 and "accepted" in err and err.count("\n") == 1
    code, _, err = run(clean, "--threads", "0")
    assert code == 4 and "--threads" in err
    assert main(["scan"], stdout=io.StringIO(), stderr=io.StringIO()) == 4
    out = io.StringIO()
    assert main(["scan", "--help"], stdout=out, stderr=io.StringIO()) == 0
    assert "--fail-on" in out.getvalue()


def test_internal_error_is_one_line_unless_traceback(files, monkeypatch):
    clean, _, _ = files
    from fpclass.scan import engine

    def boom(*a, **k):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(engine, "plan", boom)
    code, out, err = run(clean)
    assert code == 2 and err.count("\n") == 1 and "kaboom" in err
    with pytest.raises(RuntimeError):
        run(clean, "--traceback")


def check_schema(doc):
    """The JSON document against docs/scan.md, field by field."""
    def expect(obj, spec, where):
        assert isinstance(obj, dict), where
        assert set(obj) == set(spec), (where, set(obj) ^ set(spec))
        for key, kind in spec.items():
            value = obj[key]
            if isinstance(kind, tuple):
                assert isinstance(value, kind), (where, key, value)
            else:
                assert kind(value), (where, key, value)

    nat = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    expect(doc, {"schema": lambda v: v == "fpclass.scan/3", "fpclass_version": (str,),
                 "status": lambda v: v in ("clean", "found", "inconclusive", "interrupted"),
                 "exit_code": lambda v: v in (0, 1, 2, 130), "interrupted": (bool,),
                 "fail_on": lambda v: set(v) <= {"nan", "posinf", "neginf", "missing",
                                                 "out_of_range"} or all(map(_gate_text, v)),
                 "summary": (dict,), "files": (list,), "tensors": (list,), "problems": (list,),
                 "skipped": (list,), "gate_findings": (list,)},
           "document")
    counts = ("files", "tensors", "checked", "not_applicable", "unchecked", "problems", "skipped",
              "tensors_with_findings", "nan", "posinf", "neginf", "missing", "out_of_range",
              "gate_findings", "bytes_checked")
    expect(doc["summary"], {**{k: nat for k in counts}, "seconds": lambda v: v >= 0,
                            "bytes_per_second": lambda v: v is None or v >= 0}, "summary")
    for f in doc["files"]:
        expect(f, {"path": (str,), "format": lambda v: v in (
            "safetensors", "safetensors-index", "npy", "npz", "onnx", "gguf", "pytorch",
            "pytorch-legacy", "hdf5", "keras", "netcdf3", "zarr", "fits")}, "file")
    for p in doc["problems"] + doc["skipped"]:
        expect(p, {"path": (str,), "reason": lambda v: isinstance(v, str) and "\n" not in v}, "problem")
    for t in doc["tensors"]:
        expect(t, {"file": (str,), "name": (str,), "dtype": (str,),
                   "shape": lambda v: isinstance(v, list) and all(map(nat, v)), "elements": nat,
                   "status": lambda v: v in ("checked", "not_applicable", "unchecked"),
                   "nan": nat, "posinf": nat, "neginf": nat, "missing": nat, "out_of_range": nat,
                   "stats": lambda v: v is None or _stats_ok(v), "actual_range": _range_ok,
                   "locations": (list,), "values_checked": nat, "bytes_checked": nat,
                   "reason": lambda v: v is None or (isinstance(v, str) and "\n" not in v)}, "tensor")
        assert (t["reason"] is None) == (t["status"] == "checked")
        for loc in t["locations"]:
            spec = {"index": lambda v: isinstance(v, list) and all(map(nat, v)),
                    "class": lambda v: v in ("nan", "posinf", "neginf", "missing", "out_of_range")}
            expect(loc, {**spec, "field": (str,)} if "field" in loc else spec, "location")
            assert len(loc["index"]) in (len(t["shape"]), len(t["shape"]) + 1)  # +1: complex part
    s = doc["summary"]
    assert s["tensors"] == len(doc["tensors"]) and s["problems"] == len(doc["problems"])
    assert s["skipped"] == len(doc["skipped"])
    assert s["nan"] == sum(t["nan"] for t in doc["tensors"])
    assert s["gate_findings"] == len(doc["gate_findings"])
    for g in doc["gate_findings"]:
        expect(g, {"file": (str,), "name": (str,), "gate": _gate_text, "value": (int, float)},
               "gate finding")


def _gate_text(v) -> bool:
    return v in ("all-zero", "subnormal") or (isinstance(v, str) and v.startswith("absmax>"))


def _stats_ok(v) -> bool:
    """A tensor's `stats` object: class counts, and finite extremes (all null, or min <= max and
    absmax = max(|min|, |max|))."""
    counts = all(isinstance(v[k], int) and v[k] >= 0 for k in ("zero", "subnormal", "normal"))
    ends = (v["min"], v["max"], v["absmax"])
    if None in ends:
        return counts and set(v) == {"zero", "subnormal", "normal", "min", "max", "absmax"} \
            and ends == (None, None, None)
    return counts and set(v) == {"zero", "subnormal", "normal", "min", "max", "absmax"} \
        and v["min"] <= v["max"] and v["absmax"] == max(abs(v["min"]), abs(v["max"]))


def _range_ok(v) -> bool:
    return v is None or (set(v) == {"declared", "contradicted"} and len(v["declared"]) == 2
                         and isinstance(v["contradicted"], bool))


def test_json_output_follows_the_schema(files):
    code, out, err = run(*files, os.path.join(ROOT, "examples"), "--json")
    doc = json.loads(out)
    check_schema(doc)
    assert doc["exit_code"] == code == 1 and doc["status"] == "found"


def _documented_lines():
    """The plain output documented in examples/README.md (the block after the scan command)."""
    with open(os.path.join(ROOT, "examples", "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"```text\n\$ fpclass scan examples\n(.*?)```", text, re.S).group(1)
    return block.strip().splitlines()


def test_examples_give_the_documented_output(monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, _ = run("examples")
    documented = _documented_lines()
    got = out.splitlines()
    assert got[:-1] == documented[:-1]
    timing = re.compile(r" checked in .*? s( \(.*?/s\))?;")
    assert timing.sub("", got[-1]) == timing.sub("", documented[-1])
    assert code == 1


def test_python_dash_m(files):
    clean, _, _ = files
    proc = subprocess.run([sys.executable, "-m", "fpclass", "scan", str(clean), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["checked"] == 1


def test_progress_bar_on_a_terminal_stderr(files):
    _, bad, _ = files
    err = Terminal()
    code = main(["scan", str(bad)], stdout=io.StringIO(), stderr=err)
    assert code == 1   # the transient bar ran on `err` without disturbing the result
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err.getvalue())
    assert "scanning" in drawn and "16/16 bytes" in drawn, drawn  # drawn, and reached the total
    assert err.getvalue().endswith("\x1b[2K")   # then erased: the bar is transient
    code = main(["scan", str(bad), "--quiet"], stdout=io.StringIO(), stderr=(quiet := Terminal()))
    assert code == 1 and quiet.getvalue() == ""


def test_formats_are_detected_by_content(tmp_path):
    import shutil
    for name, fmt in [("nan_inf.safetensors", "safetensors"), ("tiny.gguf", "gguf"),
                      ("arrays.npz", "npz"), ("tiny.onnx", "onnx")]:
        shutil.copy(os.path.join(ROOT, "examples", name), tmp_path / (fmt + ".bin"))
    shutil.copy(os.path.join(ROOT, "examples", "tiny.onnx.data"), tmp_path)
    from fpclass.scan import scan
    report = scan([tmp_path])
    assert sorted(f for _, f in report.files) == ["gguf", "npz", "onnx", "safetensors"]
    assert not report.problems and not report.unchecked


def test_to_json_is_the_streamed_text_and_to_dict_the_document(files, tmp_path):
    from fpclass.scan import scan
    (tmp_path / "notes.txt").write_text("no tensors here")
    report = scan([*files, tmp_path / "notes.txt", tmp_path, os.path.join(ROOT, "examples")])
    out = io.StringIO()
    report.write_json(out)
    assert report.to_json() == out.getvalue()
    assert json.loads(report.to_json()) == json.loads(json.dumps(report.to_dict()))
    check_schema(report.to_dict())
    assert report.tensors and report.problems and report.skipped
    for key in ("tensors", "problems", "skipped"):   # one item per line
        assert len(out.getvalue().split(f'"{key}": [')[1].split("\n  ]")[0].splitlines()) == \
            len(report.to_dict()[key]) + 1


def test_no_workers_timeout_reaches_the_distributed_executor(files, monkeypatch):
    pytest.importorskip("distributed")
    from fpclass.dask import distributed
    seen = {}

    def execute(tasks, scheduler, **options):
        from fpclass.scan import engine
        seen.update(options, scheduler=scheduler)
        return [engine.interrupted_result(t) for t in tasks], True
    monkeypatch.setattr(distributed, "execute", execute)
    clean, _, _ = files
    code, _, _ = run(clean, "--scheduler", "tcp://127.0.0.1:1", "--no-workers-timeout", "7.5",
                     "--json")
    assert code == ExitCode.INTERRUPTED and seen["no_workers_timeout"] == 7.5
    assert seen["scheduler"] == "tcp://127.0.0.1:1"
