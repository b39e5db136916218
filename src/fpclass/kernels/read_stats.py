"""Read and classify in one nogil call: a run of a file's bytes read with positioned reads (libc
`pread`, declared to LLVM by name, so the kernel stays in numba's on-disk cache) into a buffer
of a few hundred KiB, each piece classified by the statistics kernel (stats.py) while it is still
in the core's L2 cache, until a piece holds a non-finite word. Only whole vectors of words
(stats_vectors.py): the last few words of a run are the caller's, as a piece with a finding is.

Reading the same bytes in Python-sized chunks pays the interpreter (and the GIL, which the scan's
reading threads share) for every chunk, so chunks had to be MiB-sized, larger than L2, and the
classification read them back from L3 or memory. Here a call covers MiBs in L2-sized pieces and
leaves to the caller only what needs Python: a piece with a finding (its locations), a read that
fails or ends early (the caller's read raises the error the scan reports). POSIX, 64-bit only:
the caller checks (`available`).
"""

import os
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .stats import TINY, ZERO, fold_raw
from .stats_vectors import count_and_extremes, count_and_extremes_swapped
from .vectors import VECTOR
from .walk import JIT

#: Whether pread can be called here: a POSIX system (Windows has no pread) with 64-bit sizes and
#: offsets (a 32-bit system's pread takes a 32-bit offset).
available = os.name == "posix" and sys.maxsize > 2 ** 32


def linkable() -> bool:
    """Whether the kernel can be called here: `available`, and a `pread` symbol in the process
    for LLVM to link the call with (numba compiles a call to a missing symbol, which then
    crashes the process when it runs)."""
    global _linkable
    if _linkable is None:
        from llvmlite import binding
        _linkable = available and bool(binding.address_of_symbol("pread"))
    return _linkable


_linkable = None


@intrinsic
def _pread(typingctx, fd, buf, at, nbytes, position):
    """pread(fd, &buf[at], nbytes, position): the bytes read, 0 at the end of the file, -1 on an
    error (errno is left for the caller's own read to find again)."""
    if not (isinstance(buf, types.Array) and buf.layout == "C"
            and buf.dtype == types.uint8):
        return None
    i64 = ir.IntType(64)

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(i64, [ir.IntType(32), ir.IntType(8).as_pointer(), i64, i64])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "pread")
        data = context.make_array(sig.args[1])(context, builder, args[1]).data
        at = context.cast(builder, args[2], sig.args[2], types.int64)
        ptr = builder.gep(data, [at])
        return builder.call(fn, [
            context.cast(builder, args[0], sig.args[0], types.int32), ptr,
            context.cast(builder, args[3], sig.args[3], types.int64),
            context.cast(builder, args[4], sig.args[4], types.int64)])

    return types.int64(fd, buf, at, nbytes, position), codegen


@njit(**JIT)
def read_clean(fd, raw, words, keys, position, nbytes, piece, tests, c, swap, acc):
    """Read `nbytes` bytes of file descriptor `fd` from byte `position` into `raw` (uint8, at
    least `piece` bytes; `words` / `keys` the same memory as unsigned / signed words), `piece`
    bytes (whole vectors of words) at a time, each piece's statistics (stats.py's row: `tests`,
    `c`, `swap`) merged into `acc` while no piece holds a non-finite word. Returns the bytes read
    and merged: `nbytes`, or where the piece starts that holds a non-finite word (its bytes then
    in raw[:piece] but not in `acc`), or that pread ended early or failed in, or where the last
    words short of a whole vector start (left to the caller)."""
    whole = words.itemsize * VECTOR
    done = 0
    while done < nbytes:
        n = min(piece, nbytes - done)
        n -= n % whole
        if n == 0:  # words short of a vector: the caller's
            return done
        got = 0
        while got < n:
            k = _pread(fd, raw, got, n - got, position + done + got)
            if k <= 0:
                return done
            got += k
        vectors = n // whole
        if swap:  # big-endian FITS / NetCDF classic data: the same loop, swapping words
            bad, tiny, zero, umin, umax, smax = count_and_extremes_swapped(
                words, np.uint64(0), np.uint64(vectors), tests[0, 0], tests[0, 1],
                tests[1, 0], tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0], tests[2, 1])
        else:
            bad, tiny, zero, umin, umax, smax = count_and_extremes(
                words, np.uint64(0), np.uint64(vectors), tests[0, 0], tests[0, 1],
                tests[1, 0], tests[1, 1], tests[1, 2], tests[1, 3], tests[2, 0], tests[2, 1])
        if bad != 0:
            return done
        acc[TINY] += np.int64(tiny)
        acc[ZERO] += np.int64(zero)
        fold_raw(umin, umax, smax, c, acc)
        done += n
    return done


@njit(**JIT)
def read_clean_runs(fd, raw, words, keys, positions, lengths, piece, tests, c, swap, acc,
                    saved):
    """read_clean over the runs of `lengths[k]` bytes from byte `positions[k]`, in order, for as
    long as each is kept whole; `acc` then holds the statistics of exactly the runs kept
    (`saved`: a row of acc's size to restore it from). Returns how many runs were kept."""
    for k in range(positions.size):
        saved[:] = acc
        if read_clean(fd, raw, words, keys, positions[k], lengths[k], piece, tests, c, swap,
                      acc) != lengths[k]:
            acc[:] = saved
            return k
    return positions.size
