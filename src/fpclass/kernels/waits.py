"""Spin-waits for kernels/thread_parts.py, in nogil kernels so that the GIL stays free for the
threads being waited for."""

from numba import njit

from . import atomics
from .walk import JIT


@njit(**JIT)
def all_set(flags, spins):
    """Whether every one of `flags` (int64) is non-zero, looked at for up to `spins` rounds."""
    for _ in range(spins):
        for i in range(flags.size):
            if atomics.load(flags, i) == 0:
                break
        else:
            return True
    return False


@njit(**JIT)
def moved(counter, seen, spins):
    """Whether counter[0] (int64) differs from `seen`, looked at for up to `spins` rounds."""
    for _ in range(spins):
        if atomics.load(counter, 0) != seen:
            return True
    return False
