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


def _store(tmp_path, fmt):
    """A store of format `fmt`: arrays at the root and in a nested group, attributes on both."""
    g = zarr.open_group(tmp_path / f"v{fmt}.zarr", mode="w", zarr_format=fmt)
    g.attrs["title"] = "x"
    sub = g.create_group("sub")
    sub.attrs["scale"] = 2.0
    for name, parent in (("a", g), ("b", sub)):
        z = parent.create_array(name, shape=(6, 5), chunks=(4, 5), dtype="<f4")
        z[...] = planted((6, 5), len(name))
    return tmp_path / f"v{fmt}.zarr"


@pytest.mark.parametrize("fmt", [2, 3])
def test_nodes_opened_are_the_ones_zarr_opens(tmp_path, fmt):
    # told the format where the metadata files leave one choice, zarr gives the same nodes as
    # when it looks for itself
    path = _store(tmp_path, fmt)
    store = zarr.storage.LocalStore(path, read_only=True)
    names = ["", "sub", "a", "sub/b"]
    got = dict(zarr_open.open_nodes(zarr, store, names, str(path)))
    for name in names:
        own = zarr.open(store=store, path=name, mode="r")
        assert type(got[name]) is type(own)
        assert got[name].metadata.to_dict() == own.metadata.to_dict()
    report = scan([path])
    by = {t.name: t for t in report.tensors}
    for name in ("a", "sub/b"):
        assert by[name].status == "checked"
        assert {"nan": by[name].nan, "posinf": by[name].posinf,
                "neginf": by[name].neginf} == truth(np.asarray(zarr.open_array(
                    store=store, path=name, mode="r")[...]))


def test_zarr_opens_only_what_is_not_built_and_is_told_the_format_when_one(tmp_path,
                                                                          monkeypatch):
    # arrays and format 3 groups are built by zarr from the documents read (no open); the rest
    # is opened by zarr, told the format where the metadata files leave one choice
    from zarr.api import asynchronous
    told = {}
    real = asynchronous.open

    async def spy(**kw):
        told[kw["path"]] = kw.get("zarr_format")
        return await real(**kw)
    monkeypatch.setattr(asynchronous, "open", spy)
    v3, v2 = _store(tmp_path, 3), _store(tmp_path, 2)
    mixed = tmp_path / "mixed.zarr"  # an array with both formats' documents: zarr picks
    zarr.create_array(mixed, shape=(3,), chunks=(3,), dtype="f4", zarr_format=3)[...] = 1
    (mixed / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "<f4", "compressor": None,
        "fill_value": 0.0, "filters": None, "order": "C"}))
    cases = {v3: ({"", "sub", "a", "sub/b"}, {}),
             v2: ({"", "sub", "a", "sub/b"}, {"": None, "sub": None}),  # v2 groups: .zgroup
             mixed: ({""}, {"": None})}
    for path, (names, want) in cases.items():
        told.clear()
        store = zarr.storage.LocalStore(path, read_only=True)
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")  # zarr warns of the mixed node
            list(zarr_open.open_nodes(zarr, store, sorted(names), str(path)))
        assert told == want
    told.clear()  # a store that is not a directory: zarr always looks
    list(zarr_open.open_nodes(zarr, zarr.storage.LocalStore(v3, read_only=True), ["a"], None))
    assert told == {"a": None}


def _v3_array(**change):
    doc = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "float32",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": "NaN", "codecs": [{"name": "bytes",
                                            "configuration": {"endian": "little"}}],
           "attributes": {"scale": float("nan"), "range": [1.0, float("inf")]}}
    doc.update(change)
    return {k: v for k, v in doc.items() if v is not None}


_V2_ARRAY = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f4", "compressor": None,
             "fill_value": "NaN", "filters": None, "order": "C"}

#: name -> {file: text} of node "x": documents zarr takes, refuses or takes as another kind.
DOCUMENTS = {
    "v3 array, NaN attributes": {"zarr.json": json.dumps(_v3_array())},
    "v3 array saying format 2": {"zarr.json": json.dumps(_v3_array(zarr_format=2))},
    "v3 without node_type": {"zarr.json": json.dumps(_v3_array(node_type=None))},
    "v3 node_type other": {"zarr.json": json.dumps(_v3_array(node_type="table"))},
    "v3 without shape": {"zarr.json": json.dumps(_v3_array(shape=None))},
    "v3 unknown data type": {"zarr.json": json.dumps(_v3_array(data_type="float7"))},
    "v3 bool with a list fill": {"zarr.json": json.dumps(_v3_array(data_type="bool",
                                                                   fill_value=[1, 2]))},
    "v3 not json": {"zarr.json": "{not json"},
    "v3 a list": {"zarr.json": "[1, 2]"},
    "v3 group": {"zarr.json": json.dumps({"zarr_format": 3, "node_type": "group",
                                          "attributes": {"x": float("-inf")}})},
    "v3 group, consolidated": {"zarr.json": json.dumps({
        "zarr_format": 3, "node_type": "group", "attributes": {},
        "consolidated_metadata": {"kind": "inline", "must_understand": False,
                                  "metadata": {"ghost": _v3_array()}}})},
    "v3 group saying format 2": {"zarr.json": json.dumps({"zarr_format": 2,
                                                          "node_type": "group"})},
    "v2 array": {".zarray": json.dumps(_V2_ARRAY),
                 ".zattrs": json.dumps({"fill": float("nan")})},
    "v2 array, no attributes": {".zarray": json.dumps(_V2_ARRAY)},
    "v2 array, attributes not json": {".zarray": json.dumps(_V2_ARRAY), ".zattrs": "{"},
    "v2 array, attributes a list": {".zarray": json.dumps(_V2_ARRAY), ".zattrs": "[1]"},
    "v2 array saying format 3": {".zarray": json.dumps({**_V2_ARRAY, "zarr_format": 3})},
    "v2 array, bad dtype": {".zarray": json.dumps({**_V2_ARRAY, "dtype": "<q9"})},
    "v2 a number": {".zarray": "7"},
}


@pytest.mark.parametrize("case", sorted(DOCUMENTS))
def test_a_node_built_from_its_documents_is_what_zarr_open_gives(tmp_path, case):
    path = tmp_path / "s.zarr"
    zarr.open_group(path, mode="w", zarr_format=3)
    (path / "x").mkdir()
    for name, text in DOCUMENTS[case].items():
        (path / "x" / name).write_text(text)
    store = zarr.storage.LocalStore(path, read_only=True)
    got = dict(zarr_open.open_nodes(zarr, store, ["x"], str(path)))["x"]
    try:
        own = zarr.open(store=store, path="x", mode="r", use_consolidated=False)
    except Exception as e:
        own = e
    assert type(got) is type(own), (got, own)
    if isinstance(own, Exception):
        return
    assert repr(got.metadata) == repr(own.metadata)
    assert json.dumps(got.metadata.attributes) == json.dumps(own.metadata.attributes)
    if isinstance(own, zarr.Array):  # and what it reads: zarr's own read of the same bytes
        (path / "x" / "c").mkdir()
        (path / "x" / "c" / "0").write_bytes(np.array([1, np.nan, np.inf, 2], "<f4").tobytes())
        (path / "x" / "0").write_bytes(np.array([1, np.nan, np.inf, 2], "<f4").tobytes())
        np.testing.assert_array_equal(_read(got), _read(own))


def _read(a):
    try:
        return np.asarray(a[...])
    except Exception as e:  # the same refusal on both sides
        return np.array(type(e).__name__)
