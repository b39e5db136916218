"""fpclass on dask vs dask's own expressions, on a lazily generated chunked float32 array.

    python benchmarks/bench_dask.py --gib 8            # the issue's size
    python benchmarks/bench_dask.py --gib 1 --chunk-mib 64

Queries: any non-finite (fpclass.dask.any_nonfinite vs da.isnan(x).any() | da.isinf(x).any())
and the class histogram (fpclass.dask.class_counts vs da.isnan(x).sum() and da.isinf(x).sum()),
on the threaded scheduler and on a 2-process LocalCluster. Each chunk is built from a seeded
generator (a random 1 MiB tile repeated, so generating costs about one memory write); the
"generate" row times a reduction that only touches each chunk, and the net ratios subtract it.
Memory: peak RSS growth of this process (threads) or the largest worker's peak RSS, sampled every
10 ms, next to its RSS before the case ran (cluster).
"""

from __future__ import annotations

import argparse
import threading
import time

import dask
import dask.array as da
import numpy as np
import psutil

import fpclass.dask as fd

TILE = 1 << 18  # float32 elements in the random tile each chunk repeats (1 MiB)


def _chunk(seed: int, n: int, block_id=None) -> np.ndarray:
    rng = np.random.default_rng([seed, block_id[0]])
    tile = rng.standard_normal(TILE, dtype=np.float32)
    out = np.resize(tile, n)
    if block_id[0] == 3:  # one NaN and one -Inf deep inside one chunk: no early exit anywhere
        out[n // 2] = np.nan
        out[n // 2 + 1] = -np.inf
    return out


def make_array(gib: float, chunk_mib: int, seed: int = 0) -> da.Array:
    per_chunk = chunk_mib * (1 << 20) // 4
    n_chunks = max(1, int(gib * (1 << 30)) // (per_chunk * 4))
    return da.map_blocks(_chunk, seed, per_chunk, chunks=((per_chunk,) * n_chunks,),
                         dtype=np.float32, meta=np.empty((0,), np.float32))


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
    rows = {}
    for name, build in CASES.items():
        best = float("inf")
        for _ in range(repeat):
            with PeakRSS() as mem:
                t = time.perf_counter()
                dask.compute(build(x), scheduler="threads")
                best = min(best, time.perf_counter() - t)
        rows[name] = (best, mem.growth)
    return rows


def run_cluster(x, repeat):
    from distributed import Client, LocalCluster
    rows = {}
    for name, build in CASES.items():  # a fresh cluster per case: worker peaks are per case
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster) as c:
            c.run(lambda: fd.any_nonfinite(da.ones(8, chunks=4)).compute(scheduler="sync"))  # JIT warm
            c.run(_start_sampler)
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                dask.compute(build(x))
                best = min(best, time.perf_counter() - t)
            peak, base = max(c.run(_stop_sampler).values())
        rows[name] = (best, peak, base)
    return rows


def report(title, rows, nbytes):
    print(f"\n## {title}")
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
        print(f"- {ours} vs {theirs}: {raw:.2f}x end to end, {net:.2f}x net of generation")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=8.0, help="array size in GiB (default 8)")
    parser.add_argument("--chunk-mib", type=int, default=64, help="chunk size in MiB (default 64)")
    parser.add_argument("--repeat", type=int, default=2, help="best of N runs (default 2)")
    parser.add_argument("--skip-cluster", action="store_true")
    args = parser.parse_args(argv)
    x = make_array(args.gib, args.chunk_mib)
    nbytes = x.nbytes
    # the answers agree before anything is timed
    assert fd.any_nonfinite(x[: x.chunks[0][0] * 4]).compute()
    cc = fd.class_counts(x[: x.chunks[0][0] * 4]).compute()
    assert (cc.nan, cc.neg_inf) == (1, 1), cc
    print(f"array: {nbytes / 2**30:.2f} GiB float32 in {x.numblocks[0]} chunks of "
          f"{args.chunk_mib} MiB; {psutil.cpu_count()} cores")
    report("threaded scheduler", run_threads(x, args.repeat), nbytes)
    if not args.skip_cluster:
        report("LocalCluster, 2 worker processes x 1 thread", run_cluster(x, args.repeat), nbytes)


if __name__ == "__main__":
    main()
