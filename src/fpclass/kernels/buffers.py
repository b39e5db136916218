"""Counting bit-test matches in many buffers given by address and length, in one call.

Checking a model's thousand tensors one ndarray at a time costs microseconds per tensor before a
byte is read (building the array, planning, launching). Here the caller hands over addresses and
lengths; one kernel walks them all, and the parallel version spreads the pieces over the cores, so
a thousand small buffers cost what one large one does.
"""

import numpy as np
from numba import carray, njit, prange, types
from numba.extending import intrinsic

from .reductions import any_run, count_run
from .vectors import VECTOR, masked_max
from .walk import JIT


@intrinsic
def _pointer(typingctx, address, like):
    """`address` (an integer) as a pointer to words of like's dtype (like: any array of them)."""
    if not (isinstance(address, types.Integer) and isinstance(like, types.Array)):
        return None
    pointer = types.CPointer(like.dtype)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, like), codegen


@njit(**JIT)
def count_one(address, length, like, m, v, m2, v2):
    """Matches among the `length` words at `address` (see count_at)."""
    words = carray(_pointer(address, like), length)
    zero, one = np.int64(0), np.int64(1)
    return count_run(words, zero, one, length, m, v, m2, v2, one)


@njit(**JIT)
def any_one(address, length, like, m, v, m2, v2, top, bound):
    """Does one of the `length` words at `address` match? (any_run's terms: `top`, `bound` from
    launch_find.above, zeros where the test lacks that form.)"""
    words = carray(_pointer(address, like), length)
    zero, one = np.int64(0), np.int64(1)
    return any_run(words, zero, one, length, m, v, m2, v2, one, top, bound)


@njit(**JIT)
def count_at(addresses, lengths, like, m, v, m2, v2, counts):
    """counts[i] = matches among the lengths[i] words at addresses[i] (contiguous, alive, of
    like's dtype: the caller's duty, nothing is checked)."""
    for i in range(addresses.size):
        counts[i] = count_one(addresses[i], lengths[i], like, m, v, m2, v2)


@njit(parallel=True, **JIT)
def count_at_parallel(addresses, lengths, like, m, v, m2, v2, counts):
    """count_at with the buffers spread over numba's threads."""
    for i in prange(addresses.size):
        counts[i] = count_one(addresses[i], lengths[i], like, m, v, m2, v2)


@njit(**JIT)
def max_one(address, length, like, top):
    """The largest `w & top` among the `length` words at `address` (0 for none)."""
    words = carray(_pointer(address, like), length)
    vectors = np.uint64(length // VECTOR)
    best = masked_max(words, np.uint64(0), vectors, top)
    for j in range(vectors * np.uint64(VECTOR), np.uint64(length)):
        w = words[j] & top
        if w > best:
            best = w
    return best


@njit(parallel=True, **JIT)
def max_at_parallel(addresses, lengths, like, top, found):
    """found[i] = max_one of the lengths[i] words at addresses[i], the buffers spread over
    numba's threads (contiguous, alive, of like's dtype: the caller's duty)."""
    for i in prange(addresses.size):
        found[i] = max_one(addresses[i], lengths[i], like, top)
