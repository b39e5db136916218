"""`[tool.fpclass]` settings in pyproject.toml: found upward from the scanned paths (the nearest
file holding the table), overridden by the command line, `--config FILE` / `--no-config`, and
unknown keys or wrong kinds refused by name. Outcomes are checked against the arrays the files
were written from (NumPy), not against fpclass's own numbers."""

import io
import json
import os
import sys
import types

import numpy as np
import pytest

from fpclass.cli import main
from test_scan_support import write_safetensors


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


INF = np.array([1, np.inf, 2, -np.inf, 3, np.inf, np.inf, np.inf], np.float32)
NAN = np.array([np.nan, 1], np.float32)


@pytest.fixture
def project(tmp_path):
    """project/pyproject.toml (written by each test), project/models/{inf,nan}.safetensors."""
    models = tmp_path / "project" / "models"
    models.mkdir(parents=True)
    write_safetensors(models / "inf.safetensors", {"w": ("F32", INF)})
    write_safetensors(models / "nan.safetensors", {"w": ("F32", NAN)})
    return tmp_path / "project"


def settings(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_fail_on_from_the_nearest_pyproject_and_the_command_line_wins(project):
    inf = project / "models" / "inf.safetensors"
    assert run(inf)[0] == 1                        # default nan,inf
    settings(project / "pyproject.toml",
             '[project]\nname = "x"\n\n[tool.fpclass]\nfail-on = "nan"\n')
    assert run(inf)[0] == 0                        # only NaN fails; the file holds Inf only
    assert run(inf, "--fail-on", "inf")[0] == 1    # the command line wins
    assert run(inf, "--no-config")[0] == 1
    # a nearer pyproject.toml without the table is passed over; one with it wins
    settings(project / "models" / "pyproject.toml", '[tool.ruff]\nline-length = 100\n')
    assert run(inf)[0] == 0
    settings(project / "models" / "pyproject.toml", '[tool.fpclass]\nfail-on = ["posinf"]\n')
    assert run(inf)[0] == 1


def test_found_from_the_directory_holding_every_path(project):
    settings(project / "pyproject.toml", '[tool.fpclass]\nfail-on = "nan"\n')
    os.mkdir(project / "other")
    write_safetensors(project / "other" / "inf.safetensors", {"w": ("F32", INF)})
    both = (project / "models" / "inf.safetensors", project / "other" / "inf.safetensors")
    assert run(*both)[0] == 0
    assert run(project)[0] == 1                    # models/nan.safetensors holds NaN


def test_include_exclude_and_max_locations(project):
    settings(project / "pyproject.toml",
             '[tool.fpclass]\nexclude = ["nan.*"]\nmax-locations = 2\n')
    code, out, _ = run(project, "--json")
    doc = json.loads(out)
    assert code == 1 and [os.path.basename(t["file"]) for t in doc["tensors"]] == [
        "inf.safetensors"]
    (t,) = doc["tensors"]
    assert [loc["index"] for loc in t["locations"]] == np.argwhere(np.isinf(INF))[:2].tolist()
    code, out, _ = run(project, "--json", "--max-locations", "3", "--exclude", "inf.*")
    (t,) = json.loads(out)["tensors"]           # the command line's list replaces the file's
    assert os.path.basename(t["file"]) == "nan.safetensors" and len(t["locations"]) == 1
    settings(project / "pyproject.toml", '[tool.fpclass]\ninclude = ["nan.*"]\n')
    doc = json.loads(run(project, "--json")[1])
    assert [os.path.basename(t["file"]) for t in doc["tensors"]] == ["nan.safetensors"]


def test_allow_global(project, monkeypatch):
    torch = pytest.importorskip("torch")
    module = types.ModuleType("mypkg")

    class Config:
        def __init__(self):
            self.lr = float("nan")
    Config.__module__, Config.__qualname__, module.Config = "mypkg", "Config", Config
    monkeypatch.setitem(sys.modules, "mypkg", module)
    path = project / "models" / "ckpt.pt"
    torch.save({"cfg": Config(), "w": torch.ones(3)}, path)
    assert run(path)[0] == 2                       # a foreign global: not checked
    settings(project / "pyproject.toml", '[tool.fpclass]\nallow-global = ["mypkg.Config"]\n')
    code, out, _ = run(path, "--json")
    assert code == 1 and {t["name"]: t["nan"] for t in json.loads(out)["tensors"]} == {
        "cfg.lr": 1, "w": 0}


def test_config_file_named_on_the_command_line(project, tmp_path):
    inf = project / "models" / "inf.safetensors"
    other = settings(tmp_path / "elsewhere.toml", '[tool.fpclass]\nfail-on = "nan"\n')
    assert run(inf, "--config", other)[0] == 0
    code, _, err = run(inf, "--config", tmp_path / "nope.toml")
    assert code not in (0, 1) and "nope.toml" in err
    code, _, err = run(inf, "--config", other, "--no-config")
    assert code not in (0, 1) and "--no-config" in err
    empty = settings(tmp_path / "empty.toml", '[tool.ruff]\n')
    code, _, err = run(inf, "--config", empty)
    assert code not in (0, 1) and "no [tool.fpclass] table" in err


@pytest.mark.parametrize("text, message", [
    ('[tool.fpclass]\nfail_on = "nan"\n',
     "unknown key 'fail_on' in [tool.fpclass]; accepted: fail-on, max-locations, include, "
     "exclude, allow-global"),
    ('[tool.fpclass]\nfail-on = "nope"\n', "fail-on: unknown --fail-on class 'nope'"),
    ('[tool.fpclass]\nmax-locations = -1\n', "max-locations must be an integer >= 0"),
    ('[tool.fpclass]\nmax-locations = true\n', "max-locations must be an integer >= 0"),
    ('[tool.fpclass]\nexclude = "*.npy"\n', "exclude must be a list of strings"),
    ('[tool.fpclass]\nallow-global = [1]\n', "allow-global must be a list of strings"),
    ('[tool.fpclass\n', "not valid TOML"),
    ('tool = 1\n[x]\n', None),       # no table: not a settings file, passed over
])
def test_bad_settings_are_refused_by_name(project, text, message):
    path = settings(project / "pyproject.toml", text)
    code, out, err = run(project / "models" / "nan.safetensors")
    if message is None:
        assert code == 1 and err == ""
        return
    assert code not in (0, 1) and out == "" and err.count("\n") == 1
    assert str(path) in err and message in err
