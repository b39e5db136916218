"""Compressed chunks decoded on every scan thread (issue 22): zarr chunks decoded from their files
by their codec, HDF5 chunks decoded here, FITS tiles, and large compressed datasets cut into
parts of whole blocks. Every count and location against the format's own library (zarr, h5py,
astropy, netCDF4) read whole + numpy, in the order the file stores the values (chunk after chunk,
C order of the chunk grid, C order inside a chunk), with one scan thread and with several, and
the thread policy: blosc never starts its own threads under a scan."""

import itertools
import math

import numpy as np
import pytest

from fpclass.scan import scan
from fpclass.scan.engine import plan
from fpclass.scan.storage import grids

FEW = 300  # task_bytes: parts of a few chunks each, so every test runs the parts path


def planted(shape, dtype="<f4", seed=0):
    """Finite values with NaN in the first and the last element, +Inf and -Inf between."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 3).astype(dtype)
    flat = a.reshape(-1)
    flat[0] = flat[-1] = np.nan
    for k, i in enumerate(rng.integers(1, flat.size - 1, 6)):
        flat[i] = (np.inf, -np.inf, np.nan)[k % 3]
    return a


def stored_order(a, chunks):
    """[(index, class)] of the non-finite values of `a` chunk after chunk (C order of the chunk
    grid), in C order inside each chunk: the order a scan of chunked storage reports them."""
    out = []
    f = a.astype(np.float64)
    for idx in itertools.product(*(range(-(-n // c)) for n, c in zip(a.shape, chunks))):
        box = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
        part = f[box]
        cls = np.full(part.shape, "", dtype=object)
        cls[np.isnan(part)], cls[np.isposinf(part)], cls[np.isneginf(part)] = \
            "nan", "posinf", "neginf"
        for row in np.argwhere(cls != ""):
            out.append((tuple(int(r + s.start) for r, s in zip(row, box)), cls[tuple(row)]))
    return out


def assert_exact(t, a, chunks, nan_class="nan"):
    """TensorResult `t` against `a` (the library's read): counts, values checked, and every
    location with its class in stored order."""
    f = a.astype(np.float64)
    assert t.status == "checked", t.reason
    nan = int(np.isnan(f).sum())
    assert (t.nan, t.missing) == ((nan, 0) if nan_class == "nan" else (0, nan))
    assert (t.posinf, t.neginf) == (int(np.isposinf(f).sum()), int(np.isneginf(f).sum()))
    assert t.values_checked == a.size
    want = [(i, nan_class if c == "nan" else c) for i, c in stored_order(a, chunks)]
    assert [(loc.index, loc.cls) for loc in t.locations] == want


THREADS = [1, 3]


# zarr ------------------------------------------------------------------------------------------

def zarr_codecs():
    zarr = pytest.importorskip("zarr")
    numcodecs = pytest.importorskip("numcodecs")
    return [(3, zarr.codecs.BloscCodec(), "blosc"), (3, zarr.codecs.ZstdCodec(), "zstd"),
            (3, zarr.codecs.GzipCodec(), "gzip"), (2, numcodecs.Blosc(), "blosc"),
            (2, numcodecs.Zstd(), "zstd"), (2, numcodecs.GZip(), "gzip"),
            (2, numcodecs.Zlib(), "zlib")]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("case", range(7))
def test_zarr_compressed_chunks_decoded_here_match_zarr(tmp_path, case, threads, monkeypatch):
    zarr = pytest.importorskip("zarr")
    from fpclass.scan.readers import zarr_chunks
    fmt, codec, name = zarr_codecs()[case]
    a = planted((37, 29), ">f8" if fmt == 2 else "<f4", seed=case)
    path = tmp_path / "a.zarr"
    z = zarr.create_array(path, shape=a.shape, chunks=(4, 5), dtype=a.dtype, zarr_format=fmt,
                          compressors=codec, fill_value=0)
    z[...] = a
    path.joinpath(*z.metadata.encode_chunk_key((2, 2)).split("/")).unlink()  # never written
    truth = np.asarray(zarr.open_array(path, mode="r")[...])
    decoded = []
    real = zarr_chunks.decode
    monkeypatch.setattr(zarr_chunks, "decode", lambda c, *r: decoded.append(c) or real(c, *r))
    report = scan([path], threads=threads, max_locations=10_000, task_bytes=FEW)
    [t] = report.tensors
    assert_exact(t, truth, (4, 5))
    assert set(decoded) == {name} and len(decoded) == 10 * 6 - 1  # every stored chunk, here
    assert len(plan([path], task_bytes=FEW)) > 3  # parts of whole chunks


@pytest.mark.parametrize("case", [0, 1, 2])
@pytest.mark.parametrize("damage", ["truncated", "longer"])
def test_zarr_corrupt_chunk_is_unchecked_naming_it(tmp_path, case, damage):
    zarr = pytest.importorskip("zarr")
    path = tmp_path / "a.zarr"
    z = zarr.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="<f4",
                          compressors=zarr_codecs()[case][1])
    z[...] = planted((8, 8))
    other = path / "c" / "0" / "0"
    chunk = path / "c" / "1" / "0"
    if damage == "truncated":
        chunk.write_bytes(chunk.read_bytes()[:-3])
    else:  # a valid stream of another chunk size: a 4 x 8 chunk's
        z2 = zarr.create_array(tmp_path / "b.zarr", shape=(4, 8), chunks=(4, 8), dtype="<f4",
                               compressors=zarr_codecs()[case][1])
        z2[...] = 1.0
        chunk.write_bytes((tmp_path / "b.zarr" / "c" / "0" / "0").read_bytes())
    assert other.exists()
    [t] = scan([path], threads=2).tensors
    assert t.status == "unchecked" and "c/1/0" in t.reason, t.reason


def test_zstd_declared_sizes():
    zstd = pytest.importorskip("numcodecs.zstd")
    from fpclass.scan.readers.zarr_chunks import zstd_size
    for n in (0, 1, 255, 256, 300, 65_791, 65_792, 1 << 20):
        frame = np.frombuffer(zstd.compress(bytes(n), 1), np.uint8)
        assert zstd_size(frame) == n
    assert zstd_size(np.frombuffer(b"not a zstd frame", np.uint8)) is None


def test_blosc_runs_on_one_thread_per_scan_thread(tmp_path, monkeypatch):
    """numcodecs' blosc uses its own threads when `_get_use_threads()` is True (on the main
    thread unless use_threads is False): every decode under a scan must see it False."""
    zarr = pytest.importorskip("zarr")
    blosc = pytest.importorskip("numcodecs.blosc")
    a = planted((40, 40))
    path = tmp_path / "b.zarr"
    z = zarr.create_array(path, shape=a.shape, chunks=(8, 8), dtype=a.dtype,
                          compressors=zarr.codecs.BloscCodec())
    z[...] = a
    seen = []
    real = blosc.decompress

    def spy(*args):
        seen.append(blosc._get_use_threads())
        return real(*args)

    monkeypatch.setattr(blosc, "decompress", spy)
    for threads in THREADS:
        [t] = scan([path], threads=threads, max_locations=10_000, task_bytes=FEW).tensors
        assert_exact(t, a, (8, 8))
    assert len(seen) == 2 * 25 and not any(seen)
    # use_threads changed by the user: read through zarr (which decodes off the main thread)
    from fpclass.scan.readers import zarr_chunks
    monkeypatch.setattr(blosc, "use_threads", None)
    monkeypatch.setattr(zarr_chunks, "decode", None)  # not called
    seen.clear()
    [t] = scan([path], threads=1, max_locations=10_000).tensors
    assert_exact(t, a, (8, 8))
    assert len(seen) == 25 and not any(seen)


# HDF5 and NetCDF-4 -----------------------------------------------------------------------------

H5_FILTERS = {"gzip+shuffle": dict(compression="gzip", shuffle=True),
              "gzip": dict(compression="gzip", compression_opts=9),
              "shuffle": dict(shuffle=True),
              "lzf": dict(compression="lzf"),
              "fletcher32+gzip": dict(compression="gzip", fletcher32=True)}


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("filters", list(H5_FILTERS))
def test_hdf5_compressed_chunks_in_parts_match_h5py(tmp_path, filters, threads, monkeypatch):
    h5py = pytest.importorskip("h5py")
    from fpclass.scan.readers import hdf5_blocks
    through_h5py = []
    real = hdf5_blocks._Blocks._read
    monkeypatch.setattr(hdf5_blocks._Blocks, "_read",
                        lambda self, *r: through_h5py.append(r) or real(self, *r))
    lzf = []
    real_lzf = hdf5_blocks.lzf_decompress
    monkeypatch.setattr(hdf5_blocks, "lzf_decompress",
                        lambda *r: lzf.append(1) or real_lzf(*r))
    a = planted((23, 17, 5), "<f8" if "lzf" in filters else ">f4", seed=len(filters))
    a[8:12] = np.round(a[8:12])  # chunks LZF compresses (random doubles it stores raw)
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=a.shape, dtype=a.dtype, chunks=(4, 6, 5),
                             fillvalue=np.nan, **H5_FILTERS[filters])
        for i in range(0, 23, 4):  # chunk row 4..8 never written: the NaN fill value
            if i != 4:
                d[i:i + 4] = a[i:i + 4]
    with h5py.File(path, "r") as f:
        truth = f["x"][...]
    tasks = plan([path], task_bytes=FEW)
    assert len([t for t in tasks if t.name == "x"]) > 3
    [t] = scan([path], threads=threads, max_locations=10_000, task_bytes=FEW).tensors
    assert_exact(t, truth, (4, 6, 5))
    # decoded here but for fletcher32; h5py reads one fill value per chunk never written
    fills = [r for r in through_h5py if r[1] == (1, 1, 1)]
    assert len(fills) == 3
    assert (len(through_h5py) > len(fills)) == ("fletcher32" in filters)
    assert bool(lzf) == (filters == "lzf")


def test_netcdf4_zlib_variable_in_parts_matches_netcdf4(tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    a = planted((30, 20))
    path = tmp_path / "a.nc"
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("y", 30)
        d.createDimension("x", 20)
        v = d.createVariable("v", "f4", ("y", "x"), zlib=True, shuffle=True,
                             chunksizes=(7, 6), fill_value=False)
        v[...] = a
    with netCDF4.Dataset(path) as d:
        d.set_auto_mask(False)
        truth = d["v"][...]
    for threads in THREADS:
        [t] = [t for t in scan([path], threads=threads, max_locations=10_000,
                               task_bytes=FEW).tensors if t.name == "v"]
        assert_exact(t, truth, (7, 6))


def test_compressed_grids_are_cut_into_parts_uncompressed_ones_are_not(tmp_path, monkeypatch):
    h5py = pytest.importorskip("h5py")
    monkeypatch.setattr(grids, "PACKED_PART_BYTES", 4096)
    a = planted((64, 64))
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("packed", data=a, chunks=(8, 64), compression="gzip")
        f.create_dataset("plain", data=a, chunks=(8, 64))
    tasks = plan([path])  # the default task_bytes: 256 MiB
    count = {n: sum(t.name == n for t in tasks) for n in ("packed", "plain")}
    assert count == {"packed": math.ceil(a.nbytes / 4096), "plain": 1}
    for t in scan([path], threads=3, max_locations=10_000).tensors:
        assert_exact(t, a, (8, 64))


def test_large_uncompressed_grids_are_cut_into_parts_too(tmp_path, monkeypatch):
    """Chunks read as stored (HDF5, zarr chunk files) in parts of about RAW_PART_BYTES, so one
    large array is classified on every scan thread; answers as the libraries read them."""
    h5py = pytest.importorskip("h5py")
    zarr = pytest.importorskip("zarr")
    monkeypatch.setattr(grids, "RAW_PART_BYTES", 4096)
    a = planted((64, 64))
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("plain", data=a, chunks=(8, 64))
    z = zarr.create_array(tmp_path / "a.zarr", shape=a.shape, chunks=(8, 64), dtype=a.dtype,
                          compressors=None)
    z[...] = a
    with h5py.File(tmp_path / "a.h5", "r") as f:
        truth = {"plain": f["plain"][...],
                 "": np.asarray(zarr.open_array(tmp_path / "a.zarr", mode="r")[...])}
    paths = [tmp_path / "a.h5", tmp_path / "a.zarr"]
    counts = {}
    for t in plan(paths):
        counts[t.name] = counts.get(t.name, 0) + (t.status == "check")
    assert counts == {"plain": 4, "": 4}  # 16 KiB in parts of 4 KiB of whole chunks
    for t in scan(paths, threads=3, max_locations=10_000).tensors:
        assert_exact(t, truth[t.name], (8, 64))


# FITS ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("kind, dtype, tile", [
    ("GZIP_1", ">f4", (4, 33)), ("GZIP_2", ">f8", (4, 7)), ("GZIP_2", ">f4", (2, 5, 3)),
    ("RICE_1", ">f4", (4, 33))])
def test_fits_tile_compressed_in_parts_matches_astropy(tmp_path, kind, dtype, tile, threads,
                                                        monkeypatch):
    fits = pytest.importorskip("astropy.io.fits")
    from fpclass.scan.readers import fits_read
    shape = (45, 33) if len(tile) == 2 else (5, 9, 7)
    a = planted(shape, dtype, seed=3)
    extra = dict(quantize_level=0.0) if kind != "RICE_1" else {}  # GZIP: lossless
    path = tmp_path / "a.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(a, compression_type=kind,
                                                       tile_shape=tile, **extra)]
                 ).writeto(path)
    with fits.open(path) as hdul:
        truth = np.array(hdul[1].data)
    if kind.startswith("GZIP"):
        assert np.array_equal(truth, a, equal_nan=True)
    direct = []
    real = fits_read.read_tiles
    monkeypatch.setattr(fits_read, "read_tiles", lambda *r: direct.append(1) or real(*r))
    [t] = [t for t in scan([path], threads=threads, max_locations=10_000,
                           task_bytes=FEW).tensors if t.status != "not_applicable"]
    assert_exact(t, truth, tile, nan_class="missing")
    assert bool(direct) == kind.startswith("GZIP")  # GZIP tiles decoded here, RICE by astropy


def test_fits_corrupt_gzip_tile_is_unchecked_naming_it(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    a = planted((16, 8))
    path = tmp_path / "a.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(a, compression_type="GZIP_1",
                                                       tile_shape=(4, 8), quantize_level=0.0)]
                 ).writeto(path)
    raw = bytearray(path.read_bytes())
    with fits.open(path, disable_image_compression=True) as hdul:
        heap = hdul.fileinfo(1)["datLoc"] + hdul[1].header["NAXIS1"] * 4
    raw[heap + 20:heap + 40] = b"\xff" * 20  # inside the first tile's deflate stream
    path.write_bytes(bytes(raw))
    [t] = [t for t in scan([path]).tensors if t.status != "not_applicable"]
    assert t.status == "unchecked" and "tile 0" in t.reason, t.reason


def test_lzf_kernel_against_h5py_and_corrupt_streams(tmp_path):
    h5py = pytest.importorskip("h5py")
    from fpclass.kernels.lzf import lzf_decompress
    a = np.repeat(np.arange(700, dtype="<f4"), 9)[:6000].reshape(60, 100)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("x", data=a, chunks=(60, 100), compression="lzf")
    with h5py.File(tmp_path / "a.h5") as f:
        mask, raw = f["x"].id.read_direct_chunk((0, 0))
    assert mask == 0
    out = np.empty(a.nbytes, np.uint8)
    assert lzf_decompress(raw, out) == a.nbytes
    assert np.array_equal(out.view("<f4").reshape(a.shape), a)
    assert lzf_decompress(raw, np.empty(a.nbytes - 1, np.uint8)) == -1  # longer than the chunk
    assert lzf_decompress(raw[:-1], out) != a.nbytes  # truncated: -1, or short
    assert lzf_decompress(b"\x20\x00", out) == -1  # a reference before the start
    assert lzf_decompress(b"\x05ab", out) == -1  # a literal run past the end of the stream


def test_thread_buffers_are_reused_per_thread_and_role_only():
    import threading
    from fpclass.scan.storage.buffers import KEEP_BYTES, thread_buffer
    a = thread_buffer("packed", 1000)
    assert thread_buffer("packed", 10).base is a.base  # the same memory, next task
    assert not np.shares_memory(thread_buffer("decoded", 1000), a)  # another role
    big = thread_buffer("packed", KEEP_BYTES + 1)
    assert thread_buffer("packed", 10).base is a.base  # a large one is not kept
    assert big.size == KEEP_BYTES + 1
    other = []
    t = threading.Thread(target=lambda: other.append(thread_buffer("packed", 1000)))
    t.start()
    t.join()
    assert not np.shares_memory(other[0], a)  # each thread has its own


@pytest.mark.parametrize("stored", ["bomb", "truncated", "lzf-garbage"])
def test_hdf5_chunk_decoding_to_other_than_a_chunk_is_unchecked(tmp_path, stored):
    h5py = pytest.importorskip("h5py")
    import zlib
    path = tmp_path / "a.h5"
    packed = {"bomb": zlib.compress(bytes(1 << 24)), "truncated": zlib.compress(bytes(64))[:-4],
              "lzf-garbage": b"\x1f" + bytes(8)}[stored]
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(8, 4), dtype="<f4", chunks=(4, 4),
                             compression="lzf" if stored.startswith("lzf") else "gzip")
        d[...] = 1.0
        d.id.write_direct_chunk((4, 0), packed)
    [t] = scan([path], threads=2).tensors
    assert t.status == "unchecked" and "chunk at [4, 0]" in t.reason, t.reason
    if stored == "bomb":  # stopped one byte past the chunk, not inflated to its 16 MiB
        assert "longer than the chunk" in t.reason
