"""Benchmark `fpclass scan` on a large safetensors file (mixed BF16/F16/F32), page cache warm.

    python benchmarks/bench_scan.py [--size-gib 4] [--path /tmp/fpclass_bench.safetensors] [--keep]

Times, each in a fresh subprocess that reports its own peak RSS (resource.getrusage):
  read        reading the file into one reused 32 MiB buffer (the same-run read bandwidth)
  scan        fpclass.scan.scan (chunks mapped one at a time), default threads
  scan-read   fpclass.scan.scan reading chunks into reused buffers
  adhoc       safetensors + numpy: get_tensor(name) and np.isnan(x).any() per tensor
Targets (issue 7): scan >= 70% of read bandwidth, >= 5x adhoc, peak RSS < 300 MB.
Needs the `safetensors` package for the adhoc baseline (skipped when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np

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


CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
if mode == "read":
    buf = bytearray(32 << 20); view = memoryview(buf); n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(view)
            if not k: break
            n += k
    found = 0
elif mode.startswith("scan"):
    from fpclass.scan import scan
    import fpclass, numpy as np
    fpclass.count_nonfinite(np.ones(1, np.float32))  # load compiled kernels before timing
    t = time.perf_counter()
    r = scan([path], io="read" if mode == "scan-read" else "mmap")
    n, found = r.bytes_checked, r.summary()["nan"]
else:
    import ml_dtypes, numpy as np  # ml_dtypes registers bfloat16 for safetensors' numpy loader
    from safetensors import safe_open
    n = found = 0
    with safe_open(path, "np") as f:
        for name in f.keys():
            x = f.get_tensor(name)
            found += bool(np.isnan(x).any() or np.isinf(x).any())
            n += x.nbytes
            del x
dt = time.perf_counter() - t
print(json.dumps({"mode": mode, "seconds": dt, "bytes": n, "found": found,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(mode: str, path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, path], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{mode} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-gib", type=float, default=4.0)
    p.add_argument("--path", default="/tmp/fpclass_bench.safetensors")
    p.add_argument("--keep", action="store_true", help="keep the generated file")
    args = p.parse_args(argv)
    size = int(args.size_gib * (1 << 30))
    if not os.path.exists(args.path) or abs(os.path.getsize(args.path) - size) > TENSOR_BYTES:
        t = time.perf_counter()
        generate(args.path, size)
        print(f"generated {args.path} ({os.path.getsize(args.path) / 2**30:.2f} GiB) "
              f"in {time.perf_counter() - t:.1f} s")
    try:
        measure("read", args.path)  # warm the page cache
        modes = ["read", "scan", "scan-read"]
        try:
            import safetensors  # noqa: F401
            modes.append("adhoc")
        except ImportError:
            print("safetensors not installed: adhoc baseline skipped")
        rows = {m: measure(m, args.path) for m in modes}
        read_rate = rows["read"]["bytes"] / rows["read"]["seconds"]
        print(f"\n{'mode':<10} {'seconds':>8} {'GiB/s':>7} {'vs read':>8} {'vs adhoc':>9} {'peak RSS MB':>12}")
        for m, r in rows.items():
            rate = r["bytes"] / r["seconds"]
            vs_adhoc = (rows["adhoc"]["seconds"] / r["seconds"]) if "adhoc" in rows else float("nan")
            print(f"{m:<10} {r['seconds']:8.2f} {rate / 2**30:7.2f} {rate / read_rate:8.2f} "
                  f"{vs_adhoc:9.2f} {r['peak_rss_mb']:12.0f}")
    finally:
        if not args.keep:
            os.remove(args.path)


if __name__ == "__main__":
    main()
