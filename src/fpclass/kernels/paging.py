"""Chunks of a fresh answer claimed by the threads that write it, one thread faulting the pages in
a few chunks ahead of the claims (Linux's MADV_POPULATE_WRITE, kernel >= 5.14).

A fresh answer costs the operating system a page fault and the zeroing of each page on its first
store: on rows of four float8 into one-byte cells, 64 MiB of answer per 256 MiB read, about as
long as the read itself on the 2-core machine (docs/benchmarks.md, "issue 22, rows4 helper").
Where the writers fault their own pages, each stops at every new page; here the pager thread
faults the next chunks while the others write, then writes too, and a chunk is written while its
zeroed pages are still in cache. Faulting in changes no byte (a page already present is left as
it is), so a claim that overtakes the pager only faults its own pages, as before; elsewhere
(another system, an older kernel) nothing is faulted ahead and the chunks are simply shared.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from . import atomics
from .walk import JIT

#: madvise's advice "fault these pages in, writable" (include/uapi/asm-generic/mman-common.h).
MADV_POPULATE_WRITE = 23
#: How many chunks the pager keeps faulted in ahead of the next claim: enough to stay ahead of a
#: writer, few enough that the zeroed pages are still in cache when written.
LEAD = 4
#: The system's page size: madvise takes page-aligned starts.
PAGE = mmap.PAGESIZE


@functools.cache
def function() -> int:
    """The address of the C library's madvise where it takes MADV_POPULATE_WRITE (tried once on
    a page of our own), else 0: nothing is faulted ahead."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    probe = np.empty(2 * PAGE, np.uint8)
    start = probe.ctypes.data + -probe.ctypes.data % PAGE
    if madvise(start, PAGE, MADV_POPULATE_WRITE) != 0:
        return 0
    return ctypes.cast(madvise, ctypes.c_void_p).value or 0


@intrinsic
def _populate(typingctx, madvise, start, length):
    """madvise(start, length, MADV_POPULATE_WRITE) through the C function at address `madvise`
    (int madvise(void *, size_t, int)); its return value."""
    if not all(isinstance(t, types.Integer) for t in (madvise, start, length)):
        return None

    def codegen(context, builder, sig, args):
        size = context.get_value_type(types.uintp)
        i32, byte = ir.IntType(32), ir.IntType(8).as_pointer()
        callee = ir.FunctionType(i32, [byte, size, i32]).as_pointer()
        f, at, n = (context.cast(builder, v, t, types.uintp) for v, t in zip(args, sig.args))
        return builder.call(builder.inttoptr(f, callee),
                            [builder.inttoptr(at, byte), n, ir.Constant(i32, MADV_POPULATE_WRITE)])

    return types.int32(madvise, start, length), codegen


def state() -> np.ndarray:
    """A fresh claim state for one kernel call: the next chunk to claim, the next to fault in."""
    return np.array([0, 1], np.int64)


@njit(**JIT)
def claim(state, pager, madvise, start, chunk_bytes, stop, chunks):
    """The next chunk (0..chunks-1) for this thread to write; chunks once all are claimed.
    `pager` (one thread of the call, with `madvise` from function(), not 0) first faults in the
    pages of chunks 1.. up to LEAD ahead of the claims, chunk k being the bytes from start +
    k * chunk_bytes (stop: the end of the last); it stops faulting at madvise's first refusal."""
    if pager:
        # chunks already claimed are their writers' to fault
        state[1] = max(state[1], atomics.load(state, 0))
        while state[1] < chunks and state[1] < atomics.load(state, 0) + LEAD:
            lo = start + state[1] * chunk_bytes
            hi = min(stop, lo + chunk_bytes)
            lo -= lo % PAGE
            if _populate(madvise, lo, hi - lo) != 0:
                state[1] = chunks
            else:
                state[1] += 1
    return atomics.fetch_add(state, 0, 1)
