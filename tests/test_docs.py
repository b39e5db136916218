"""The documentation runs: every ```python block of README.md and docs/*.md is executed, the blocks
of a file in order and in one namespace (a block may use what an earlier block defined), in a
scratch directory holding a copy of examples/. In ```sh / ```bash blocks, `fpclass ...` and
`python -m fpclass ...` lines run through the CLI in process and must exit 0 (clean) or 1 (found):
2 would mean a bad option or an unreadable path; `fpclass scan examples` must give the output that
examples/README.md documents. `python3 dev.py ...` lines are not run (they
bootstrap .venv, and `test` is this suite); they must name a dev.py command.

A block that cannot run here (a cluster) is marked in the Markdown, right before its fence, with
`<!-- docs-test: skip (reason) -->`; each such block is reported as a skipped test with its reason.
"""

import io
import os
import re
import shlex
import shutil
import sys

import pytest

from fpclass.cli import main
from test_scan_cli import _documented_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                             if f.endswith(".md"))
FENCE = re.compile(r"(?:^<!-- docs-test: skip \((?P<skip>[^)\n]+)\) -->\n)?"
                   r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.S | re.M)
SHELL = ("sh", "bash", "shell")


def blocks(doc):
    """[(line, lang, code, skip reason or None)] of the fenced blocks of `doc`."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    return [(text.count("\n", 0, m.start("lang")) + 1, m["lang"], m["code"], m["skip"])
            for m in FENCE.finditer(text)]


def runnable(doc):
    return [b for b in blocks(doc) if b[1] in ("python", *SHELL) and b[3] is None]


SKIPPED = [(doc, line, reason) for doc in DOCS for line, lang, _, reason in blocks(doc) if reason]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    shutil.copytree(os.path.join(ROOT, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_shell(doc, line, code):
    for command in code.splitlines():
        command = command.split(" #", 1)[0].strip()
        if not command:
            continue
        argv = shlex.split(command)
        where = f"{doc}:{line}: {command}"
        if argv[:2] == ["python3", "dev.py"]:
            sys.path.insert(0, ROOT)
            try:
                import dev
            finally:
                sys.path.remove(ROOT)
            assert argv[2] in dev.EXTRAS, where
            continue
        if argv[:3] == ["python", "-m", "fpclass"]:
            argv = argv[2:]
        assert argv[0] == "fpclass", f"{where}: only fpclass commands run; mark others skipped"
        out, err = io.StringIO(), io.StringIO()
        code = main(argv[1:], stdout=out, stderr=err, env={})
        assert code in (0, 1), f"{where}: exit {code}\n{err.getvalue()}{out.getvalue()}"
        if argv[1:] in (["scan", "examples"], ["scan", "examples/"]):
            # the demo: the planted values, exactly as examples/README.md shows them
            assert code == 1, where
            assert out.getvalue().splitlines()[:-1] == _documented_lines()[:-1], where


@pytest.mark.parametrize("doc", DOCS)
def test_blocks_run(doc, scratch):
    namespace = {"__name__": "__docs__"}
    for line, lang, code, _ in runnable(doc):
        if lang in SHELL:
            run_shell(doc, line, code)
            continue
        try:
            exec(compile(code, f"{doc}:{line}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"the ```python block at {doc}:{line} fails: "
                                 f"{type(e).__name__}: {e}") from e


def test_the_readme_and_every_guide_have_running_python_blocks():
    counts = {doc: sum(lang == "python" for _, lang, _, _ in runnable(doc)) for doc in DOCS}
    assert counts["README.md"] >= 7 and counts[os.path.join("docs", "scan.md")] >= 1, counts


def test_few_blocks_are_skipped():
    # today: the install commands, `fpclass warmup` (a minute of compiling), and the cluster
    # examples (README, docs/dask.md twice)
    assert len(SKIPPED) <= 5, f"keep the blocks that cannot run to a minimum: {SKIPPED}"


@pytest.mark.parametrize("doc, line, reason", SKIPPED, ids=[f"{d}:{n}" for d, n, _ in SKIPPED])
def test_skipped_block(doc, line, reason):
    pytest.skip(f"the block at {doc}:{line} is not run: {reason}")


def test_the_install_commands_name_this_version():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        version = re.search(r'^version = "(.*)"', f.read(), re.M).group(1)
    install = [code for _, _, code, reason in blocks("README.md")
               if reason and "pip install" in code]
    assert len(install) == 1
    assert set(re.findall(r"fpclass-([\w.]+)-py3", install[0])) == {version}
    assert f"fpclass --version               # fpclass {version}" in install[0]
