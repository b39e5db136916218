"""Calling the kernels on NumPy arrays: word views, plans, serial or parallel, odd layouts.

Everything here is about *how* to run; *what* to look for arrives as a BitTest from the format
table. Importing this module imports numba (kernels compile, or load from the on-disk cache, on
first use), so the public modules import it lazily.
"""

from __future__ import annotations

import functools
import threading

import numba
import numpy as np

from . import buffers, elementwise, reductions
from . import histogram as histogram_kernels
from .layout import Plan, as_words, plan

U8 = np.dtype(np.uint8)

#: Below this many elements one thread is faster than waking numba's pool (measured: see
#: docs/benchmarks.md).
PARALLEL_MIN = 1 << 22
#: Elements per parallel task.
BLOCK = 1 << 16
#: The bytes one thread searches in a round of `find`'s parallel search, once rounds have grown
#: (a few milliseconds of reading; the last round takes the rest, up to twice that): rounds cost
#: a thread wake-up each, which smaller rounds on 1-byte formats made 10-15% of the time (measured).
ROUND_BYTES = 32 << 20
#: How much larger each round of that search is than the last: a hit at position k still
#: costs O(k), in few rounds (each wakes the threads: about 30 µs here).
ROUND_GROWTH = 4
#: Masks from this size on are written with non-temporal stores, past the caches: larger than
#: half a typical last-level cache, they would not stay there, and skipping the read of the old
#: bytes makes writing them 1.2x faster (measured, bfloat16 isnan over 64 Mi elements).
STREAM_MIN_BYTES = 16 << 20
#: Odd layouts (strides that are not whole words, unaligned data) are copied in pieces this big.
PIECE = 1 << 20


def parallel_ok(n: int) -> bool:
    """Use numba's thread pool for `n` elements? Only from the main thread: inside a foreign
    thread pool (dask, fpclass scan) the callers already use the cores."""
    return (n >= PARALLEL_MIN and numba.get_num_threads() > 1
            and threading.current_thread() is threading.main_thread())


def pieces(shape, limit=PIECE):
    """Index tuples that cut an array of `shape` into C-order pieces of at most `limit` elements."""
    if len(shape) == 0 or int(np.prod(shape)) <= limit:
        yield ()
        return
    inner = int(np.prod(shape[1:]))
    if inner <= limit:
        step = max(1, limit // max(inner, 1))
        for i in range(0, shape[0], step):
            yield (slice(i, i + step),)
    else:
        for i in range(shape[0]):
            for rest in pieces(shape[1:], limit):
                yield (i,) + rest


def _first_flat(ix, shape) -> int:
    """C-order position of the first element of the piece `ix` (from `pieces`)."""
    first = [i.start if isinstance(i, slice) else i for i in ix] + [0] * (len(shape) - len(ix))
    return int(np.ravel_multi_index(first, shape)) if shape else 0


def _part(out: np.ndarray, ix) -> np.ndarray:
    """The view of `out` at piece `ix` (indexing a 0-d array with () would give a scalar)."""
    return out[ix] if ix else out


def _copy(piece) -> np.ndarray:
    """A fresh, aligned, C-contiguous copy (ascontiguousarray would keep unaligned data as is)."""
    return np.array(piece, order="C", copy=True)


@functools.lru_cache(maxsize=1024)
def scalars(test, word):
    """The test's four constants as scalars of the word type (so kernels compute in that width)."""
    return tuple(word.type(v) for v in test)


@functools.lru_cache(maxsize=1024)
def test_words(test, word, negate: bool, lanes: int) -> np.ndarray:
    """mask_flat's `test` argument: the test's four constants and its flags as an array of the
    word type (read-only: it is shared)."""
    words = np.array([*test, int(negate) | (2 if lanes == 2 else 0)], dtype=word)
    words.flags.writeable = False
    return words


def _contiguous(a: np.ndarray, word: np.dtype, lanes: int):
    """(flat words, plan) for a C-contiguous aligned array without building a plan, else None."""
    if not (a.flags.c_contiguous and a.flags.aligned):
        return None
    return a.reshape(-1).view(word), Plan(np.array([a.size], np.int64), (0,), (_STRIDE[lanes],), a.size)


_STRIDE = {1: np.array([1], np.int64), 2: np.array([2], np.int64)}


def mask(a: np.ndarray, word: np.dtype, lanes: int, test, negate: bool, out: np.ndarray) -> None:
    """out[...] = test(a) ^ negate element-wise; `out` is a uint8 array of a's shape."""
    flat = _contiguous(a, word, lanes)
    if flat is not None and out.flags.c_contiguous and not parallel_ok(a.size):
        if elementwise.mask_flat(flat[0], out.reshape(-1), test_words(test, word, negate, lanes)):
            return
    src = as_words(a, word)
    if src is None:  # strides or address not whole words: copy piece by piece, never whole
        for ix in pieces(a.shape):
            mask(_copy(a[ix]), word, lanes, test, negate, _part(out, ix))
        return
    dst = as_words(out, U8)
    p = plan(a.shape, [src, dst], reorder=True)
    m, v, m2, v2 = scalars(test, word)
    common = (src.flat, p.offsets[0], p.strides[0], dst.flat, p.offsets[1], p.strides[1], p.shape)
    if parallel_ok(p.size):
        stream = out.nbytes >= STREAM_MIN_BYTES
        elementwise.mask_parallel(*common, m, v, m2, v2, lanes, negate, BLOCK, stream)
    else:
        elementwise.mask_range(*common, 0, p.size, m, v, m2, v2, lanes, negate)


def _source_plan(a, word, c_order, lanes=1):
    """(flat words, plan) for reading `a`, or (None, None) when its layout needs copying."""
    fast = _contiguous(a, word, lanes)
    if fast is not None:
        return fast
    src = as_words(a, word)
    if src is None:
        return None, None
    return src.flat, plan(a.shape, [src], reorder=not c_order)


def count(a: np.ndarray, word: np.dtype, lanes: int, tests: list) -> np.ndarray:
    """How many elements of `a` match each of `tests`, in one pass (int64 array, one per test)."""
    flat, p = _source_plan(a, word, c_order=False, lanes=lanes)
    if flat is None:
        total = np.zeros(len(tests), np.int64)
        for ix in pieces(a.shape):
            total += count(_copy(a[ix]), word, lanes, tests)
        return total
    table = _table(tests, word)
    if parallel_ok(p.size):
        rows = np.zeros(((p.size + BLOCK - 1) // BLOCK, len(tests)), np.int64)
        reductions.count_parallel(flat, p.offsets[0], p.strides[0], p.shape, table, lanes, BLOCK, rows)
        return rows.sum(axis=0)
    counts = np.zeros(len(tests), np.int64)
    reductions.count_range(flat, p.offsets[0], p.strides[0], p.shape, 0, p.size, table, lanes, counts)
    return counts


def histogram(a: np.ndarray, word: np.dtype, base: list, special: list) -> np.ndarray:
    """Counts of a real array's elements matching the six `base` tests (rows as in
    kernels/histogram.py) then each `special` test, in one streaming pass (int64 array). A test
    that is None matches nothing; special tests must only match where base[NONFINITE] does."""
    tests = base + special
    k = histogram_kernels
    assert all(t is None or not t.mask2 for t in (base[k.NONFINITE], base[k.NEGATIVE], base[k.ZERO])), \
        "the streaming loop takes a second clause for tiny only"
    if all(t is None for t in base[1:]):
        # Only the non-finite classes exist (e8m0): counting just those beats testing every
        # vector for classes that cannot occur.
        counts = np.zeros(len(tests), np.int64)
        present = [i for i, t in enumerate(tests) if t is not None]
        if present:
            counts[present] = count(a, word, 1, [tests[i] for i in present])
        return counts
    flat, p = _source_plan(a, word, c_order=False)
    if flat is None:
        total = np.zeros(len(base) + len(special), np.int64)
        for ix in pieces(a.shape):
            total += histogram(_copy(a[ix]), word, base, special)
        return total
    base_table, special_table = _table(base, word), _table(special, word)
    width = len(tests)
    common = (flat, p.offsets[0], p.strides[0], p.shape, base_table, special_table)
    if parallel_ok(p.size):
        rows = np.zeros(((p.size + BLOCK - 1) // BLOCK, width), np.int64)
        histogram_kernels.histogram_parallel(*common, BLOCK, rows)
        return rows.sum(axis=0)
    counts = np.zeros(width, np.int64)
    histogram_kernels.histogram_range(*common[:4], 0, p.size, *common[4:], counts)
    return counts


_NEVER = (0, 1, 0, 1)  # (w & 0) == 1 never holds


def _table(tests: list, word: np.dtype) -> np.ndarray:
    """Bit tests as a (T, 4) array of the word type; None becomes a test that matches nothing."""
    return np.array([list(_NEVER if t is None else t) for t in tests], dtype=word).reshape(len(tests), 4)


def count_into(a: np.ndarray, word: np.dtype, lanes: int, test, counts: np.ndarray) -> None:
    """counts[...] += test(a) for an int64 `counts` broadcast to a's shape (zero strides on the
    reduced axes): per-slice counts in one pass over `a` in memory order."""
    src = as_words(a, word)
    if src is None:
        for ix in pieces(a.shape):
            count_into(_copy(a[ix]), word, lanes, test, _part(counts, ix))
        return
    dst = as_words(counts, np.dtype(np.int64))
    p = plan(a.shape, [src, dst], reorder=True)
    m, v, m2, v2 = scalars(test, word)
    elementwise.mask_range(src.flat, p.offsets[0], p.strides[0], dst.flat, p.offsets[1], p.strides[1],
                           p.shape, 0, p.size, m, v, m2, v2, lanes, False, True)


def find(a: np.ndarray, word: np.dtype, lanes: int, test, limit: int) -> np.ndarray:
    """C-order flat positions of the first `limit` elements of `a` matching `test` (int64)."""
    if limit <= 0:
        return np.empty(0, np.int64)
    flat, p = _source_plan(a, word, c_order=True, lanes=lanes)
    if flat is None:
        hits, found = [], 0
        for ix in pieces(a.shape):
            more = find(_copy(a[ix]), word, lanes, test, limit - found)
            hits.append(more + _first_flat(ix, a.shape))
            found += more.size
            if found == limit:
                break
        return np.concatenate(hits) if hits else np.empty(0, np.int64)
    m, v, m2, v2 = scalars(test, word)
    args = (flat, p.offsets[0], p.strides[0], p.shape)
    if limit == 1 and parallel_ok(p.size):
        return _first_in_rounds(args, (m, v, m2, v2, lanes), p.size)
    found = np.empty(min(limit, p.size), np.int64)
    n = reductions.find_range(*args, 0, p.size, m, v, m2, v2, lanes, found)
    return found[:n]


def _first_in_rounds(args, test_args, total):
    """The first match, searched serially over a short prefix (an early hit answers in
    microseconds), then in rounds of growing chunks, one per thread, stopping after the first
    round that has a hit."""
    one = np.empty(1, np.int64)
    pos = min(total, BLOCK)
    if reductions.find_range(*args, 0, pos, *test_args, one):
        return one
    threads = numba.get_num_threads()
    chunk = BLOCK
    largest = max(BLOCK, ROUND_BYTES // (args[0].itemsize * test_args[-1]))
    while pos < total:
        chunk = min(chunk * ROUND_GROWTH, largest)
        if total - pos <= 2 * threads * chunk:  # one round for the rest, not a short last one
            chunk = -(-(total - pos) // threads)
        starts = np.minimum(pos + chunk * np.arange(threads, dtype=np.int64), total)
        stops = np.minimum(starts + chunk, total)
        firsts = np.empty(threads, np.int64)
        reductions.first_parallel(*args, *test_args, starts, stops, firsts)
        hit = firsts[firsts >= 0]
        if hit.size:
            return hit[:1]
        pos = int(stops[-1])
    return np.empty(0, np.int64)


def count_buffers(addresses: np.ndarray, lengths: np.ndarray, word: np.dtype, test) -> np.ndarray:
    """How many of the lengths[i] words (dtype `word`) at addresses[i] match `test`, per buffer
    (int64). The buffers are contiguous and alive for the call (the caller's duty). Long ones are
    cut into pieces of BLOCK words, so the cores share the work whatever the sizes."""
    addresses = np.asarray(addresses, np.int64)
    lengths = np.asarray(lengths, np.int64)
    counts = np.zeros(lengths.size, np.int64)
    if test is None or not lengths.size:
        return counts
    m, v, m2, v2 = scalars(test, word)
    like = _LIKE.setdefault(word, np.empty(0, word))
    if not parallel_ok(int(lengths.sum())):
        buffers.count_at(addresses, lengths, like, m, v, m2, v2, counts)
        return counts
    pieces_of = np.maximum(-(-lengths // BLOCK), 1)
    owner = np.repeat(np.arange(lengths.size), pieces_of)
    first = np.cumsum(pieces_of) - pieces_of                  # each buffer's first piece
    k = np.arange(owner.size) - first[owner]                  # a piece's place in its buffer
    starts = addresses[owner] + k * BLOCK * word.itemsize
    sizes = np.minimum(lengths[owner] - k * BLOCK, BLOCK)
    found = np.empty(owner.size, np.int64)
    buffers.count_at_parallel(starts, sizes, like, m, v, m2, v2, found)
    return np.add.reduceat(found, first)


def buffer_counter(word: np.dtype, test):
    """A function (address, length) -> how many of the `length` words at `address` match `test`
    (one contiguous buffer, alive for the call): count_buffers for one buffer, minus its
    per-call setup, for callers that check one tensor at a time (hooks)."""
    if test is None:
        return lambda address, length: 0
    m, v, m2, v2 = scalars(test, word)
    like = _LIKE.setdefault(word, np.empty(0, word))
    one, many = buffers.count_one, count_buffers

    def count(address: int, length: int) -> int:
        if length >= PARALLEL_MIN and parallel_ok(length):
            return int(many([address], [length], word, test)[0])
        return one(address, length, like, m, v, m2, v2)
    return count


_LIKE: dict = {}  # a zero-length array per word dtype: tells the kernel the type of the words
