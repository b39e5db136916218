"""Short rows that fill one machine word (4 or 8 bytes: four float8 values, four float16 ...)
reduced along their own axis into one-byte cells: each row is one uint32/uint64 word whose
elements are lanes, tested all at once by integer arithmetic that carries across no lane (SWAR).

Per lane, `(x & top) > bound` (the form launch_find.above finds, where top's lane sign bit is
clear) is the sign bit of `(x & top) + (LOW - bound)`; any test `(x & m) == v and (x & m2) != v2`
is exact through "y is not zero" = the sign bit of `((y & LOW) + LOW) | y` with y = (x & m) ^ v,
LOW the lane's bits below its sign bit. A row's count is the popcount of its lanes' sign bits.
A plain loop over the words, which LLVM vectorizes: on one thread, data in cache, 2.1-2.4x
rows.py's shuffles for rows of four float8 (NaN tests), 1.6x for tests of the general form
(docs/benchmarks.md, "issue 22, rows3 helper").
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .launch_find import above as above_form
from .walk import JIT

#: The bytes of a row this kernel takes, and the unsigned word that holds one.
ROW_WORDS = {4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def _same_unsigned(*args) -> bool:
    """Are the numba types all one unsigned integer type?"""
    return isinstance(args[0], types.Integer) and not args[0].signed and all(a == args[0] for a in args)


@intrinsic
def _above_count(typingctx, w, a, b, high):
    """popcount(((w & a) + b) & high), computed in w's own width (numba's arithmetic widens
    32-bit words to 64 bits, halving the lanes of a vector)."""
    if not _same_unsigned(w, a, b, high):
        return None

    def codegen(context, builder, sig, args):
        w, a, b, high = args
        return builder.ctpop(builder.and_(builder.add(builder.and_(w, a), b), high))

    return w(w, a, b, high), codegen


@intrinsic
def _exact_count(typingctx, w, a, b, c, d, low, high):
    """popcount of the lanes where (w & a) == b and (w & c) != d, in w's own width: a lane y is
    non-zero iff the sign bit of ((y & low) + low) | y is set (no carry leaves the lane)."""
    if not _same_unsigned(w, a, b, c, d, low, high):
        return None

    def codegen(context, builder, sig, args):
        w, a, b, c, d, low, high = args

        def nonzero(y):
            return builder.or_(builder.add(builder.and_(y, low), low), y)

        equal = builder.not_(nonzero(builder.xor(builder.and_(w, a), b)))
        differ = nonzero(builder.xor(builder.and_(w, c), d))
        return builder.ctpop(builder.and_(builder.and_(equal, differ), high))

    return w(w, a, b, c, d, low, high), codegen


@njit(**JIT)
def word_rows(words, cells, a, b, c, d, low, high, above, any_mode):
    """cells[i] = how many lanes of words[i] pass the test (any_mode: 1 if one does, else 0),
    for every i (threads each take a slice of the rows). above: the test is lane & a > bound
    with b = LOW - bound (a's lane sign bits clear); else (lane & a) == b and (lane & c) != d.
    low, high: each lane's bits below its sign bit, and its sign bit. cells is uint8."""
    if above:
        if any_mode:
            for i in range(words.size):
                cells[i] = _above_count(words[i], a, b, high) != 0
        else:
            for i in range(words.size):
                cells[i] = _above_count(words[i], a, b, high)
    else:
        if any_mode:
            for i in range(words.size):
                cells[i] = _exact_count(words[i], a, b, c, d, low, high) != 0
        else:
            for i in range(words.size):
                cells[i] = _exact_count(words[i], a, b, c, d, low, high)


@functools.lru_cache(maxsize=256)
def constants(test: tuple, lane_bytes: int, row_bytes: int) -> tuple:
    """word_rows's (a, b, c, d, low, high, above) for `test` (four ints: (w & m) == v and
    (w & m2) != v2, then (w & top) > bound where launch_find.above found that form) on lanes of
    `lane_bytes` in words of `row_bytes`."""
    word = ROW_WORDS[row_bytes]
    lane = np.dtype(f"u{lane_bytes}")
    bits = 8 * lane_bytes
    low = (1 << (bits - 1)) - 1
    ones = sum(1 << (bits * k) for k in range(row_bytes // lane_bytes))
    top, bound = (int(t) for t in above_form(test, lane))
    if top and top <= low:
        values = (top, low - bound, 0, 0)
    else:
        values = test
    return (*(word.type(x * ones) for x in values), word.type(low * ones), word.type((low + 1) * ones),
            bool(top and top <= low))
