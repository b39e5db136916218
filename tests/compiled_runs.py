"""A torch.compile script run in a fresh process (dynamo's state and fpclass's first call both
new), for the watch tests under torch.compile."""

import json
import subprocess
import sys

import pytest


def run_compiled(script: str) -> dict:
    """The JSON object `script` prints last; skips where torch.compile cannot run here."""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600)
    if run.returncode and "torch._dynamo" in run.stderr and "not supported" in run.stderr:
        pytest.skip(f"torch.compile cannot run here: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
