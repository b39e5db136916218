"""Compile every numba kernel fpclass uses, ahead of time, into numba's on-disk cache: for images
and CI caches, so that no later process pays a compile (`fpclass warmup`).
The work is cut into units (one dtype's kernels, serial or threaded; the decoders and density
maps), each reported as it ends; with several workers the units are compiled in parallel
processes (warmup_workers.py). A complete warm-up leaves a stamp (kernels/compile_cache.py)."""

from __future__ import annotations

import os
import time

import numpy as np

from ..kernels import compile_cache, numpy_bits

#: One dtype per kernel specialisation: the word widths (1, 2, 4, 8 bytes), complex (two words an
#: element) and a byte-swapped input.
_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "complex64",
           "complex128", ">f4")
#: The kernels' two launch modes: serial, and threaded (every input over the threshold).
_MODES = ("serial", "threaded")
#: The units of the kernels no dtype selects: the scan's decoders (LZF, unshuffle), the density
#: maps (scan --html).
CODECS, DENSITY = ("codecs", "serial"), ("density", "serial")


def units() -> list:
    """The (dtype name, mode) units the warm-up is made of."""
    return [(name, mode) for mode in _MODES for name in _DTYPES] + [CODECS, DENSITY]


def compile_unit(name: str, mode: str) -> float:
    """Compile (or load) every kernel specialisation that dtype `name` uses in `mode`; the
    seconds it took. Not to be called while other threads use fpclass (it lowers the small-input
    and threading thresholds for its duration)."""
    import ml_dtypes
    from ..formats import format_of, has_magnitude_bounds
    from ..kernels import threads
    from . import buffers, elementwise as ops, queries as q, read_sieve, statistics

    start = time.perf_counter()
    if (name, mode) in (CODECS, DENSITY):
        _codec_kernels() if (name, mode) == CODECS else _density_kernels()
        return time.perf_counter() - start
    small, parallel = numpy_bits.SMALL_BYTES, threads.PARALLEL_MIN
    numpy_bits.SMALL_BYTES = -1
    threads.PARALLEL_MIN = parallel if mode == "serial" else 0
    policy = compile_cache.set_policy("inline")   # a warm-up compiles: never the NumPy answers
    try:
        # per-column counts of 300 rows of 1-byte words take 2-byte cells, of 70,000 rows of 1-
        # or 2-byte words 4-byte cells (wider words: cells as wide as the word); tall tables of 8
        # columns are counted and searched per column by threads in cells of their own
        dtype = np.dtype(getattr(ml_dtypes, name, name))
        shapes = [(3, 64), (300, 64), (2048, 8)] + ([(70_000, 128), (70_000, 8)] if dtype.itemsize <= 2
                                                    else [])
        for x in (np.zeros(shape, dtype) for shape in shapes):
            ops.isnan(x), ops.isinf(x), ops.isfinite(x), ops.isnan(x.T)
            q.any_nan(x), q.first_nonfinite(x), q.locate_nan(x, 2)
            q.count_nan(x), q.count_nonfinite(x, axis=1), q.count_nonfinite(x, axis=0)
            q.any_nan(x, axis=0), q.any_nan(x, axis=1)
            if x.dtype.kind != "c":
                ops.isposinf(x), q.class_counts(x), statistics.value_stats(x)
            # the scan's statistics above; fpclass.check and torch.watch count raw buffers
            buffers.count_nonfinite_words(x.dtype, [x.ctypes.data], [x.size])
            buffers.nonfinite_counter(x.dtype)(x.ctypes.data, x.size)
            buffers.nonfinite_screen(x.dtype)(x.ctypes.data, x.size)
            if x.dtype.isnative and has_magnitude_bounds(format_of(x.dtype)):  # watch's outputs
                buffers.magnitude_screen(x.dtype)(x.ctypes.data, x.size)
        # more elements than the operators' small path takes: the launcher's one-run kernel,
        # writing uint8 (the shapes above reach it only for 1- and 2-byte words)
        ops.isnan(np.zeros(ops.SMALL_ELEMENTS + 1, dtype))
        if mode == "serial":  # the scan's reads of raw ranges (read_sieve), per word width
            read_sieve.compile_for(dtype)
        if dtype.itemsize == 1:
            # rows a word (kernels/row_words.py) are compiled per word, whatever the format: rows
            # of 8 bytes above, of 4 here
            q.any_nan(np.zeros((2048, 4), dtype), axis=1)
    finally:
        numpy_bits.SMALL_BYTES, threads.PARALLEL_MIN = small, parallel
        compile_cache.set_policy(policy)
    return time.perf_counter() - start


def compile_kernels(progress=None, workers: int = 1, todo=None, wait=None) -> float:
    """Compile (or load) every kernel into numba's cache, unit by unit (`todo`: those units
    only, for tests; no stamp is written then); `progress(done, total, unit, seconds)` is
    called as each unit ends. With `workers` > 1 and a cold cache, units are compiled in that
    many processes and merged into the cache. Another warm-up of the same cache is waited for
    (`wait(lock_path)` called first). Returns the seconds it took."""
    from . import warmup_workers
    start = time.perf_counter()
    every = todo is None
    todo = units() if every else list(todo)
    with compile_cache.warmup_lock(wait):
        if every:
            compile_cache.purge_unstamped()
        if workers > 1 and not compile_cache.is_warm():
            warmup_workers.compile_in_workers(todo, workers, progress)
        else:
            for done, u in enumerate(todo, 1):
                seconds = compile_unit(*u)
                if progress is not None:
                    progress(done, len(todo), u, seconds)
        if every:
            compile_cache.write_stamp(len(todo))
    return time.perf_counter() - start


def work(share: str) -> None:
    """A warm-up worker process's main (warmup_workers.py): compile the units of the JSON list
    `share`, printing a JSON line [name, mode, seconds] as each ends."""
    import json
    for name, mode in json.loads(share):
        seconds = compile_unit(name, mode)
        print(json.dumps([name, mode, seconds]), flush=True)


def default_workers() -> int:
    """The worker processes `fpclass warmup` uses unless told: the cores this process may run
    on, at most 4 (beyond, the units' shared kernels are compiled once per worker for nothing)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def _codec_kernels() -> None:
    """The scan's decoders: LZF (HDF5), unshuffle (HDF5, FITS), shuffled statistics (HDF5), and
    its HDF5 chunk index callback."""
    from ..kernels import index_rows  # noqa: F401  (importing it compiles the callback)
    from ..kernels.lzf import lzf_decompress
    from ..kernels.unshuffle import unshuffle
    lzf_decompress(b"\x01ab", np.zeros(4, np.uint8))
    for size in (2, 3, 4, 8):   # the byte loop, and each word width's whole-word loop
        unshuffle(bytes(2 * size), size, np.zeros(2 * size, np.uint8))
    from . import shuffled
    policy = compile_cache.set_policy("inline")
    try:   # shuffled HDF5 chunks classified as stored, per word width
        for dtype in ("<f2", "<f4", "<f8"):
            shuffled.finite_shuffled_stats(bytes(640), dtype, 80)
    finally:
        compile_cache.set_policy(policy)


def _density_kernels() -> None:
    """The density-map kernels (scan --html), once per word width."""
    from ..kernels import density
    place = density.place_array((1, 4, 4, 0, 1, 4, 1, 0, 4, 4, 4, 4))
    channel, counts = np.zeros((2, 3), np.int64), np.zeros((4, 4, 4), np.int64)
    edges = np.arange(5, dtype=np.int64)
    for word in (np.uint8, np.uint16, np.uint32, np.uint64):
        density.bin_words(np.zeros(16, word), np.zeros((4, 4), word), 0, place, edges, edges,
                          channel, counts)
    density.bin_mask(np.zeros(16, np.uint8), 0, place, edges, edges, 0, counts)
