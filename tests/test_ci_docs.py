"""docs/ci.md's recipes hold: its YAML blocks parse, the `fpclass` commands of their `run:` steps
run (in a scratch directory holding examples/, `.` standing for the repository), the pre-commit
config names the shipped hook, and its `[tool.fpclass]` example is accepted by the settings
reader. (Its ```python and ```sh blocks run in tests/test_docs.py.)"""

import io
import os
import re
import shlex
import shutil

import pytest

from fpclass import settings
from fpclass.cli import main

yaml = pytest.importorskip("yaml", reason="PyYAML (from pre-commit) is not installed")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "ci.md")


def blocks(lang):
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def steps(doc):
    for job in (doc.get("jobs") or {}).values():
        yield from job.get("steps", [])


def test_the_workflow_runs_fpclass_commands_that_work(tmp_path, monkeypatch):
    shutil.copytree(os.path.join(ROOT, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    docs = [yaml.safe_load(b) for b in blocks("yaml")]
    workflow = next(d for d in docs if "jobs" in d)
    commands = [line for step in steps(workflow) for line in step.get("run", "").splitlines()
                if line.startswith("fpclass ")]
    assert any("--format sarif" in c for c in commands)
    uploads = [s for s in steps(workflow) if "upload-sarif" in s.get("uses", "")]
    for command in commands:
        argv, _, target = command.partition(" > ")
        out, err = io.StringIO(), io.StringIO()
        code = main(shlex.split(argv)[1:], stdout=out, stderr=err, env={})
        assert code in (0, 1), (command, err.getvalue())  # examples/ holds planted NaN: 1
        if target:
            (tmp_path / target).write_text(out.getvalue())
            assert [s["with"]["sarif_file"] for s in uploads] == [target]
            assert uploads[0]["if"] == "always()"
            assert '"version": "2.1.0"' in out.getvalue()


def test_the_pre_commit_config_names_the_shipped_hook():
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as f:
        shipped = {h["id"] for h in yaml.safe_load(f)}
    configs = [d for d in map(yaml.safe_load, blocks("yaml")) if "repos" in d]
    assert configs and {h["id"] for c in configs for r in c["repos"] for h in r["hooks"]} <= shipped


def test_the_settings_example_is_accepted(tmp_path):
    (example,) = blocks("toml")
    path = tmp_path / "pyproject.toml"
    path.write_text(example, encoding="utf-8")
    read = settings.read(str(path))
    assert set(read) == {dest for dest, _ in settings.OPTIONS.values()}
