"""fpclass scan on zarr stores (v2 and v3, directories and zip files) written by zarr itself: the
counts and locations against zarr's own full read of each array, fill values, data types that
are not floats, sharding, parts, and every way a store can fail to be read."""

import io
import json
import os
import pickle
import sys
import types

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
from zarr.codecs import BytesCodec  # noqa: E402

from fpclass.cli import main  # noqa: E402
from fpclass.scan import ExitCode, scan  # noqa: E402
from fpclass.scan.engine import plan, run_task  # noqa: E402
from fpclass.scan.readers import zarr_store  # noqa: E402
from fpclass.results.build import merge_parts  # noqa: E402
from test_scan_support import safetensors_bytes  # noqa: E402

ALL = dict(max_locations=10_000, threads=2)
FLOATS = ["<f2", "<f4", "<f8", "<c8", "<c16"]


def planted(dtype, shape, seed=0):
    """Finite values with NaN, +Inf and -Inf at the first and last element and at a few random
    places (in both parts of complex values)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    a = (rng.standard_normal(shape) + 3).astype(dtype)
    flat = a.reshape(-1)
    if dtype.kind == "c":
        flat += 1j * (rng.standard_normal(flat.size) + 3).astype(dtype)
    spots = {0, flat.size - 1} | set(rng.integers(0, flat.size, 6).tolist()) if flat.size else set()
    for k, i in enumerate(sorted(spots)):
        value = (np.nan, np.inf, -np.inf)[k % 3]
        if dtype.kind == "c" and k % 2:
            flat[i] = complex(flat[i].real, value)
        else:
            flat[i] = value if dtype.kind != "c" else complex(value, flat[i].imag)
    return a


def truth(a, missing=False):
    """(nan, +inf, -inf, {index: class}) of `a` (zarr's own read) by plain numpy; complex values
    as their parts (one more index); NaN named "missing" where the fill value is NaN."""
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag], axis=-1)
    f = a.astype(np.float64)
    classes = {}
    for cls, mask in (("missing" if missing else "nan", np.isnan(f)), ("posinf", np.isposinf(f)),
                      ("neginf", np.isneginf(f))):
        classes.update({tuple(int(i) for i in ix): cls for ix in np.argwhere(mask)})
    return int(np.isnan(f).sum()), int(np.isposinf(f).sum()), int(np.isneginf(f).sum()), classes


def assert_matches(t, a, missing=False, limit=ALL["max_locations"]):
    """`t` (a TensorResult) against `a`, zarr's read of the array: exact counts; the locations,
    which come in chunk order, are the first `limit` of the truth, each with its class."""
    nan, pinf, ninf, classes = truth(a, missing)
    assert t.status == "checked", t.reason
    assert (t.missing, t.nan) == ((nan, 0) if missing else (0, nan))
    assert (t.posinf, t.neginf) == (pinf, ninf)
    reported = {loc.index: loc.cls for loc in t.locations}
    assert len(reported) == len(t.locations) == min(limit, len(classes))
    wrong = {(i, c) for i, c in reported.items() if classes.get(i) != c}
    assert not wrong, wrong
    assert t.values_checked == a.size * (2 if a.dtype.kind == "c" else 1)


def result(report, name):
    [t] = [t for t in report.tensors if t.name == name]
    return t


def zarr_read(path, name=""):
    """Array `name` of the store at `path` as zarr itself reads it, whole."""
    store = (zarr.storage.LocalStore(path, read_only=True) if os.path.isdir(path)
             else zarr.storage.ZipStore(path, mode="r"))
    try:
        node = zarr.open(store=store, mode="r", use_consolidated=False)
        return np.asarray((node[name] if name else node)[...])
    finally:
        store.close()


def planned(store, name=""):
    """The task planned for array `name` of `store`."""
    [task] = [t for t in plan([store]) if t.name == name and t.status == "check"]
    return task


def create(group, name, a, chunks, compressed=True, **kw):
    z = group.create_array(name, shape=a.shape, chunks=chunks, dtype=a.dtype,
                           **({} if compressed else {"compressors": None}), **kw)
    z[...] = a
    return z


def compressor(fmt, name):
    """The compressor `name` ("zstd", "blosc", None) for a zarr v2 or v3 array."""
    import numcodecs
    if name is None:
        return None
    if fmt == 2:
        return {"zstd": numcodecs.Zstd(), "blosc": numcodecs.Blosc()}[name]
    return {"zstd": zarr.codecs.ZstdCodec(), "blosc": zarr.codecs.BloscCodec()}[name]


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue()


@pytest.mark.parametrize("chunk_bytes", [64, 4 << 20])  # a read per chunk (or part) / many
@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("dtype", FLOATS)
def test_arrays_in_nested_groups_match_zarrs_own_read(tmp_path, fmt, compressed, dtype,
                                                      chunk_bytes):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    create(g, "a", planted(dtype, (10, 13)), (4, 5), compressed)          # edge chunks
    create(g, "sub/deeper/b", planted(dtype, (3, 7, 6), 1), (2, 3, 6), compressed)
    create(g, "sub/c", planted(dtype, (50,), 2), (50,), compressed)       # one chunk
    create(g, "sub/nested_keys", planted(dtype, (9, 5), 3), (2, 2), compressed,
           chunk_key_encoding={"name": "v2", "separator": "/" if fmt == 2 else "."})
    report = scan([store], chunk_bytes=chunk_bytes, **ALL)
    assert [t.name for t in report.tensors] == ["a", "sub/c", "sub/deeper/b", "sub/nested_keys"]
    assert result(report, "a").dtype == (dtype if fmt == 2 else np.dtype(dtype).name)
    for name in ("a", "sub/c", "sub/deeper/b", "sub/nested_keys"):
        assert_matches(result(report, name), zarr_read(store, name))
    assert report.files == [(str(store), "zarr")]
    assert report.exit_code == ExitCode.FOUND


@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("dtype", [">f2", ">f4", ">f8", ">c8", ">c16"])
def test_big_endian_arrays(tmp_path, fmt, compressed, dtype):
    a = planted(dtype, (9, 8))
    g = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=fmt)
    kw = {"serializer": BytesCodec(endian="big")} if fmt == 3 else {}
    z = create(g, "be", a, (4, 3), compressed, **kw)
    if fmt == 2:
        assert z.metadata.to_dict()["dtype"] == dtype
    report = scan([tmp_path / "s.zarr"], chunk_bytes=48, **ALL)
    assert_matches(result(report, "be"), zarr_read(tmp_path / "s.zarr", "be"))
    label = result(report, "be").dtype    # as the metadata names it
    assert label == (dtype if fmt == 2 else {"f": "float", "c": "complex"}[dtype[1]]
                     + str(int(dtype[2:]) * 8))
    assert np.array_equal(zarr_read(tmp_path / "s.zarr", "be"), a, equal_nan=True)


def test_a_store_that_is_one_array_and_the_location_limit(tmp_path):
    a = planted("<f4", (20, 20))
    z = zarr.create_array(tmp_path / "one.zarr", shape=a.shape, chunks=(6, 7), dtype=a.dtype)
    z[...] = a
    report = scan([tmp_path / "one.zarr"], max_locations=3)
    assert [t.name for t in report.tensors] == [""]
    assert_matches(result(report, ""), zarr_read(tmp_path / "one.zarr"), limit=3)


@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_nan_fill_value_counts_unwritten_chunks_as_missing(tmp_path, fmt, compressed):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    z = g.create_array("part", shape=(12, 10), chunks=(4, 4), dtype="f4", fill_value=np.nan,
                       compressors=compressor(fmt, "zstd" if compressed else None))
    z[:4, :] = 1.5                 # chunk row 0 written, the rest never
    z[5, 5] = np.nan               # a NaN written into a chunk: also a blank
    report = scan([store], **ALL)
    t = result(report, "part")
    assert_matches(t, zarr_read(store, "part"), missing=True)
    assert t.missing == 12 * 10 - 4 * 10 and t.nan == 0
    assert report.exit_code == ExitCode.CLEAN   # missing is not a --fail-on class by default
    assert scan([store], fail_on="missing").exit_code == ExitCode.FOUND
    code, out = cli(store, "--fail-on", "missing")
    assert code == ExitCode.FOUND
    assert cli(store)[0] == ExitCode.CLEAN


@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_a_finite_fill_value_is_data_and_nan_is_nan(tmp_path, fmt, compressed):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    z = g.create_array("part", shape=(12, 10), chunks=(4, 4), dtype="f8", fill_value=-999.0,
                       compressors=compressor(fmt, "zstd" if compressed else None))
    z[:4, :] = 1.5
    z[2, 3] = np.nan
    z[1, 9] = -np.inf
    report = scan([store], **ALL)
    t = result(report, "part")
    assert_matches(t, zarr_read(store, "part"))
    assert (t.nan, t.neginf, t.missing) == (1, 1, 0)
    assert report.exit_code == ExitCode.FOUND


@pytest.mark.parametrize("fmt", [2, 3])
def test_0d_empty_and_integer_arrays(tmp_path, fmt):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    scalar = g.create_array("scalar", shape=(), dtype="f4")
    scalar[...] = np.inf
    raw = g.create_array("raw_scalar", shape=(), dtype="f8", compressors=None)
    raw[...] = -np.inf
    g.create_array("empty", shape=(0, 3), dtype="f4")
    create(g, "ints", np.arange(12, dtype="i4").reshape(3, 4), (2, 2))
    create(g, "flags", np.ones(5, bool), (2,))
    report = scan([store], **ALL)
    assert_matches(result(report, "scalar"), zarr_read(store, "scalar"))
    assert result(report, "scalar").locations[0].index == ()
    assert_matches(result(report, "raw_scalar"), zarr_read(store, "raw_scalar"))
    empty = result(report, "empty")
    assert (empty.status, empty.values_checked, empty.shape) == ("checked", 0, (0, 3))
    assert result(report, "ints").status == "not_applicable"
    assert result(report, "flags").status == "not_applicable"
    assert report.exit_code == ExitCode.FOUND


def test_sharded_arrays_by_shard_and_by_inner_chunk(tmp_path, monkeypatch):
    a = planted("<f4", (40, 30))
    z = zarr.create_array(tmp_path / "sh.zarr", shape=a.shape, chunks=(5, 5), shards=(20, 15),
                          dtype=a.dtype)
    z[...] = a
    truth_ = zarr_read(tmp_path / "sh.zarr")
    by_shard = scan([tmp_path / "sh.zarr"], chunk_bytes=64, **ALL)
    assert_matches(result(by_shard, ""), truth_)
    task = planned(tmp_path / "sh.zarr")
    assert task.storage.nblocks == 2 * 2
    monkeypatch.setattr(zarr_store, "SHARD_BYTES", 20 * 15 * 4 - 1)   # too big: inner chunks
    task = planned(tmp_path / "sh.zarr")
    assert task.storage.nblocks == 8 * 6
    for chunk_bytes in (64, 5 * 5 * 4 * 7, 1 << 20):
        assert_matches(result(scan([tmp_path / "sh.zarr"], chunk_bytes=chunk_bytes, **ALL), ""),
                       truth_)


@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
@pytest.mark.parametrize("dtype", ["<f4", "<c8"])
def test_parts_over_block_ranges_add_up_to_the_whole(tmp_path, dtype, compressed):
    a = planted(dtype, (11, 9, 4))
    store = tmp_path / "s.zarr"
    z = zarr.create_array(store, shape=a.shape, chunks=(3, 4, 4), dtype=a.dtype,
                          **({} if compressed else {"compressors": None}))
    z[...] = a
    task = planned(store)
    assert task.storage.nblocks == 4 * 3 * 1
    whole = run_task(task, 10_000, chunk_bytes=64)
    assert_matches(whole, zarr_read(store))
    for cuts in ([0, 1, 12], [0, 5, 6, 11, 12], list(range(13))):
        parts = [run_task(task.part(b, e - b), 10_000, chunk_bytes=100)
                 for b, e in zip(cuts, cuts[1:])]
        merged = merge_parts(parts, 10_000)
        assert (merged.nan, merged.posinf, merged.neginf, merged.values_checked) == (
            whole.nan, whole.posinf, whole.neginf, whole.values_checked)
        assert sorted(merged.locations, key=lambda l: l.index) == sorted(
            whole.locations, key=lambda l: l.index)


@pytest.mark.parametrize("fmt", [2, 3])
def test_zip_store(tmp_path, fmt):
    path = tmp_path / "s.zarr.zip"
    zstore = zarr.storage.ZipStore(path, mode="w")
    g = zarr.open_group(store=zstore, mode="w", zarr_format=fmt)
    create(g, "sub/a", planted("<f8", (7, 9)), (3, 4))
    create(g, "b", planted("<f4", (30,), 1), (8,), compressed=False)
    zstore.close()
    report = scan([tmp_path], **ALL)
    assert report.files == [(str(path), "zarr")]
    assert_matches(result(report, "sub/a"), zarr_read(path, "sub/a"))
    assert_matches(result(report, "b"), zarr_read(path, "b"))
    assert not report.problems and not report.skipped


#: (compressor, damage done to a chunk file). Any bytes of the right length are an uncompressed
#: chunk, so garbage is only damage to compressed ones.
DAMAGES = [("zstd", "truncated"), ("zstd", "garbage"), ("blosc", "truncated"),
           ("blosc", "garbage"), (None, "truncated"), (None, "extended")]


@pytest.mark.parametrize("codec, damage", DAMAGES)
@pytest.mark.parametrize("fmt", [2, 3])
def test_a_corrupt_chunk_makes_its_array_unchecked(tmp_path, fmt, codec, damage):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    bad = g.create_array("bad", shape=(12, 12), chunks=(4, 4), dtype="f4",
                         compressors=compressor(fmt, codec))
    bad[...] = planted("<f4", (12, 12))
    create(g, "good", planted("<f4", (5,)), (5,))
    key = bad.metadata.encode_chunk_key((1, 2))
    chunk = store / "bad" / key
    data = chunk.read_bytes()
    chunk.write_bytes({"truncated": data[: len(data) // 2], "extended": data + bytes(4),
                       "garbage": bytes(i * 7 % 251 for i in range(len(data)))}[damage])
    report = scan([store], **ALL)
    t = result(report, "bad")
    assert t.status == "unchecked"
    assert repr(key) in t.reason and "\n" not in t.reason
    assert_matches(result(report, "good"), zarr_read(store, "good"))
    assert report.exit_code == ExitCode.FOUND   # found in "good"; "bad" alone would give 2
    assert scan([store], fail_on="").exit_code == ExitCode.INCONCLUSIVE


def test_store_zarr_refuses_is_a_problem_with_zarrs_reason(tmp_path):
    store = tmp_path / "s.zarr"
    store.mkdir()
    (store / "zarr.json").write_text('{"zarr_format": 3, "node_type": ')
    report = scan([store])
    [p] = report.problems
    assert p.path == str(store) and p.reason.startswith("zarr cannot open the store: ")
    assert "JSONDecodeError" in p.reason and "\n" not in p.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE
    (tmp_path / "none.zarr").mkdir()
    [p] = scan([tmp_path / "none.zarr"]).problems
    assert "zarr cannot open the store: " in p.reason


@pytest.mark.parametrize("fmt", [2, 3])
def test_an_array_zarr_refuses_inside_a_group_is_unchecked(tmp_path, fmt):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=fmt)
    create(g, "ok", planted("<f4", (6,)), (3,))
    create(g, "sub/broken", planted("<f4", (6,)), (3,))
    meta = store / "sub" / "broken" / (".zarray" if fmt == 2 else "zarr.json")
    doc = json.loads(meta.read_text())
    doc["dtype" if fmt == 2 else "data_type"] = "no-such-type"
    meta.write_text(json.dumps(doc))
    (store / "notes").mkdir()   # not a zarr node: not an array either
    (store / "notes" / "x.txt").write_text("x")
    report = scan([store], **ALL)
    t = result(report, "sub/broken")
    assert t.status == "unchecked" and "no-such-type" in t.reason
    assert t.reason.startswith("zarr cannot open this array or group: ")
    assert_matches(result(report, "ok"), zarr_read(store, "ok"))
    assert [t.name for t in report.tensors] == ["ok", "sub/broken"]
    assert not report.problems and not report.skipped


def test_missing_zarr_names_the_extra(tmp_path, monkeypatch):
    z = zarr.create_array(tmp_path / "s.zarr", shape=(3,), dtype="f4")
    z[...] = 1
    monkeypatch.setitem(sys.modules, "zarr", None)
    report = scan([tmp_path / "s.zarr"])
    [p] = report.problems
    assert "fpclass[zarr]" in p.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE
    code, out = cli(tmp_path / "s.zarr")
    assert code == ExitCode.INCONCLUSIVE and "fpclass[zarr]" in out


def test_an_old_zarr_names_the_version_needed(tmp_path, monkeypatch):
    z = zarr.create_array(tmp_path / "s.zarr", shape=(3,), dtype="f4")
    z[...] = 1
    monkeypatch.setitem(sys.modules, "zarr", types.SimpleNamespace(__version__="2.18.7"))
    [p] = scan([tmp_path / "s.zarr"]).problems
    assert "zarr-python >= 3.1" in p.reason and "2.18.7 is installed" in p.reason
    assert "fpclass[zarr]" in p.reason


def test_a_store_beside_other_files_is_read_as_one_unit(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(
        safetensors_bytes({"w": ("F32", np.ones(4, np.float32), (4,))}))
    g = zarr.open_group(tmp_path / "fields", mode="w", zarr_format=2)   # found by .zgroup
    create(g, "t", planted("<f4", (8, 8)), (2, 2))
    z = zarr.create_array(tmp_path / "more.zarr", shape=(4,), chunks=(2,), dtype="f4")
    z[...] = 1
    report = scan([tmp_path], **ALL)
    assert sorted(report.files) == sorted([
        (str(tmp_path / "model.safetensors"), "safetensors"),
        (str(tmp_path / "fields"), "zarr"), (str(tmp_path / "more.zarr"), "zarr")])
    assert not report.skipped and not report.problems   # no chunk file listed on its own
    assert_matches(result(report, "t"), zarr_read(tmp_path / "fields", "t"))
    assert report.exit_code == ExitCode.FOUND


def test_data_types_that_are_not_floats(tmp_path):
    store = tmp_path / "s.zarr"
    g = zarr.open_group(store, mode="w", zarr_format=2)
    create(g, "text", np.array(["a", "bc"]), (2,))
    create(g, "when", np.array(["2020-01-01", "NaT"], "M8[s]"), (2,))
    create(g, "pairs", np.zeros(3, [("x", "<f4"), ("n", "<i2")]), (3,))
    create(g, "counts", np.zeros(3, [("n", "<i2"), ("m", "u1")]), (3,))
    create(g, "blob", np.zeros(3, "V4"), (3,))
    report = scan([store])
    why = {t.name: (t.status, t.reason) for t in report.tensors}
    assert why["text"] == ("not_applicable", "strings: not a floating-point type")
    assert why["when"][0] == "not_applicable"
    assert why["pairs"][0] == "unchecked" and "floating-point fields (x)" in why["pairs"][1]
    assert why["counts"][0] == "not_applicable"
    assert why["blob"][0] == "unchecked" and "opaque" in why["blob"][1]


class _MakesDirectory:
    """Unpickled, creates a directory: proof that a pickle ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_pickle_codecs_are_never_decoded(tmp_path):
    """Nothing in a store is unpickled, whatever its metadata says."""
    store = tmp_path / "s.zarr"
    z = zarr.create_array(store, shape=(2,), chunks=(2,), dtype="f8", zarr_format=2,
                          compressors=None)
    z[...] = 1
    meta = json.loads((store / ".zarray").read_text())
    meta["filters"] = [{"id": "pickle", "protocol": 5}]
    (store / ".zarray").write_text(json.dumps(meta))
    ran = tmp_path / "pickle-ran"
    (store / "0").write_bytes(pickle.dumps(_MakesDirectory(str(ran))))
    report = scan([store])
    [p] = report.problems   # zarr 3.1 refuses pickle codecs: the store cannot be opened
    assert "pickle" in p.reason
    assert not ran.exists()


def test_an_array_changed_since_planning_is_unchecked(tmp_path):
    z = zarr.create_array(tmp_path / "s.zarr", shape=(8,), chunks=(4,), dtype="f4")
    z[...] = 1
    task = planned(tmp_path / "s.zarr")
    z = zarr.create_array(tmp_path / "s.zarr", shape=(9,), chunks=(4,), dtype="f4",
                          overwrite=True)
    r = run_task(task)
    assert r.status == "unchecked" and "changed since" in r.reason
