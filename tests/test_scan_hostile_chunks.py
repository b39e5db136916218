"""Hostile chunks on the paths that decode zarr and HDF5 chunks here (issue 22): frames declaring
no size or a false one, decompression bombs, chunk files and chunk records of lying sizes. Each
leaves its array unchecked, naming the chunk, and never decodes more than a chunk; a valid frame
of an unusual form is read exactly as zarr reads it."""

import numpy as np
import pytest

from fpclass.scan import scan

zarr = pytest.importorskip("zarr")


def rle_frame(total: int, byte: int, block: int = 1 << 17) -> bytes:
    """A zstd frame of `total` copies of `byte` in RLE blocks that declares no content size
    (as streaming encoders write them): a few bytes for any size."""
    out = bytearray(b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x38]))  # no size; a 128 KiB window
    count = -(-total // block)
    for i in range(count):
        size = min(block, total - i * block)
        header = (1 if i == count - 1 else 0) | (1 << 1) | (size << 3)  # RLE block
        out += header.to_bytes(3, "little") + bytes([byte])
    return bytes(out)


@pytest.fixture
def store(tmp_path):
    """A zstd array of 4 chunks of 16 x 16 float32, and the path of its chunk (1, 0)."""
    z = zarr.create_array(tmp_path / "a.zarr", shape=(32, 32), chunks=(16, 16), dtype="<f4",
                          compressors=zarr.codecs.ZstdCodec())
    z[...] = 1.5
    return tmp_path / "a.zarr", tmp_path / "a.zarr" / "c" / "1" / "0"


@pytest.fixture
def zstd_calls(monkeypatch):
    """Whether each zstd decode was given a buffer of the chunk's size to decode into."""
    zstd = pytest.importorskip("numcodecs.zstd")
    calls = []
    real = zstd.decompress
    monkeypatch.setattr(zstd, "decompress",
                        lambda frame, dest=None: calls.append(dest is not None
                                                              and len(dest) == 1024)
                        or real(frame, dest))
    return calls


def test_a_frame_declaring_no_size_is_read_as_zarr_reads_it(store, zstd_calls):
    path, chunk = store
    chunk.write_bytes(rle_frame(16 * 16 * 4, 0xFF))  # all NaN (0xFFFFFFFF)
    a = np.asarray(zarr.open_array(path, mode="r")[...])
    assert np.isnan(a).sum() == 256  # zarr's own read
    zstd_calls.clear()
    [t] = scan([path]).tensors
    assert t.status == "checked" and (t.nan, t.values_checked) == (256, 1024)
    assert zstd_calls == [True] * 4


@pytest.mark.parametrize("frame", ["bomb", "declares-more", "declares-less", "short-rle"])
def test_frames_not_decoding_to_one_chunk_are_unchecked(store, zstd_calls, frame):
    zstd = pytest.importorskip("numcodecs.zstd")
    path, chunk = store
    chunk.write_bytes({"bomb": rle_frame(1 << 30, 0),  # 1 GiB from 24 KiB, declaring nothing
                       "declares-more": zstd.compress(bytes(1 << 20), 1),
                       "declares-less": zstd.compress(bytes(1020), 1),
                       "short-rle": rle_frame(1020, 0)}[frame])
    [t] = scan([path]).tensors
    assert t.status == "unchecked" and "c/1/0" in t.reason, t.reason
    assert all(zstd_calls)  # never decoded past a chunk's buffer


def test_blosc_header_declaring_a_larger_chunk_is_unchecked(tmp_path):
    numcodecs = pytest.importorskip("numcodecs")
    z = zarr.create_array(tmp_path / "b.zarr", shape=(32,), chunks=(16,), dtype="<f4",
                          compressors=zarr.codecs.BloscCodec())
    z[...] = 2.0
    frame = numcodecs.Blosc().encode(bytes(1 << 20))  # a valid frame of 1 MiB
    (tmp_path / "b.zarr" / "c" / "1").write_bytes(bytes(frame))
    [t] = scan([tmp_path / "b.zarr"]).tensors
    assert t.status == "unchecked" and "'c/1'" in t.reason, t.reason


@pytest.mark.parametrize("size", [63, 65, 0])
def test_uncompressed_chunk_files_of_another_size_are_unchecked(tmp_path, size):
    z = zarr.create_array(tmp_path / "r.zarr", shape=(32,), chunks=(16,), dtype="<f4",
                          compressors=None)
    z[...] = 3.0
    (tmp_path / "r.zarr" / "c" / "0").write_bytes(b"\x00" * size)
    [t] = scan([tmp_path / "r.zarr"]).tensors
    assert t.status == "unchecked" and "'c/0'" in t.reason, t.reason


@pytest.mark.parametrize("filters, stored", [
    ({"shuffle": True}, b"\x00" * 60),                       # shuffled, cut short
    ({"shuffle": True}, b"\x00" * 68),                       # shuffled, too long
    ({"compression": "lzf", "shuffle": True}, b"\x1f" + bytes(64)),   # LZF: one byte more
    ({"compression": "gzip", "shuffle": True}, __import__("zlib").compress(bytes(60))),
])
def test_hdf5_chunks_of_another_size_are_unchecked(tmp_path, filters, stored):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(8, 4), dtype="<f4", chunks=(4, 4), **filters)
        d[...] = 1.0
        d.id.write_direct_chunk((4, 0), stored)
    [t] = scan([path], threads=2).tensors
    assert t.status == "unchecked" and "chunk at [4, 0]" in t.reason, t.reason
