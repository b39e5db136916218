"""The find launcher: positions of the first matches in C order, and whether there is a match
at all (searched in memory order), stopping early.

It owns what surrounds the kernels (kernels/reductions.py's find_range, first_claims and
any_claims): odd layouts searched piece by piece, and the first match, or any match, searched by
threads that claim chunks in turn.
launch_find_order.py builds C-order answers on layouts whose C order is not memory order from these.
"""

from __future__ import annotations

import functools

import numpy as np

from . import reductions, thread_parts
from .constants import scalars
from .layout import source_plan, without_broadcast
from .pieces import first_flat, fresh_copy, pieces
from .reductions import FIND_BYTES
from .threads import threads_for

#: Words searched serially before the threads are woken: an early hit answers in microseconds.
PREFIX = 1 << 16
#: The bytes a thread of a parallel search claims at a time: threads claim chunks in order until
#: the chunks left start past a match seen, so one slow or descheduled thread holds up the answer
#: by one chunk at most (rounds of chunks, each waiting for its slowest thread, took 3-5x
#: as long, median, on a loaded 2-core machine: docs/benchmarks.md).
CLAIM_BYTES = 1 << 20


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
    args = (flat, p.offsets[0], p.strides[0], p.shape, *scalars(test, word), lanes, *above(test, word))
    head = min(p.size, PREFIX)
    if reductions.any_chunks(*args, 0, head, max(1, FIND_BYTES // (flat.itemsize * lanes))):
        return True
    threads = threads_for(p.size)
    if threads == 1:
        return reductions.any_chunks(*args, head, p.size, max(1, CLAIM_BYTES // (flat.itemsize * lanes)))
    # no position wanted: every thread stops at the end of the chunk in which any sees a match
    # (256 MiB float32 on a loaded 2-core machine: rounds of first-match searches 48-92 ms,
    # 0.3-0.5x numpy's isnan(a).any(); claimed chunks 16-28 ms, measured alternated)
    state = np.zeros(2, np.int64)   # chunks claimed, "a match was seen"
    claims = (*args, head, p.size, max(1, CLAIM_BYTES // (flat.itemsize * lanes)), state)
    thread_parts.run(reductions.any_claims, [claims] * threads, threads)
    return bool(state[1])


@functools.lru_cache(maxsize=1024)
def above(test, word: np.dtype) -> tuple:
    """(top, bound) as scalars of the word type such that test(w) iff (w & top) > bound, where the
    test has that form (a kernel then compares the largest w & top of a run: reductions.any_run),
    else zeros. The form: all of m's bits set (v == m), and either no second clause or "some of
    m2's bits set" (v2 == 0) with every bit of m2 below m's lowest, as NaN's test is."""
    m, v, m2, v2 = (int(t) for t in test)
    if m and v == m and (m2, v2) == (0, 1):
        top, bound = m, m - 1
    elif m and v == m and v2 == 0 and 0 < m2 < (m & -m):
        top, bound = m | m2, m   # m's bits all set adds m; m2's bits add less than m's lowest bit
    else:
        top, bound = 0, 0
    return word.type(top), word.type(bound)


def _search(flat, p, word, lanes, test, limit, stop) -> np.ndarray:
    """Plan positions of the first `limit` matches among plan positions 0..stop."""
    m, v, m2, v2 = scalars(test, word)
    args = (flat, p.offsets[0], p.strides[0], p.shape)
    if limit == 1:
        threads = threads_for(stop)
        if threads > 1:
            return _first_by_claims(args, (m, v, m2, v2, lanes), stop, threads)
    found = np.empty(min(limit, stop), np.int64)
    n = reductions.find_range(*args, 0, stop, m, v, m2, v2, lanes, found)
    return found[:n]


def _first_by_claims(args, test_args, total, threads):
    """The first match, searched serially over a short prefix, then by threads claiming chunks."""
    one = np.empty(1, np.int64)
    pos = min(total, PREFIX)
    if reductions.find_range(*args, 0, pos, *test_args, one):
        return one
    state = np.array([0, total], np.int64)   # chunks claimed, the first match seen (total: none)
    chunk = max(1, CLAIM_BYTES // (args[0].itemsize * test_args[-1]))
    thread_parts.run(reductions.first_claims, [(*args, *test_args, pos, total, chunk, state)] * threads,
                     threads)
    return state[1:] if state[1] < total else np.empty(0, np.int64)
