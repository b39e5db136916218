"""Shared benchmark helpers: timing, the machine's own bandwidth baselines, and table printing.

Timings on a shared 2-core machine are noisy, so every number is the best of several runs and
every result is reported as a ratio against a baseline measured in the same run. fpclass and
whatever it is compared with are timed by `alternated`: the same repeat count, in turn.
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np

# The benchmarks time the kernels: compiled on first use (their warm-up rounds), never the NumPy
# answers a cold cache gets by default, and no background warm-up competing for the cores
# (docs/startup.md). bench_startup's cold rows set their own policy.
os.environ.setdefault("FPCLASS_COMPILE", "inline")


def best_time(fn, repeat=5, warmup=1) -> float:
    """Best wall time of `fn()` in seconds over `repeat` runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def alternated(*fns, repeat=5, warmup=1) -> list[float]:
    """Best wall time of each of `fns` in seconds, run in turn, one round after another, `repeat`
    rounds after `warmup`: every side gets the same repeat count and the same stretch of this
    machine's drifting bandwidth, so a ratio of two of the results compares like with like. The
    one helper for timing fpclass against a peer or a baseline."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def paired_times(fn, baseline, repeat=7) -> tuple[float, float]:
    """Best wall times of `fn()` and `baseline()`, run alternately (`alternated`, baseline first)."""
    t_base, t_fn = alternated(baseline, fn, repeat=repeat)
    return t_fn, t_base


def read_baseline(nbytes: int):
    """A function that reads `nbytes` once over all cores (a uint64 sum): the read-bandwidth
    baseline for a query over data of that size."""
    words = np.ones(max(1, nbytes // 8), np.uint64)
    return lambda: read_words(words)


def read_words(words: np.ndarray, threads: int | None = None) -> int:
    """The sum of uint64 `words`, in one part per thread (default: fpclass.get_num_threads()),
    on this thread and Python threads, as fpclass's calls run (kernels/thread_parts.py): a read
    over numba's OpenMP threads would leave them spinning beside the next timed call for
    milliseconds, slowing fpclass's threads (measured: any_nan on a transposed 256 MiB float32
    1.27x its C-contiguous copy after such a read, 1.04x before the calls left prange)."""
    import fpclass
    n = fpclass.get_num_threads() if threads is None else threads
    bounds = [words.size * t // n for t in range(n + 1)]
    sums = np.zeros(n, np.uint64)
    read_part = _read_part()
    rest = [_pool().submit(read_part, words, bounds[k], bounds[k + 1], sums, k) for k in range(1, n)]
    read_part(words, bounds[0], bounds[1], sums, 0)
    for f in rest:
        f.result()
    return int(sums.sum())


@functools.cache
def _pool():
    from concurrent.futures import ThreadPoolExecutor
    return ThreadPoolExecutor(max_workers=64)


def read_own(a: np.ndarray):
    """Two functions that read C-contiguous `a`'s own bytes once (a uint64 sum; the last
    nbytes % 8 left out): over all cores, and on one thread. The read a query of `a` cannot
    beat, on the memory `a` happens to sit in (huge pages or not); the faster of the two is the
    machine's read bandwidth for it."""
    words = a.reshape(-1).view(np.uint8)[:a.nbytes // 8 * 8].view(np.uint64)
    return lambda: read_words(words), lambda: read_words(words, 1)


def read_buffers_baseline(addresses, nbytes):
    """A function that reads the buffers of nbytes[i] bytes at addresses[i] once over all cores
    (a uint64 sum, in pieces of 1 MiB): reading the very memory a check reads. Memory from
    torch's allocator is not backed by huge pages the way NumPy's large arrays are, and reads at
    about 60% of their speed here, so a NumPy buffer is the wrong baseline for torch tensors."""
    read = _parallel_buffer_read()
    piece = 1 << 17  # words
    starts, sizes = [], []
    for address, n in zip(addresses, nbytes):
        words = n // 8
        for k in range(0, words, piece):
            starts.append(address + 8 * k)
            sizes.append(min(piece, words - k))
    starts, sizes = np.array(starts, np.int64), np.array(sizes, np.int64)
    return lambda: read(starts, sizes)


@functools.cache
def _parallel_buffer_read():
    from llvmlite import ir
    from numba import carray, njit, prange, types
    from numba.extending import intrinsic

    @intrinsic
    def words_at(typingctx, address):
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.uint64)))
        return types.CPointer(types.uint64)(address), codegen

    @njit(parallel=True, cache=False)
    def read(starts, sizes):
        total = np.uint64(0)
        for p in prange(starts.size):
            words = carray(words_at(starts[p]), sizes[p])
            for i in range(words.size):
                total += words[i]
        return total

    return read


@functools.cache
def _read_part():
    from numba import njit

    @njit(nogil=True, cache=False)
    def read_part(src, start, stop, sums, k):
        part = src[start:stop]   # a loop from 0 to its size vectorizes; start..stop did not (2x)
        total = np.uint64(0)
        for i in range(part.size):
            total += part[i]
        sums[k] = total

    return read_part


@functools.cache
def _parallel_kernels():
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def copy(src, dst):
        for i in prange(src.size):
            dst[i] = src[i]

    @njit(parallel=True, cache=False)
    def read(src):
        total = np.uint64(0)
        for i in prange(src.size):
            total += src[i]
        return total

    return copy, read


def bandwidth(nbytes: int = 512 << 20) -> dict:
    """The machine's copy and read bandwidth in bytes/s: the better of numpy (one thread) and a
    numba loop over all cores, plus np.copyto's own ("copy_numpy"). Copy counts bytes read +
    bytes written."""
    src = np.ones(nbytes // 8, np.uint64)
    dst = np.empty_like(src)
    copy, read = _parallel_kernels()
    numpy_copy = best_time(lambda: np.copyto(dst, src))
    copy_t = min(numpy_copy, best_time(lambda: copy(src, dst)))
    read_t = min(best_time(lambda: src.sum()), best_time(lambda: read(src)),
                 best_time(lambda: read_words(src)))
    return {"copy": 2 * nbytes / copy_t, "copy_numpy": 2 * nbytes / numpy_copy, "read": nbytes / read_t}


def table(headers: list[str], rows: list[list]) -> str:
    """A GitHub markdown table."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in cells])


def ratio(a: float | None, b: float | None) -> str:
    """`b / a` formatted as "N.N×" (how many times faster a time `a` is than `b`), or "—"."""
    if a is None or b is None:
        return "—"
    return f"{b / a:.1f}×"


def ort_session(model):
    """An onnxruntime CPU session for the ModelProto `model`. Its idle workers do not spin:
    spinning after each run steals the cores from whatever is timed next (measured: fpclass 2x
    slower right after)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def ort_bound_run(session, x: np.ndarray, onnx_type: int, out: np.ndarray):
    """A function running the one-input, one-output `session` on `x` (any dtype, passed as its
    words with the ONNX element type `onnx_type`: bfloat16 and float8 have to go that way) that
    writes the output into `out` through an IOBinding: onnxruntime's preallocated-output path,
    nothing allocated or copied per call."""
    import onnxruntime as ort
    binding = session.io_binding()
    values = (ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x.view(f"u{x.dtype.itemsize}"), onnx_type),
              ort.OrtValue.ortvalue_from_numpy(out))  # they wrap x's and out's memory
    binding.bind_ortvalue_input(session.get_inputs()[0].name, values[0])
    binding.bind_ortvalue_output(session.get_outputs()[0].name, values[1])

    def run():
        session.run_with_iobinding(binding)
        return values  # kept alive with the binding
    return run


#: Source text for benchmark child processes (run with `python -c`, so they cannot import this
#: module): `files_of(path)` lists a file or a folder's files, and `read_one_thread(path)` reads
#: them with one thread into a reused 4 MiB buffer, the "reading the bytes" every scan benchmark
#: compares with.
READ_SOURCE = r"""
import os as _os


def files_of(path):
    return [path] if _os.path.isfile(path) else [
        _os.path.join(r, n) for r, _, ns in _os.walk(path) for n in ns]


def read_one_thread(path):
    view = memoryview(bytearray(4 << 20))
    for name in files_of(path):
        with open(name, "rb", buffering=0) as f:
            while f.readinto(view):
                pass
"""
