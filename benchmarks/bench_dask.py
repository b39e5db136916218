"""fpclass on dask vs dask's own expressions, on a lazily built chunked float32 array.

    python benchmarks/bench_dask.py --gib 8                  # the issue's size, generated chunks
    python benchmarks/bench_dask.py --gib 8 --source file    # the same data from a .npy on disk
    python benchmarks/bench_dask.py --gib 1 --chunk-mib 64

Queries: any non-finite (fpclass.dask.any_nonfinite vs da.isnan(x).any() | da.isinf(x).any())
and the class histogram (fpclass.dask.class_counts vs da.isnan(x).sum() and da.isinf(x).sum()),
on the threaded scheduler and on a 2-process LocalCluster.

Sources: "generate" builds each chunk from a seeded generator (a random 1 MiB tile repeated, so
generating costs about one memory write); the "generate" row times a reduction that only touches
each chunk, and the net ratios subtract it. "memory" keeps 8 distinct generated chunks per
process (9 with the one holding the NaN/-Inf) and hands out read-only views of them: an in-memory
array far larger than the caches. "file" writes the same chunks to one .npy file first (in --dir;
it stays in the page cache) and each task memory-maps its chunk of the file, as a worker reading
a shared filesystem would. For both, nothing is generated while timed: end to end is the ratio.
Timing: the cases run in turn, --repeat rounds, best time of each (the threaded scheduler and one
2-process cluster alike), so fpclass and dask see the same stretch of the machine's load.
Memory: peak RSS growth of this process over the rounds (threads), or the largest worker's peak
RSS in one more untimed run of the case on a cluster of its own, next to its RSS before the case
ran (cluster: a fresh one per case, so no case inherits another's memory). Sampled every 10 ms.
Mapped file pages count in RSS while mapped.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import tempfile
import threading
import time

import dask

os.environ.setdefault("FPCLASS_COMPILE", "inline")  # time the kernels (docs/startup.md)
import dask.array as da
import numpy as np
import psutil

import fpclass.dask as fd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dask_sources import file_array, fill_pool, make_array, memory_array, write_file  # noqa: E402


def _add_to_path(folder):
    if folder not in sys.path:
        sys.path.insert(0, folder)


def _touch(block):
    return np.zeros((1,), np.int64) + block.shape[0]


CASES = {
    "generate": lambda x: x.map_blocks(_touch, chunks=((1,) * x.numblocks[0],), dtype=np.int64).sum(),
    "fpclass any_nonfinite": lambda x: fd.any_nonfinite(x),
    "dask isnan.any|isinf.any": lambda x: da.isnan(x).any() | da.isinf(x).any(),
    "fpclass class_counts": lambda x: fd.class_counts(x),
    "dask isnan.sum,isinf.sum": lambda x: (da.isnan(x).sum(), da.isinf(x).sum()),
    "fpclass count_nan,count_inf": lambda x: (fd.count_nan(x), fd.count_inf(x)),
}


def _warm_kernels():
    """Loads numba and every kernel the cases use, as dask runs them (chunks above the 16 KiB
    that the small-input path answers without numba), before anything is measured."""
    x = da.ones(1 << 17, chunks=1 << 15, dtype=np.float32)
    for name, build in CASES.items():
        if name.startswith("fpclass"):
            dask.compute(build(x), scheduler="sync")


class PeakRSS:
    """Samples this process's RSS every 10 ms; `.growth` is the peak above the starting RSS."""

    def __enter__(self):
        self.proc, self.start, self.peak, self.stop = psutil.Process(), 0, 0, threading.Event()
        self.start = self.peak = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.stop.wait(0.01):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.growth = self.peak - self.start


def _start_sampler(dask_worker):
    proc = psutil.Process()
    state = {"base": proc.memory_info().rss, "stop": threading.Event()}
    state["peak"] = state["base"]

    def sample():
        while not state["stop"].wait(0.01):
            state["peak"] = max(state["peak"], proc.memory_info().rss)

    threading.Thread(target=sample, daemon=True).start()
    dask_worker.fpclass_bench_rss = state


def _stop_sampler(dask_worker):
    state = dask_worker.fpclass_bench_rss
    state["stop"].set()
    return state["peak"], state["base"]


def run_threads(x, repeat):
    best = dict.fromkeys(CASES, float("inf"))
    growth = dict.fromkeys(CASES, 0)
    for _ in range(repeat):
        for name, build in CASES.items():
            with PeakRSS() as mem:
                t = time.perf_counter()
                dask.compute(build(x), scheduler="threads")
                best[name] = min(best[name], time.perf_counter() - t)
            growth[name] = max(growth[name], mem.growth)
    return {name: (best[name], growth[name]) for name in CASES}


@contextlib.contextmanager
def cluster_client(warm=None):
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster) as c:
        c.run(_add_to_path, HERE)  # the workers import dask_sources, never get it by value
        c.run(_warm_kernels)
        if warm is not None:
            c.run(warm)
        yield c


def run_cluster(x, repeat, warm=None):
    best = dict.fromkeys(CASES, float("inf"))
    with cluster_client(warm):  # timing: every case in turn on one cluster
        for _ in range(repeat):
            for name, build in CASES.items():
                t = time.perf_counter()
                dask.compute(build(x))
                best[name] = min(best[name], time.perf_counter() - t)
    rows = {}
    for name, build in CASES.items():  # memory: a fresh cluster per case, one untimed run
        with cluster_client(warm) as c:
            c.run(_start_sampler)
            dask.compute(build(x))
            peak, base = max(c.run(_stop_sampler).values())
        rows[name] = (best[name], peak, base)
    return rows


def report(title, rows, nbytes, generated):
    print(f"\n### {title}")
    print("| case | seconds | GB/s | memory |")
    print("|---|---|---|---|")
    for name, (sec, *mem) in rows.items():
        memory = f"peak worker RSS {mem[0] / 2**20:.0f} MiB (before: {mem[1] / 2**20:.0f} MiB)" \
            if len(mem) == 2 else f"peak RSS growth {mem[0] / 2**20:.0f} MiB"
        print(f"| {name} | {sec:.3f} | {nbytes / sec / 1e9:.2f} | {memory} |")
    gen = rows["generate"][0]
    for ours, theirs in (("fpclass any_nonfinite", "dask isnan.any|isinf.any"),
                         ("fpclass class_counts", "dask isnan.sum,isinf.sum"),
                         ("fpclass count_nan,count_inf", "dask isnan.sum,isinf.sum")):
        raw = rows[theirs][0] / rows[ours][0]
        net = (rows[theirs][0] - gen) / max(rows[ours][0] - gen, 1e-9)
        print(f"- {ours} vs {theirs}: {raw:.2f}x end to end"
              + (f", {net:.2f}x net of generation" if generated else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=8.0, help="array size in GiB (default 8)")
    parser.add_argument("--chunk-mib", type=int, default=64, help="chunk size in MiB (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every case, in turn (default 3)")
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--source", choices=("generate", "memory", "file"), default="generate")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where --source file writes")
    args = parser.parse_args(argv)
    path = os.path.join(args.dir, f"fpclass_bench_dask_{os.getpid()}.npy")
    try:
        if args.source == "file":
            t = time.perf_counter()
            write_file(path, args.gib, args.chunk_mib)
            print(f"wrote {path} in {time.perf_counter() - t:.1f} s")
            x = file_array(path, args.gib, args.chunk_mib)
        elif args.source == "memory":
            x = memory_array(args.gib, args.chunk_mib)
        else:
            x = make_array(args.gib, args.chunk_mib)
        run(x, args)
    finally:
        if os.path.exists(path):
            os.remove(path)


def run(x, args):
    generated = args.source == "generate"
    warm = None
    if args.source == "memory":  # each process makes its pool before anything is timed
        warm = functools.partial(fill_pool, 0, x.chunks[0][0])
        warm()
    nbytes = x.nbytes
    _warm_kernels()
    # the answers agree before anything is timed
    assert fd.any_nonfinite(x[: x.chunks[0][0] * 4]).compute()
    cc = fd.class_counts(x[: x.chunks[0][0] * 4]).compute()
    assert (cc.nan, cc.neginf) == (1, 1), cc
    print(f"array: {nbytes / 2**30:.2f} GiB float32 in {x.numblocks[0]} chunks of "
          f"{args.chunk_mib} MiB, source: {args.source}; {psutil.cpu_count()} cores")
    report("threaded scheduler", run_threads(x, args.repeat), nbytes, generated)
    if not args.skip_cluster:
        report("LocalCluster, 2 worker processes x 1 thread", run_cluster(x, args.repeat, warm), nbytes,
               generated)


if __name__ == "__main__":
    main()
