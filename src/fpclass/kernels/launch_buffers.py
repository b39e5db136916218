"""The raw-buffer launchers: counts of bit-test matches over many contiguous buffers at once
(fpclass.check), and one buffer at a time, counted or screened (fpclass.torch.watch's hooks).

A screened buffer of SPLIT_MIN words or more, too small for every core by PARALLEL_MIN's rule, is
read on the main thread alone or in parts on every thread, as the caller's timed periods say
(threads.SplitChoice): a tensor that torch's threads have just written lies in their cores'
caches.
"""

from __future__ import annotations

import numpy as np

from . import buffers, threads as policy
from .constants import scalars
from .launch_find import above
from .launch_reduce import BLOCK
from .threads import parallel, threads_for


def count_buffers(addresses: np.ndarray, lengths: np.ndarray, word: np.dtype, test) -> np.ndarray:
    """How many of the lengths[i] words (dtype `word`) at addresses[i] match `test`, per buffer
    (int64). The buffers are contiguous and alive for the call (the caller's duty). Long ones are
    cut into pieces of BLOCK words, so the cores share the work whatever the sizes."""
    addresses = np.asarray(addresses, np.int64)
    lengths = np.asarray(lengths, np.int64)
    counts = np.zeros(lengths.size, np.int64)
    if test is None or not lengths.size:
        return counts
    (m, v, m2, v2), like = _buffer_terms(word, test)
    threads = threads_for(int(lengths.sum()))
    if threads == 1:
        buffers.count_at(addresses, lengths, like, m, v, m2, v2, counts)
        return counts
    pieces_of = np.maximum(-(-lengths // BLOCK), 1)
    owner = np.repeat(np.arange(lengths.size), pieces_of)
    first = np.cumsum(pieces_of) - pieces_of                  # each buffer's first piece
    k = np.arange(owner.size) - first[owner]                  # a piece's place in its buffer
    starts = addresses[owner] + k * BLOCK * word.itemsize
    sizes = np.minimum(lengths[owner] - k * BLOCK, BLOCK)
    found = np.empty(owner.size, np.int64)
    with parallel(threads):
        buffers.count_at_parallel(starts, sizes, like, m, v, m2, v2, found)
    return np.add.reduceat(found, first)


def buffer_counter(word: np.dtype, test):
    """A function (address, length) -> how many of the `length` words at `address` match `test`
    (one contiguous buffer, alive for the call): count_buffers for one buffer, minus its
    per-call setup, for callers that check one tensor at a time (hooks)."""
    if test is None:
        return lambda address, length: 0
    (m, v, m2, v2), like = _buffer_terms(word, test)
    one, many = buffers.count_one, count_buffers

    def count_one(address: int, length: int) -> int:
        if threads_for(length) > 1:
            return int(many([address], [length], word, test)[0])
        return one(address, length, like, m, v, m2, v2)
    return count_one


def buffer_screen(word: np.dtype, test):
    """A function (address, length) -> does one of the `length` words at `address` match `test`
    (one contiguous buffer, alive for the call)? buffer_counter's question without the count. On
    one thread it keeps the largest `w & top` of a run (above()) instead of a count, which reads
    what another core has just written faster; from PARALLEL_MIN words, the counter on every
    core; from SPLIT_MIN words, one part per thread when threads.SPLIT says so."""
    if test is None:
        return lambda address, length: False
    terms = _buffer_terms(word, test)
    (m, v, m2, v2), like = terms
    top, bound = above(test, word)
    many, split = buffer_counter(word, test), _split_counter(word, terms)

    def first(*args):
        nonlocal one
        found, one = _called(buffers.any_one, args)
        return found
    one = first

    def alone(address: int, length: int) -> bool:
        return bool(one(address, length, like, m, v, m2, v2, top, bound))

    def in_parts(address: int, length: int, threads: int) -> bool:
        return split(address, length, threads) > 0

    def every_core(address: int, length: int) -> bool:
        return many(address, length) > 0

    def screen(address: int, length: int) -> bool:
        # _read_one_buffer's one-thread case, inlined: a hook's usual read, three calls fewer
        if length < policy.SPLIT_MIN and length < policy.PARALLEL_MIN:
            return bool(one(address, length, like, m, v, m2, v2, top, bound))
        return _read_one_buffer(address, length, alone, in_parts, every_core)
    return screen


def buffer_maximum(word: np.dtype, top: int):
    """A function (address, length) -> the largest `w & top` among the `length` words at
    `address` (one contiguous buffer, alive for the call; 0 for none), read as buffer_screen
    reads (_read_one_buffer)."""
    like, top = _LIKE.setdefault(word, np.empty(0, word)), word.type(top)
    itemsize = word.itemsize

    def first(*args):
        nonlocal one
        found, one = _called(buffers.max_one, args)
        return found
    one = first

    def in_parts(starts, sizes, threads: int) -> int:
        found = np.empty(len(starts), word)
        with parallel(threads):
            buffers.max_at_parallel(np.array(starts, np.int64), np.array(sizes, np.int64),
                                    like, top, found)
        return int(found.max())

    def alone(address: int, length: int) -> int:
        return int(one(address, length, like, top))

    def split(address: int, length: int, threads: int) -> int:
        bounds = _part_bounds(length, threads)
        return in_parts([address + b * itemsize for b in bounds[:-1]],
                        [b - a for a, b in zip(bounds, bounds[1:])], threads)

    def every_core(address: int, length: int) -> int:
        offsets = range(0, length, BLOCK)
        return in_parts([address + k * itemsize for k in offsets],
                        [min(BLOCK, length - k) for k in offsets], threads_for(length))

    def maximum(address: int, length: int) -> int:
        if length < policy.SPLIT_MIN and length < policy.PARALLEL_MIN:  # (as in screen above)
            return int(one(address, length, like, top))
        return _read_one_buffer(address, length, alone, split, every_core)
    return maximum


def _read_one_buffer(address: int, length: int, alone, split, every_core):
    """How the raw-buffer readers read one buffer: `every_core(address, length)` from
    PARALLEL_MIN words (outside foreign workers), `split(address, length, threads)` in one part
    per thread from SPLIT_MIN words when threads.SPLIT says so (the read's end marked for its
    timing), else `alone(address, length)` on this thread. (The screen and the maximum take a
    buffer below both sizes to their kernel themselves: the same one-thread read.)"""
    if threads_for(length) > 1:
        return every_core(address, length)
    if not policy.SPLIT_MIN <= length < policy.PARALLEL_MIN:  # small, or a foreign worker's
        return alone(address, length)
    choice = policy.SPLIT
    threads = choice.threads(length)
    found = split(address, length, threads) if threads > 1 else alone(address, length)
    choice.read_ended()
    return found


def _called(kernel, args: tuple) -> tuple:
    """(numba `kernel`(*args), what to call in its place from now on): for a one-buffer reader
    whose calls always pass arguments of the same types. This first call goes through the
    kernel's dispatcher, which compiles or loads the overload as any call does; the reader then
    calls that overload's compiled entry point: the same machine code without the dispatcher
    typing every argument of every call (a watched step's hooks call it cold: 2.6 us a call
    against 4.5 us, docs/benchmarks.md, issue 22, twenty-third round). The dispatcher itself
    where numba names no such overload."""
    found = kernel(*args)
    try:
        from numba import typeof
        return found, kernel.get_overload(tuple(typeof(a) for a in args))
    except (AttributeError, KeyError, TypeError, ValueError):
        return found, kernel


def _part_bounds(length: int, threads: int) -> list:
    """Where `threads` parts of `length` words that differ by a word at most begin (and the
    last ends), in plain integers: NumPy's arange and diff cost more than the arithmetic on a
    read of a watched step (a few parts, microseconds a read)."""
    return [k * length // threads for k in range(threads + 1)]


def _split_counter(word: np.dtype, terms: tuple):
    """A function (address, length, threads) -> how many of the `length` words at `address` match
    the test given by `terms` (_buffer_terms), counted in `threads` parts that differ by a word at
    most, the k-th (in address order) on numba's k-th thread with numba's OpenMP layer (its
    static schedule)."""
    (m, v, m2, v2), like = terms
    itemsize = word.itemsize

    def count(address: int, length: int, threads: int) -> int:
        bounds = _part_bounds(length, threads)
        starts = np.array([address + b * itemsize for b in bounds[:-1]], np.int64)
        sizes = np.array([b - a for a, b in zip(bounds, bounds[1:])], np.int64)
        found = np.empty(threads, np.int64)
        with parallel(threads):
            buffers.count_at_parallel(starts, sizes, like, m, v, m2, v2, found)
        return sum(found.tolist())
    return count


def _buffer_terms(word: np.dtype, test) -> tuple:
    """What the raw-buffer kernels take besides the buffers: `test`'s (mask, value, mask2,
    value2) words, and a zero-length array of `word` that tells them the words' type."""
    return scalars(test, word), _LIKE.setdefault(word, np.empty(0, word))


_LIKE: dict = {}  # a zero-length array per word dtype, made once
