"""fpclass scan finds every array of a zarr store (v2 and v3, directories and zip files) at any
depth, with or without group metadata above it, each once, and checks the float values of array
and group attributes as "path@attribute": against zarr's own read of each array and attribute."""

import json
import zipfile

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

from fpclass.scan import ExitCode, scan  # noqa: E402
from test_scan_zarr import ALL, assert_matches, planted, result  # noqa: E402


def array_at(path, fmt, a, chunks=(3,)):
    """A zarr array written by zarr at `path` (no group metadata written above it)."""
    z = zarr.open_array(path, mode="w", shape=a.shape, chunks=chunks, dtype=a.dtype,
                        zarr_format=fmt)
    z[...] = a
    return z


def zarr_array(path):
    return np.asarray(zarr.open_array(path, mode="r")[...])


@pytest.mark.parametrize("fmt", [2, 3])
def test_arrays_below_folders_without_group_metadata(tmp_path, fmt):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    g.create_array("top", shape=(2,), dtype="f4")[...] = 1
    array_at(store / "sub" / "deep" / "b", fmt, planted("<f8", (7,), seed=1))
    array_at(store / "x" / "c", fmt, planted("<f4", (5,), seed=2))
    report = scan([tmp_path], **ALL)
    assert [t.name for t in report.tensors] == ["sub/deep/b", "top", "x/c"]
    assert report.files == [(str(store), "zarr")]      # one store, each array once
    for name in ("sub/deep/b", "x/c"):
        assert_matches(result(report, name), zarr_array(store / name))
    assert report.exit_code == ExitCode.FOUND


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_store_without_root_metadata(tmp_path, fmt):
    store = tmp_path / "bare.zarr"           # found by its name; no .zgroup / zarr.json at all
    array_at(store / "a", fmt, planted("<f4", (6,)))
    array_at(store / "g" / "b", fmt, planted("<f8", (4,), seed=3))
    report = scan([store], **ALL)
    assert [t.name for t in report.tensors] == ["a", "g/b"]
    assert_matches(result(report, "a"), zarr_array(store / "a"))
    assert_matches(result(report, "g/b"), zarr_array(store / "g" / "b"))
    assert not report.problems


def test_zip_store_with_an_array_below_a_folder_without_metadata(tmp_path):
    folder = tmp_path / "s"
    zarr.open_group(folder, mode="w", zarr_format=2)
    array_at(folder / "no_group" / "a", 2, planted("<f4", (6,)))
    path = tmp_path / "s.zarr.zip"
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(folder).as_posix())
    report = scan([path], **ALL)
    assert_matches(result(report, "no_group/a"), zarr_array(folder / "no_group" / "a"))


def flat_floats(value):
    """The float leaves of a parsed JSON value, in document order."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [x for v in value for x in flat_floats(v)]
    return []


@pytest.mark.parametrize("fmt", [2, 3])
def test_float_attributes_are_checked(tmp_path, fmt):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    g.attrs.update({"bad": float("-inf"), "name": "text", "n": 3})
    a = g.create_array("a", shape=(3,), dtype="i4")
    a[...] = 1
    a.attrs.update({"scale_factor": float("nan"), "ok": 2.5, "flags": [1, 2, True, None],
                    "nested": {"x": [1.0, float("inf")], "y": {"z": [[float("nan")]]}}})
    text = (store / "a" / (".zattrs" if fmt == 2 else "zarr.json")).read_text()
    assert "NaN" in text and "Infinity" in text             # JSON's NaN tokens, as zarr writes
    report = scan([store], **ALL)
    names = [t.name for t in report.tensors]
    assert names == ["@bad", "a", "a@scale_factor", "a@ok", "a@nested"]
    attrs = {"": zarr.open_group(store, mode="r").attrs.asdict(),
             "a": zarr.open_array(store / "a", mode="r").attrs.asdict()}
    for name in names:
        if "@" not in name:
            continue
        node, key = name.split("@")
        values = np.array(flat_floats(attrs[node][key]))
        t = result(report, name)
        assert t.status == "checked" and t.values_checked == values.size
        assert (t.nan, t.posinf, t.neginf) == (
            np.isnan(values).sum(), np.isposinf(values).sum(), np.isneginf(values).sum())
    assert result(report, "a").status == "not_applicable"
    assert report.exit_code == ExitCode.FOUND


def test_deeply_nested_attributes_do_not_crash(tmp_path):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=2)
    g.create_array("a", shape=(2,), dtype="f4")[...] = 1
    (store / "a" / ".zattrs").write_text('{"deep": ' + "[" * 200_000 + "]" * 200_000 + "}")
    (store / ".zattrs").write_text('{"d": ' + "[" * 500 + "NaN" + "]" * 500 + "}")
    report = scan([store], **ALL)
    assert result(report, "@d").nan == 1
    t = result(report, "a")
    assert t.status == "unchecked" and "zarr cannot open" in t.reason  # zarr's parser refuses
    assert report.exit_code == ExitCode.FOUND


def test_a_folder_reached_twice_through_a_link_is_read_once(tmp_path):
    store = tmp_path / "s.zarr"
    zarr.open_group(store, mode="w", zarr_format=2)
    array_at(store / "real" / "a", 2, planted("<f4", (6,)))
    (store / "link").symlink_to(store / "real")
    (store / "real" / "loop").symlink_to(store)
    report = scan([store], **ALL)
    checked = [t.name for t in report.tensors if t.status == "checked"]
    assert checked == ["real/a"]
    others = {t.name: t.reason for t in report.tensors if t.status != "checked"}
    assert sorted(others) == ["link", "real/loop"]
    assert all("not read twice" in r for r in others.values())


def test_a_huge_grid_of_chunks_never_written_is_unchecked_quickly(tmp_path, monkeypatch):
    """Found by the fuzz: a store of a few bytes declaring 2^30 chunks took hours (zarr reads
    each missing chunk as the fill value, about 0.1 ms each)."""
    z = zarr.create_array(tmp_path / "s.zarr", shape=(1 << 31,), chunks=(2,), dtype="f8")
    z[:4] = [1.0, np.nan, 3.0, 4.0]
    assert np.isnan(z[:4]).sum() == 1   # zarr reads it
    report = scan([tmp_path / "s.zarr"], **ALL)
    [t] = report.tensors
    assert t.status == "unchecked" and "chunks declared" in t.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE and report.seconds < 5
    from fpclass.scan.readers import zarr_store
    monkeypatch.setattr(zarr_store, "SPARSE_BLOCKS", 64)
    dense = zarr.create_array(tmp_path / "d.zarr", shape=(400,), chunks=(2,), dtype="f4")
    dense[...] = 1.0                    # 200 chunks, all written: read
    assert result(scan([tmp_path / "d.zarr"], **ALL), "").status == "checked"
    dense[:2] = np.nan                  # 1,000 declared, 201 stored: still read
    dense.resize((2000,))
    assert result(scan([tmp_path / "d.zarr"], **ALL), "").status == "checked"


def test_metadata_zarr_opens_but_cannot_describe_is_unchecked(tmp_path):
    """Found by the fuzz: a bool array whose fill value is a list opens, then fails in zarr's
    own to_dict (an internal error before)."""
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=3)
    g.create_array("z", shape=(3,), chunks=(2,), dtype="c8")[...] = 1
    meta = store / "z" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["data_type"] = "bool"
    meta.write_text(json.dumps(doc))
    report = scan([store], **ALL)
    t = result(report, "z")
    assert t.status == "unchecked" and "zarr cannot describe" in t.reason
    assert "internal error" not in t.reason


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_file_zarr_never_reads_inside_a_store_is_unchecked(tmp_path, fmt):
    # zarr reads metadata and chunk keys only: a NaN in any other file of the store is not in
    # zarr's answer, so the scan may not call the store clean
    store = tmp_path / "s.zarr"
    a = zarr.create_array(str(store / "g" / "a"), shape=(4,), chunks=(2,), dtype="f4",
                          zarr_format=fmt)
    a[:] = [1, 2, 3, 4]
    (store / "README.txt").write_text("how this store was made\n")
    (store / ".DS_Store").write_bytes(b"\0\0\0\1Bud1" + bytes(64))
    assert scan([str(store)]).exit_code == ExitCode.CLEAN   # chunks, metadata, text: all known
    np.save(store / "g" / "a" / "extra.npy", np.array([np.nan]))
    (store / "g" / "blob").write_bytes(bytes(range(256)))
    report = scan([str(store)])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert sorted(t.name for t in report.unchecked) == ["g/a/extra.npy", "g/blob"]
