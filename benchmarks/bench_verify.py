"""Benchmark `fpclass scan --verify` (SHA-256 of every file in the same read as the NaN/Inf check)
against `sha256sum` alone over the same files on every core, page cache warm.

    python benchmarks/bench_verify.py [--files 4] [--size-gib 2] [--dir DIR] [--repeat 5] [--keep]

Sides, timed in turn (`alternated`, best of --repeat):
  sha256sum   coreutils' sha256sum, one process per file, as many at a time as there are cores
  hashlib     Python's hashlib over the files, 4 MiB positioned reads, one thread per core (the
              hash alone, through the same library the scan uses)
  scan        fpclass.scan.scan(files): the check alone, no hash
  verify      fpclass.scan.scan(files, verify=True): the check and the hash in one read
Target (issue 24): verify >= 90% of sha256sum's throughput. fpclass runs in this process (its
fastest honest path: no interpreter start-up per run); sha256sum is a process per file, as users
run it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import alternated, table  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))


def generate(directory: str, files: int, size: int) -> list:
    """`files` safetensors files of about `size` bytes each, float32 tensors of 64 MiB with
    random finite values."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    block = rng.standard_normal(16 << 20).astype(np.float32)
    paths = []
    for k in range(files):
        path = os.path.join(directory, f"shard-{k}.safetensors")
        if not os.path.exists(path) or abs(os.path.getsize(path) - size) > (64 << 20):
            save_file({f"t{i}": block for i in range(max(1, size // block.nbytes))}, path)
        paths.append(path)
    return paths


def sha256sum_all(paths, workers):
    procs, pending = [], list(paths)
    while pending or procs:
        while pending and len(procs) < workers:
            procs.append(subprocess.Popen(["sha256sum", pending.pop()], stdout=subprocess.DEVNULL))
        procs.pop(0).wait()


def hashlib_all(paths, workers):
    def one(path):
        h, buf = hashlib.sha256(), bytearray(4 << 20)
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                h.update(memoryview(buf)[:n])
        return h.hexdigest()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, paths))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--size-gib", type=float, default=2.0, help="total size of the files")
    ap.add_argument("--dir", default=None, help="where the files are made (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    from fpclass.scan import engine
    if shutil.which("sha256sum") is None:
        print("sha256sum not found (coreutils): nothing to compare with")
        return 1
    directory = args.dir or tempfile.mkdtemp(prefix="fpclass-bench-verify-")
    os.makedirs(directory, exist_ok=True)
    try:
        paths = generate(directory, args.files, int(args.size_gib * (1 << 30) / args.files))
        total = sum(os.path.getsize(p) for p in paths)
        cores = os.cpu_count() or 1
        report = engine.scan(paths, verify=True)
        assert report.integrity and all(i.sha256 for i in report.integrity)
        times = alternated(lambda: sha256sum_all(paths, cores), lambda: hashlib_all(paths, cores),
                           lambda: engine.scan(paths), lambda: engine.scan(paths, verify=True),
                           repeat=args.repeat)
        names = ["sha256sum", "hashlib", "scan", "verify"]
        gbs = {n: total / t / 1e9 for n, t in zip(names, times)}
        print(f"{args.files} files, {total / (1 << 30):.2f} GiB in all, {cores} cores, "
              f"page cache warm, best of {args.repeat}")
        print(table(["side", "GB/s", "vs sha256sum", "vs hashlib"],
                    [[n, f"{gbs[n]:.2f}", f"{gbs[n] / gbs['sha256sum']:.2f}x",
                      f"{gbs[n] / gbs['hashlib']:.2f}x"] for n in names]))
        separate = 1 / (1 / gbs["scan"] + 1 / gbs["sha256sum"])
        print(f"\nverify vs sha256sum: {gbs['verify'] / gbs['sha256sum']:.0%} (target >= 90%); "
              f"vs scan then sha256sum one after the other: "
              f"{gbs['verify'] / separate:.2f}x; vs hashlib alone (the same hash library, "
              f"OpenSSL): {gbs['verify'] / gbs['hashlib']:.0%}")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
