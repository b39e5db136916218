"""A zarr array read by a task whose metadata files hold the bytes the scan planned it from
derives nothing again (scan/readers/zarr_store.py: the planned task and blocks kept with the
bytes by zarr_open); changed bytes are read through zarr and compared as before, and a change
that matters is refused. Counts against zarr's own read + numpy."""

import json

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

from fpclass.scan.engine import plan, run_task  # noqa: E402
from fpclass.scan.readers import zarr_store  # noqa: E402
from fpclass.results.build import merge_parts  # noqa: E402


def truth(a) -> dict:
    return {"nan": int(np.isnan(a).sum()), "posinf": int(np.isposinf(a).sum()),
            "neginf": int(np.isneginf(a).sum()), "values_checked": a.size}


def counts(results) -> dict:
    r = merge_parts(list(results), 10) if len(results) > 1 else results[0]
    assert r.status == "checked", r.reason
    return {k: getattr(r, k) for k in ("nan", "posinf", "neginf", "values_checked")}


def make(path, fmt, codec, dtype="<f4"):
    """A (10, 7) array in (4, 3) chunks, the last (partial) chunk holding a NaN; zarr's read."""
    compressors = None
    if codec == "zstd":
        compressors = zarr.codecs.ZstdCodec() if fmt == 3 else __import__("numcodecs").Zstd()
    a = np.random.default_rng(fmt).standard_normal((10, 7)).astype(dtype)
    a[0, 1], a[5, 2], a[-1, -1] = np.inf, -np.inf, np.nan
    if a.dtype.kind == "c":
        a[3, 3] = complex(np.nan, 1)
    z = zarr.create_array(path, shape=a.shape, chunks=(4, 3), dtype=a.dtype, fill_value=0,
                          zarr_format=fmt, compressors=compressors)
    z[...] = a
    return np.asarray(zarr.open_array(path, mode="r")[...])


@pytest.fixture
def derived(monkeypatch):
    """How many times a read derived the array's task again from its metadata."""
    seen = []
    real = zarr_store._array_task
    monkeypatch.setattr(zarr_store, "_array_task", lambda *a, **k: seen.append(1) or real(*a, **k))
    return seen


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("codec", ["none", "zstd"])
@pytest.mark.parametrize("dtype", ["<f4", ">f8", "<c8"])
def test_unchanged_array_reads_what_zarr_reads_deriving_nothing(tmp_path, derived, fmt, codec,
                                                               dtype):
    path = tmp_path / "a.zarr"
    a = make(path, fmt, codec, dtype)
    tasks = [t for t in plan([path], task_bytes=100) if t.status == "check"]
    assert len(tasks) > 1  # parts of the array, each its own read
    planned = len(derived)
    got = counts([run_task(t, chunk_bytes=64) for t in tasks])
    assert got == truth(a.view(a.real.dtype) if a.dtype.kind == "c" else a)
    assert len(derived) == planned  # no read derived the task again


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_changed_metadata_between_plan_and_read(tmp_path, derived, fmt, codec):
    path = tmp_path / "a.zarr"
    a = make(path, fmt, codec)
    [task] = [t for t in plan([path]) if t.status == "check"]
    name = "zarr.json" if fmt == 3 else ".zarray"
    doc = json.loads((path / name).read_text())
    (path / name).write_text(json.dumps(doc, indent=3))  # other bytes, the same array
    before = len(derived)
    assert counts([run_task(task)]) == truth(a)
    assert len(derived) == before + 1  # derived again from the new bytes, and compared
    doc["shape"] = [12, 7]  # a change that matters: refused
    (path / name).write_text(json.dumps(doc))
    r = run_task(task)
    assert r.status == "unchecked" and "changed since the store was planned" in r.reason
    doc["shape"] = [10, 7]
    doc["fill_value"] = 1.0  # a change of the fill value alone is read from the new bytes
    (path / name).write_text(json.dumps(doc))
    assert counts([run_task(task)]) == truth(a)


def test_blosc_thread_setting_changed_after_planning_is_seen(tmp_path, derived, monkeypatch):
    # whether blosc chunks are decoded here depends on numcodecs' setting, not the bytes
    numcodecs_blosc = pytest.importorskip("numcodecs.blosc")
    path = tmp_path / "a.zarr"
    a = np.arange(40, dtype="<f4").reshape(10, 4)
    a[-1, -1] = np.nan
    z = zarr.create_array(path, shape=a.shape, chunks=(4, 4), dtype=a.dtype, fill_value=0,
                          compressors=zarr.codecs.BloscCodec())
    z[...] = a
    [task] = [t for t in plan([path]) if t.status == "check"]
    decoded = []
    real = zarr_store.packed_blocks
    monkeypatch.setattr(zarr_store, "packed_blocks",
                        lambda *args: decoded.append(1) or real(*args))
    assert counts([run_task(task)]) == truth(a) and decoded == [1]
    monkeypatch.setattr(numcodecs_blosc, "use_threads", True)
    before = len(derived)
    assert counts([run_task(task)]) == truth(a)
    assert decoded == [1] and len(derived) == before + 1  # through zarr, under the new setting


def test_metadata_bytes_compared_are_the_files_bytes(tmp_path, monkeypatch):
    from fpclass.scan.readers import zarr_open
    monkeypatch.setattr(zarr_open, "METADATA_BYTES", 64)
    node = tmp_path / "x"
    node.mkdir()
    (node / "zarr.json").write_bytes(b"{" + b" " * 62 + b"}")  # 64 bytes: at the bound
    (node / ".zattrs").write_bytes(b"{}")
    assert zarr_open._metadata(str(tmp_path), "x") == ((node / "zarr.json").read_bytes(), None,
                                                        b"{}")
    (node / "zarr.json").write_bytes(b"{" + b" " * 63 + b"}")  # over it: never kept
    assert zarr_open._metadata(str(tmp_path), "x") is None
    (node / "zarr.json").unlink()
    (node / "zarr.json").symlink_to("/dev/zero")  # a size of 0 and endless bytes
    assert zarr_open._metadata(str(tmp_path), "x") is None
