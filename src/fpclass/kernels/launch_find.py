"""The find launcher: positions of the first matches in C order, and whether there is a match
at all (searched in memory order), stopping early.

It owns what surrounds the kernels (kernels/reductions.py's find_range and first_parallel): odd
layouts searched piece by piece, and the first match searched in rounds over the threads.
launch_find_order.py builds C-order answers on layouts whose C order is not memory order from these.
"""

from __future__ import annotations

import numpy as np

from . import reductions
from .constants import scalars
from .layout import source_plan, without_broadcast
from .pieces import first_flat, fresh_copy, pieces
from .threads import parallel, threads_for

#: Words searched serially before the threads are woken: an early hit answers in microseconds.
PREFIX = 1 << 16
#: The bytes one thread searches in a round of the parallel search, once rounds have grown (a few
#: milliseconds of reading; the last round takes the rest, up to twice that): rounds cost a thread
#: wake-up each, which smaller rounds on 1-byte formats made 10-15% of the time (measured).
ROUND_BYTES = 32 << 20
#: How much larger each round of that search is than the last: a hit at position k still costs
#: O(k), in few rounds (each wakes the threads: about 30 µs here).
ROUND_GROWTH = 4
#: The bytes a thread of the parallel `any` claims at a time: threads claim chunks in turn until
#: one sees a match, so one slow or descheduled thread holds up the answer by one chunk at most.
ANY_BYTES = 1 << 20


def find(a: np.ndarray, word: np.dtype, lanes: int, test, limit: int,
         within: int | None = None) -> np.ndarray:
    """C-order flat positions of the first `limit` elements of `a` matching `test` (int64),
    among its first `within` elements in C order (None: all)."""
    if limit <= 0:
        return np.empty(0, np.int64)
    flat, p = source_plan(a, word, lanes, c_order=True)
    if flat is None:
        hits, found = [], 0
        for ix in pieces(a.shape):
            start = first_flat(ix, a.shape)
            if within is not None and start >= within:
                break
            more = find(fresh_copy(a[ix]), word, lanes, test, limit - found,
                        None if within is None else within - start)
            hits.append(more + start)
            found += more.size
            if found == limit:
                break
        return np.concatenate(hits) if hits else np.empty(0, np.int64)
    return _search(flat, p, word, lanes, test, limit, p.size if within is None else min(within, p.size))


def any_match(a: np.ndarray, word: np.dtype, lanes: int, test) -> bool:
    """Does any element of `a` match `test`? Searched in memory order whatever the layout (each
    element of a stride-0 axis once), stopping at the first match."""
    a, _ = without_broadcast(a)
    flat, p = source_plan(a, word, lanes)
    if flat is None:
        return find(a, word, lanes, test, 1).size > 0
    threads = threads_for(p.size)
    if threads == 1:
        return _search(flat, p, word, lanes, test, 1, p.size).size > 0
    # no position wanted: one parallel call over the rest, not rounds of first-match searches,
    # each waiting for its slowest thread (256 MiB float32 on a loaded 2-core machine: rounds
    # 48-92 ms, 0.3-0.5x numpy's isnan(a).any(); claimed chunks 16-28 ms, measured alternated)
    test_args = (*scalars(test, word), lanes)
    args = (flat, p.offsets[0], p.strides[0], p.shape)
    head = min(p.size, PREFIX)
    if reductions.find_range(*args, 0, head, *test_args, np.empty(1, np.int64)):
        return True
    state = np.zeros(2, np.int64)   # chunks claimed, "a match was seen"
    chunk = max(1, ANY_BYTES // (flat.itemsize * lanes))
    with parallel(threads):
        reductions.any_parallel(*args, *test_args, head, p.size, chunk, threads, state)
    return bool(state[1])


def _search(flat, p, word, lanes, test, limit, stop) -> np.ndarray:
    """Plan positions of the first `limit` matches among plan positions 0..stop."""
    m, v, m2, v2 = scalars(test, word)
    args = (flat, p.offsets[0], p.strides[0], p.shape)
    if limit == 1:
        threads = threads_for(stop)
        if threads > 1:
            with parallel(threads):
                return _first_in_rounds(args, (m, v, m2, v2, lanes), stop, threads)
    found = np.empty(min(limit, stop), np.int64)
    n = reductions.find_range(*args, 0, stop, m, v, m2, v2, lanes, found)
    return found[:n]


def _first_in_rounds(args, test_args, total, threads):
    """The first match, searched serially over a short prefix, then in rounds of growing chunks,
    one per thread, stopping after the first round that has a hit."""
    one = np.empty(1, np.int64)
    pos = min(total, PREFIX)
    if reductions.find_range(*args, 0, pos, *test_args, one):
        return one
    chunk = PREFIX
    largest = max(PREFIX, ROUND_BYTES // (args[0].itemsize * test_args[-1]))
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
