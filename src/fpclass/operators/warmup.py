"""Compile every numba kernel fpclass uses, ahead of time, into numba's on-disk cache: for images
and CI caches, so that no later process pays a compile (`fpclass warmup`).
The work is cut into units (one dtype's kernels, serial or threaded), each reported as it ends."""

from __future__ import annotations

import time

import numpy as np

from ..kernels import numpy_bits

#: One dtype per kernel specialisation: the word widths (1, 2, 4, 8 bytes), complex (two words an
#: element) and a byte-swapped input.
_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "complex64",
           "complex128", ">f4")
#: The kernels' two launch modes: serial, and threaded (every input over the threshold).
_MODES = ("serial", "threaded")


def units() -> list:
    """The (dtype name, mode) units the warm-up is made of."""
    return [(name, mode) for mode in _MODES for name in _DTYPES]


def compile_unit(name: str, mode: str) -> float:
    """Compile (or load) every kernel specialisation that dtype `name` uses in `mode`; the
    seconds it took. Not to be called while other threads use fpclass (it lowers the small-input
    and threading thresholds for its duration)."""
    import ml_dtypes
    from ..kernels import threads
    from . import elementwise as ops, queries as q

    start = time.perf_counter()
    small, parallel = numpy_bits.SMALL_BYTES, threads.PARALLEL_MIN
    numpy_bits.SMALL_BYTES = -1
    threads.PARALLEL_MIN = parallel if mode == "serial" else 0
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
                ops.isposinf(x), q.class_counts(x)
    finally:
        numpy_bits.SMALL_BYTES, threads.PARALLEL_MIN = small, parallel
    _density_kernels()
    return time.perf_counter() - start


def compile_kernels(progress=None) -> float:
    """Compile (or load) every kernel into numba's cache, unit by unit; `progress(done, total,
    unit, seconds)` is called as each unit ends. Returns the seconds it took."""
    start = time.perf_counter()
    todo = units()
    for done, u in enumerate(todo, 1):
        seconds = compile_unit(*u)
        if progress is not None:
            progress(done, len(todo), u, seconds)
    return time.perf_counter() - start


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
