"""Benchmark `fpclass scan` on a large safetensors file (mixed BF16/F16/F32), page cache warm,
and on hostile headers: small files that declare very many tensors or entries.

    python benchmarks/bench_scan.py [--size-gib 4] [--path /tmp/fpclass_bench.safetensors] [--keep]
    python benchmarks/bench_scan.py --hostile [--scale 0.1] [--timeout 120]   # that table only
    python benchmarks/bench_scan.py --no-hostile                              # throughput only
    python benchmarks/bench_scan.py --no-hostile --baseline OLD/src   # also another fpclass tree

Times, each in a fresh subprocess that reports its own peak RSS (VmHWM; see PEAK_RSS); the three
run in turn, --repeat rounds (best time of each; the largest peak RSS of each):
  read        reading the file into one reused 4 MiB buffer, on one thread
  read-threads  the scan's own read path without the checks: 4 MiB positioned reads (os.preadv)
              into one reused buffer per thread, on as many threads as the scan (one per core)
  scan        fpclass.scan.scan (chunks read into reused buffers), default threads, NaN/Inf only
              (stats=False)
  scan-stats  the same scan with its default statistics (class counts, min / max / absmax)
  adhoc       safetensors + numpy: get_tensor(name) and np.isnan(x).any() per tensor
  baseline    (with --baseline SRC) the scan of the fpclass sources in SRC (another checkout's
              src/), timed in turn with the others: "not slower than before" in one run
Each child does its work twice and times the second: the first, untimed, pays for its imports
(the scan's numba and compiled kernels: about 0.5 s here, which the scan's time used to include),
its buffers and a CPU coming out of idle (a first read of the file here runs at half speed).
Targets (issue 7): scan >= 70% of read bandwidth, >= 5x adhoc, peak RSS < 300 MB; (issue 24)
scan-stats >= 85% of scan's throughput.
Needs the `safetensors` package for the adhoc baseline (skipped when missing).

Hostile headers: each adversarial file (at most 64 MB) and a benign file of the same format and
about the same size (a few large tensors) is scanned by fpclass.scan.scan in a fresh subprocess
that reports its time and its own peak RSS; a child past --timeout is killed and reported as
"timeout" with the largest RSS sampled while it ran. Target: <= 10 s and <= 512 MB per file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from protobuf_writer import field as pb_field  # noqa: E402  (the tests' writer)

TENSOR_BYTES = 64 << 20
DTYPES = [("BF16", 2), ("F16", 2), ("F32", 4)]


def generate(path: str, size: int) -> None:
    """A safetensors file of about `size` bytes: 64 MiB tensors cycling BF16/F16/F32, filled with
    finite random-looking bytes (a repeated random block with the exponents kept small)."""
    header, pos, i = {}, 0, 0
    while pos < size:
        dtype, itemsize = DTYPES[i % 3]
        n = TENSOR_BYTES // itemsize
        header[f"layer.{i}.weight"] = {"dtype": dtype, "shape": [n // 1024, 1024],
                                       "data_offsets": [pos, pos + TENSOR_BYTES]}
        pos += TENSOR_BYTES
        i += 1
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    block = rng.integers(0, 256, 1 << 20, dtype=np.uint8)
    block[1::2] &= 0x3F  # clear the top exponent bits of every 16-bit word (and f32's high half)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _ in range(pos // block.size):
            f.write(block.tobytes())


#: A child's own peak RSS: VmHWM, not ru_maxrss, which Linux carries over from the parent across
#: fork and exec (the parent may hold the large headers it just generated).
PEAK_RSS = r"""
def peak_rss_mb():
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""

CHILD = PEAK_RSS + r"""
import itertools, json, os, sys, threading, time


def read(path):
    view, n = memoryview(bytearray(4 << 20)), 0
    with open(path, "rb", buffering=0) as f:
        while k := f.readinto(view):
            n += k
    return n, 0


def read_threads(path):
    size, fd, pieces = os.path.getsize(path), os.open(path, os.O_RDONLY), itertools.count()
    done = [0] * (os.cpu_count() or 1)
    def work(k):
        view = memoryview(bytearray(4 << 20))
        while (position := next(pieces) * len(view)) < size:
            done[k] += os.preadv(fd, [view], position)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(done))]
    for w in threads: w.start()
    for w in threads: w.join()
    os.close(fd)
    return sum(done), 0


def scan(path):
    from fpclass.scan import scan
    r = scan([path], stats=False)
    return r.bytes_checked, r.summary()["nan"]


def scan_stats(path):
    from fpclass.scan import scan
    r = scan([path])
    return r.bytes_checked, r.summary()["nan"]


def adhoc(path):
    import ml_dtypes, numpy as np  # ml_dtypes registers bfloat16 for safetensors' numpy loader
    from safetensors import safe_open
    n = found = 0
    with safe_open(path, "np") as f:
        for name in f.keys():
            x = f.get_tensor(name)
            found += bool(np.isnan(x).any() or np.isinf(x).any())
            n += x.nbytes
            del x
    return n, found


mode, path = sys.argv[1], sys.argv[2]
run = {"read": read, "read-threads": read_threads, "scan": scan, "scan-stats": scan_stats,
       "adhoc": adhoc}[mode]
run(path)  # untimed: imports, compiled kernels, buffers, a busy CPU
t = time.perf_counter()
n, found = run(path)
dt = time.perf_counter() - t
print(json.dumps({"mode": mode, "seconds": dt, "bytes": n, "found": found,
                  "peak_rss_mb": peak_rss_mb()}))
"""


def measure(mode: str, path: str, src: str | None = None) -> dict:
    """One child's report; `src`: the fpclass sources it imports (the installed ones if None)."""
    env = dict(os.environ, PYTHONPATH=src) if src else None
    out = subprocess.run([sys.executable, "-c", CHILD, mode, path], capture_output=True, text=True,
                         env=env)
    if out.returncode:
        raise SystemExit(f"{mode} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Hostile headers. Each writer takes (path, count) and returns the number of tensors (or zip
# members, or metadata entries) it declared; BENIGN writes a file of the same format and size.

def _gguf(tensors, kv=b"", n_kv=0, data=b""):
    """GGUF v3 bytes: `tensors` [(name bytes, dims, ggml type, offset)], raw metadata `kv`."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), n_kv), kv]
    for name, dims, gtype, off in tensors:
        out.append(struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
                   + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", gtype, off))
    head = b"".join(out)
    return head + b"\0" * (-len(head) % 32) + data


def gguf_empty_tensors(path, n):
    """n zero-element F32 tensors, all at data offset 0."""
    with open(path, "wb") as f:
        f.write(_gguf([(b"%x" % i, [0], 0, 0) for i in range(n)]))
    return n


def gguf_metadata_array(path, n):
    """One metadata array of n empty strings (as a huge tokenizer vocabulary would be), one tensor."""
    key = b"tokenizer.ggml.tokens"
    kv = (struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, n) + b"\0" * (8 * n))
    with open(path, "wb") as f:
        f.write(_gguf([(b"w", [8], 0, 0)], kv, 1, np.ones(8, np.float32).tobytes()))
    return 1


def gguf_benign(path, size):
    n = size // 4 // 4 // 8 * 8  # whole 32-byte alignment units
    with open(path, "wb") as f:
        f.write(_gguf([(b"w%d" % i, [n], 0, i * n * 4) for i in range(4)]))
        f.write(np.ones(4 * n, np.float32).tobytes())
    return 4


def _safetensors(path, header, data_len):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.write(np.ones(data_len // 4, np.float32).tobytes())


def safetensors_empty_tensors(path, n):
    """n zero-size F32 tensors in the header, no data."""
    _safetensors(path, {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
                        for i in range(n)}, 0)
    return n


def safetensors_benign(path, size):
    each = size // 4 // 4 * 4
    _safetensors(path, {f"w{i}": {"dtype": "F32", "shape": [each // 4],
                                  "data_offsets": [i * each, (i + 1) * each]} for i in range(4)},
                 4 * each)
    return 4


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz_tiny_members(path, n):
    """n stored one-element float32 members."""
    one = _npy(np.zeros(1, np.float32))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for i in range(n):
            z.writestr(f"m{i}.npy", one)
    return n


def npz_shared_member(path, n):
    """One stored member listed n times in a zip64 central directory (every entry pointing at the
    same local header: the overlapping-entries zip bomb)."""
    data = _npy(np.zeros(4, np.float32))
    crc = zipfile.crc32(data)
    name = b"a.npy"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data),
                        len(name), 0) + name + data
    entries = []
    for i in range(n):
        nm = b"m%d.npy" % i
        entries.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 45, 20, 0, 0, 0, 0, crc,
                                   len(data), len(data), len(nm), 0, 0, 0, 0, 0, 0) + nm)
    cd = b"".join(entries)
    cd_at = len(local)
    eocd64_at = cd_at + len(cd)
    tail = (struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(cd), cd_at)
            + struct.pack("<4sLQL", b"PK\x06\x07", 0, eocd64_at, 1)
            + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                          0xFFFFFFFF, 0))
    with open(path, "wb") as f:
        f.write(local + cd + tail)
    return n


def npz_benign(path, size):
    n = size // 4 // 4
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for i in range(4):
            z.writestr(f"w{i}.npy", _npy(np.ones(n, np.float32)))
    return 4


def _onnx(graph_fields: bytes) -> bytes:
    opset = pb_field(8, 2, pb_field(1, 2, b"") + pb_field(2, 0, 18))
    return pb_field(1, 0, 8) + pb_field(7, 2, graph_fields) + opset


def _initializer(name: bytes, raw: bytes) -> bytes:
    return pb_field(5, 2, pb_field(1, 0, len(raw) // 4) + pb_field(2, 0, 1) + pb_field(8, 2, name) + pb_field(9, 2, raw))


def onnx_small_initializers(path, n):
    """n one-element FLOAT initializers in raw_data."""
    one = np.ones(1, np.float32).tobytes()
    body = b"".join(_initializer(b"i%x" % i, one) for i in range(n))
    with open(path, "wb") as f:
        f.write(_onnx(pb_field(2, 2, b"g") + body))
    return n


def onnx_field_flood(path, n):
    """A graph holding n unknown 3-byte varint fields (protobuf keeps unknown fields; onnx.load
    accepts them) and one initializer."""
    flood = pb_field(100, 0, 1) * n
    with open(path, "wb") as f:
        f.write(_onnx(pb_field(2, 2, b"g") + flood + _initializer(b"w", np.ones(4, np.float32).tobytes())))
    return 1


def onnx_benign(path, size):
    n = size // 4 // 4
    body = b"".join(_initializer(b"w%d" % i, np.ones(n, np.float32).tobytes()) for i in range(4))
    with open(path, "wb") as f:
        f.write(_onnx(pb_field(2, 2, b"g") + body))
    return 4


#: (label, file name, writer, count at scale 1, benign writer)
HOSTILE = [
    ("GGUF: 1M empty F32 tensors", "empty.gguf", gguf_empty_tensors, 1_000_000, gguf_benign),
    ("GGUF: 4M-entry metadata array", "vocab.gguf", gguf_metadata_array, 4_000_000, gguf_benign),
    ("safetensors: 1M zero-size tensors", "empty.safetensors", safetensors_empty_tensors, 1_000_000,
     safetensors_benign),
    ("npz: 100k tiny members", "tiny.npz", npz_tiny_members, 100_000, npz_benign),
    ("npz: 1M entries, one shared member", "shared.npz", npz_shared_member, 1_000_000, npz_benign),
    ("ONNX: 300k small initializers", "inits.onnx", onnx_small_initializers, 300_000, onnx_benign),
    ("ONNX: 10M unknown fields in the graph", "flood.onnx", onnx_field_flood, 10_000_000,
     onnx_benign),
]

HOSTILE_CHILD = PEAK_RSS + r"""
import json, sys, time
from fpclass.scan import scan
import fpclass, numpy as np
fpclass.count_nonfinite(np.ones(1, np.float32))  # load compiled kernels before timing
t = time.perf_counter()
r = scan([sys.argv[1]])
print(json.dumps({"seconds": time.perf_counter() - t, "exit": int(r.exit_code),
                  "tensors": len(r.tensors), "problems": len(r.problems),
                  "peak_rss_mb": peak_rss_mb()}))
"""


def measure_scan(path: str, timeout: float) -> dict:
    """A full scan of `path` in a fresh process: its time, exit code and peak RSS; on a timeout the
    largest RSS sampled (every 0.1 s) while it ran."""
    import psutil
    proc = subprocess.Popen([sys.executable, "-c", HOSTILE_CHILD, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    watch, peak, start = psutil.Process(proc.pid), 0, time.perf_counter()
    while proc.poll() is None:
        try:
            peak = max(peak, watch.memory_info().rss)
        except psutil.Error:
            pass
        if time.perf_counter() - start > timeout:
            proc.kill()
            proc.communicate()
            return {"timeout": True, "seconds": timeout, "peak_rss_mb": peak / 2 ** 20}
        time.sleep(0.1)
    out, err = proc.communicate()
    if proc.returncode:
        return {"failed": err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}",
                "seconds": time.perf_counter() - start, "peak_rss_mb": peak / 2 ** 20}
    return json.loads(out.strip().splitlines()[-1])


def _cell_time(r):
    if r.get("timeout"):
        return f"timeout (>{r['seconds']:.0f})"
    return f"{r['seconds']:.2f}" if "failed" not in r else "failed"


def _cell_rss(r):
    return (">= " if r.get("timeout") else "") + f"{r['peak_rss_mb']:.0f}"


def hostile(scale: float, timeout: float, directory: str | None, keep: bool) -> None:
    load = os.getloadavg()[0]
    work = directory or tempfile.mkdtemp(prefix="fpclass_hostile_")
    os.makedirs(work, exist_ok=True)
    rows = []
    for label, name, write, count, benign in HOSTILE:
        path, bpath = os.path.join(work, name), os.path.join(work, "benign_" + name)
        declared = write(path, max(1, int(count * scale)))
        size = os.path.getsize(path)
        benign(bpath, size)
        bad, good = measure_scan(path, timeout), measure_scan(bpath, timeout)
        ok = (not bad.get("timeout") and "failed" not in bad and bad["seconds"] <= 10
              and bad["peak_rss_mb"] <= 512)
        ratio = "—" if "failed" in bad or "failed" in good else (
            ("> " if bad.get("timeout") else "") + f"{bad['seconds'] / good['seconds']:.0f}×")
        rows.append([label, f"{size / 2 ** 20:.1f} MB", f"{declared:,}", _cell_time(bad),
                     _cell_rss(bad), bad.get("exit", "—"), _cell_time(good), _cell_rss(good),
                     good.get("exit", "—"), ratio, "yes" if ok else "no"])
        print(f"  {label}: {rows[-1][3]} s, {rows[-1][4]} MB", file=sys.stderr, flush=True)
        if not keep:
            os.remove(path)
            os.remove(bpath)
    if not keep and not directory:
        os.rmdir(work)
    print("\n### Hostile headers\n")
    print(f"Full `fpclass.scan.scan` of each file in a fresh process (timeout {timeout:.0f} s); "
          "the benign file has the same format and size in 4 large float32 tensors. Target: "
          "<= 10 s and <= 512 MB peak RSS for any file up to 64 MB."
          + (f" Counts scaled by {scale}." if scale != 1 else "")
          + f" Load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
          f"({os.cpu_count()} cores): other work on the machine stretches every time alike.\n")
    print(table(["file", "size", "declared", "time s", "peak RSS MB", "exit", "benign time s",
                 "benign RSS MB", "benign exit", "time vs benign", "within target"], rows))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-gib", type=float, default=4.0)
    p.add_argument("--path", default="/tmp/fpclass_bench.safetensors")
    p.add_argument("--keep", action="store_true", help="keep the generated file(s)")
    p.add_argument("--repeat", type=int, default=3, help="throughput: rounds of read, scan, adhoc")
    p.add_argument("--baseline", metavar="SRC",
                   help="throughput: also time the scan of the fpclass sources in SRC")
    p.add_argument("--hostile", action="store_true", help="only the hostile-headers table")
    p.add_argument("--no-hostile", action="store_true", help="skip the hostile-headers table")
    p.add_argument("--scale", type=float, default=1.0,
                   help="hostile tables: scale the declared counts (1: the issue's sizes)")
    p.add_argument("--timeout", type=float, default=120.0, help="hostile: seconds per scan")
    p.add_argument("--hostile-dir", default=None, help="hostile: where to write the files")
    args = p.parse_args(argv)
    if not args.hostile:
        throughput(args)
    if not args.no_hostile:
        hostile(args.scale, args.timeout, args.hostile_dir, args.keep)


def throughput(args) -> None:
    size = int(args.size_gib * (1 << 30))
    if not os.path.exists(args.path) or abs(os.path.getsize(args.path) - size) > TENSOR_BYTES:
        t = time.perf_counter()
        generate(args.path, size)
        print(f"generated {args.path} ({os.path.getsize(args.path) / 2**30:.2f} GiB) "
              f"in {time.perf_counter() - t:.1f} s")
    try:
        measure("read", args.path)  # warm the page cache
        modes = ["read", "read-threads", "scan", "scan-stats"]
        try:
            import safetensors  # noqa: F401
            modes.append("adhoc")
        except ImportError:
            print("safetensors not installed: adhoc baseline skipped")
        if args.baseline:
            modes.append("baseline")
        rows = {}
        for _ in range(args.repeat):
            for m in modes:
                r = (measure("scan", args.path, args.baseline) if m == "baseline"
                     else measure(m, args.path))
                best = rows.setdefault(m, r)
                best["peak_rss_mb"] = max(best["peak_rss_mb"], r["peak_rss_mb"])
                if r["seconds"] < best["seconds"]:
                    best.update(seconds=r["seconds"], bytes=r["bytes"])
        print(f"best of {args.repeat} rounds, alternated; peak RSS: the largest of the rounds")
        read_rate = max(rows[m]["bytes"] / rows[m]["seconds"] for m in ("read", "read-threads"))
        print(f"vs read: against the faster of the two reads\n\n{'mode':<12} {'seconds':>8} {'GiB/s':>7} "
              f"{'vs read':>8} {'vs adhoc':>9} {'peak RSS MB':>12}")
        for m, r in rows.items():
            rate = r["bytes"] / r["seconds"]
            vs_adhoc = (rows["adhoc"]["seconds"] / r["seconds"]) if "adhoc" in rows else float("nan")
            print(f"{m:<12} {r['seconds']:8.2f} {rate / 2**30:7.2f} {rate / read_rate:8.2f} "
                  f"{vs_adhoc:9.2f} {r['peak_rss_mb']:12.0f}")
        stats_ratio = rows["scan"]["seconds"] / rows["scan-stats"]["seconds"]
        print(f"\nscan-stats vs scan (NaN-only), same run: {stats_ratio:.2f} (target >= 0.85)")
    finally:
        if not args.keep:
            os.remove(args.path)


if __name__ == "__main__":
    main()
