"""fpclass scan of HDF5, NetCDF-4, NetCDF classic (CDF-1/2/5) and .keras files: every count
against the format's own library (h5py, netCDF4) reading the same file, and every location
against numpy's argwhere of that read, in the order the file stores the values (C order for
contiguous data and NetCDF classic variables, chunk after chunk for chunked datasets)."""

import io
import itertools
import re
import struct
import sys
import time
import zipfile

import numpy as np
import pytest

from fpclass.cli import main
from fpclass.scan import ExitCode, engine, scan

CHUNK = 64   # bytes per read in these tests: boundaries every few values
ALL = dict(chunk_bytes=CHUNK, max_locations=10_000, threads=2)


def h5py():
    return pytest.importorskip("h5py")


def netCDF4():
    return pytest.importorskip("netCDF4")


def classes_of(a):
    """Float64 values of `a` (complex: a trailing axis of parts) and their class names."""
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag], axis=-1)
    f = np.asarray(a, dtype=np.float64)
    cls = np.full(f.shape, "", dtype=object)
    cls[np.isnan(f)] = "nan"
    cls[np.isposinf(f)] = "posinf"
    cls[np.isneginf(f)] = "neginf"
    return cls


def truth(a, chunks=None, missing=False):
    """(nan, +inf, -inf, missing, [(index, class)] in storage order) of the library's array `a`:
    C order, or chunk after chunk (C order of the chunk grid, C order inside each chunk)."""
    cls = classes_of(a)
    if missing:
        cls[cls == "nan"] = "missing"
    counts = tuple(int((cls == c).sum()) for c in ("nan", "posinf", "neginf", "missing"))
    if chunks is None:
        order = [tuple(int(i) for i in ix) for ix in np.argwhere(cls != "")]
    else:
        order = []
        grid = [range(0, n, c) for n, c in zip(a.shape, chunks)]
        for start in itertools.product(*grid):
            sel = tuple(slice(s, s + c) for s, c in zip(start, chunks))
            tail = cls.ndim - len(chunks)
            for ix in np.argwhere(cls[sel] != ""):
                order.append(tuple(int(s) + int(i) for s, i in zip(start + (0,) * tail, ix)))
    return counts + ([(ix, cls[ix]) for ix in order],)


def tensor(report, name):
    found = [t for t in report.tensors if t.name == name]
    assert len(found) == 1, (name, [t.name for t in report.tensors])
    return found[0]


def assert_as_library(t, a, chunks=None, missing=False):
    nan, pinf, ninf, miss, locs = truth(a, chunks, missing)
    assert (t.status, t.nan, t.posinf, t.neginf, t.missing) == ("checked", nan, pinf, ninf,
                                                                   miss), t.reason
    got = [(loc.index, loc.cls) for loc in t.locations]
    assert got == locs[:len(got)] and len(got) == min(len(locs), 10_000)


def planted(shape, dtype, seed=0):
    """Finite values with NaN, +Inf and -Inf at known places: the first and last element and a
    few in between."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 2).astype(dtype)
    flat = a.reshape(-1)
    kinds = [np.nan, np.inf, -np.inf]
    if flat.size:
        for k, i in enumerate(sorted({0, flat.size - 1, flat.size // 3, flat.size // 2, 17}
                                     & set(range(flat.size)))):
            flat[i] = kinds[k % 3] if a.dtype.kind == "f" else complex(kinds[k % 3], k)
    return a


# -- HDF5 ------------------------------------------------------------------------------------

def test_hdf5_datasets_in_groups_match_h5py(tmp_path):
    h = h5py()
    path = tmp_path / "w.h5"
    data = {
        "contig/le_f4": planted((7, 13), "<f4"),
        "contig/be_f4": planted((5, 11), ">f4"),
        "contig/f2": planted((33,), "<f2"),
        "contig/be_f8": planted((3, 4, 5), ">f8"),
        "contig/c8": planted((9,), "<c8"),
        "contig/be_c16": planted((2, 5), ">c16"),
        "scalar": np.float32(np.nan),
    }
    chunked = {
        "chunked/gzip": (planted((37, 23), "<f4", 1), (8, 5), dict(compression="gzip",
                                                                   shuffle=True)),
        "chunked/plain_be": (planted((19, 6), ">f8", 2), (4, 4), {}),
        "chunked/lzf_c8": (planted((30,), "<c8", 3), (7,), dict(compression="lzf")),
        "chunked/f2_fletcher": (planted((8, 9, 10), "<f2", 4), (3, 4, 5),
                                dict(fletcher32=True)),
    }
    with h.File(path, "w") as f:
        for name, a in data.items():
            f.create_dataset(name, data=a)
        for name, (a, chunks, opts) in chunked.items():
            f.create_dataset(name, data=a, chunks=chunks, **opts)
        f.create_dataset("ints", data=np.arange(6, dtype="<i4"))
        f.create_dataset("bools", data=np.array([True, False]))
        f.create_dataset("text", data=np.array([b"ab", b"cd"]))
        f.create_dataset("vlen_text", data=["x", "yz"], dtype=h.string_dtype())
        f.create_dataset("empty", shape=(0, 4), dtype="<f4")
        f.create_dataset("empty_chunked", shape=(3, 0), dtype="<f4", chunks=(2, 2),
                         maxshape=(None, None))
        f.create_dataset("null", data=h.Empty("<f4"))
    tasks = {t.name: t for t in engine.plan([path])}
    assert {tasks[n].storage.kind for n in data} == {"raw"}       # contiguous: positioned reads
    assert {tasks[n].storage.kind for n in chunked} == {"dataset"}
    report = scan([path], **ALL)
    with h.File(path, "r") as f:
        for name in [*data, *chunked]:
            chunks = chunked[name][1] if name in chunked else None
            assert_as_library(tensor(report, name), f[name][()], chunks)
    for name in ("ints", "bools", "text", "vlen_text"):
        assert tensor(report, name).status == "not_applicable"
    assert tensor(report, "empty").status == tensor(report, "empty_chunked").status == "checked"
    assert tensor(report, "null").status == "not_applicable"
    assert not report.problems and not report.unchecked
    assert report.exit_code == ExitCode.FOUND


def test_hdf5_locations_are_the_first_in_chunk_order(tmp_path):
    # chunks (16, 8): the C order of the chunk grid reaches chunk (0, 1) before chunk (1, 0),
    # and both before the last row of chunk (0, 0) would come in C order of the whole array
    h = h5py()
    a = np.ones((40, 30), "<f4")
    a[20, 0] = a[21, 3] = np.nan          # chunk (1, 0)
    a[0, 9] = a[3, 12] = np.inf           # chunk (0, 1)
    a[15, 7] = -np.inf                    # chunk (0, 0), last row
    a[39, 29] = np.nan
    path = tmp_path / "c.h5"
    with h.File(path, "w") as f:
        f.create_dataset("x", data=a, chunks=(16, 8), compression="gzip")
    t = tensor(scan([path], max_locations=4), "x")
    nan, pinf, ninf, _, locs = truth(a, (16, 8))
    assert (t.nan, t.posinf, t.neginf) == (nan, pinf, ninf) == (3, 2, 1)
    assert [(loc.index, loc.cls) for loc in t.locations] == locs[:4] == [
        ((15, 7), "neginf"), ((0, 9), "posinf"), ((3, 12), "posinf"), ((20, 0), "nan")]
    everywhere = {tuple(int(i) for i in ix) for ix in np.argwhere(~np.isfinite(a))}
    assert {loc.index for loc in t.locations} <= everywhere


def test_hdf5_parts_and_threads_agree(tmp_path):
    # a DATASET task cut into parts (first/count over its chunks) covers each chunk once
    h = h5py()
    a = planted((50, 20), "<f8")
    path = tmp_path / "p.h5"
    with h.File(path, "w") as f:
        f.create_dataset("x", data=a, chunks=(7, 6), compression="gzip")
    [task] = [t for t in engine.plan([path]) if t.name == "x"]
    assert task.storage.nblocks == 8 * 4
    parts = [task.part(first, 5) for first in range(0, task.storage.nblocks, 5)]
    results, _ = engine.execute(parts, threads=3, max_locations=10_000)
    report = engine.assemble(parts, results, max_locations=10_000)
    assert_as_library(tensor(report, "x"), a, (7, 6))


def test_hdf5_chunks_a_filter_skipped_or_corrupt(tmp_path):
    # HDF5 marks, chunk by chunk, the filters it did not apply (filter_mask): chunks written
    # shuffled only, shuffled and deflated, and one whose deflate stream is corrupt
    h = h5py()
    import zlib
    a = planted((4, 6), "<f4")
    path = tmp_path / "m.h5"
    with h.File(path, "w") as f:
        d = f.create_dataset("x", shape=(4, 6), dtype="<f4", chunks=(2, 6), shuffle=True,
                             compression="gzip")
        for row, mask in ((0, 0b10), (2, 0b00)):
            shuffled = a[row:row + 2].view(np.uint8).reshape(-1, 4).T.tobytes()
            d.id.write_direct_chunk((row, 0), shuffled if mask else zlib.compress(shuffled),
                                    filter_mask=mask)
        bad = f.create_dataset("bad", shape=(4,), dtype="<f4", chunks=(4,), compression="gzip")
        bad.id.write_direct_chunk((0,), b"not deflate data", filter_mask=0)
    report = scan([path], **ALL)
    with h.File(path, "r") as f:
        assert np.array_equal(f["x"][()], a, equal_nan=True)
    assert_as_library(tensor(report, "x"), a, (2, 6))
    assert "corrupt deflate data" in tensor(report, "bad").reason


def test_hdf5_large_chunked_dataset_runs_as_parts(tmp_path):
    h = h5py()
    a = planted((64, 40), "<f4")
    path = tmp_path / "big.h5"
    with h.File(path, "w") as f:
        f.create_dataset("x", data=a, chunks=(8, 8), compression="gzip")
    parts = [t for t in engine.plan([path], task_bytes=1000) if t.name == "x"]
    assert len(parts) > 1 and sum(t.count for t in parts) == 8 * 5
    assert_as_library(tensor(scan([path], task_bytes=1000, **ALL), "x"), a, (8, 8))


def test_hdf5_compound_fields_and_array_types(tmp_path):
    # one task per floating-point field ("dataset.field", nested "dataset.outer.inner"),
    # integer fields not applicable; array types add trailing axes, as h5py reads them
    h = h5py()
    inner = np.dtype([("u", "<f2"), ("n", "<i2")])
    rec = np.dtype([("a", "<f4"), ("b", "<i4"), ("c", ">f8", (2,)), ("z", "<c8"),
                    ("s", inner)])
    a = np.zeros(12, rec)
    a["a"] = planted((12,), "<f4")
    a["c"] = planted((12, 2), ">f8", 1)
    a["z"] = planted((12,), "<c8", 2)
    a["s"]["u"] = planted((12,), "<f2", 3)
    arr = planted((6, 4, 3), "<f4", 4)
    path = tmp_path / "r.h5"
    with h.File(path, "w") as f:
        f.create_dataset("table", data=a)
        f.create_dataset("table_chunked", data=a, chunks=(5,), compression="gzip")
        vec = f.create_dataset("vec3", shape=(6, 4), dtype=np.dtype(("<f4", (3,))))
        vec[...] = arr
        assert vec.id.get_type().get_class() == h.h5t.ARRAY
    report = scan([path], **ALL)
    with h.File(path, "r") as f:
        for ds, chunks in (("table", None), ("table_chunked", (5,))):
            back = f[ds][()]
            for field, values in (("a", back["a"]), ("c", back["c"]), ("z", back["z"]),
                                  ("s.u", back["s"]["u"])):
                assert_as_library(tensor(report, f"{ds}.{field}"), values, chunks)
            for field in ("b", "s.n"):
                assert tensor(report, f"{ds}.{field}").status == "not_applicable"
        vec = f["vec3"][()]
    assert vec.shape == (6, 4, 3)
    assert_as_library(tensor(report, "vec3"), vec)
    assert tensor(report, "vec3").shape == (6, 4, 3)


def test_hdf5_never_written_storage_is_its_fill_value(tmp_path):
    h = h5py()
    path = tmp_path / "f.h5"
    with h.File(path, "w") as f:
        f.create_dataset("zero_fill", shape=(1000, 1000), dtype="<f4")
        f.create_dataset("nan_fill", shape=(20, 3), dtype="<f4", fillvalue=np.nan)
        part = f.create_dataset("part_written", shape=(25, 7), dtype=">f8", chunks=(10, 4),
                                fillvalue=-np.inf)
        part[0:10, 0:4] = 5.0
        part[12, 5] = np.nan
        f.create_dataset("chunked_unwritten", shape=(10**6,), dtype="<f4", chunks=(1000,),
                         fillvalue=7.0)
    report = scan([path], **ALL)
    with h.File(path, "r") as f:
        for name in ("nan_fill", "part_written"):
            chunks = f[name].chunks
            assert_as_library(tensor(report, name), f[name][()], chunks)
    # a finite fill value: checked from the fill value, without reading a million values
    for name in ("zero_fill", "chunked_unwritten"):
        t = tensor(report, name)
        assert (t.status, t.nonfinite) == ("checked", 0)
        assert t.bytes_checked < 4 * 1000 * 2


def test_hdf5_without_a_fill_value_unwritten_data_is_unchecked(tmp_path):
    h = h5py()
    path = tmp_path / "n.h5"
    with h.File(path, "w") as f:
        dcpl = h.h5p.create(h.h5p.DATASET_CREATE)
        dcpl.set_fill_time(h.h5d.FILL_TIME_NEVER)
        h.h5d.create(f.id, b"undefined", h.h5t.IEEE_F32LE, h.h5s.create_simple((10,)), dcpl=dcpl)
    t = tensor(scan([path]), "undefined")
    assert t.status == "unchecked" and "undefined" in t.reason


def test_hdf5_links_stay_inside_the_file(tmp_path):
    h = h5py()
    path = tmp_path / "l.h5"
    with h.File(tmp_path / "other.h5", "w") as f:
        f["x"] = np.full(3, np.nan, "<f4")
    with h.File(path, "w") as f:
        f["g/d"] = np.array([1.0, np.inf])
        f["g/again"] = f["g/d"]              # a second hard link: one dataset
        f["g/up"] = f["g"]                   # a hard-link cycle
        f["soft"] = h.SoftLink("/g")
        f["loop"] = h.SoftLink("/loop")
        f["dangling"] = h.SoftLink("/nowhere")
        f["ext"] = h.ExternalLink("other.h5", "/x")
    report = scan([path])
    assert sorted(t.name for t in report.tensors) == ["ext", "g/again"]  # each dataset once
    assert tensor(report, "g/again").posinf == 1
    ext = tensor(report, "ext")
    assert ext.status == "unchecked" and "other.h5" in ext.reason and "not followed" in ext.reason
    assert report.exit_code == ExitCode.FOUND


def test_hdf5_virtual_and_external_storage_are_unchecked(tmp_path):
    h = h5py()
    with h.File(tmp_path / "src.h5", "w") as f:
        f["x"] = np.full(4, np.nan, "<f4")
    (tmp_path / "raw.bin").write_bytes(np.full(4, np.nan, "<f4").tobytes())
    path = tmp_path / "v.h5"
    layout = h.VirtualLayout(shape=(4,), dtype="<f4")
    layout[:] = h.VirtualSource(str(tmp_path / "src.h5"), "x", shape=(4,))
    with h.File(path, "w") as f:
        f.create_virtual_dataset("virtual", layout)
        f.create_dataset("external", shape=(4,), dtype="<f4",
                         external=[(str(tmp_path / "raw.bin"), 0, 16)])
    report = scan([path])
    assert "virtual dataset" in tensor(report, "virtual").reason
    assert "external file" in tensor(report, "external").reason
    assert len(report.unchecked) == 2 and report.exit_code == ExitCode.INCONCLUSIVE


def test_hdf5_types_that_cannot_be_read_are_unchecked(tmp_path):
    h = h5py()
    path = tmp_path / "t.h5"
    custom = h.h5t.IEEE_F32LE.copy()           # a 32-bit float with a 9-bit exponent
    custom.set_fields(31, 22, 9, 0, 22)
    custom.set_ebias(255)
    with h.File(path, "w") as f:
        f.create_dataset("opaque", data=np.zeros(2, "V4"))
        f.create_dataset("vlen", shape=(2,), dtype=h.vlen_dtype(np.float32))
        f.create_dataset("refs", shape=(2,), dtype=h.ref_dtype)
        h.h5d.create(f.id, b"odd_float", custom, h.h5s.create_simple((3,)))
    report = scan([path])
    assert "opaque" in tensor(report, "opaque").reason
    assert "variable-length" in tensor(report, "vlen").reason
    assert "layout" in tensor(report, "odd_float").reason
    assert {t.name for t in report.unchecked} == {"opaque", "vlen", "odd_float"}
    assert tensor(report, "refs").status == "not_applicable"


def test_hdf5_bfloat16_and_userblock(tmp_path):
    # bfloat16 as an HDF5 float type (8-bit exponent, 7-bit mantissa), read as stored; a
    # userblock shifts every offset
    h = h5py()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = h.h5t.IEEE_F16LE.copy()
    bf16.set_fields(15, 7, 8, 0, 7)
    bf16.set_ebias(127)
    values = planted((20,), "<f4").astype(ml_dtypes.bfloat16)
    path = tmp_path / "u.h5"
    with h.File(path, "w", userblock_size=512) as f:
        d = h.h5d.create(f.id, b"bf16", bf16, h.h5s.create_simple((20,)))
        d.write(h.h5s.ALL, h.h5s.ALL, values.view("<u2"), mtype=bf16)
        f["f4"] = planted((9,), "<f4", 1)
    report = scan([path], **ALL)
    assert_as_library(tensor(report, "bf16"), values.astype(np.float32))
    with h.File(path, "r") as f:
        assert_as_library(tensor(report, "f4"), f["f4"][()])


def test_hdf5_compact_and_uncompressed_chunks(tmp_path):
    h = h5py()
    a = planted((5, 6), "<f4")
    b = planted((41, 17), ">f4", 1)
    path = tmp_path / "k.h5"
    with h.File(path, "w") as f:
        dcpl = h.h5p.create(h.h5p.DATASET_CREATE)
        dcpl.set_layout(h.h5d.COMPACT)
        d = h.h5d.create(f.id, b"compact", h.h5t.IEEE_F32LE, h.h5s.create_simple(a.shape),
                         dcpl=dcpl)
        d.write(h.h5s.ALL, h.h5s.ALL, a)
        f.create_dataset("chunks", data=b, chunks=(8, 8))
    report = scan([path], **ALL)
    assert_as_library(tensor(report, "compact"), a)
    assert_as_library(tensor(report, "chunks"), b, (8, 8))


def test_junk_with_hdf5_magic_is_a_problem(tmp_path):
    h5py()
    path = tmp_path / "weights.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    report = scan([path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    [p] = report.problems
    assert "not a readable HDF5 file" in p.reason


def test_missing_h5py_is_a_problem_naming_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "w.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    monkeypatch.setitem(sys.modules, "h5py", None)
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", str(path)], stdout=out, stderr=err)
    assert code == ExitCode.INCONCLUSIVE
    assert "fpclass[hdf5]" in out.getvalue()


# -- NetCDF-4 ---------------------------------------------------------------------------------

def test_netcdf4_fill_values(tmp_path):
    nc = netCDF4()
    path = tmp_path / "d.nc"
    a = planted((6, 10), "<f4")
    b = planted((4, 5), "<f8", 1)
    with nc.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 10)
        ds.createDimension("y", 5)
        v = ds.createVariable("blank_nan", "f4", ("t", "x"), fill_value=np.nan, zlib=True)
        v[0:6, :] = a
        w = ds.createVariable("fill_999", "f8", ("t", "y"), fill_value=-999.0)
        w[0:4, :] = b
        ds.createVariable("unwritten_nan", "f4", ("x",), fill_value=np.nan)
        g = ds.createGroup("sub")
        m = g.createVariable("missing_nan", "f4", ("x",))
        m.missing_value = np.float32(np.nan)
        m[:] = a[0]
    report = scan([path], **ALL)
    h = h5py()
    with h.File(path, "r") as f:
        for name, missing in (("blank_nan", True), ("fill_999", False),
                              ("unwritten_nan", True), ("sub/missing_nan", True)):
            assert_as_library(tensor(report, name), f[name][()], f[name].chunks, missing)
    assert tensor(report, "blank_nan").missing == int(np.isnan(a).sum())
    assert tensor(report, "unwritten_nan").missing == 10
    assert tensor(report, "fill_999").nan == int(np.isnan(b).sum())
    # netCDF4's own read agrees (unmasked)
    with nc.Dataset(path) as ds:
        ds.set_auto_mask(False)
        assert np.array_equal(ds["blank_nan"][:], a, equal_nan=True)


# -- NetCDF classic ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"])
def test_netcdf3_fixed_and_record_variables_match_netcdf4(tmp_path, fmt):
    nc = netCDF4()
    path = tmp_path / "c.nc"
    with nc.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 7)
        ds.createDimension("y", 3)
        ds.createVariable("fixed", "f4", ("x", "y"))[:] = planted((7, 3), "f4")
        ds.createVariable("scalar", "f8", ())[...] = np.inf
        ds.createVariable("rec_f8", "f8", ("time", "x"))[0:9] = planted((9, 7), "f8", 1)
        s = ds.createVariable("rec_f4", "f4", ("time",), fill_value=np.nan)
        s[0:9] = planted((9,), "f4", 2)
        ds.createVariable("rec_i2", "i2", ("time", "y"))[0:9] = np.ones((9, 3))
        ds.createVariable("rec_3d", "f4", ("time", "y", "x"))[0:9] = planted((9, 3, 7), "f4", 3)
    tasks = {t.name: t for t in engine.plan([path])}
    assert tasks["rec_f8"].storage.kind == "strided" and tasks["fixed"].storage.kind == "raw"
    report = scan([path], **ALL)
    with nc.Dataset(path) as ds:
        ds.set_auto_mask(False)
        for name in ("fixed", "scalar", "rec_f8", "rec_f4", "rec_3d"):
            assert_as_library(tensor(report, name), ds[name][...], missing=name == "rec_f4")
    assert tensor(report, "rec_i2").status == "not_applicable"
    assert tensor(report, "rec_f4").missing > 0
    assert not report.problems and not report.unchecked


def test_netcdf3_records_not_a_whole_number_of_values_apart(tmp_path):
    # records of 8 + 4 bytes: the doubles are 1.5 values apart, read a block of records at a time
    nc = netCDF4()
    path = tmp_path / "odd.nc"
    with nc.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("t", None)
        ds.createVariable("d", "f8", ("t",))[0:11] = planted((11,), "f8")
        ds.createVariable("f", "f4", ("t",))[0:11] = planted((11,), "f4", 1)
    tasks = {t.name: t for t in engine.plan([path])}
    assert tasks["d"].storage.kind == "bands" and tasks["f"].storage.kind == "strided"
    report = scan([path], **ALL)
    with nc.Dataset(path) as ds:
        ds.set_auto_mask(False)
        assert_as_library(tensor(report, "d"), ds["d"][:])
        assert_as_library(tensor(report, "f"), ds["f"][:])


def test_netcdf3_streaming_numrecs_and_truncation(tmp_path):
    nc = netCDF4()
    path = tmp_path / "s.nc"
    a = planted((6, 4), "f4")
    with nc.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 4)
        ds.createVariable("r", "f4", ("t", "x"))[0:6] = a
        ds.createVariable("q", "f8", ("t",))[0:6] = np.arange(6.0)
    raw = bytearray(path.read_bytes())
    assert struct.unpack(">I", raw[4:8]) == (6,)
    raw[4:8] = b"\xff\xff\xff\xff"          # numrecs "streaming": counted from the file size
    path.write_bytes(raw)
    assert_as_library(tensor(scan([path], **ALL), "r"), a)
    path.write_bytes(raw[:-10])             # records of 16 + 8 bytes: 5 whole ones remain
    report = scan([path], **ALL)
    assert_as_library(tensor(report, "r"), a[:5])
    raw[4:8] = struct.pack(">I", 6)
    path.write_bytes(raw[:-10])             # 6 records declared, 5 and a bit present
    [planned] = [t for t in engine.plan([path]) if t.name == "r"]
    assert planned.status == "unchecked"    # refused from the header, nothing read
    report = scan([path], **ALL)
    assert "truncated" in tensor(report, "r").reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_netcdf3_single_record_variable_is_not_padded(tmp_path):
    # one record variable of 3 shorts: records are 6 bytes apart (not padded to 8), which the
    # record count of a streaming file depends on
    nc = netCDF4()
    path = tmp_path / "one.nc"
    with nc.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 3)
        ds.createVariable("fixed", "f4", ("x",))[:] = [1, np.nan, 3]
        ds.createVariable("s", "i2", ("t", "x"))[0:5] = np.ones((5, 3))
    with nc.Dataset(path) as ds:
        assert ds["s"].shape == (5, 3)
    raw = bytearray(path.read_bytes())
    raw[4:8] = b"\xff\xff\xff\xff"            # streaming: netCDF-C itself does not read it
    path.write_bytes(raw)
    report = scan([path])
    assert tensor(report, "s").shape == (5, 3)
    assert tensor(report, "fixed").nan == 1


DIM_X = struct.pack(">I", 1) + b"x\0\0\0" + struct.pack(">I", 3)   # one dimension "x" = 3


@pytest.mark.parametrize("body, why", [
    (struct.pack(">III", 0, 0x0A, 0x7FFFFFF0), "dimension count 2147483632 .* cannot fit"),
    (struct.pack(">III", 0, 0x0A, 0xFFFFFFF0), "dimension count .* negative"),
    (struct.pack(">IIIII", 0, 0, 0, 0, 0) + struct.pack(">II", 0x0B, 0x7FFFFF00),
     "variable count .* cannot fit"),
    (struct.pack(">III", 0, 0x0A, 1) + DIM_X + struct.pack(">II", 0x0C, 0x7FFFFFF0),
     "global attribute count .* cannot fit"),
    (struct.pack(">III", 0, 0x0A, 1) + struct.pack(">I", 0x7FFFFF00),
     "dimension name length .* cannot fit"),
    (struct.pack(">III", 0, 0x0A, 1) + DIM_X + struct.pack(">IIII", 0, 0, 0x0B, 1)
     + struct.pack(">I", 1) + b"v\0\0\0" + struct.pack(">I", 0x7FFFFFF0),
     "variable 'v' dimension count .* cannot fit"),
])
def test_netcdf3_hostile_header_is_refused_at_once(tmp_path, body, why):
    path = tmp_path / "h.nc"
    path.write_bytes(b"CDF\x01" + body + b"\0" * 64)
    start = time.perf_counter()
    report = scan([path])
    assert time.perf_counter() - start < 1.0
    [p] = report.problems
    assert report.exit_code == ExitCode.INCONCLUSIVE and re.search(why, p.reason), p.reason


def test_netcdf3_cdf5_huge_count_is_refused(tmp_path):
    path = tmp_path / "h5.nc"
    path.write_bytes(b"CDF\x05" + struct.pack(">Q", 0) + struct.pack(">IQ", 0x0A, 1 << 60))
    [p] = scan([path]).problems
    assert "cannot fit" in p.reason


# -- Keras ------------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_keras_archive_weights(tmp_path, compression):
    h = h5py()
    buf = io.BytesIO()
    kernel = planted((16, 8), "<f4")
    bias = planted((8,), "<f4", 1)
    with h.File(buf, "w") as f:
        f["layers/dense/vars/0"] = kernel
        f.create_dataset("layers/dense/vars/1", data=bias, chunks=(3,))
        f["optimizer/vars/0"] = np.int64(3)
    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        z.writestr("metadata.json", '{"keras_version": "3.5.0"}')
        z.writestr("config.json", "{}")
        z.writestr("model.weights.h5", buf.getvalue())
    tasks = {t.name: t for t in engine.plan([path])}
    stored = compression == zipfile.ZIP_STORED
    assert tasks["model.weights.h5/layers/dense/vars/0"].storage.kind == ("raw" if stored
                                                                     else "dataset")
    report = scan([path], **ALL)
    assert_as_library(tensor(report, "model.weights.h5/layers/dense/vars/0"), kernel)
    assert_as_library(tensor(report, "model.weights.h5/layers/dense/vars/1"), bias, (3,))
    assert tensor(report, "model.weights.h5/optimizer/vars/0").status == "not_applicable"
    assert report.files == [(str(path), "keras")]


def test_keras_archive_without_weights_is_a_problem(tmp_path):
    h5py()
    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", "{}")
    [p] = scan([path]).problems
    assert "holds its weights in model.weights.h5; this one has none" in p.reason
