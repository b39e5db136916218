#!/usr/bin/env python3
"""Per-axis queries on short rows and tall, narrow tables against read bandwidth and numpy (issue 22).

    python benchmarks/bench_axes.py [--mib 256] [--repeat 5] [--only rows,columns,early,words]
                                    [--formats float32,bfloat16,float8_e4m3fn]

rows: count_nan / any_nan / count_nonfinite along the last axis of (N, 4), (N, 6), (N, 8) arrays
(the counts also with dtype=np.uint8) of about --mib MiB (float32, bfloat16, float8_e4m3fn),
against reading the input's own bytes (a uint64 sum, the faster of all cores and one: "% read
bw"), against that read plus making a fresh answer of the answer's size and type (`np.ones(N,
int64)` for counts, bool for any: on rows of 4 one-byte elements the int64 counts are twice the
input, so their pages and writes, not the read, bound the call: "% read + answer"), against the
read plus only faulting a fresh answer's pages in (`np.empty` + madvise(MADV_POPULATE_WRITE),
Linux >= 5.14: the operating system's part of a fresh answer; "(read + faults) / read" over 2
would put 50% of the read out of reach of a call done one after the other) and numpy's
expression (`count_nonzero(isnan(x), axis=-1)`, ...). Answers of 8 MiB and more come from
fpclass's pool of recycled memory once an earlier answer is gone, as in this loop ("% read bw");
"% read bw, pool off" is the same call with numpy's allocator: fresh pages for answers over
glibc's threshold (which it raises up to 32 MiB once a block that large is freed; below it the C
heap recycles memory too), as a first call or one whose earlier answers are still alive gets them.
columns: count_nan(axis=0) on (N, C) tables with C = 4..16, on one thread and on all, against the
read and numpy. early: any_nan(axis=0) and all_finite(axis=0) with a NaN in row 3 of every column,
against the same call on the first quarter of its rows (a call that stops reading once every
column has a hit takes as long on both), on clean data, and numpy. Each row's sides are timed
in turn (`alternated`, best of --repeat). The data hold a few NaN and Inf (1 in 4096 elements).
words (not run unless named): rows of 4 or 8 bytes into one-byte answers, a row a word
(kernels/row_words.py), against the same call through the shuffles (kernels/rows.py) in one run.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import mmap
import os
import sys
from functools import partial

import ml_dtypes
import numpy as np

import fpclass
from common import alternated, read_own, table

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
from comparisons import COMPARISONS  # noqa: E402  (the table the tests read too)

DTYPES = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn))
QUERIES = ("count_nan", "any_nan", "count_nonfinite")
#: the rows' queries: each of QUERIES as it is, and the counts in the narrowest type that holds
#: a row's count (dtype=, written directly: the int64 answer is up to twice the input)
VARIANTS = [(name, flags) for name in QUERIES
            for flags in ([{}, {"dtype": np.uint8}] if name.startswith("count_") else [{}])]
#: share of read bandwidth for rows of 4-8 elements; for `early`, the time with a hit early in every
#: column over the same on the first quarter of the rows (reading on to the end would make it ~4)
TARGETS = {"rows": 0.5, "early": 2.0}


def sample(dtype, shape, seed=0):
    """Finite random values with a NaN or an Inf at about 1 in 4096 elements."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, flat.size >> 12)] = np.nan
    flat[rng.integers(0, flat.size, flat.size >> 12)] = np.inf
    return x.astype(dtype)


def elements(dtype, mib):
    return (mib << 20) // dtype.itemsize


@functools.cache
def _populate():
    """libc's madvise where it takes MADV_POPULATE_WRITE (23; Linux >= 5.14), else None. Its own
    copy, not fpclass's, so that the column is the same for any tree under test."""
    if not sys.platform.startswith("linux"):
        return None
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    probe = np.empty(2 * mmap.PAGESIZE, np.uint8)
    start = probe.ctypes.data + -probe.ctypes.data % mmap.PAGESIZE
    return madvise if madvise(start, mmap.PAGESIZE, 23) == 0 else None


def fresh_faults(n, kind):
    """A function that makes a fresh np.empty(n, kind) and has the operating system fault in and
    zero its pages (madvise MADV_POPULATE_WRITE; nothing written by us), or None where that
    advice is not taken."""
    madvise = _populate()
    if madvise is None:
        return None

    def run():
        a = np.empty(n, kind)
        start = a.ctypes.data - a.ctypes.data % mmap.PAGESIZE
        madvise(start, a.ctypes.data + a.nbytes - start, 23)
        return a
    return run


def rows_section(mib, repeat):
    out = []
    for dtype in DTYPES:
        for width in (4, 6, 8):
            x = sample(dtype, (elements(dtype, mib) // width, width))
            read, read_one = read_own(x)
            for name, flags in VARIANTS:
                ours, peer = partial(getattr(fpclass, name), **flags), COMPARISONS[name]["numpy"]
                kind = np.asarray(ours(x[:1], axis=-1)).dtype
                np.testing.assert_array_equal(ours(x, axis=-1), peer(x, axis=-1))
                faults = fresh_faults(x.shape[0], kind)
                t, t_fresh, t_read, t_read_one, t_answer, t_faults, t_np = alternated(
                    lambda: ours(x, axis=-1), unpooled(lambda: ours(x, axis=-1)), read, read_one,
                    lambda: np.ones(x.shape[0], kind), faults or (lambda: None),
                    lambda: peer(x, axis=-1), repeat=repeat)
                if flags:
                    name += f"(dtype={np.dtype(flags['dtype']).name})"
                t_read = min(t_read, t_read_one)
                share, limit = t_read / t, (t_read + t_answer) / t
                verdict = "met" if share >= TARGETS["rows"] else "NOT met"
                if share < TARGETS["rows"] and limit >= TARGETS["rows"]:
                    verdict += " (≥ 50% of read + answer)"
                bound = f"{(t_read + t_faults) / t_read:.2f}" if faults else "-"
                out.append([dtype.name, f"{x.shape[0]}×{width}", name, f"{t * 1e3:.1f}",
                            f"{t_read * 1e3:.1f}", f"{share:.0%}", f"{limit:.0%}", bound,
                            f"{t_read / t_fresh:.0%}", f"{t_np / t:.1f}×", verdict])
    return table(["format", "shape", "query (axis=-1)", "ms", "read ms", "% read bw", "% read + answer",
                  "(read + faults) / read", "% read bw, pool off", "vs numpy", "≥ 50% read bw"],
                 out)


def unpooled(call):
    """`call` with fpclass's pool of recycled memory off (where the tree has one): answers from
    numpy's allocator."""
    try:
        from fpclass.operators import outputs
    except ImportError:
        return call

    def run():
        saved, outputs.POOL_MIN_BYTES = outputs.POOL_MIN_BYTES, 1 << 62
        try:
            return call()
        finally:
            outputs.POOL_MIN_BYTES = saved
    return run


def columns_section(mib, repeat):
    out = []
    threads = fpclass.get_num_threads()
    peer = COMPARISONS["count_nan"]["numpy"]
    for dtype in DTYPES:
        for width in (4, 8, 12, 16):
            x = sample(dtype, (elements(dtype, mib) // width, width))
            read, read_one = read_own(x)
            np.testing.assert_array_equal(fpclass.count_nan(x, axis=0), peer(x, axis=0))

            def one():
                fpclass.set_num_threads(1)
                try:
                    return fpclass.count_nan(x, axis=0)
                finally:
                    fpclass.set_num_threads(threads)
            t, t_one, t_read, t_read_one, t_np = alternated(
                lambda: fpclass.count_nan(x, axis=0), one, read, read_one, lambda: peer(x, axis=0),
                repeat=repeat)
            t_read = min(t_read, t_read_one)
            out.append([dtype.name, f"{x.shape[0]}×{width}", f"{t * 1e3:.1f}", f"{t_one / t:.2f}",
                        f"{t_read / t:.0%}", f"{t_np / t:.1f}×"])
    return table(["format", "shape", "count_nan(axis=0) ms", "1 thread / all", "% read bw", "vs numpy"],
                 out)


def early_section(mib, repeat):
    out = []
    for dtype in DTYPES:
        n = elements(dtype, mib)
        for shape in ((n // 8, 8), (n // 16384, 16384)):
            clean = np.ones(shape, dtype)
            hit = clean.copy()
            hit[3, :] = np.nan
            quarter = hit[: shape[0] // 4]
            for name, peer in (("any_nan", COMPARISONS["any_nan"]["numpy"]),
                               ("all_finite", lambda a, axis: np.isfinite(a).all(axis=axis))):
                ours = getattr(fpclass, name)
                np.testing.assert_array_equal(ours(hit, axis=0), peer(hit, axis=0))
                # each hit call right after a call that streams the whole array (numpy's, the clean
                # one): both start from the same cold caches
                t_hit, t_clean, t_quarter, t_np = alternated(
                    lambda: ours(hit, axis=0), lambda: ours(clean, axis=0), lambda: ours(quarter, axis=0),
                    lambda: peer(hit, axis=0), repeat=repeat)
                growth = t_hit / t_quarter
                out.append([dtype.name, f"{shape[0]}×{shape[1]}", f"{name}(axis=0)", f"{t_hit * 1e3:.2f}",
                            f"{growth:.2f}", f"{t_clean * 1e3:.1f}", f"{t_hit / t_clean:.3f}",
                            f"{t_np / t_hit:.0f}×", "met" if growth <= TARGETS["early"] else "NOT met"])
    return table(["format", "shape", "query, NaN in row 3 of every column", "ms", "ms / ms on ¼ of the rows",
                  "clean ms", "hit / clean", "vs numpy", f"stops: ≤ {TARGETS['early']}"], out)


def words_section(mib, repeat):
    from fpclass.kernels import row_words
    saved = dict(row_words.ROW_WORDS)

    def by_shuffles(fn):
        def run():
            row_words.ROW_WORDS.clear()   # launch_rows then takes no row as a word
            try:
                return fn()
            finally:
                row_words.ROW_WORDS.update(saved)
        return run

    out = []
    f8, bf16 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.bfloat16)
    for dtype, width in ((f8, 4), (f8, 8), (bf16, 2), (bf16, 4)):
        x = sample(dtype, (elements(dtype, mib) // width, width))
        read, read_one = read_own(x)
        for name, flags in (("any_nan", {}), ("count_nan", {"dtype": np.uint8})):
            words = partial(getattr(fpclass, name), x, axis=-1, **flags)
            shuffles = by_shuffles(words)
            np.testing.assert_array_equal(words(), shuffles())
            t, t_old, t_read, t_read_one = alternated(words, shuffles, read, read_one, repeat=repeat)
            t_read = min(t_read, t_read_one)
            if flags:
                name += "(dtype=uint8)"
            out.append([dtype.name, f"{x.shape[0]}×{width}", name, f"{t * 1e3:.1f}", f"{t_old * 1e3:.1f}",
                        f"{t_old / t:.2f}", f"{t_read / t:.0%}", f"{t_read / t_old:.0%}"])
    return table(["format", "shape", "query (axis=-1)", "a row a word ms", "shuffles ms", "shuffles / words",
                  "% read bw", "% read bw, shuffles"], out)


SECTIONS = {"rows": rows_section, "columns": columns_section, "early": early_section,
            "words": words_section}


def main():
    global DTYPES
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", default="rows,columns,early")
    p.add_argument("--threads", type=int, default=None, help="cap fpclass's threads")
    p.add_argument("--formats", default=",".join(d.name for d in DTYPES),
                   help="the rows' and columns' formats, comma-separated")
    args = p.parse_args()
    DTYPES = tuple(np.dtype(getattr(ml_dtypes, name, name)) for name in args.formats.split(","))
    fpclass.set_num_threads(args.threads)
    print(f"about {args.mib} MiB an array; fpclass threads {fpclass.get_num_threads()}; best of "
          f"{args.repeat}, alternated. \"% read bw\": reading the input's own bytes (a uint64 sum, the "
          "faster of all cores and one thread) over the query's time.\n")
    for name in args.only.split(","):
        print(SECTIONS[name](args.mib, args.repeat))
        print()


if __name__ == "__main__":
    main()
