"""Walking an iteration plan (see layout.py) inside numba kernels.

A kernel visits a range [start, stop) of C-order positions of the plan's shape as a sequence of
*runs*: stretches along the innermost axis, where the words sit at a constant stride and the loop
body is a tight, vectorizable loop.
"""

import numpy as np
from numba import njit

#: Every kernel's options. No C callback wrapper: no kernel is passed as a function pointer, and
#: building one adds to every kernel's compile.
JIT = dict(cache=True, nogil=True, boundscheck=False, error_model="numpy", no_cfunc_wrapper=True)
#: A kernel only other kernels call: no wrapper for calls from Python either (measured: a cold
#: warm-up unit 0-14% cheaper, median 2.5%). Python calling one crashes the process, so
#: tests/test_compile_specialisations.py checks that no code outside the kernels reaches one.
INNER = dict(JIT, no_cpython_wrapper=True)


@njit(**INNER)
def plan_size(shape):
    """The number of elements of a plan's shape."""
    total = 1
    for n in shape:
        total *= n
    return total


@njit(**INNER)
def seek(shape, start, idx):
    """Set `idx` to the multi-index of C-order position `start`."""
    rem = start
    for ax in range(shape.size - 1, -1, -1):
        idx[ax] = rem % shape[ax]
        rem //= shape[ax]


@njit(**INNER)
def word_at(idx, strides, offset):
    """The word position of multi-index `idx` for an operand with these strides and offset."""
    pos = offset
    for ax in range(idx.size):
        pos += idx[ax] * strides[ax]
    return pos


@njit(**INNER)
def run_length(idx, shape, position, stop):
    """How many elements from `position` stay on the current innermost row and before `stop`."""
    last = shape.size - 1
    return min(shape[last] - idx[last], stop - position)


@njit(**INNER)
def advance(idx, shape, run):
    """Move `idx` forward by `run` elements, which never passes the end of the current row."""
    ax = shape.size - 1
    idx[ax] += run
    while ax > 0 and idx[ax] >= shape[ax]:
        idx[ax] = 0
        idx[ax - 1] += 1
        ax -= 1


@njit(**INNER)
def hit(w, m, v, m2, v2):
    """The bit test of formats/bit_tests.py: (w & m) == v and (w & m2) != v2."""
    return ((w & m) == v) & ((w & m2) != v2)


@njit(**INNER)
def element_hit(src, i, m, v, m2, v2, lanes):
    """The bit test on the element whose first word is src[i]: with lanes == 2 (complex) it
    holds if it holds for either of its two words."""
    h = hit(src[i], m, v, m2, v2)
    if lanes == 2:
        h = h | hit(src[i + np.uint64(1)], m, v, m2, v2)
    return h
