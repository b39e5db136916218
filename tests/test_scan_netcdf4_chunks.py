"""NetCDF-4 variables of many small chunks (an unlimited dimension's default chunking: one record
a chunk) read through the chunk index in one pass and, where unfiltered chunks lie back to back,
in runs of chunks (readers/hdf5_runs.py): every count and location against netCDF4's own read +
numpy, contiguous and chunked, interleaved appends, chunks never written, compressed chunks,
and hostile files and indexes ending unchecked, never clean."""

import numpy as np
import pytest

from fpclass.scan import scan
from fpclass.scan.engine import plan
from fpclass.scan.readers import hdf5_runs
from fpclass.scan.storage.grids import BlockGrid
from sieve_spy import spy_sieve
from test_scan_parallel_decode import assert_exact, planted, stored_order

netCDF4 = pytest.importorskip("netCDF4")


def library(path) -> dict:
    """Every variable as netCDF4 reads it (no masking, no scaling)."""
    with netCDF4.Dataset(path) as d:
        d.set_auto_maskandscale(False)
        return {n: np.asarray(v[...]) for n, v in d.variables.items()}


def tensors(path, **kw) -> dict:
    return {t.name: t for t in scan([path], max_locations=10_000, **kw).tensors}


@pytest.fixture
def records(tmp_path):
    """Two variables along one unlimited dimension, appended in turns (so each variable's chunks
    lie in stretches, not all back to back), a 3-D one, a contiguous and an explicitly chunked
    one, a compressed one: NaN, +Inf, -Inf at known places in each."""
    path = tmp_path / "records.nc"
    a, b = planted((200, 37), seed=1), planted((200, 37), "<f8", seed=2)
    c = planted((200, 5, 6), seed=3)
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("time", None)
        d.createDimension("x", 37)
        d.createDimension("y", 5)
        d.createDimension("z", 6)
        d.createDimension("fixed", 200)
        va = d.createVariable("a", "f4", ("time", "x"), fill_value=False)
        vb = d.createVariable("b", "f8", ("time", "x"), fill_value=False)
        for lo in range(0, 200, 50):  # interleaved appends
            va[lo:lo + 50] = a[lo:lo + 50]
            vb[lo:lo + 50] = b[lo:lo + 50]
        d.createVariable("c", "f4", ("time", "y", "z"), fill_value=False)[0:200] = c
        d.createVariable("flat", "f4", ("fixed", "x"), contiguous=True)[...] = a
        d.createVariable("tiles", "f4", ("fixed", "x"), chunksizes=(8, 5),
                         fill_value=False)[...] = a
        d.createVariable("packed", "f4", ("time", "x"), zlib=True, shuffle=True,
                         fill_value=False)[0:200] = a
    return path


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("run_bytes", [hdf5_runs.RUN_BYTES, 1000])
def test_many_small_chunks_match_netcdf4(records, threads, run_bytes, monkeypatch):
    monkeypatch.setattr(hdf5_runs, "RUN_BYTES", run_bytes)  # runs of a few chunks, or many
    truth = library(records)
    got = tensors(records, threads=threads)
    chunks = {"a": (1, 37), "b": (1, 37), "c": (1, 5, 6), "flat": (200, 37), "tiles": (8, 5),
              "packed": (1, 37)}
    with netCDF4.Dataset(records) as d:  # the chunking the test relies on
        assert [d[n].chunking() for n in ("a", "c", "tiles")] == [[1, 37], [1, 5, 6], [8, 5]]
    for name, shape in chunks.items():
        assert_exact(got[name], truth[name], shape)
        assert got[name].stats.values == truth[name].size


def test_the_index_is_read_in_one_pass_and_runs_are_read_at_once(records, monkeypatch):
    """The one-pass table agrees with HDF5's own lookup chunk by chunk, and the runs of `a`
    are its stretches of chunks back to back (b's chunks come between)."""
    import h5py
    calls = []
    real = hdf5_runs.chunk_table
    monkeypatch.setattr("fpclass.scan.readers.hdf5_blocks.chunk_table",
                        lambda *a: calls.append(a[3:]) or real(*a))
    tensors(records, threads=1)
    assert len(calls) >= 4  # a, b, c, tiles, packed: each task's index in one pass
    with h5py.File(records, "r") as f:
        d = f["a"]
        walk = BlockGrid(d.shape, d.chunks)
        table = real(d.id, walk.grid, walk.block, 0, walk.count)
        for k in range(walk.count):
            info = d.id.get_chunk_info_by_coord(walk.region(walk.index(k))[0])
            assert tuple(table[k]) == (info.byte_offset, info.size, info.filter_mask)
        groups = list(hdf5_runs.runs(table, walk, 0, walk.count, 37 * 4, True))
    assert sum(n for *_, n in groups) == sum(g[1][0] for g in groups) == 200
    assert len(groups) > 1  # b's chunks come between
    k = 0
    for start, count, info, n in groups:  # each run back to back in the file, and no longer
        assert start == (k, 0) and info.byte_offset == table[k, 0]
        assert (np.diff(table[k:k + n, 0]) == 37 * 4).all()
        k += n
        assert k == 200 or table[k, 0] != table[k - 1, 0] + 37 * 4


def test_chunks_never_written_read_as_the_fill_value(tmp_path):
    path = tmp_path / "gaps.nc"
    a = planted((300, 16), seed=4)
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("time", None)
        d.createDimension("x", 16)
        v = d.createVariable("v", "f4", ("time", "x"), fill_value=np.float32(np.inf))
        v[0:100] = a[0:100]
        v[200:300] = a[200:300]  # records 100..199: chunks never written, the fill value
        w = d.createVariable("w", "f4", ("time", "x"), fill_value=False)  # NOFILL
        w[0:100] = a[0:100]
        w[200:300] = a[200:300]
    truth = library(path)
    assert np.isposinf(truth["v"][100:200]).all()
    got = tensors(path, threads=2)
    v = got["v"]
    assert v.status == "checked"
    # the fill value (CF: _FillValue, a blank) counted for every record, as netCDF4 reads them
    assert (v.missing, v.posinf) == (int(np.isposinf(truth["v"]).sum()), 0)
    assert (v.nan, v.neginf) == (int(np.isnan(truth["v"]).sum()),
                                 int(np.isneginf(truth["v"]).sum()))
    # no fill value written: netCDF reads whatever, the scan cannot tell
    assert got["w"].status == "unchecked" and "never written" in got["w"].reason


@pytest.mark.parametrize("threads", [1, 2])
def test_a_file_shorter_than_its_chunks_is_unchecked_never_clean(records, threads, monkeypatch):
    """HDF5 checks its own metadata (a truncated file does not open: a problem); a file that is
    shorter when its chunks are read than the index says leaves them unchecked."""
    from fpclass.scan.engine import execute
    from fpclass.scan.readers import hdf5_blocks
    tasks = plan([records])
    real = hdf5_blocks.source_size  # the file as if cut after its first 4 KiB
    monkeypatch.setattr(hdf5_blocks, "source_size", lambda fd: min(real(fd), 4096))
    results, _ = execute(tasks, threads=threads, max_locations=10)
    got = {r.name: r for r in results}
    for name in ("a", "b", "c", "tiles", "packed"):
        assert got[name].status == "unchecked", name
        assert "past the end of the file" in got[name].reason
    cut = records.parent / "cut.nc"
    cut.write_bytes(records.read_bytes()[:-50_000])
    assert scan([cut]).exit_code != 0


class FakeIndex:
    """A dataset id whose chunk index lists what it is given."""

    def __init__(self, entries):
        self.entries = entries

    def get_num_chunks(self):
        return len(self.entries)

    def chunk_iter(self, visit):
        for offset, byte_offset, size in self.entries:
            visit(hdf5_runs.ChunkInfo(offset, 0, byte_offset, size))


@pytest.mark.parametrize("entries", [
    [((0, 0), 100, 64), ((0, 0), 164, 64)],   # one chunk listed twice
    [((1, 0), 100, 64), ((3, 0), 164, 64)],   # an offset inside a chunk: off the grid
    [((0, 0), 100, 64), ((800, 0), 164, 64)],  # past the grid
    [((0, 0), 100, 64), ((2, 0), None, 64)],   # listed without storage
])
def test_an_index_that_lies_is_left_to_hdf5s_lookup(entries, monkeypatch):
    monkeypatch.setattr(hdf5_runs, "MIN_CHUNKS", 1)
    grid, block = (100, 1), (2, 4)
    assert hdf5_runs.chunk_table(FakeIndex(entries), grid, block, 0, 100) is None
    good = [((0, 0), 100, 64), ((2, 0), 164, 64)]
    table = hdf5_runs.chunk_table(FakeIndex(good), grid, block, 0, 100)
    assert table[:3].tolist() == [[100, 64, 0], [164, 64, 0], [-1, -1, -1]]


@pytest.mark.parametrize("grid", [(100, 1), (10, 10)])
@pytest.mark.parametrize("listed, first, last", [
    (range(100), 0, 100),                                # every chunk, in order
    (list(range(99, -1, -1)), 0, 100),                   # every chunk, backwards
    (list(range(25)) + list(range(60, 85)), 0, 50),      # as many as the task's, some past it
    ([49] + list(range(50, 98)) + [99], 50, 100),        # as many, one before it, one missing
    (range(0, 100, 3), 20, 60),                          # a part of an index with gaps
])
def test_each_listed_chunk_takes_its_own_place_in_the_table(grid, listed, first, last,
                                                            monkeypatch):
    monkeypatch.setattr(hdf5_runs, "MIN_CHUNKS", 1)
    block = (2, 4)
    entries = [((2 * (c // grid[1]), 4 * (c % grid[1])), 1000 + 64 * c, 64) for c in listed]
    table = hdf5_runs.chunk_table(FakeIndex(entries), grid, block, first, last)
    want = [[1000 + 64 * c, 64, 0] if c in set(listed) else [-1, -1, -1]
            for c in range(first, last)]
    assert table.tolist() == want


def test_runs_join_only_whole_unfiltered_chunks_back_to_back():
    walk = BlockGrid((10, 4), (2, 4))
    table = np.array([[0, 32, 0], [32, 32, 0], [64, 31, 0],   # a chunk of another size
                      [95, 32, 0], [127, 32, 1]], np.int64)    # a filter skipped
    groups = [(s, c, n) for s, c, _, n in hdf5_runs.runs(table, walk, 0, 5, 32, True)]
    assert groups == [((0, 0), (4, 4), 2), ((4, 0), (2, 4), 1), ((6, 0), (2, 4), 1),
                      ((8, 0), (2, 4), 1)]
    alone = list(hdf5_runs.runs(table, walk, 0, 5, 32, False))
    assert [n for *_, n in alone] == [1] * 5


def test_dimension_scales_are_matched_to_their_variables(tmp_path):
    """The variables a NetCDF-4 dimension scale lists (REFERENCE_LIST) are found among the
    datasets walked, by their identity in the file (what says a variable reads longer than it
    is stored), and a variable shorter than its unlimited dimension with a masked fill is
    checked."""
    import h5py
    from fpclass.scan.readers.hdf5_attributes import Attributes, class_of
    from fpclass.scan.readers.hdf5_netcdf import Dimensions
    from fpclass.scan.readers.hdf5_walk import attribute_names
    path = tmp_path / "short.nc"
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("time", None)
        d.createDimension("x", 8)
        d.createVariable("long", "f4", ("time", "x"), fill_value=False)[0:300] = \
            np.ones((300, 8), np.float32)
        d.createVariable("short", "f4", ("time", "x"),
                         fill_value=np.float32(np.nan))[0:100] = np.ones((100, 8), np.float32)
    assert np.isnan(library(path)["short"][100:]).all()  # as netCDF4 reads it: masked
    with h5py.File(path, "r") as f:
        dims = Dimensions(h5py, f)
        for name in ("time", "x", "long", "short"):
            d = f[name]
            attrs = Attributes(h5py, d.id, attribute_names(h5py, d.id)[0])
            dims.add(name, 0, 0, h5py.h5o.get_info(d.id).addr, d.shape, class_of(attrs), attrs)
        attached = {a for _, pairs in dims.scales for a, _ in pairs}
        names = {dims.variables[a].name for a in attached if a in dims.variables}
    assert len(dims.scales) == 2 and names == {"long", "short"}
    got = tensors(path)
    assert got["long"].status == got["short"].status == "checked"


@pytest.mark.parametrize("threads", [1, 3])
def test_parts_of_a_compressed_variable_read_through_the_table(records, threads, monkeypatch):
    """A compressed variable cut into parts (each a quarter of its chunks or more, so each reads
    the index in one pass from its own first chunk) is the whole, chunk for chunk."""
    firsts = []
    real = hdf5_runs.chunk_table

    def spy(*a):
        table = real(*a)
        if table is not None:
            firsts.append(a[3])
        return table
    monkeypatch.setattr("fpclass.scan.readers.hdf5_blocks.chunk_table", spy)
    monkeypatch.setattr(hdf5_runs, "MIN_CHUNKS", 1)
    task_bytes = 200 * 37 * 4 // 3 + 1
    parts = [t for t in plan([records], task_bytes=task_bytes) if t.name == "packed"]
    assert 2 <= len(parts) <= 4 and parts[1].first > 0  # each at least a quarter
    got = tensors(records, threads=threads, task_bytes=task_bytes)
    assert_exact(got["packed"], library(records)["packed"], (1, 37))
    # each part holding a quarter of the chunks read its own table (a small tail part: HDF5's
    # lookup, chunk by chunk)
    big = {t.first for t in parts if 4 * t.count >= 200}
    assert len(big) >= 2 and big <= set(firsts)


@pytest.mark.parametrize("threads, sieved_bytes", [(1, 16 << 20), (3, 16 << 20), (1, 9000),
                                                   (3, 9000)])
def test_runs_read_and_classified_in_one_call_match_netcdf4(tmp_path, threads, sieved_bytes,
                                                            monkeypatch):
    """Runs of plain float chunks go through the read sieve (operators/read_sieve.py; pieces of
    256 bytes, every run taken), all of a variable's in one call or a few runs a call:
    counts, locations and statistics as netCDF4's read + NumPy, for little- and big-endian
    float32 and float64 records and chunks of several records (the last one past the variable's
    end); clean runs are kept by the sieve, runs holding a finding are read again the usual way
    and located, and the clean runs after them are kept."""
    from fpclass.operators import read_sieve as sieves
    from fpclass.scan.readers import hdf5_blocks
    monkeypatch.setattr(sieves, "PIECE_BYTES", 256)
    monkeypatch.setattr(hdf5_runs, "RUN_BYTES", 4096)  # runs of 2 to 16 chunks
    monkeypatch.setattr(hdf5_blocks, "SIEVED_BYTES", sieved_bytes)
    kept = spy_sieve(monkeypatch)
    calls = []
    read_runs = sieves.ReadSieve.read_runs
    monkeypatch.setattr(sieves.ReadSieve, "read_runs",
                        lambda self, fd, buf, at, n: calls.append(len(at)) or
                        read_runs(self, fd, buf, at, n))
    path = tmp_path / "runs.nc"
    arrays = {"a": planted((300, 64), seed=5), "b": planted((300, 64), "<f8", seed=6),
              "c": planted((300, 64), ">f4", seed=7)}
    arrays["a"][100:200] = np.abs(arrays["a"][100:200])  # clean runs of records
    # chunks of 8 records (at least hdf5_runs.MIN_CHUNKS of them), written at once: the last
    # run is two chunks cut at the variable's end, clean
    arrays["d"] = planted((612, 64), seed=8)
    arrays["d"][-100:] = 1.5
    chunks = {"a": (1, 64), "b": (1, 64), "c": (1, 64), "d": (8, 64)}
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("time", None)
        d.createDimension("more", None)
        d.createDimension("x", 64)
        v = {n: d.createVariable(n, a.dtype, ("more" if n == "d" else "time", "x"),
                                 fill_value=False, chunksizes=chunks[n],
                                 endian="big" if a.dtype.str[0] == ">" else "little")
             for n, a in arrays.items()}
        for lo in range(0, 300, 100):  # appends in turns: runs of each variable's records
            for n in "abc":
                v[n][lo:lo + 100] = arrays[n][lo:lo + 100]
        v["d"][0:612] = arrays["d"]
    truth = library(path)
    got = tensors(path, threads=threads)
    for name in arrays:
        a = truth[name]
        assert_exact(got[name], a, chunks[name])
        f = a.astype(np.float64)
        finite = f[np.isfinite(f)]
        tiny = float(np.finfo(a.dtype).tiny)
        zero = int((finite == 0).sum())
        sub = int(((finite != 0) & (np.abs(finite) < tiny)).sum())
        assert tuple(got[name].stats) == (f.size, f.size - finite.size, zero, sub,
                                          finite.size - zero - sub, finite.min(), finite.max(),
                                          np.abs(finite).max())
    assert True in kept and False in kept  # clean runs kept, runs with a finding read again
    # each variable's runs in one call, or a few at a time
    assert (max(calls) > 20) if sieved_bytes > 1 << 20 else (max(calls) <= 4 and len(calls) > 8)


def test_runs_of_chunks_wider_than_the_dataset_leave_their_padding_out(tmp_path, monkeypatch):
    """Chunks wider than the dataset along a trailing axis (a resizable one: h5py's maxshape,
    a second unlimited dimension) hold padding past its edge, here a fill value below every value:
    such runs are read the usual way, cut to the dataset (found by the review of 6b0a4a5)."""
    h5py = pytest.importorskip("h5py")
    spy_sieve(monkeypatch)
    a = np.random.default_rng(9).random((300, 60), np.float32) + 1
    a[0, 0], a[7, 3], a[-1, -1] = np.nan, np.inf, -np.inf  # the runs between them clean
    path = tmp_path / "wide.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=a, chunks=(1, 64), maxshape=(None, 64), fillvalue=-5e30)
    t = tensors(path)["v"]
    assert_exact(t, a, (1, 64))
    finite = a[np.isfinite(a)].astype(np.float64)
    assert (t.stats.values, t.stats.min, t.stats.max) == (a.size, finite.min(), finite.max())


@pytest.mark.parametrize("sieved_bytes", [16 << 20, 2 << 10])
def test_runs_between_chunks_never_written_and_single_chunks_keep_their_order(
        tmp_path, sieved_bytes, monkeypatch):
    """Runs the sieve takes, chunks never written (the fill value), single chunks (one where the
    file's chunks break off) and runs with findings, in the dataset's order: every location in
    order and the statistics, fill values included, as h5py's read + NumPy."""
    h5py = pytest.importorskip("h5py")
    from fpclass.scan.readers import hdf5_blocks
    monkeypatch.setattr(hdf5_blocks, "SIEVED_BYTES", sieved_bytes)
    kept = spy_sieve(monkeypatch)
    rng = np.random.default_rng(12)
    a = rng.random((400, 64), np.float32) + 1
    a[5, 1], a[150, 3], a[250, 2], a[390, 63] = np.nan, np.inf, np.inf, -np.inf
    path = tmp_path / "gaps.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("v", shape=a.shape, dtype="<f4", chunks=(1, 64), fillvalue=-7.0,
                             maxshape=(None, 64))
        for lo, hi in ((0, 100), (300, 400), (200, 201), (150, 151), (202, 260)):
            d[lo:hi] = a[lo:hi]  # records 100..149, 151..199, 201 never written
        truth = d[...]
    assert (truth[120] == -7).all() and np.isposinf(truth[250, 2])
    t = tensors(path)["v"]
    assert t.status == "checked"
    assert [(loc.index, loc.cls) for loc in t.locations] == stored_order(truth, (1, 64))
    assert (t.nan, t.posinf, t.neginf) == (1, 2, 1)
    first = scan([path], max_locations=1).tensors[0].locations  # the first in stored order
    assert [(loc.index, loc.cls) for loc in first] == [((5, 1), "nan")]
    # a block never written is checked from its one fill value (hdf5_blocks): 140 of them
    written = 260 * 64
    assert t.values_checked == t.stats.values == written + 140
    finite = truth[np.isfinite(truth)].astype(np.float64)
    assert (t.stats.min, t.stats.max, t.stats.normal) == (-7.0, finite.max(), written + 136)
    assert kept.count(True) >= 3 and False in kept


def test_runs_inside_a_keras_archive_are_read_at_the_members_offset(tmp_path, monkeypatch):
    """Runs of small chunks in a .keras archive's stored weights file: the sieve reads them at
    the member's place in the archive (its offset, plus each chunk's in the HDF5 file)."""
    import io
    import zipfile
    h5py = pytest.importorskip("h5py")
    kept = spy_sieve(monkeypatch)
    a = np.random.default_rng(11).random((300, 64), np.float32) + 1
    a[0, 0], a[150, 9], a[-1, -1] = np.nan, np.inf, -np.inf
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        f.create_dataset("layers/dense/vars/0", data=a, chunks=(1, 64), maxshape=(None, 64))
    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("metadata.json", '{"keras_version": "3.5.0"}')
        z.writestr("model.weights.h5", buf.getvalue())
    t = tensors(path)["model.weights.h5/layers/dense/vars/0"]
    assert_exact(t, a, (1, 64))
    finite = a[np.isfinite(a)].astype(np.float64)
    assert (t.stats.values, t.stats.min, t.stats.max) == (a.size, finite.min(), finite.max())
    assert True in kept
