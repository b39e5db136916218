"""The pre-commit hook (.pre-commit-hooks.yaml) run by the real pre-commit in a temporary git
repository whose .pre-commit-config.yaml names this working tree (copied into a git repository,
committed or not): pre-commit installs this tree's fpclass into a fresh virtual environment (pip,
with no index: the wheels are packed from this environment, tests/wheelhouse.py) and runs the
hook on the staged files. A clean tensor passes, a NaN fails naming the file and tensor, a
README.md, config.json or the config staged beside them is not passed to fpclass. The hook's
`files:` is the pattern made from the reader registry."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fpclass.scan.readers.registry import READERS
from fpclass.scan.readers.registry_hook import files_pattern
from test_scan_support import write_safetensors

yaml = pytest.importorskip("yaml", reason="pre-commit (and its PyYAML) is not installed")
ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / ".pre-commit-hooks.yaml"


def hook():
    (entry,) = yaml.safe_load(HOOKS.read_text(encoding="utf-8"))
    return entry


def test_the_hook_checks_the_names_the_readers_claim():
    entry = hook()
    assert entry["id"] == "fpclass" and entry["language"] == "python"
    assert entry["entry"].split()[:2] == ["fpclass", "scan"]
    assert entry["files"] == files_pattern()
    pattern = re.compile(entry["files"])
    for reader in READERS:
        for name in reader.extensions + reader.known_names:
            if reader.kind == "compressed":
                continue
            assert pattern.search("dir/model" + name.lstrip("*")), name
            if not name.startswith("*"):   # a tensor file's name, compressed
                assert pattern.search("dir/MODEL" + name.upper() + ".gz"), name
    for other in ("README.md", "config.json", "model.safetensors.json", "train.py",
                  "data.csv.gz", "store.zarr/c/0/0", "store.zarr/zarr.json", "npy"):
        assert not pattern.search(other), other


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t",
                    "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True,
                   capture_output=True)


def _hook_repository(dest: Path) -> Path:
    """A git repository of this working tree's package (committed or not), as pre-commit clones
    a hook repository."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(ROOT / name, dest / name)
    for licence in ROOT.glob("LICEN[SC]E*"):
        shutil.copy(licence, dest / licence.name)
    shutil.copytree(ROOT / "src", dest / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"))
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "hook")
    return dest


def _offline_pip(tmp_path: Path) -> dict:
    """The environment that makes pip install from wheels of this environment only."""
    import wheelhouse
    try:
        import tomllib
    except ImportError:   # Python 3.10
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    wheels = wheelhouse.build(project["project"]["dependencies"]
                              + project["build-system"]["requires"], tmp_path / "wheels")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PYTHON", "VIRTUALENV_", "PRE_COMMIT"))}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels), PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1", PRE_COMMIT_HOME=str(tmp_path / "cache"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    return env


@pytest.fixture
def scratch(tmp_path):
    """tmp_path, with the wheels and pre-commit's environment (hundreds of MB) removed after."""
    yield tmp_path
    for name in ("wheels", "cache"):
        shutil.rmtree(tmp_path / name, ignore_errors=True)


def test_pre_commit_runs_the_hook_on_staged_tensor_files(scratch):
    tmp_path = scratch
    pytest.importorskip("pre_commit", reason="pre-commit is not installed")
    pytest.importorskip("packaging", reason="the wheels are named with packaging")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    hooks = _hook_repository(tmp_path / "hook")
    env = _offline_pip(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    write_safetensors(repo / "clean.safetensors", {"w": ("F32", np.ones(4, np.float32))})
    (repo / "README.md").write_text("# model\n")
    (repo / "config.json").write_text('{"hidden_size": 4}\n')
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hooks, check=True,
                         capture_output=True, text=True).stdout.strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: fpclass\n")
    _git(repo, "add", "-A")

    def pre_commit():   # the environment is installed once, then reused (as for a user)
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--verbose", "--color", "never"],
            cwd=repo, env=env, capture_output=True, text=True, timeout=600)

    done = pre_commit()
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^fpclass \(NaN / Inf in tensor files\)\.+Passed$", done.stdout, re.M)
    assert "README.md" not in done.stdout and "config.json" not in done.stdout
    assert "1 file, 1 tensor (1 checked" in done.stdout   # fpclass got the tensor file only
    # the installed package holds its data files (the JSON Schema of the scan's document)
    assert list((tmp_path / "cache").glob(
        "*/*/lib/python*/site-packages/fpclass/results/schema/scan-*.json"))

    bad = np.array([1, np.nan, 3], np.float32)
    (repo / "weights").mkdir()
    write_safetensors(repo / "weights" / "bad.safetensors", {"layer.0.w": ("F32", bad)})
    _git(repo, "add", "-A")
    done = pre_commit()
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^fpclass \(NaN / Inf in tensor files\)\.+Failed$", done.stdout, re.M)
    assert re.search(r"^found: weights/bad\.safetensors: layer\.0\.w: F32\[3\]: "
                     rf"nan={int(np.isnan(bad).sum())} ", done.stdout, re.M), done.stdout
