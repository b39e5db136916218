"""HDF5 chunks stored with the shuffle filter, classified without unshuffling them to memory
(issue 22): counts, locations and statistics against h5py's read + numpy, for every element size
and float format the reader takes, both byte orders, odd and partial chunks, shuffle alone and
with a compressor; damaged chunks stay unchecked."""

import math

import ml_dtypes
import numpy as np
import pytest

from fpclass.kernels import compile_cache
from fpclass.operators.shuffled import finite_shuffled_stats
from fpclass.scan import scan
from fpclass.scan.readers import hdf5_blocks

from test_scan_hdf5 import assert_as_library, tensor

h5py = pytest.importorskip("h5py")

ALL = dict(max_locations=10_000, threads=2)


def numpy_stats(a):
    """(values, non-finite, zero, subnormal, normal, min, max, absmax) of `a` by numpy."""
    tiny = (ml_dtypes.finfo(a.dtype) if a.dtype == ml_dtypes.bfloat16
            else np.finfo(a.dtype)).smallest_normal
    f = a.astype(np.longdouble if a.dtype.itemsize > 8 else np.float64).reshape(-1)
    finite = np.isfinite(f)
    zero = int((f == 0).sum())
    sub = int((finite & (f != 0) & (np.abs(f) < f.dtype.type(tiny))).sum())
    kept = f[finite]
    extremes = ((float(kept.min()), float(kept.max()), float(np.abs(kept).max())) if kept.size
                else (None, None, None))
    return (f.size, f.size - int(finite.sum()), zero, sub, int(finite.sum()) - zero - sub,
            *extremes)


def values(shape, dtype, seed, hits=()):
    """Random values with zeros and subnormals, and NaN / +Inf / -Inf at flat indices `hits`."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 8).astype(np.float32).astype(dtype)
    flat = a.reshape(-1)
    flat[::97] = 0
    flat[5::101] = (ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal
                    if a.dtype == ml_dtypes.bfloat16 else np.finfo(a.dtype).smallest_subnormal)
    for k, i in enumerate(hits):
        flat[i] = (np.nan, np.inf, -np.inf)[k % 3]
    return a


def bfloat16_type():
    bf16 = h5py.h5t.IEEE_F16LE.copy()
    bf16.set_fields(15, 7, 8, 0, 7)
    bf16.set_ebias(127)
    return bf16


def write(f, name, a, chunks, **filters):
    """A chunked dataset of `a` (bfloat16 through HDF5's own float type)."""
    if a.dtype != ml_dtypes.bfloat16:
        return f.create_dataset(name, data=a, chunks=chunks, **filters)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    dcpl.set_shuffle()
    if filters.get("compression") == "gzip":
        dcpl.set_deflate(4)
    d = h5py.h5d.create(f.id, name.encode(), bfloat16_type(), h5py.h5s.create_simple(a.shape),
                        dcpl=dcpl)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, a.view("<u2"), mtype=bfloat16_type())


def library(f, name, dtype):
    back = f[name][()]  # h5py converts bfloat16 to float32: every value exactly
    return back.astype(ml_dtypes.bfloat16) if dtype == ml_dtypes.bfloat16 else back


#: Every float format the reader takes (bfloat16 only little-endian), both byte orders.
DTYPES = ["<f2", "<f4", "<f8", ">f2", ">f4", ">f8", ml_dtypes.bfloat16, np.longdouble]
#: (shape, chunks): odd chunks over one block of the kernel; edge chunks cut along the first
#: axis only (a prefix of the chunk) and along an inner one.
LAYOUTS = [((5000,), (4099,)), ((37, 150), (8, 64))]


@pytest.fixture(params=["kernels", "cold"])
def launcher(request, monkeypatch):
    """The kernels, or numba's cache cold (the compile policy's NumPy answers, chunks unshuffled
    first): both must give the same answers."""
    if request.param == "cold":
        monkeypatch.setattr(compile_cache, "kernels_ready", lambda: False)
    return request.param


@pytest.mark.parametrize("filters", [{"shuffle": True}, {"shuffle": True, "compression": "gzip"}],
                         ids=["shuffle", "shuffle+gzip"])
def test_shuffled_chunks_match_h5py(tmp_path, filters, launcher):
    path = tmp_path / "s.h5"
    cases = {}
    with h5py.File(path, "w") as f:
        for d, dtype in enumerate(DTYPES):
            for k, (shape, chunks) in enumerate(LAYOUTS):
                n = math.prod(shape)
                # a clean dataset, and one with hits: the last element of a chunk, an element
                # past a kernel block, the array's last
                last = int(np.ravel_multi_index([c - 1 for c in chunks], shape))
                for hits in ((), (last, (n // 2 + 4096) % n, n - 1)):
                    name = f"d{d}_{k}_{len(hits)}"
                    a = values(shape, dtype, 10 * d + k, hits)
                    write(f, name, a, chunks, **filters)
                    cases[name] = (dtype, chunks)
    report = scan([path], **ALL)
    with h5py.File(path, "r") as f:
        for name, (dtype, chunks) in cases.items():
            a = library(f, name, dtype)
            t = tensor(report, name)
            assert_as_library(t, a, chunks)
            assert tuple(t.stats) == numpy_stats(a), name
    assert report.exit_code == 1 and not report.unchecked


def test_clean_chunks_are_never_unshuffled_to_memory(tmp_path, monkeypatch):
    # shuffled only, shuffled and deflated, shuffled and LZF-compressed; a NaN in one chunk:
    # that chunk alone is unshuffled, to be located
    path = tmp_path / "c.h5"
    a = values((64, 100), "<f4", 3)
    b = a.copy()
    b[40, 7] = np.nan
    with h5py.File(path, "w") as f:
        f.create_dataset("plain", data=a, chunks=(16, 100), shuffle=True)
        f.create_dataset("gzip", data=a, chunks=(16, 100), shuffle=True, compression="gzip")
        f.create_dataset("lzf", data=a, chunks=(16, 100), shuffle=True, compression="lzf")
        f.create_dataset("hit", data=b, chunks=(16, 100), shuffle=True)
    calls = []
    real = hdf5_blocks.unshuffle
    monkeypatch.setattr(hdf5_blocks, "unshuffle", lambda *args: calls.append(1) or real(*args))
    report = scan([path], **ALL)
    assert len(calls) == 1
    for name, want in (("plain", a), ("gzip", a), ("lzf", a), ("hit", b)):
        t = tensor(report, name)
        assert_as_library(t, want, (16, 100))
        assert tuple(t.stats) == numpy_stats(want)
        assert t.values_checked == want.size and t.bytes_checked == want.nbytes


def test_damaged_shuffled_chunks_stay_unchecked(tmp_path):
    # a shuffled chunk stored short or long, one whose deflate stream is corrupt
    path = tmp_path / "d.h5"
    a = values((8, 16), "<f4", 4)
    stored = a.view(np.uint8).reshape(-1, 4).T.tobytes()
    with h5py.File(path, "w") as f:
        for name, chunk, gzip in (("short", stored[:-4], False), ("long", stored + bytes(4), False),
                                  ("bad", b"not deflate data", True)):
            d = f.create_dataset(name, shape=(8, 16), dtype="<f4", chunks=(8, 16), shuffle=True,
                                 **({"compression": "gzip"} if gzip else {}))
            d.id.write_direct_chunk((0, 0), chunk, filter_mask=0)
    report = scan([path], **ALL)
    assert "decodes to 508 bytes, 512 expected" in tensor(report, "short").reason
    assert "decodes to 516 bytes, 512 expected" in tensor(report, "long").reason
    assert "corrupt deflate data" in tensor(report, "bad").reason
    assert report.exit_code == 2 and len(report.unchecked) == 3


@pytest.mark.parametrize("dtype", ["<f2", "<f4", "<f8", ">f2", ">f4", ">f8",
                                   ml_dtypes.bfloat16])
def test_finite_shuffled_stats_against_numpy(dtype):
    # element counts around the kernel's vectors (64 words); a non-finite value at the last
    # element of a vector, of the data; a prefix of the data. None where one is not finite.
    for n in (1, 63, 64, 65, 127, 128, 4097):
        for hits in ((), (n - 1,), (min(63, n - 1),)):
            a = values((n,), dtype, n, hits)
            stored = a.view(np.uint8).reshape(-1, a.itemsize).T.tobytes()
            for count in {0, n // 3, n - 1, n}:
                got = finite_shuffled_stats(stored, a.dtype, count)
                if any(i < count for i in hits):
                    assert got is None, (n, hits, count)
                elif count:
                    assert tuple(got) == numpy_stats(a[:count]), (n, hits, count)
                else:
                    assert tuple(got)[:5] == (0, 0, 0, 0, 0)


def test_finite_shuffled_stats_declines_what_it_does_not_read():
    assert finite_shuffled_stats(bytes(32), np.longdouble, 2) is None
    assert finite_shuffled_stats(bytes(0), np.float32, 0) is not None
    with pytest.raises(ValueError, match="count must be 0..2"):
        finite_shuffled_stats(bytes(8), np.float32, 3)
    with pytest.raises(TypeError):
        finite_shuffled_stats(bytes(8), np.int32, 2)
