"""Command-line conventions: --version, global options before or after the subcommand, --color
and NO_COLOR, --output, escaped names on stderr, and plain output when rich is missing."""

import io
import json
import os
import re
import sys

import numpy as np
import pytest

import fpclass
from fpclass.cli import main
from test_scan_support import safetensors_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ESC = "\x1b["


def uncolor(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def run(*argv, stdout=None, stderr=None, env=None):
    out, err = stdout or io.StringIO(), stderr or io.StringIO()
    code = main(list(map(str, argv)), stdout=out, stderr=err, env={} if env is None else env)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def bad(tmp_path):
    path = tmp_path / "bad.safetensors"
    a = np.array([1, np.nan, -np.inf], np.float32)
    path.write_bytes(safetensors_bytes({"w": ("F32", a, a.shape)}))
    return path


def test_version():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        version = re.search(r'^version = "(.*)"', f.read(), re.M).group(1)
    assert fpclass.__version__ == version
    assert run("--version") == (0, f"fpclass {version}\n", "")


def test_no_command_prints_help_and_exits_4():
    code, out, err = run()
    assert code == 4 and out == "" and "scan" in err and "--version" in err


@pytest.mark.parametrize("argv", [("-q", "scan", "{}"), ("scan", "{}", "-q"), ("scan", "-q", "{}"),
                                  ("--quiet", "scan", "{}"), ("scan", "{}", "--quiet")])
def test_quiet_before_or_after_the_subcommand(bad, argv):
    code, out, _ = run(*(a.format(bad) for a in argv))
    assert code == 1 and out.startswith("found: ") and "summary" not in out


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_before_or_after_the_subcommand(bad, tmp_path, where, monkeypatch):
    options = ["--color", "always", "--output", tmp_path / "r.json", "--traceback"]
    argv = [*options, "scan", bad] if where == "before" else ["scan", bad, *options]
    code, out, _ = run(*argv)
    assert code == 1 and ESC in out
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == 1
    from fpclass.scan import engine

    def boom(*a, **k):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(engine, "plan", boom)
    with pytest.raises(RuntimeError):   # --traceback took effect
        run(*argv)


def test_the_option_after_the_subcommand_wins(bad):
    assert ESC not in run("--color", "always", "scan", bad, "--color", "never")[1]
    assert ESC in run("--color", "never", "scan", bad, "--color", "always")[1]


@pytest.mark.parametrize("color, env, expect", [
    ("auto", {}, True), ("auto", {"NO_COLOR": "1"}, False), ("auto", {"NO_COLOR": ""}, True),
    ("never", {}, False), ("always", {"NO_COLOR": "1"}, True)])
def test_color_on_a_terminal(bad, color, env, expect):
    code, out, _ = run("scan", bad, "--color", color, stdout=Terminal(), env=env)
    assert code == 1 and "┃" in out and "summary:" in out   # the rich table, colored or not
    assert (ESC in out) == expect


def test_color_in_a_pipe(bad):
    code, plain, _ = run("scan", bad)
    assert code == 1 and ESC not in plain
    code, colored, _ = run("scan", bad, "--color", "always")
    assert code == 1 and ESC in colored
    # The same lines, only colored: grep and `less -R` see what a pipe without color sees.
    timing = re.compile(r" checked in .*? s( \(.*?/s\))?;")
    assert timing.sub("", uncolor(colored)) == timing.sub("", plain)


def test_bad_color_names_the_accepted_values(bad):
    code, _, err = run("scan", bad, "--color", "sometimes")
    assert code == 4 and "auto" in err and "always" in err and "never" in err


def test_output_writes_the_json_document_and_stdout_keeps_the_human_output(bad, tmp_path):
    target = tmp_path / "report.json"
    code, out, _ = run("scan", bad, "--output", target)
    assert code == 1 and out.startswith("found: ") and out.splitlines()[-1].startswith("summary:")
    doc = json.loads(target.read_text())
    assert doc["exit_code"] == 1 and doc["tensors"][0]["nan"] == 1
    code, out, _ = run("scan", bad, "--json", "--output", target)   # --json still goes to stdout
    assert json.loads(out)["exit_code"] == json.loads(target.read_text())["exit_code"] == 1


def test_output_that_cannot_be_written_fails_before_the_scan(bad, tmp_path, monkeypatch):
    from fpclass.scan import engine
    monkeypatch.setattr(engine, "plan", lambda *a, **k: pytest.fail("scanned anyway"))
    target = tmp_path / "missing" / "report.json"
    code, out, err = run("scan", bad, "--output", target)
    assert code == 4 and out == "" and err.count("\n") == 1
    assert "--output" in err and str(target) in err


def test_control_characters_in_names_are_escaped_on_stderr(tmp_path, monkeypatch):
    from fpclass.scan import engine

    def boom(*a, **k):
        raise OSError("cannot open evil\x1b[2J\nname")
    monkeypatch.setattr(engine, "plan", boom)
    code, _, err = run("scan", tmp_path)
    assert code == 2 and "\x1b" not in err and err.count("\n") == 1 and "\\x1b[2J\\x0aname" in err
    assert "scheduler" not in err   # a local scan's OSError is not about a cluster
    code, _, err = run("scan", tmp_path, "--output", tmp_path / "evil\x1b]0;\x07" / "r.json")
    assert code == 4 and "\x1b" not in err and err.count("\n") == 1 and "evil\\x1b]0;\\x07" in err
    code, _, err = run("scan", tmp_path, "--max-locations", "x\x1b[31m")
    assert code == 4 and "\x1b" not in err and "\\x1b[31m" in err


def test_without_rich_the_terminal_gets_plain_lines(bad, monkeypatch):
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rich", None)
    code, out, err = run("scan", bad, stdout=Terminal(), stderr=Terminal())
    assert code == 1 and uncolor(out).startswith("found: ") and ESC in out and err == ""
    code, out, err = run("scan", bad, "--color", "never", stdout=Terminal(), stderr=Terminal())
    assert code == 1 and out.startswith("found: ") and ESC not in out and err == ""


def test_scheduler_without_distributed_names_the_extra(bad, monkeypatch):
    from test_extras import forget, hide, install_message
    hide(monkeypatch, "distributed")
    forget(monkeypatch, "fpclass.dask.distributed")
    code, out, err = run("scan", bad, "--scheduler", "tcp://127.0.0.1:1")
    assert code == 4 and out == "" and err.count("\n") == 1 and "--scheduler" in err
    assert re.search(install_message("dask"), err)


def test_help_lists_the_global_options():
    _, out, _ = run("--help")
    for option in ("--version", "--quiet", "--color", "--output", "--traceback"):
        assert option in out
    _, out, _ = run("scan", "--help")
    for option in ("--quiet", "--color", "--output", "--traceback", "--json"):
        assert option in out
