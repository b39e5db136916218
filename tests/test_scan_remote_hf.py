"""`fpclass scan hf://...` through huggingface_hub's HfFileSystem against a minimal Hub on
127.0.0.1 (tests/remote_servers.HubServer: repo info, tree listings, paths-info and ranged
resolve downloads). Truth comes from numpy on the arrays written."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from remote_servers import HubServer, found_by_file  # noqa: E402

pytest.importorskip("huggingface_hub", reason="the remote extra (huggingface_hub) is not installed")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from fpclass.scan import scan  # noqa: E402

TOKEN = "hf_never_printed_0123456789abcdef"


def _truth(x) -> tuple:
    return int(np.isnan(x).sum()), int(np.isposinf(x).sum()), int(np.isneginf(x).sum())


@pytest.fixture
def hub():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(4000).astype(np.float32)
    a[[1, 3999]] = np.nan
    b = rng.standard_normal((16, 16)).astype(np.float16)
    b[15, 0] = -np.inf
    save = safetensors_numpy.save
    repos = {"org/model": {
        "README.md": b"# a model\n",
        "config.json": json.dumps({"hidden": 16}).encode(),
        "model-00001-of-00002.safetensors": save({"a": a}),
        "model-00002-of-00002.safetensors": save({"b": b}),
        "model.safetensors.index.json": json.dumps({"weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors"}}).encode(),
        "extra/deep/c.safetensors": save({"c": np.ones(10, np.float32)}),
    }}
    truth = {"model-00001-of-00002.safetensors": {"a": _truth(a)},
             "model-00002-of-00002.safetensors": {"b": _truth(b)},
             "extra/deep/c.safetensors": {"c": (0, 0, 0)}}
    with HubServer(repos) as server:
        yield server, truth


def test_a_hub_repo_scans_as_numpy_counts(hub):
    server, truth = hub
    report = scan(["hf://org/model"], storage_options={"endpoint": server.url})
    assert not report.problems, report.problems
    assert found_by_file(report, "hf://org/model/") == truth
    assert all(t.status == "checked" for t in report.tensors)
    assert sorted(s.path for s in report.skipped) == ["hf://org/model/README.md",
                                                      "hf://org/model/config.json"]
    # ranged reads: no request asked for a whole file
    assert all(r[2] for r in server.requests if "/resolve/" in r[1])


def test_a_revision_and_a_path_inside_the_repo(hub):
    server, truth = hub
    url = "hf://org/model@main/extra/deep/c.safetensors"
    report = scan([url], storage_options={"endpoint": server.url})
    assert [(t.file, t.name, t.status) for t in report.tensors] == [(url, "c", "checked")]


def test_hf_endpoint_in_the_environment_and_a_token_never_printed(hub):
    import subprocess
    server, _ = hub
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HUB_DISABLE_TELEMETRY": "1",
           "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "fpclass", "scan", "--json", "--storage-option", f"token={TOKEN}",
         "hf://org/model/model-00002-of-00002.safetensors",
         "hf://org/model/missing.safetensors"],
        env=env, capture_output=True, text=True, timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr  # the -Inf found wins over the missing file
    assert [p["path"] for p in doc["problems"]] == ["hf://org/model/missing.safetensors"]
    assert [(t["name"], t["neginf"]) for t in doc["tensors"]] == [("b", 1)]
    assert TOKEN not in done.stdout + done.stderr
    # the token was sent to the Hub, as huggingface_hub sends it
    assert any(h == f"Bearer {TOKEN}" for h in server.authorizations)


def test_a_file_pushed_during_the_scan_is_unchecked_never_clean(hub):
    server, _ = hub
    repo = server.repos["org/model"]
    repo["two.safetensors"] = safetensors_numpy.save(
        {"x": np.ones(500, np.float32), "y": np.ones(500, np.float32)})
    pushed = safetensors_numpy.save({"x": np.ones(500, np.float32),
                                     "y": np.full(500, np.nan, np.float32)})
    done = []

    def progress(task, result):
        if not done:
            done.append(task.name)
            repo["two.safetensors"] = pushed  # a new commit: same size, new blob

    url = "hf://org/model/two.safetensors"
    report = scan([url], storage_options={"endpoint": server.url}, threads=1,
                  progress=progress)
    by_name = {t.name: t for t in report.tensors}
    other = by_name[({"x", "y"} - set(done)).pop()]
    assert other.status == "unchecked"
    assert f"{url} changed during the scan" in other.reason
    assert int(report.exit_code) == 2
