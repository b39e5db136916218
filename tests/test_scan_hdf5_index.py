"""A chunked HDF5 dataset's chunk index read in one native pass (scan/readers/hdf5_index.py,
kernels/index_rows.py): the same entries, in the same order, as h5py's own iteration and as its
lookup chunk by chunk, for every rank, chunks never written, filter masks, a file read through
h5py's Python file driver; and h5py's iteration wherever the native pass cannot be used."""

import ctypes
import io

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from fpclass.kernels import compile_cache  # noqa: E402
from fpclass.scan.readers import hdf5_index  # noqa: E402

pytestmark = pytest.mark.skipif(hdf5_index._native_iteration() is None,
                                reason="h5py's HDF5 has no chunk iteration callable here")


def h5py_rows(dsid, ndim):
    """The index as h5py's iteration lists it, and as its lookup by coordinates finds it."""
    rows = []
    dsid.chunk_iter(lambda i: rows.append(
        (*i.chunk_offset, -1 if i.byte_offset is None else i.byte_offset, i.size,
         i.filter_mask)))
    for offset, *entry in ((r[:ndim], *r[ndim:]) for r in rows):
        info = dsid.get_chunk_info_by_coord(offset)
        assert [info.byte_offset, info.size, info.filter_mask] == entry
    return np.array(rows, np.int64).reshape(-1, ndim + 3)


def datasets(f):
    rng = np.random.default_rng(3)
    a = f.create_dataset("records", data=rng.random((300, 7), np.float32), chunks=(1, 7),
                         maxshape=(None, 7))
    b = f.create_dataset("cube", shape=(40, 30, 20), dtype="<f8", chunks=(7, 8, 9),
                         fillvalue=1.5)
    b[0:20, 5:29, :] = rng.random((20, 24, 20))  # chunks never written elsewhere
    c = f.create_dataset("packed", data=rng.random((64, 64)), chunks=(8, 8), compression="gzip",
                         shuffle=True)
    # a chunk written raw, its deflate skipped (filter mask 1 << 1: the second filter)
    c.id.write_direct_chunk((8, 8), np.arange(64, dtype="<f8").tobytes(), filter_mask=2)
    d = f.create_dataset("row", data=rng.random(5000), chunks=(64,))
    return [a, b, c, d]


@pytest.fixture
def h5file(tmp_path):
    path = tmp_path / "index.h5"
    with h5py.File(path, "w") as f:
        datasets(f)
    with h5py.File(path, "r") as f:
        yield f


def test_the_native_pass_lists_what_h5py_lists(h5file, monkeypatch):
    native = []
    real = hdf5_index._native_rows
    monkeypatch.setattr(hdf5_index, "_native_rows",
                        lambda *a: native.append(real(*a)) or native[-1])
    for name in ("records", "cube", "packed", "row"):
        d = h5file[name]
        want = h5py_rows(d.id, d.ndim)
        got = hdf5_index.chunk_rows(d.id, d.ndim, d.id.get_num_chunks())
        assert native[-1] is not None, name  # the native pass, not h5py's
        assert got.dtype == np.int64 and got.tolist() == want.tolist(), name
    masks = h5py_rows(h5file["packed"].id, 2)[:, -1]
    assert sorted(set(masks.tolist())) == [0, 2]


@pytest.fixture
def calls(monkeypatch):
    """Which of H5Dchunk_iter's two ctypes functions each native pass called."""
    native = hdf5_index._native_iteration()
    made = []

    def spy(name):
        real = getattr(native, name)
        return lambda *a: made.append(name) or real(*a)
    monkeypatch.setattr(hdf5_index, "_native_iteration", lambda: native._replace(
        with_gil=spy("with_gil"), without_gil=spy("without_gil")))
    return made


def test_a_file_through_h5pys_python_driver_is_listed_the_same(tmp_path, calls):
    """A file HDF5 reads through h5py's Python driver (a .keras member, a URL) is iterated
    holding the GIL, which that driver's reads need; a file HDF5 reads itself without it."""
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        datasets(f)
    with h5py.File(buf, "r") as f:
        for d in (f[n] for n in ("records", "cube")):
            rows = hdf5_index._native_rows(d.id, d.ndim, d.id.get_num_chunks())
            assert rows is not None and rows.tolist() == h5py_rows(d.id, d.ndim).tolist()
        assert hdf5_index.any_chunk(f["cube"].id)
    assert calls == ["with_gil"] * 3
    (tmp_path / "plain.h5").write_bytes(buf.getvalue())
    with h5py.File(tmp_path / "plain.h5", "r", driver="sec2") as f:
        rows = hdf5_index._native_rows(f["cube"].id, 3, 100)
        assert rows.tolist() == h5py_rows(f["cube"].id, 3).tolist()
    assert calls[3:] == ["without_gil"]


def test_an_index_larger_than_the_room_given_means_h5pys_iteration(h5file):
    d = h5file["cube"]
    n = d.id.get_num_chunks()
    want = h5py_rows(d.id, 3).tolist()
    assert hdf5_index._native_rows(d.id, 3, n - 1) is None  # more entries than room
    assert hdf5_index._native_rows(d.id, 3, n + 5).tolist() == want
    assert hdf5_index.chunk_rows(d.id, 3, n - 1).tolist() == want


def test_whether_any_chunk_was_written(tmp_path, monkeypatch):
    """any_chunk stops HDF5's iteration at the first chunk; h5py's count where it cannot."""
    with h5py.File(tmp_path / "some.h5", "w") as f:
        f.create_dataset("none", shape=(50, 50), dtype="<f4", chunks=(5, 5))
        f.create_dataset("one", shape=(50, 50), dtype="<f4", chunks=(5, 5))[49, 49] = 1
        datasets(f)
        for native in (True, False):
            if not native:
                monkeypatch.setattr(compile_cache, "kernels_ready", lambda: False)
            assert [hdf5_index.any_chunk(f[n].id) for n in ("none", "one", "cube")] == \
                [False, True, True]
            assert (hdf5_index._native_table(f["one"].id, 2, 0) is not None) == native


def test_no_native_pass_while_the_kernels_are_cold_or_without_the_symbol(h5file, monkeypatch):
    d = h5file["records"]
    want = h5py_rows(d.id, 2).tolist()
    monkeypatch.setattr(compile_cache, "kernels_ready", lambda: False)
    assert hdf5_index._native_rows(d.id, 2, 300) is None
    assert hdf5_index.chunk_rows(d.id, 2, 300).tolist() == want
    monkeypatch.undo()
    monkeypatch.setattr(hdf5_index, "_native_iteration", lambda: None)
    assert hdf5_index._native_rows(d.id, 2, 300) is None
    assert hdf5_index.chunk_rows(d.id, 2, 300).tolist() == want


def test_a_failing_iteration_means_h5pys_iteration(h5file, monkeypatch):
    """HDF5's iteration returning an error (here: a dataset id closed under it) is never taken
    as the index; h5py's iteration then raises its own error."""
    d = h5file["records"]
    dsid = h5py.h5d.open(h5file.id, b"records")
    dsid.close()
    assert hdf5_index._native_rows(dsid, 2, 300) is None
    with pytest.raises(Exception):
        hdf5_index.chunk_rows(dsid, 2, 300)
    assert hdf5_index._native_rows(d.id, 2, 300) is not None


def test_the_callback_writes_each_entry_and_turns_away_sizes_hdf5_cannot_hold():
    """kernels/index_rows.py called as HDF5 calls it: rows as given (an undefined address as
    -1), and an entry of 4 GiB or more (or one from an HDF5 that passed 32 bits) turned away,
    for h5py's iteration to list the index."""
    from fpclass.kernels import index_rows
    call = index_rows.collect.ctypes
    offset = (ctypes.c_uint64 * 2)(3, 5)
    table = index_rows.new_table(2, 4)
    assert call(offset, 0, 4096, 100, table.ctypes.data) == 0
    assert call(offset, 2, 2 ** 64 - 1, (1 << 32) - 1, table.ctypes.data) == 0
    assert index_rows.table_rows(table).tolist() == [[3, 5, 4096, 100, 0],
                                                     [3, 5, -1, (1 << 32) - 1, 2]]
    assert call(offset, 0, 8192, 1 << 32, table.ctypes.data) == 1
    assert index_rows.table_rows(table) is None
