"""The reduce launcher: counts of bit-test matches, over the whole array or per slice, `any` per
slice, and the class histogram (raw buffers: launch_buffers.py).

It owns what surrounds the kernels (reductions.py, slices.py, histogram.py): odd
layouts counted piece by piece, the thread count (threads.py) and how the work is split over
threads (thread_parts.py): ranges of positions for whole-array counts, index ranges of a kept
axis for per-slice answers, so that no two threads share an output cell, or, where the kept axes
offer no such parts (a tall, narrow table), index ranges of a reduced axis, each part answering
into its own copy of the few cells.
Per-column counts of rows narrower than ALIGN words are counted as longer rows and folded.
"""

from __future__ import annotations

import math

import numpy as np

from . import launch_rows, reductions, slices, thread_parts
from . import histogram as histogram_kernels
from .constants import scalars, table
from .launch_find import any_match
from .layout import as_words, c_order_streams, plan, source_plan, without_broadcast
from .pieces import fresh_copy, part, pieces
from .threads import threads_for

#: A whole-array count's parts on threads start at multiples of this many elements.
BLOCK = 1 << 16
#: Split points along a kept innermost axis are multiples of this many elements, so that each
#: part's rows start on whole vectors.
ALIGN = 64
#: Per-column counts of rows narrower than ALIGN words are counted as rows of at least this many
#: words (measured: 11-47% of read bandwidth as they are, on (N, 4..16) float32).
WIDE = 256
#: Threaded `any` along a reduced axis first reads 1/PROBE of it on the calling thread.
PROBE = 64
_CELLS = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))


def count(a: np.ndarray, word: np.dtype, lanes: int, tests: list) -> np.ndarray:
    """How many elements of `a` match each of `tests`, in one pass (int64 array, one per test)."""
    return _whole(a, word, lanes, len(tests), reductions.count_range, (table(tests, word), lanes))


def histogram(a: np.ndarray, word: np.dtype, base: list, special: list) -> np.ndarray:
    """Counts of a real array's elements matching the six `base` tests (rows as in
    kernels/histogram.py) then each `special` test, in one pass (int64 array). A test that is
    None matches nothing; special tests must only match where base[NONFINITE] does."""
    tests = base + special
    k = histogram_kernels
    two_clauses = any(t is not None and t.mask2 for t in (base[k.NONFINITE], base[k.NEGATIVE], base[k.ZERO]))
    if two_clauses or all(t is None for t in base[1:]):
        # The streaming loop tests a second clause for TINY only, so a format with another
        # two-clause class is counted test by test, which takes any test. So are formats with only
        # the non-finite classes (e8m0): counting those beats testing every vector for the rest.
        counts = np.zeros(len(tests), np.int64)
        present = [i for i, t in enumerate(tests) if t is not None]
        if present:
            counts[present] = count(a, word, 1, [tests[i] for i in present])
        return counts
    return _whole(a, word, 1, len(tests), k.histogram_range, (table(base, word), table(special, word)))


def _whole(a, word, lanes, width, kernel, args) -> np.ndarray:
    """`width` counts over all of `a` from a counting kernel kernel(flat, offset, strides, shape,
    start, stop, *args, counts), which adds to `counts`: on threads, a range of positions each."""
    a, copies = without_broadcast(a)
    if copies > 1:  # each element of a stride-0 axis counted once
        return copies * _whole(a, word, lanes, width, kernel, args)
    flat, p = source_plan(a, word, lanes)
    if flat is None:
        total = np.zeros(width, np.int64)
        for ix in pieces(a.shape):
            total += _whole(fresh_copy(a[ix]), word, lanes, width, kernel, args)
        return total
    threads = threads_for(p.size)
    common = (flat, p.offsets[0], p.strides[0], p.shape)
    if threads == 1:   # no parts to add up: a few µs less on calls of kilobytes
        counts = np.zeros(width, np.int64)
        kernel(*common, 0, p.size, *args, counts)
        return counts
    bounds = thread_parts.cuts(p.size, thread_parts.parts_for(threads), BLOCK)
    rows = np.zeros((len(bounds) - 1, width), np.int64)
    thread_parts.run(kernel, [(*common, b0, b1, *args, row)
                              for b0, b1, row in zip(bounds, bounds[1:], rows)], threads)
    return rows.sum(axis=0)


def reduce(a: np.ndarray, word: np.dtype, lanes: int, test, axes: tuple, any_mode: bool,
           dtype=None, empty=None) -> np.ndarray:
    """Per-slice answers along `axes` (normalized axes of `a`), shaped like `a` with 1 on the
    reduced axes: counts of the elements matching `test` as `dtype` (an integer dtype wide
    enough for a slice's count, the caller's duty; None: int64), or with `any_mode` bool "one
    does". Reducing every axis of length > 1 is a whole-array count or search. `empty(shape,
    dtype)` gives the uninitialised C-ordered memory of an answer written once (default
    numpy.empty; the operators pass their pool of recycled memory)."""
    answer = np.dtype(bool if any_mode else np.int64 if dtype is None else dtype)
    kept = tuple(1 if ax in axes else n for ax, n in enumerate(a.shape))
    if a.size == 0:
        return np.zeros(kept, answer)
    if math.prod(kept) == 1:
        if any_mode:
            return np.full(kept, any_match(a, word, lanes, test))
        return np.full(kept, count(a, word, lanes, [test])[0], answer)
    # the cells laid out in a's memory order: the pass over a then writes them in order too
    like = a[tuple(slice(0, 1) if ax in axes else slice(None) for ax in range(a.ndim))]
    if _along_rows(a, axes):
        # short rows (launch_rows.py): the answer is as large as the input or larger, so its
        # cells are the answer's own type (bool as uint8), written once (no zeros first: the
        # kernel stores every cell), not converted after
        cells_type = _CELLS[0] if any_mode else np.dtype(f"u{answer.itemsize}")
        if empty is not None and c_order_streams(like):
            cells = empty(like.shape, cells_type)
        else:
            cells = np.empty_like(like, cells_type, order="K")
        if _short_rows(a, word, lanes, test, _spread(cells, a.shape, axes), any_mode):
            return np.ascontiguousarray(cells.view(answer))
    # cells as wide as the word where they can hold the counts: the kernels are compiled once per
    # word and cell type (each takes seconds), and these are the types the per-column counts need
    cells_type = cell_dtype(word, a.size // math.prod(kept), any_mode)
    cells = np.zeros_like(like, cells_type, order="K")
    _reduce_into(a, word, lanes, test, _spread(cells, a.shape, axes), any_mode)
    if cells_type.itemsize == answer.itemsize:   # any's uint8 cells hold 0 or 1
        return np.ascontiguousarray(cells.view(answer))
    return cells.astype(answer, order="C", copy=False)


def _spread(cells: np.ndarray, shape: tuple, axes: tuple) -> np.ndarray:
    """The cells seen with a's shape: stride 0 along the reduced axes."""
    return np.lib.stride_tricks.as_strided(
        cells, shape, [0 if ax in axes else st for ax, st in enumerate(cells.strides)])


def _short_rows(a, word, lanes, test, cells, any_mode) -> bool:
    """Answer into `cells` (a's shape, stride 0 on the reduced axes) with the short-row kernel
    (launch_rows.py) if it takes this reduction; whether it did."""
    src = as_words(a, word)
    if src is None or lanes != 1:
        return False
    dst = as_words(cells, cells.dtype)
    p = plan(a.shape, [src, dst], reorder=True)
    if not launch_rows.takes(p, lanes):
        return False
    launch_rows.reduce_rows(src.flat, dst.flat, p, scalars(test, word), any_mode, threads_for(p.size))
    return True


def _along_rows(a: np.ndarray, axes: tuple) -> bool:
    """Is a's innermost axis in memory (its shortest stride, among axes longer than 1) reduced?"""
    inner = min((abs(st), ax) for ax, (n, st) in enumerate(zip(a.shape, a.strides)) if n > 1)[1]
    return inner in axes


def cell_dtype(word: np.dtype, slice_size: int, any_mode: bool) -> np.dtype:
    """The unsigned type of per-slice cells: as wide as the word (so the kernel's loop does not
    convert between widths) and wide enough for the largest count; counts in at least 4 bytes,
    so that the counts of 1- and 2-byte words, short columns or tall, take one cell type (each
    word and cell type is another compile of slices.py's kernels, several seconds)."""
    for cells in _CELLS:
        if cells.itemsize >= word.itemsize and (any_mode or cells.itemsize >= 4
                                                and slice_size <= np.iinfo(cells).max):
            return cells
    return _CELLS[-1]


def _reduce_into(a, word, lanes, test, cells, any_mode) -> None:
    """cells[...] += per-slice counts (any_mode: |= "one matches") for `cells` broadcast to a's
    shape with zero strides on the reduced axes, in one pass over `a` in memory order."""
    src = as_words(a, word)
    if src is None:
        for ix in pieces(a.shape):
            _reduce_into(fresh_copy(a[ix]), word, lanes, test, part(cells, ix), any_mode)
        return
    dst = as_words(cells, cells.dtype)
    p = plan(a.shape, [src, dst], reorder=True)
    # the mode as a type (True: any, None: counts, never False): each mode's kernels compile
    # only their own loops (the float8 warm-up unit: 33 -> 25 s, 22 s with no literals either)
    args = (*scalars(test, word), lanes, True if any_mode else None)
    threads = threads_for(p.size)
    wide = None if any_mode or lanes != 1 else _widened(p)
    if wide is not None:
        _count_columns(src.flat, dst.flat, p, wide, args, threads)
    else:
        _run(src.flat, p.offsets[0], p.strides[0], dst.flat, p.offsets[1], p.strides[1], p.shape, args,
             threads)


def _run(src, s_off, s_str, dst, d_off, d_str, shape, args, threads, private=False) -> None:
    """reduce_plan(src, ..., *args) on `threads` threads: split along kept axes where _split finds
    parts (unless `private`), else along the outermost long reduced axis, each thread answering
    into its own copy of the cells `dst` (then added up), where the cells are few."""
    any_mode = args[-1]
    if threads > 1 and any_mode:
        rest = _probe(src, s_off, s_str, dst, d_off, d_str, shape, args)
        if rest is None:
            return
        s_off, shape = rest
    common = (src, s_off, s_str, dst, d_off, d_str, shape, *args)
    split = _split(shape, d_str, threads) if threads > 1 and not private else None
    if split is not None:
        axis, bounds = split
        thread_parts.run(slices.reduce_plan, [_part(src, s_off, s_str, dst, d_off, d_str, shape, args,
                                                    axis, lo, hi) for lo, hi in zip(bounds, bounds[1:])],
                         threads)
        return
    axis = _private_axis(shape, d_str, dst.size, threads)
    if axis is None:
        slices.reduce_plan(*common)
        return
    n = int(shape[axis])
    bounds = thread_parts.cuts(n, threads)
    # any: each copy starts from the hits found so far, so a thread stops once every cell has one
    parts = len(bounds) - 1
    own = np.tile(dst, (parts, 1)) if any_mode else np.zeros((parts, dst.size), dst.dtype)
    thread_parts.run(slices.reduce_plan, [_part(src, s_off, s_str, cells, d_off, d_str, shape, args, axis,
                                                lo, hi) for lo, hi, cells in zip(bounds, bounds[1:], own)],
                     threads)
    if any_mode:
        np.bitwise_or(dst, own.max(axis=0), out=dst)
    else:
        dst += own.sum(axis=0, dtype=dst.dtype)


def _part(src, s_off, s_str, cells, d_off, d_str, shape, args, axis, lo, hi) -> tuple:
    """reduce_plan's arguments for indices lo..hi of plan axis `axis`, answering into `cells`."""
    part = shape.copy()
    part[axis] = hi - lo
    return src, s_off + lo * s_str[axis], s_str, cells, d_off + lo * d_str[axis], d_str, part, *args


def _probe(src, s_off, s_str, dst, d_off, d_str, shape, args):
    """`any` over the first 1/PROBE of the outermost long reduced axis, on this thread: None when
    that answered every cell (threads would each read on until their own part had a hit, and
    waking them costs more than a probe), else (offset, shape) of the rest of the plan. Not the
    innermost axis: there each slice's search stops at its own first hit, threads or not."""
    axis = next((ax for ax in range(shape.size - 1) if d_str[ax] == 0 and shape[ax] >= PROBE), None)
    if axis is None:
        return s_off, shape
    start = int(shape[axis]) // PROBE
    head = shape.copy()
    head[axis] = start
    slices.reduce_plan(src, s_off, s_str, dst, d_off, d_str, head, *args)
    kept = [(int(n), int(st) * dst.itemsize) for n, st in zip(shape, d_str) if st != 0]
    if np.lib.stride_tricks.as_strided(dst[d_off:], [n for n, _ in kept], [st for _, st in kept]).all():
        return None
    rest = shape.copy()
    rest[axis] -= start
    return s_off + start * int(s_str[axis]), rest


def _private_axis(shape, d_str, cells: int, threads: int):
    """The plan axis along which threads answer into copies of the `cells` cells: the outermost
    reduced axis with at least two indices a thread, where a copy per thread is small beside the
    work (at most 1/16 of the elements); else None."""
    if threads <= 1 or cells * threads * 16 > int(np.prod(shape)):
        return None
    for axis in range(shape.size):
        if d_str[axis] == 0 and shape[axis] >= 2 * threads:
            return axis
    return None


def _widened(p):
    """For per-column counts of a plan (rows, C) of contiguous rows of C < ALIGN words: the length
    of the longer rows (a multiple of C and of ALIGN, at least WIDE words) they are counted as, else
    None. A row of C words is too short for the kernel's vector loop; a long row holds whole rows,
    its cell k counting column k % C."""
    if p.shape.size != 2:
        return None
    rows, width = (int(n) for n in p.shape)
    if width >= ALIGN or tuple(p.strides[0]) != (width, 1) or p.strides[1][0] != 0 or p.strides[1][1] == 0:
        return None
    wide = math.lcm(width, ALIGN)
    while wide < WIDE:
        wide *= 2
    return wide if rows * width >= 4 * wide else None


def _count_columns(src, dst, p, wide, args, threads) -> None:
    """Per-column counts of the plan (rows, C) counted as rows `wide` words long (_widened) into
    cells of their own, folded into the C cells of `dst`; the rows left over counted as they are."""
    rows, width = (int(n) for n in p.shape)
    long_rows = rows * width // wide
    done = long_rows * wide // width
    cells = np.zeros(wide, dst.dtype)  # as the answer's cells: no kernel specialisation of its own
    _run(src, p.offsets[0], np.array([wide, 1], np.int64), cells, 0, np.array([0, 1], np.int64),
         np.array([long_rows, wide], np.int64), args, threads, private=True)
    step = int(p.strides[1][1])
    out = np.lib.stride_tricks.as_strided(dst[p.offsets[1]:], (width,), (step * dst.itemsize,))
    out += cells.reshape(-1, width).sum(axis=0).astype(dst.dtype)
    if done < rows:
        slices.reduce_plan(src, p.offsets[0] + done * width, p.strides[0], dst, p.offsets[1], p.strides[1],
                           np.array([rows - done, width], np.int64), *args)


def _split(shape, cell_strides, threads):
    """(plan axis, bounds) cutting a per-slice reduction into parts that write disjoint cells, or
    None; one part per thread (thread_parts.run). Candidates are the kept axes: first the
    outermost with an index for every thread, then the others, longest first. The innermost axis
    is cut only at multiples of ALIGN elements, so parts never share a cache line of cells; a
    kept innermost axis of at most ALIGN elements is never cut."""
    kept = [ax for ax in range(shape.size) if cell_strides[ax] != 0 and shape[ax] > 1]
    roomy = [ax for ax in kept if shape[ax] >= threads][:1]
    for axis in roomy + sorted(set(kept) - set(roomy), key=lambda ax: -shape[ax]):
        n = int(shape[axis])
        align = ALIGN if axis == shape.size - 1 else 1  # the rows' own axis: whole vectors
        bounds = thread_parts.cuts(n, threads, align)
        if len(bounds) > 2:
            return axis, bounds
    return None
