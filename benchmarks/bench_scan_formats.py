"""Benchmark `fpclass scan` per file format against each format's own library, page cache warm.

    python benchmarks/bench_scan_formats.py [--mib 1024] [--repeat 3] [--dir /tmp] [--keep]
    python benchmarks/bench_scan_formats.py --memory [--mib 2048]   # peak RSS of fpclass only
    python benchmarks/bench_scan_formats.py --baseline OLD/src      # also another fpclass tree
    python benchmarks/bench_scan_formats.py --tensor-mib 512 --mib 512  # one large dataset

For each file (about --mib MiB of float32/bfloat16 tensors of --tensor-mib MiB each, no NaN),
fresh processes are timed alternately, best of --repeat, each reporting its own peak RSS (VmHWM)
and the CPU time of its process (all threads, least of --repeat: on a loaded machine the CPU a
scan costs beside decode alone's shows what the wall time cannot):
  read      reading the file's bytes into one reused 4 MiB buffer (this run's read bandwidth,
            one thread: the "% of reading the bytes" of issue 22's targets)
  read-all  the same bytes read on a thread per core, each into its own reused 4 MiB buffer
            with positioned reads (the machine's read bandwidth: "% of reading on all cores")
  fpclass   fpclass.scan.scan([path]); its start-up is untimed and shown apart ("fpclass
            start-up"): importing fpclass's reader of the format (the library child imports
            its library before timing too) and loading the kernels the scan classifies with from
            numba's cache (float32 both byte orders, bfloat16; for HDF5 also the statistics of
            shuffled chunks; the read sieve's kernel), as a process pays them once
  library   the format's own reader loading every tensor, then `isnan(t).any()` per tensor:
            torch.load(weights_only=True) + torch.isnan for .pt; h5py ds[...] + np.isnan for HDF5;
            zarr a[...] + np.isnan for zarr; astropy hdu.data for FITS (memmap off); netCDF4
            v[...] (auto-mask off) for NetCDF (nc4-records: each variable along an unlimited
            dimension, in netCDF's default chunks there, one 4 KiB record each)
  decode    (compressed files) "decode alone": every stored chunk read and decoded by its codec
            on a thread pool of all cores, nothing classified: h5py's read_direct_chunk, then the
            dataset's filters undone, for HDF5 (h5-gzip: gzip level 1 + shuffle; h5-shuffle:
            shuffle alone; h5-lzf: shuffle + LZF), by zlib, fpclass's unshuffle kernel and, for
            LZF, fpclass's LZF kernel (kernels/lzf.py: no other LZF decoder is installed, and
            h5py's C filter runs only inside ds[...], under HDF5's lock, so decode alone is the
            decoder the scan uses, without classifying); chunk files + numcodecs (blosc on one
            thread per worker; zstd), into a buffer each worker reuses, for zarr (zarr-blosc:
            blosc-lz4 + shuffle, zarr's BloscCodec(); zarr-zstd: zarr 3's default compressor),
            the tiles' gzip streams + zlib for tile-compressed FITS
  baseline  (with --baseline SRC) fpclass.scan.scan([path]) of the fpclass sources in SRC (another
            checkout's src/), timed in turn with the others: "not slower than before" in one run
Each child finds fpclass's modules compiled (in a private pycache, made by one untimed run per
file), as an installed package has them and as the libraries' are.
Targets (issue 22): compressed >= 1.5x the library and >= 80% of decode alone; uncompressed
zarr, FITS and NetCDF >= 70% of read and >= 2x the library. (Issue 13: .pt >= 3x the library and
>= 70% of read; HDF5 and zarr >= 1.5x uncompressed.)
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import READ_SOURCE, table  # noqa: E402

TENSOR = 32 << 20   # bytes per tensor / dataset / array (--tensor-mib)

CHILD = r"""
import json, sys, time
def peak_rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
mode, kind, path = sys.argv[1:4]
startup = 0.0
if mode == "fpclass":
    import fpclass, numpy as np
    from fpclass.scan import scan
    # numba's machinery started (imported and initialized by a first kernel call)
    fpclass.count_nonfinite(np.ones(1 << 20, np.float32))
    # the format's library imported before timing, as on the library's side
    __import__({"h5": "h5py", "nc": "h5py", "fi": "astropy.io.fits", "za": "zarr"}.get(
        kind[:2], "json"))
    # start-up, untimed and reported apart: fpclass's reader of the format imported (as the
    # library's parsers are by its import) and the kernels the scan classifies with loaded from
    # numba's cache (as the library's compiled code is by its import): the statistics pass,
    # float32 in both byte orders and bfloat16
    t = time.perf_counter()
    from fpclass.scan.readers.registry import BY_KIND
    BY_KIND[{"pt": "pytorch", "h5": "hdf5", "za": "zarr", "fi": "fits"}.get(
        kind[:2], "netcdf3" if kind == "nc-classic" else "hdf5")].load()
    from fpclass.operators.statistics import value_stats
    from ml_dtypes import bfloat16
    for dt in ("<f4", ">f4", bfloat16):
        value_stats(np.ones(1 << 20, dt))
    try:  # and the statistics of HDF5 chunks read as stored shuffled (not in older trees)
        from fpclass.operators.shuffled import finite_shuffled_stats
    except ImportError:
        finite_shuffled_stats = None
    if kind.startswith("h5") and finite_shuffled_stats is not None:
        for dt in ("<f4", ">f4"):
            finite_shuffled_stats(np.ones(1 << 20, dt).tobytes(), dt, 1 << 20)
    try:  # and the kernel reading and classifying raw ranges in one call (not in older trees)
        from fpclass.operators import read_sieve
    except ImportError:
        read_sieve = None
    for dt in ("<f4", ">f4", bfloat16) if read_sieve is not None else ():
        sieve = read_sieve.read_sieve(np.dtype(dt), read_sieve.SMALL_BYTES + 1)
        # runs read in one call (HDF5's runs of chunks, zarr's chunks; not in older trees), the
        # chunk index by a callback; loaded for the formats that use them only (loading kernels
        # a scan does not call moved a FITS scan's time by 5%: 48 against 50 ms, ten processes)
        if kind.startswith(("h5", "nc4", "zarr")) and hasattr(sieve, "read_runs"):
            nothing = np.zeros(1, np.int64)
            sieve.read_runs(-1, np.empty(read_sieve.PIECE_BYTES, np.uint8), nothing, nothing)
    if kind.startswith(("h5", "nc4")):
        try:
            from fpclass.kernels import index_rows  # noqa: F401
        except ImportError:
            pass
    startup = time.perf_counter() - t
elif mode == "library":
    import numpy as np
    if kind == "pt":
        import torch
    elif kind.startswith("h5"):
        import h5py
    elif kind.startswith("fits"):
        from astropy.io import fits
    elif kind.startswith("nc"):
        import netCDF4
    else:
        import zarr
elif mode == "decode":
    import os, zlib
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(os.cpu_count())
    if kind.startswith("h5"):
        import h5py
        from fpclass.kernels.lzf import lzf_decompress
        from fpclass.kernels.unshuffle import unshuffle
        unshuffle(b"abcd" * 8, 4, np.empty(32, np.uint8))  # loaded before timing
        lzf_decompress(b"\x00a", np.empty(1, np.uint8))
    elif kind.startswith("fits"):
        from astropy.io import fits
    else:
        import numcodecs.blosc, numcodecs.zstd
        numcodecs.blosc.use_threads = False  # one thread per worker, as zarr sets it
t, cpu = time.perf_counter(), time.process_time()
if mode == "read":
    read_one_thread(path)
    found = 0
elif mode == "read-all":  # a thread per core, each reading 4 MiB pieces into its own buffer
    import os, threading
    files = files_of(path)
    pieces = iter([(n, at) for n in files for at in range(0, max(os.path.getsize(n), 1), 4 << 20)])
    lock = threading.Lock()

    def reader():
        view, name, fd = memoryview(bytearray(4 << 20)), None, -1
        while True:
            with lock:
                piece = next(pieces, None)
            if piece is None or piece[0] != name:
                if fd >= 0:
                    os.close(fd)
                if piece is None:
                    return
                name, fd = piece[0], os.open(piece[0], os.O_RDONLY)
            os.preadv(fd, [view], piece[1])
    workers = [threading.Thread(target=reader) for _ in range(os.cpu_count() or 1)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    found = 0
elif mode == "decode":
    if kind.startswith("h5"):
        import threading
        kept = threading.local()  # each worker's output buffers, reused (as the scan's are)

        def buffer(role, nbytes):
            buf = getattr(kept, role, None)
            if buf is None or buf.size < nbytes:
                buf = np.empty(nbytes, np.uint8)
                setattr(kept, role, buf)
            return buf[:nbytes]

        def chunk(ds, filters, offset, nbytes):
            mask, data = ds.id.read_direct_chunk(offset)
            for i in reversed(range(len(filters))):  # HDF5's pipeline undone, as it applies it
                if mask & (1 << i):
                    continue
                if filters[i] == 1:  # deflate
                    data = zlib.decompress(data, bufsize=nbytes)
                elif filters[i] == 2:  # shuffle
                    data = unshuffle(data, ds.dtype.itemsize, buffer("shuffle", len(data)))
                else:  # 32000, LZF
                    out = buffer("lzf", nbytes)
                    data = out[:lzf_decompress(data, out)]
            return len(data)
        with h5py.File(path, "r") as f:
            jobs = []
            for n in f:
                ds = f[n]
                nbytes = int(np.prod(ds.chunks)) * ds.dtype.itemsize
                dcpl = ds.id.get_create_plist()
                filters = [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]
                for i in range(ds.id.get_num_chunks()):
                    jobs.append((ds, filters, ds.id.get_chunk_info(i).chunk_offset, nbytes))
            # HDF5's lock: the raw reads one at a time (as h5py allows), the decoding in parallel
            found = sum(pool.map(lambda j: chunk(*j), jobs))
    elif kind.startswith("fits"):
        with fits.open(path, disable_image_compression=True, memmap=False) as hdul:
            tiles = [bytes(t) for h in hdul[1:] for t in h.data["COMPRESSED_DATA"]]
        found = sum(pool.map(lambda t: len(zlib.decompress(t, 31)), tiles))
    else:
        import json, threading
        jobs = []  # (chunk file, its decoded bytes), from each array's zarr.json
        for r, _, ns in os.walk(path):
            if "zarr.json" in ns and r != path:
                with open(os.path.join(r, "zarr.json")) as f:
                    md = json.load(f)
                nbytes = int(np.prod(md["chunk_grid"]["configuration"]["chunk_shape"])) \
                    * np.dtype(md["data_type"]).itemsize
                jobs += [(os.path.join(rr, n), nbytes) for rr, _, nn in os.walk(r)
                         for n in nn if n != "zarr.json"]
        codec = numcodecs.zstd if kind == "zarr-zstd" else numcodecs.blosc
        kept = threading.local()  # each worker's output buffer, reused (as the scan's is)

        def chunk(job):
            name, nbytes = job
            with open(name, "rb") as f:
                frame = f.read()
            out = getattr(kept, "out", None)
            if out is None or out.size < nbytes:
                out = kept.out = np.empty(nbytes, np.uint8)
            return len(codec.decompress(frame, out[:nbytes]))
        found = sum(pool.map(chunk, jobs))
elif mode == "fpclass":
    r = scan([path])
    assert r.exit_code == 0, r.exit_code
    found = r.summary()["nan"]
elif kind == "pt":
    sd = torch.load(path, weights_only=True)
    found = sum(bool(torch.isnan(x).any()) for x in sd.values())
elif kind.startswith("h5"):
    with h5py.File(path, "r") as f:
        found = sum(bool(np.isnan(f[n][...]).any()) for n in f)
elif kind.startswith("fits"):
    with fits.open(path, memmap=False) as hdul:
        found = sum(bool(np.isnan(h.data).any()) for h in hdul if h.data is not None)
elif kind.startswith("nc"):
    with netCDF4.Dataset(path) as d:
        d.set_auto_mask(False)
        found = sum(bool(np.isnan(v[...]).any()) for v in d.variables.values())
else:
    g = zarr.open_group(path, mode="r")
    found = sum(bool(np.isnan(a[...]).any()) for _, a in g.arrays())
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - cpu,
                  "rss": peak_rss_mb(), "found": found, "startup": startup}))
"""


def _values(i: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    return rng.standard_normal(n, dtype=np.float32)


def make_pt(path, count):
    import torch
    torch.save({f"layer.{i}.weight": torch.from_numpy(_values(i, TENSOR // 4).reshape(-1, 1024))
                .to(torch.bfloat16 if i % 2 else torch.float32) for i in range(count)}, path)


def make_h5(path, count, filters):
    import h5py
    with h5py.File(path, "w") as f:
        for i in range(count):
            a = _values(i, TENSOR // 4).reshape(-1, 1024)
            f.create_dataset(f"w{i}", data=a, chunks=(1024, 1024), **filters)


def make_zarr(path, count, compression):
    import zarr
    g = zarr.open_group(path, mode="w")
    for i in range(count):
        a = _values(i, TENSOR // 4).reshape(-1, 1024)
        codecs = {"blosc": zarr.codecs.BloscCodec(), "zstd": zarr.codecs.ZstdCodec(), "": None}
        kwargs = {"compressors": codecs[compression]}
        arr = g.create_array(f"w{i}", shape=a.shape, dtype=a.dtype, chunks=(1024, 1024), **kwargs)
        arr[...] = a


def make_fits(path, count, compression):
    from astropy.io import fits
    hdus = [fits.PrimaryHDU()]
    for i in range(count):
        a = _values(i, TENSOR // 4).reshape(-1, 1024)
        if compression:  # lossless: gzip over the values, no quantization
            hdus.append(fits.CompImageHDU(a, compression_type="GZIP_1", tile_shape=(64, 1024),
                                          quantize_level=0.0))
        else:
            hdus.append(fits.ImageHDU(a))
    fits.HDUList(hdus).writeto(path)


def make_nc(path, count, fmt, records=False):
    """NetCDF variables of 1024 columns, contiguous; `records`: along an unlimited dimension
    each, in netCDF's default chunks there (one 4 KiB record a chunk)."""
    import netCDF4
    with netCDF4.Dataset(path, "w", format=fmt) as d:
        d.createDimension("col", 1024)
        for i in range(count):
            a = _values(i, TENSOR // 4).reshape(-1, 1024)
            d.createDimension(f"row{i}", None if records else a.shape[0])
            d.createVariable(f"w{i}", "f4", (f"row{i}", "col"),
                             fill_value=False)[0:a.shape[0]] = a


H5_GZIP = {"compression": "gzip", "compression_opts": 1, "shuffle": True}
FILES = {  # kind -> (file name, maker)
    "pt": ("bench.pt", make_pt),
    "h5": ("bench.h5", lambda p, c: make_h5(p, c, {})),
    "h5-gzip": ("bench-gzip.h5", lambda p, c: make_h5(p, c, H5_GZIP)),
    "h5-shuffle": ("bench-shuffle.h5", lambda p, c: make_h5(p, c, {"shuffle": True})),
    # LZF alone cannot shrink random float32 chunks: h5py then stores them unfiltered
    "h5-lzf": ("bench-lzf.h5", lambda p, c: make_h5(p, c, {"compression": "lzf",
                                                           "shuffle": True})),
    "zarr": ("bench.zarr", lambda p, c: make_zarr(p, c, "")),
    "zarr-blosc": ("bench-blosc.zarr", lambda p, c: make_zarr(p, c, "blosc")),
    "zarr-zstd": ("bench-zstd.zarr", lambda p, c: make_zarr(p, c, "zstd")),
    "fits": ("bench.fits", lambda p, c: make_fits(p, c, False)),
    "fits-gzip": ("bench-gzip.fits", lambda p, c: make_fits(p, c, True)),
    "nc-classic": ("bench-classic.nc", lambda p, c: make_nc(p, c, "NETCDF3_64BIT_OFFSET")),
    "nc4": ("bench-4.nc", lambda p, c: make_nc(p, c, "NETCDF4")),
    "nc4-records": ("bench-4-records.nc", lambda p, c: make_nc(p, c, "NETCDF4", True)),
}
#: Kinds whose chunks are compressed: timed against "decode alone" too.
PACKED = ("h5-gzip", "h5-shuffle", "h5-lzf", "zarr-blosc", "zarr-zstd", "fits-gzip")


#: Where the children keep their compiled modules (set by main), as an installed package has
#: them: with PYTHONDONTWRITEBYTECODE set (as in some sandboxes), every fresh process would
#: compile fpclass's sources again (15-20 ms of a first scan) while the libraries' come compiled.
PYCACHE = None


def run(mode, kind, path, src=None) -> dict:
    """One child's report; `src`: the fpclass sources it imports (the installed ones if None).
    Children write and reuse bytecode (under PYCACHE), as an installed package has it, even
    where PYTHONDONTWRITEBYTECODE is set: else every child compiles fpclass's modules again."""
    import json
    env = dict(os.environ, **({"PYTHONPATH": src} if src else {}))
    if PYCACHE is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = PYCACHE
    out = subprocess.run([sys.executable, "-c", READ_SOURCE + CHILD, mode, kind, path], capture_output=True,
                         text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{mode} {kind}: {out.stderr[-600:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def size_of(path) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(path) for n in ns)


def each_file(args, count, measure) -> list:
    """[measure(kind, path)] for each file kind of --only: the file made unless it exists, and
    removed after unless --keep; each row printed on stderr as it comes."""
    rows = []
    for kind in args.only.split(","):
        name, make = FILES[kind]
        size = "" if args.tensor_mib == 32 else f"{args.tensor_mib}m-"
        path = os.path.join(args.dir, f"fpclass-formats-{size}{name}")
        try:
            if not os.path.exists(path):
                make(path, count)
            rows.append(measure(kind, path))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)  # progress
        finally:
            if not args.keep and os.path.exists(path):
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    return rows


def memory(args, count) -> int:
    def measure(kind, path):
        r = run("fpclass", kind, path)
        return [kind, f"{size_of(path) / 2**20:.0f} MiB", f"{r['seconds']:.2f} s",
                f"{r['rss']:.0f} MB"]
    print(table(["file", "on disk", "fpclass", "peak RSS"], each_file(args, count, measure)))
    return 0


def main(argv=None) -> int:
    global TENSOR, PYCACHE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--only", default=",".join(FILES))
    parser.add_argument("--tensor-mib", type=int, default=TENSOR >> 20,
                        help="MiB per tensor (one large dataset: --tensor-mib equal to --mib)")
    parser.add_argument("--baseline", metavar="SRC",
                        help="also time the fpclass sources in SRC (e.g. an older checkout's src/)")
    parser.add_argument("--memory", action="store_true",
                        help="only fpclass's peak RSS per file (bounded memory: 2 GiB files)")
    args = parser.parse_args(argv)
    TENSOR = args.tensor_mib << 20
    PYCACHE = tempfile.mkdtemp(prefix="fpclass-formats-pycache-", dir=args.dir)
    atexit.register(shutil.rmtree, PYCACHE, True)
    count = max(1, (args.mib << 20) // TENSOR)
    if args.memory:
        return memory(args, count)

    def measure(kind, path):
        run("read", kind, path)  # warm the page cache
        run("fpclass", kind, path)  # and compile the modules (kept in PYCACHE)
        if args.baseline:
            run("fpclass", kind, path, args.baseline)
        modes = ("read", "read-all", "fpclass", "library") \
            + (("decode",) if kind in PACKED else ()) \
            + (("baseline",) if args.baseline else ())
        best = {m: None for m in modes}
        for _ in range(args.repeat):
            for mode in best:
                if mode == "baseline":
                    r = run("fpclass", kind, path, args.baseline)
                else:
                    r = run(mode, kind, path)
                if best[mode] is None or r["seconds"] < best[mode]["seconds"]:
                    best[mode] = {**r, "rss": max(r["rss"], (best[mode] or r)["rss"]),
                                  "cpu": min(r["cpu"], (best[mode] or r)["cpu"]),
                                  "startup": min(r["startup"], (best[mode] or r)["startup"])}
                else:
                    best[mode]["cpu"] = min(best[mode]["cpu"], r["cpu"])
                    best[mode]["startup"] = min(best[mode]["startup"], r["startup"])
        read, ours, lib = (best[m] for m in ("read", "fpclass", "library"))
        row = [kind, f"{size_of(path) / 2**20:.0f} MiB", f"{ours['seconds']:.2f} s",
               f"{lib['seconds']:.2f} s", f"{lib['seconds'] / ours['seconds']:.2f}x",
               f"{read['seconds'] / ours['seconds']:.0%}",
               f"{size_of(path) / ours['seconds'] / 2**30:.2f} GiB/s",
               f"{ours['rss']:.0f} / {lib['rss']:.0f} MB"]
        decode = best.get("decode")
        row.append(f"{decode['seconds'] / ours['seconds']:.0%}" if decode else "-")
        row.append(f"{ours['cpu']:.2f} / {decode['cpu']:.2f} s" if decode
                   else f"{ours['cpu']:.2f} s")
        if args.baseline:
            row.append(f"{best['baseline']['seconds'] / ours['seconds']:.2f}x")
        row += [f"{best['read-all']['seconds'] / ours['seconds']:.0%}",
                f"{ours['startup'] * 1000:.0f} ms"]
        return row
    rows = each_file(args, count, measure)
    print(table(["file", "on disk", "fpclass", "library + isnan", "fpclass speed-up",
                 "% of reading the bytes", "fpclass file GiB/s", "peak RSS fpclass / library",
                 "% of decode alone", "CPU fpclass / decode alone"]
                + (["speed vs --baseline"] if args.baseline else [])
                + ["% of reading on all cores", "fpclass start-up (untimed)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
