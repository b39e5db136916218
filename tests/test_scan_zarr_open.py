"""Zarr nodes opened at their cost (scan/readers/zarr_open.py): a store's nodes opened in batches,
and the arrays a scan planned not re-opened through zarr by the tasks that read them while their
metadata files hold the same bytes; re-opened (and the change seen) when they do not. Counts and
locations against zarr's own read + numpy."""

import json

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

from fpclass.scan import scan  # noqa: E402
from fpclass.scan.engine import plan, run_task  # noqa: E402
from fpclass.scan.readers import zarr_open, zarr_store  # noqa: E402


def planted(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype("<f4")
    a.reshape(-1)[[0, 7, -1]] = [np.nan, np.inf, -np.inf]
    return a


def truth(a) -> dict:
    return {"nan": int(np.isnan(a).sum()), "posinf": int(np.isposinf(a).sum()),
            "neginf": int(np.isneginf(a).sum())}


@pytest.fixture
def opens(monkeypatch):
    """The names zarr opened one at a time (zarr_store's own open) during a test."""
    seen = []
    real = zarr_store._open_node
    monkeypatch.setattr(zarr_store, "_open_node",
                        lambda z, store, path: seen.append(path) or real(z, store, path))
    return seen


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_tasks_reopen_no_array_the_plan_opened(tmp_path, opens, monkeypatch, fmt, codec):
    monkeypatch.setattr(zarr_open, "BATCH", 3)  # several batches
    g = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=fmt)
    arrays = {}
    for i in range(7):
        a = planted((20, 9), i)
        compressors = None if codec == "none" else (
            zarr.codecs.ZstdCodec() if fmt == 3 else __import__("numcodecs").Zstd())
        z = g.create_array(f"g{i % 2}/a{i}", shape=a.shape, chunks=(6, 9), dtype=a.dtype,
                           compressors=compressors)
        z[...] = a
        arrays[f"g{i % 2}/a{i}"] = np.asarray(zarr.open_array(z.store_path, mode="r")[...])
    report = scan([tmp_path / "s.zarr"], threads=2, task_bytes=400)
    assert opens == []  # the plan's batches, then no open per task
    got = {t.name: t for t in report.tensors}
    assert set(got) == set(arrays)
    for name, a in arrays.items():
        t = got[name]
        assert t.status == "checked", t.reason
        assert {"nan": t.nan, "posinf": t.posinf, "neginf": t.neginf} == truth(a)
        assert t.values_checked == a.size


def test_changed_metadata_is_reopened_through_zarr(tmp_path, opens):
    path = tmp_path / "s.zarr"
    z = zarr.create_array(path, shape=(8,), chunks=(4,), dtype="f4", fill_value=0)
    z[...] = 1
    z.attrs["note"] = "before"
    [task] = [t for t in plan([path]) if t.status == "check"]
    meta = json.loads((path / "zarr.json").read_text())
    meta["attributes"]["note"] = "after"  # same array, other metadata bytes
    (path / "zarr.json").write_text(json.dumps(meta))
    r = run_task(task)
    assert r.status == "checked" and r.values_checked == 8
    assert opens == [""]  # opened again, through zarr
    meta["shape"] = [9]  # and a change that matters is seen
    (path / "zarr.json").write_text(json.dumps(meta))
    r = run_task(task)
    assert r.status == "unchecked" and "changed since" in r.reason


def test_a_node_zarr_refuses_in_a_batch_is_unchecked_alone(tmp_path):
    g = zarr.open_group(tmp_path / "s.zarr", mode="w")
    for name in ("a", "b", "c"):
        g.create_array(name, shape=(4,), chunks=(4,), dtype="f4")[...] = np.nan
    (tmp_path / "s.zarr" / "b" / "zarr.json").write_text("{not json")
    report = scan([tmp_path / "s.zarr"])
    by = {t.name: t for t in report.tensors}
    assert by["b"].status == "unchecked" and "zarr cannot open" in by["b"].reason
    assert by["a"].nan == by["c"].nan == 4


def test_kept_arrays_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(zarr_open, "KEEP", 2)
    monkeypatch.setattr(zarr_open, "_kept", {})
    g = zarr.open_group(tmp_path / "s.zarr", mode="w")
    for i in range(5):
        g.create_array(f"a{i}", shape=(4,), chunks=(4,), dtype="f4")[...] = 1
    plan([tmp_path / "s.zarr"])
    assert len(zarr_open._kept) == 2
