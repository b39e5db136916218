"""Benchmark `fpclass scan` of an https-style URL against a plain parallel ranged download of the
same bytes from the same server: nginx on 127.0.0.1 (tests/remote_servers.py) serving a large
safetensors file (bench_scan.generate: 64 MiB tensors cycling BF16/F16/F32, finite values).

    python benchmarks/bench_remote.py [--size-mib 1024] [--repeat 2] [--path FILE] [--keep]
    python benchmarks/bench_remote.py --size-mib 4096 --only scan     # the 4 GiB memory target

Each side runs in a fresh subprocess that reports its own peak RSS (VmHWM), in turn, --repeat
rounds (best time of each, largest peak RSS of each), after an untimed run of the same code on a
64 MiB file from the same server (imports, compiled kernels, the HTTP session):
  download   fsspec's HTTPFileSystem.cat_ranges of the file in 4 MiB ranges, as many ranges at
             once as the scan has streams (one batch after another, each discarded), into memory
  scan       fpclass.scan.scan([url]) with its default streams for URLs
Targets (issue 25): scan >= 80% of the download's throughput; peak RSS of a scan of a 4 GiB file
<= 300 MB. Numbers on a loaded machine are indicative: compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
from bench_scan import PEAK_RSS, generate  # noqa: E402
from common import table  # noqa: E402
from remote_servers import nginx, nginx_missing  # noqa: E402

CHILD = PEAK_RSS + r"""
import json, sys, time

RANGE = 4 << 20


def download(url, streams):
    import fsspec
    fs = fsspec.filesystem("http")
    size = fs.info(url)["size"]
    starts = list(range(0, size, RANGE))
    n = 0
    for k in range(0, len(starts), streams):
        batch = starts[k:k + streams]
        got = fs.cat_ranges([url] * len(batch), batch, [min(s + RANGE, size) for s in batch])
        n += sum(len(g) for g in got)
        del got
    return n


def scan(url, streams):
    from fpclass.scan import scan
    r = scan([url])
    assert not r.problems and all(t.status == "checked" for t in r.tensors), r.problems
    return r.bytes_checked


mode, url, warm, streams = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
run = {"download": download, "scan": scan}[mode]
run(warm, streams)  # untimed, a small file: imports, compiled kernels, the HTTP session
t = time.perf_counter()
n = run(url, streams)
dt = time.perf_counter() - t
print(json.dumps({"mode": mode, "seconds": dt, "bytes": n, "peak_rss_mb": peak_rss_mb()}))
"""


def child(mode: str, url: str, warm: str, streams: int) -> dict:
    src = os.path.join(HERE, os.pardir, "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", CHILD, mode, url, warm, str(streams)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{mode} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=int, default=1024, help="file size (default 1024)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--path", help="the file (generated when absent)")
    p.add_argument("--keep", action="store_true", help="keep the generated file")
    p.add_argument("--only", choices=["scan", "download"], help="run one side only")
    args = p.parse_args(argv)
    if nginx_missing():
        print(f"skipped: {nginx_missing()}")
        return 0
    from fpclass.scan.storage.source import REMOTE_STREAMS as streams
    folder = tempfile.mkdtemp(prefix="fpclass-bench-remote-")
    path = args.path or os.path.join(folder, "model.safetensors")
    made = not os.path.exists(path)
    if made:
        generate(path, args.size_mib << 20)
    warm = os.path.join(os.path.dirname(os.path.abspath(path)), "fpclass-bench-warm.safetensors")
    generate(warm, 64 << 20)
    try:
        with nginx(os.path.dirname(os.path.abspath(path))) as base:
            url = f"{base}/{os.path.basename(path)}"
            warm_url = f"{base}/{os.path.basename(warm)}"
            modes = [args.only] if args.only else ["download", "scan"]
            best: dict = {}
            for _ in range(args.repeat):
                for mode in modes:
                    r = child(mode, url, warm_url, streams)
                    b = best.setdefault(mode, r)
                    b["seconds"] = min(b["seconds"], r["seconds"])
                    b["peak_rss_mb"] = max(b["peak_rss_mb"], r["peak_rss_mb"])
    finally:
        os.unlink(warm)
        if made and not args.keep:
            os.unlink(path)
        if not os.listdir(folder):
            os.rmdir(folder)
    size = os.path.getsize(path) if os.path.exists(path) else args.size_mib << 20
    rows = []
    for mode in modes:
        r = best[mode]
        rows.append([mode, f"{r['bytes'] / r['seconds'] / 1e6:.0f}", f"{r['seconds']:.2f}",
                     f"{r['peak_rss_mb']:.0f}"])
    print(f"{size / 2**20:.0f} MiB over http://127.0.0.1 (nginx), {streams} streams")
    print(table(["", "MB/s", "seconds", "peak RSS MB"], rows))
    if len(modes) == 2:
        ratio = best["download"]["seconds"] / best["scan"]["seconds"]
        print(f"scan / download throughput: {ratio:.2f} (target >= 0.80)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
