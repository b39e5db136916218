"""Raw ranges read and classified in one nogil call (operators/read_sieve.py and
kernels/read_stats.py): the counts, locations and statistics of the usual path, from NumPy as the
reference, wherever a finding falls among the pieces; reads that fail or end early, interruption
and empty ranges as before."""

import os
import threading

import ml_dtypes
import numpy as np
import pytest

from fpclass.operators import read_sieve as sieve_module
from fpclass.scan import run_task
from fpclass.scan.storage.ranges import Range
from fpclass.scan.tasks import Task

DTYPES = ["<f4", ">f4", "<f8", ">f8", "<f2", ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
          ml_dtypes.float8_e5m2]


@pytest.fixture
def reads(monkeypatch):
    """Small pieces (many per chunk), and the bytes the sieve was asked for and kept (a run of
    read_runs, or read_all's one, as all or nothing)."""
    monkeypatch.setattr(sieve_module, "PIECE_BYTES", 256)
    monkeypatch.setattr(sieve_module, "SMALL_BYTES", 0)
    calls = []
    read, read_runs = sieve_module.ReadSieve.read, sieve_module.ReadSieve.read_runs

    def spy(self, fd, buf, position, nbytes):
        kept = read(self, fd, buf, position, nbytes)
        calls.append((position, nbytes, kept))
        return kept

    def spy_runs(self, fd, buf, positions, lengths):  # (read_all: one run of these)
        n = read_runs(self, fd, buf, positions, lengths)
        calls.extend((int(p), int(b), int(b) if k < n else 0)
                     for k, (p, b) in enumerate(zip(positions[:n + 1], lengths[:n + 1])))
        return n
    monkeypatch.setattr(sieve_module.ReadSieve, "read", spy)
    monkeypatch.setattr(sieve_module.ReadSieve, "read_runs", spy_runs)
    return calls


def _file(tmp_path, a, header=40):
    """`a` stored at byte `header` of a file (something before it, as in real formats)."""
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x5a" * header + a.tobytes() + b"\x00" * 8)
    return str(path)


def _task(path, a, header=40, **kw):
    numpy_own = a.dtype.type.__module__ == "numpy"
    return Task(path, "x", str(a.dtype), a.shape, element=a.dtype.str if numpy_own
                else a.dtype.name, grid=a.shape,
                storage=Range(path, header, a.nbytes), **kw)


def _expected(a, limit):
    """(nan, +inf, -inf, locations, stats fields) of `a` by NumPy (float64 casts)."""
    f = a.astype(np.float64)
    bad = ~np.isfinite(f)
    where = np.argwhere(bad)[:limit]
    classes = ["nan" if np.isnan(f[tuple(i)]) else "posinf" if f[tuple(i)] > 0 else "neginf"
               for i in where]
    finite = f[~bad]
    tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
    zero = int(np.count_nonzero(finite == 0))
    sub = int(np.count_nonzero((finite != 0) & (np.abs(finite) < tiny)))
    stats = (a.size, int(bad.sum()), zero, sub, a.size - int(bad.sum()) - zero - sub)
    if finite.size:
        stats += (finite.min(), finite.max(), np.abs(finite).max())
    else:
        stats += (None, None, None)
    return (int(np.isnan(f).sum()), int(np.isposinf(f).sum()), int(np.isneginf(f).sum()),
            [(tuple(i), c) for i, c in zip(where.tolist(), classes)], stats)


def _got(r):
    return (r.nan, r.posinf, r.neginf, [(loc.index, loc.cls) for loc in r.locations],
            tuple(r.stats))


def _values(dtype, n, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 3).astype(np.float32)
    a[::97] = 0
    a[5::101] = -0.0
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("where", ["none", "first", "middle", "last", "many"])
def test_counts_locations_and_stats_as_numpy_wherever_a_finding_falls(tmp_path, reads, dtype,
                                                                      where):
    a = _values(dtype, 3001).reshape(3001)
    if dtype == ml_dtypes.float8_e4m3fn:
        a[-3] = ml_dtypes.finfo(dtype).smallest_subnormal
    bad = {"none": [], "first": [0], "middle": [1500], "last": [3000],
           "many": list(range(7, 3001, 13))}[where]
    specials = [np.nan, np.inf, -np.inf] if np.dtype(dtype) != ml_dtypes.float8_e4m3fn \
        else [np.nan]
    for k, i in enumerate(bad):
        a[i] = specials[k % len(specials)]
    path = _file(tmp_path, a)
    r = run_task(_task(path, a), 5, chunk_bytes=1024)
    assert r.status == "checked", r.reason
    assert _got(r) == _expected(a, 5)
    assert (r.values_checked, r.bytes_checked) == (a.size, a.nbytes)
    assert reads, "the sieve was not used"
    kept = sum(k for _, _, k in reads)
    if where == "none":  # all but the last words short of a vector of 64
        assert kept == a.nbytes - (a.size % 64) * a.itemsize


@pytest.mark.parametrize("dtype", ["<f4", ">f2"])
def test_parts_repeat_and_negation_as_the_usual_path(tmp_path, reads, dtype, monkeypatch):
    a = _values(dtype, 5000, seed=3).reshape(50, 100)
    a[31, 7] = np.nan
    path = _file(tmp_path, a)
    task = _task(path, a, first=1234, count=3000, flip="neg")
    got = run_task(task, 3, chunk_bytes=512)
    assert reads
    monkeypatch.setattr(Range, "sieves", False)
    reads.clear()
    usual = run_task(task, 3, chunk_bytes=512)
    assert not reads
    assert got == usual
    part = a.reshape(-1)[1234:4234]
    assert got.stats.min == -float(np.nanmax(part.astype(np.float64)))
    assert [loc.index for loc in got.locations] == [(31, 7)]


def test_a_file_that_shrinks_while_it_is_read_is_unchecked(tmp_path, reads, monkeypatch):
    a = _values("<f4", 100_000)
    path = _file(tmp_path, a)
    read = sieve_module.ReadSieve.read

    def shrinking(self, fd, buf, position, nbytes):
        if position > 40:
            os.truncate(path, 40 + a.nbytes // 2)
        return read(self, fd, buf, position, nbytes)
    monkeypatch.setattr(sieve_module.ReadSieve, "read", shrinking)
    r = run_task(_task(path, a), 5, chunk_bytes=64 << 10)
    assert r.status == "unchecked"
    assert f"ended at byte {40 + a.nbytes // 2}" in r.reason


def test_kernel_keeps_whole_vectors_and_stops_at_the_end_of_the_file_or_an_error(tmp_path):
    from fpclass.kernels import read_stats
    a = _values("<f4", 1024)
    path = _file(tmp_path, a, header=0)  # 4096 bytes of values, 8 after them
    sieve = sieve_module.read_sieve(np.dtype("<f4"), 1 << 20)
    buf = np.empty(512, np.uint8)  # pieces of 512 bytes: two vectors of 64 words
    fd = os.open(path, os.O_RDONLY)
    try:
        assert sieve.read(fd, buf, 0, 4096) == 4096
        assert sieve.stats() == _clean_stats(a)
        # a read past the file's end keeps the whole pieces before it
        assert sieve.read(fd, buf, 2048, 2560) == 2048
        # the last words short of a vector are left to the caller
        assert sieve.read(fd, buf, 0, 4096 - 40) == 3840
    finally:
        os.close(fd)
    assert sieve.read(fd, buf, 0, 512) == 0  # a closed descriptor: pread fails, nothing kept
    assert sieve.values == 1024 + 512 + 960
    assert read_stats.available == (os.name == "posix")


def _clean_stats(a):
    f = a.astype(np.float64)
    return (a.size, 0, int((f == 0).sum()), 0, int((f != 0).sum()), f.min(), f.max(),
            np.abs(f).max())


@pytest.mark.parametrize("dtype", [np.int32, np.complex64, ml_dtypes.float4_e2m1fn])
def test_no_sieve_where_the_words_are_not_the_statistics_kernels(dtype):
    assert sieve_module.read_sieve(np.dtype(dtype), 1 << 20) is None


def test_no_sieve_while_the_kernels_are_cold(monkeypatch):
    from fpclass.kernels import compile_cache
    monkeypatch.setattr(compile_cache, "kernels_ready", lambda: False)
    assert sieve_module.read_sieve(np.dtype("<f4"), 1 << 20) is None


def test_stop_interrupts_between_chunks_read_through_the_sieve(tmp_path, reads):
    a = _values("<f4", 10_000)
    path = _file(tmp_path, a)
    stop = threading.Event()
    read = sieve_module.ReadSieve.read

    def stopping(self, *args):
        stop.set()
        return read(self, *args)
    sieve_module.ReadSieve.read = stopping
    try:
        r = run_task(_task(path, a), 5, chunk_bytes=4096, stop=stop)
    finally:
        sieve_module.ReadSieve.read = read
    assert r.status == "unchecked" and "interrupted" in r.reason


def test_an_empty_range_is_checked_without_a_read(tmp_path, reads):
    a = np.empty(0, "<f4")
    path = _file(tmp_path, a)
    r = run_task(_task(path, a), 5)
    assert (r.status, r.values_checked, r.stats.values) == ("checked", 0, 0)
    assert not reads


def test_the_warmup_compiles_what_the_scan_calls(tmp_path):
    """In a fresh cache: what `fpclass warmup` compiles for a dtype is what a scan of a raw range
    of it then calls (numba's cache misses of the kernel in a second process)."""
    import subprocess
    import sys
    a = _values(">f4", 100_000)
    path = _file(tmp_path, a)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": src}

    def python(code):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=600)
        assert out.returncode == 0, out.stderr
        return out.stdout
    python("import numpy as np\nfrom fpclass.operators import read_sieve\n"
           "read_sieve.compile_for(np.dtype('>f4'))\n")
    out = python("from fpclass.scan import run_task\n"
                 "from fpclass.scan.storage.ranges import Range\n"
                 "from fpclass.scan.tasks import Task\nfrom fpclass.kernels import read_stats\n"
                 f"t = Task({path!r}, 'x', 'f', ({a.size},), element='>f4', grid=({a.size},),\n"
                 f"         storage=Range({path!r}, 40, {a.nbytes}))\n"
                 "r = run_task(t, 5)\n"
                 "import os, numpy as np\nfrom fpclass.operators.read_sieve import read_sieve\n"
                 "runs = np.array([40, 440], np.int64)\n"  # and runs read in one call (HDF5's)
                 "sieve = read_sieve(np.dtype('>f4'), 1 << 20)\n"
                 "print(r.status, r.values_checked, sieve.read_runs(os.open(t.source, os.O_RDONLY), "
                 "np.empty(1 << 18, np.uint8), runs, np.array([256, 256], np.int64)))\n"
                 "for kernel in (read_stats.read_clean, read_stats.read_clean_runs):\n"
                 "    print(sum(kernel.stats.cache_hits.values()), "
                 "sum(kernel.stats.cache_misses.values()))\n")
    assert out.split() == ["checked", str(a.size), "2", "1", "0", "1", "0"]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("dtype", ["<f4", ">f8", "<f2"])
@pytest.mark.parametrize("where", ["none", "first", "edge", "middle", "many"])
def test_uncompressed_zarr_chunks_as_numpy_wherever_a_finding_falls(tmp_path, reads, fmt, dtype,
                                                                    where):
    """Chunks (16, 16) of a (40, 35) array: edge chunks along both axes (rows past the edge kept
    out of the sieve), findings in the first, an edge chunk, in a later piece of the first chunk
    (what the sieve kept of it given back) or everywhere."""
    zarr = pytest.importorskip("zarr")
    from fpclass.scan.engine import plan
    from fpclass.results.build import merge_parts
    if fmt == 2 and dtype.startswith(">"):
        dtype = "<" + dtype[1:]
    a = _values(dtype, 40 * 35, seed=5).reshape(40, 35)
    bad = {"none": [], "first": [(0, 1)], "edge": [(39, 34)], "middle": [(7, 9)],
           "many": [(i, (3 * i) % 35) for i in range(0, 40, 2)]}[where]
    for k, i in enumerate(bad):
        a[i] = [np.nan, np.inf, -np.inf][k % 3]
    path = str(tmp_path / "a.zarr")
    serializer = "auto" if fmt == 2 else zarr.codecs.BytesCodec(
        endian="big" if dtype.startswith(">") else "little")
    z = zarr.create_array(path, shape=a.shape, chunks=(16, 16), dtype=a.dtype, fill_value=0,
                          zarr_format=fmt, compressors=None, serializer=serializer)
    z[...] = a
    tasks = [t for t in plan([path]) if t.status == "check"]
    r = merge_parts([run_task(t, 100, chunk_bytes=1024) for t in tasks], 100)
    assert r.status == "checked", r.reason
    got, expected = _got(r), _expected(a, 100)
    assert sorted(got[3]) == expected[3]  # found in the order of the chunks
    assert got[:3] + got[4:] == expected[:3] + expected[4:]
    assert r.values_checked == a.size
    assert reads, "the sieve was not used"


def test_a_kernel_that_cannot_be_built_means_the_usual_reads(tmp_path, reads, monkeypatch):
    from fpclass.kernels import read_stats

    def unlinkable(*args):
        raise RuntimeError("symbol pread not found")
    monkeypatch.setattr(sieve_module, "_works", {})
    monkeypatch.setattr(read_stats, "read_clean", unlinkable)
    assert sieve_module.read_sieve(np.dtype("<f4"), 1 << 20) is None
    a = _values("<f4", 1000)
    a[10] = np.nan
    r = run_task(_task(_file(tmp_path, a), a), 5)
    assert _got(r) == _expected(a, 5) and not reads


def test_no_pread_symbol_to_link_with_means_the_usual_reads(tmp_path, reads, monkeypatch):
    # numba compiles a call to a missing symbol, which crashes when it runs: asked first
    from llvmlite import binding

    from fpclass.kernels import read_stats
    monkeypatch.setattr(sieve_module, "_works", {})
    monkeypatch.setattr(read_stats, "_linkable", None)
    monkeypatch.setattr(binding, "address_of_symbol", lambda name: None)
    assert sieve_module.read_sieve(np.dtype("<f4"), 1 << 20) is None
    a = _values("<f4", 1000)
    a[10] = np.nan
    r = run_task(_task(_file(tmp_path, a), a), 5)
    assert _got(r) == _expected(a, 5) and not reads


def test_a_lazily_conjugated_tensor_keeps_the_statistics_of_its_values(tmp_path):
    torch = pytest.importorskip("torch")
    from fpclass.scan import scan
    g = torch.Generator().manual_seed(0)
    t = torch.complex(torch.randn(100000, generator=g) + 5, torch.randn(100000, generator=g) + 5)
    path = tmp_path / "conj.pt"
    torch.save({"c": t.conj()}, path)
    truth = t.conj().resolve_conj().numpy()
    parts = np.concatenate([truth.real, truth.imag])
    item = next(i for i in scan([str(path)]).tensors if i.name == "c")
    assert item.status == "checked"
    assert (item.stats.min, item.stats.max) == (float(parts.min()), float(parts.max()))


def test_runs_read_in_one_call_are_kept_in_order_up_to_the_first_not_kept_whole(tmp_path):
    """read_runs (HDF5's runs of chunks): the runs before the first that holds a non-finite
    value, ends short of a vector or past the file are kept, in the order given, and the
    statistics are exactly theirs."""
    a = _values("<f4", 1024)
    a[600] = np.nan  # in the third run of 256 values
    path = _file(tmp_path, a, header=0)
    buf = np.empty(512, np.uint8)
    fd = os.open(path, os.O_RDONLY)

    def runs(*spans):
        sieve = sieve_module.read_sieve(np.dtype("<f4"), 1 << 20)
        at, n = (np.array(v, np.int64) for v in zip(*spans)) if spans else \
            (np.zeros(0, np.int64),) * 2
        return sieve.read_runs(fd, buf, at, n), sieve

    try:
        kept, sieve = runs((0, 1024), (1024, 1024), (2048, 1024), (3072, 1024))
        assert (kept, sieve.values, sieve.stats()) == (2, 512, _clean_stats(a[:512]))
        kept, sieve = runs((3072, 1024), (0, 1024), (1024, 1000), (0, 1024))
        assert (kept, sieve.values) == (2, 512)  # the third short of a vector
        assert sieve.stats() == _clean_stats(np.concatenate([a[768:], a[:256]]))
        kept, sieve = runs((3072, 1024), (3584, 1024))  # the second past the file's end
        assert (kept, sieve.values, sieve.stats()) == (1, 256, _clean_stats(a[768:]))
        assert runs()[0] == 0
    finally:
        os.close(fd)
