"""`fpclass scan --format sarif` against the official SARIF 2.1.0 JSON Schema (OASIS, errata01,
vendored in tests/data from github.com/oasis-tcs/sarif-spec sarif-2.1/schema/, commit e058381),
and `--json` against the JSON Schema fpclass ships for the version the document declares; both
over scans of real files: clean, with findings, unchecked, with file problems, with skipped files.
The counts and names are checked against the NumPy arrays the files were written from."""

import io
import json
import os

import ml_dtypes
import numpy as np
import pytest

from fpclass.cli import main
from fpclass.results.schema import file_name, json_schema
from test_scan_support import write_safetensors

jsonschema = pytest.importorskip("jsonschema", reason="the schema tests need jsonschema")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SARIF_SCHEMA = os.path.join(ROOT, "tests", "data", "sarif-schema-2.1.0.json")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue()


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A directory of every kind of outcome, named by relative paths (as in a repository)."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("models")
    bad = np.array([[1, np.nan, np.inf], [np.nan, -np.inf, 2]], np.float32)
    write_safetensors(tmp_path / "models" / "bad.safetensors",
                      {"layer.w": ("F32", bad), "layer.b": ("F32", np.zeros(3, np.float32))})
    write_safetensors(tmp_path / "models" / "clean.safetensors",
                      {"w": ("F32", np.ones((2, 2), np.float32))})
    np.save(tmp_path / "models" / "bf16.npy", np.ones(3, ml_dtypes.bfloat16))  # '|V2': unchecked
    (tmp_path / "models" / "broken.safetensors").write_bytes(b"\x05\0\0\0\0\0\0\0{")
    (tmp_path / "models" / "README.md").write_text("# weights\n")
    return {"bad": bad, "dir": "models"}


CASES = {  # name -> paths under the tree (relative), the exit code expected
    "clean": (["models/clean.safetensors"], 0),
    "findings": (["models/bad.safetensors"], 1),
    "unchecked": (["models/bf16.npy", "models/clean.safetensors"], 2),
    "problems": (["models/broken.safetensors"], 2),
    "everything": (["models"], 1),
}


def sarif_validator():
    with open(SARIF_SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.mark.parametrize("case", CASES)
def test_json_follows_the_shipped_schema_of_the_version_it_declares(tree, case):
    paths, expected = CASES[case]
    code, out = run(*paths, "--json")
    doc = json.loads(out)
    assert code == expected == doc["exit_code"]
    schema = json_schema(doc["schema"])
    assert schema["title"] == doc["schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


def test_the_json_schema_rejects_what_the_document_never_holds(tree):
    doc = json.loads(run("models", "--json")[1])
    schema = json_schema(doc["schema"])
    validator = jsonschema.Draft202012Validator(schema)
    checked = next(i for i, t in enumerate(doc["tensors"]) if t["status"] == "checked")
    unchecked = next(i for i, t in enumerate(doc["tensors"]) if t["status"] == "unchecked")
    broken = [
        lambda d: d["tensors"][checked].update(reason="why"),       # checked has no reason
        lambda d: d["tensors"][unchecked].update(reason=None),      # unchecked says why
        lambda d: d["tensors"][checked].update(status="fine"),
        lambda d: d["tensors"][checked].update(extra=1),            # a field the schema lacks
        lambda d: d["summary"].update(nan=-1),
        lambda d: d["problems"][0].update(reason="two\nlines"),
        lambda d: d.update(schema="fpclass.scan/1"),
        lambda d: d.pop("skipped"),
    ]
    for i, breaks in enumerate(broken):
        bad = json.loads(json.dumps(doc))
        breaks(bad)
        assert not validator.is_valid(bad), i


def test_schema_files_are_named_by_version():
    assert file_name("fpclass.scan/2") == "scan-2.json"
    with pytest.raises(ValueError, match="fpclass.scan/N"):
        file_name("other/2")
    with pytest.raises(FileNotFoundError, match="fpclass.scan/999"):
        json_schema("fpclass.scan/999")


@pytest.mark.parametrize("case", CASES)
def test_sarif_is_valid_sarif_2_1_0(tree, case):
    paths, expected = CASES[case]
    code, out = run(*paths, "--format", "sarif")
    assert code == expected
    log = json.loads(out)
    sarif_validator().validate(log)
    assert log["version"] == "2.1.0" and log["runs"][0]["invocations"][0]["exitCode"] == code


def test_the_vendored_sarif_schema_rejects_a_broken_log(tree):
    log = json.loads(run("models", "--format", "sarif")[1])
    validator = sarif_validator()
    assert validator.is_valid(log)
    log["runs"][0]["results"][0]["level"] = "fatal"
    assert not validator.is_valid(log)


def _results(log):
    return log["runs"][0]["results"]


def _where(result):
    loc = result["locations"][0]
    names = [n["name"] for n in loc.get("logicalLocations", [])]
    return loc["physicalLocation"]["artifactLocation"]["uri"], names


def test_sarif_results_name_the_file_and_tensor_with_numpys_counts(tree):
    bad = tree["bad"]
    code, out = run("models", "--format", "sarif", "--fail-on", "nan")
    log = json.loads(out)
    findings = {r["ruleId"]: r for r in _results(log) if r["ruleId"] in ("nan", "posinf", "neginf")}
    assert set(findings) == {"nan", "posinf", "neginf"}
    truth = {"nan": np.isnan(bad), "posinf": np.isposinf(bad), "neginf": np.isneginf(bad)}
    for cls, r in findings.items():
        assert _where(r) == ("models/bad.safetensors", ["layer.w"])
        assert r["properties"]["count"] == int(truth[cls].sum())
        assert [loc["index"] for loc in r["properties"]["locations"]] == \
            np.argwhere(truth[cls]).tolist()
        assert "layer.w" in r["message"]["text"]
        # --fail-on nan: only NaN fails the scan; the Inf found is reported, as a note
        assert r["level"] == ("error" if cls == "nan" else "note")
    rules = [rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]]
    for r in _results(log):
        assert rules[r["ruleIndex"]] == r["ruleId"]
    unchecked = [r for r in _results(log) if r["ruleId"] == "unchecked"]
    assert [(_where(r), r["level"]) for r in unchecked] == [
        (("models/bf16.npy", ["(array)"]), "warning")]
    problems = [r for r in _results(log) if r["ruleId"] == "problem"]
    assert [(_where(r), r["level"]) for r in problems] == [
        (("models/broken.safetensors", []), "warning")]
    # a clean file gives no result; a skipped one is a notification, not a result
    assert not any("clean" in _where(r)[0] for r in _results(log))
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes] == [
        "models/README.md"]


def test_json_and_format_sarif_contradict(tree):
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "models", "--json", "--format", "sarif"], stdout=out, stderr=err)
    assert code != 0 and "--json and --format sarif" in err.getvalue() and out.getvalue() == ""


def test_sarif_uris_are_percent_encoded_relative_references(tmp_path, monkeypatch):
    from urllib.parse import unquote
    monkeypatch.chdir(tmp_path)
    name = "a b#1%.npy"
    np.save(tmp_path / name, np.array([np.nan], np.float32))
    code, out = run(name, "--format", "sarif")
    (result,) = _results(json.loads(out))
    uri = _where(result)[0]
    assert code == 1 and uri == "a%20b%231%25.npy" and unquote(uri) == name
    code, out = run(tmp_path / name, "--format", "sarif")
    (result,) = _results(json.loads(out))
    uri = _where(result)[0]
    assert uri.startswith("file:///") and unquote(uri[len("file://"):]) == str(tmp_path / name)
    assert " " not in uri and "#" not in uri
