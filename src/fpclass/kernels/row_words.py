"""Short rows that fill one machine word (4 or 8 bytes: four float8 values, four float16 ...)
reduced along their own axis into one-byte cells: each row is one uint32/uint64 word whose
elements are lanes, tested all at once by integer arithmetic that carries across no lane (SWAR).

Per lane, `(x & top) > bound` (the form launch_find.above finds, where top's lane sign bit is
clear) is the sign bit of `(x & top) + (LOW - bound)`; any test `(x & m) == v and (x & m2) != v2`
is exact through "y is not zero" = the sign bit of `((y & LOW) + LOW) | y` with y = (x & m) ^ v,
LOW the lane's bits below its sign bit. A row's count is the popcount of its lanes' sign bits.
A plain loop over the words: LLVM vectorizes it (rows.py's shuffles cost more per row).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

from .walk import JIT

#: The bytes of a row this kernel takes, and the unsigned word that holds one.
ROW_WORDS = {4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


@intrinsic
def _popcount(typingctx, x):
    """The set bits of an unsigned integer, in its own type (vectorizes: vpopcnt)."""
    if not isinstance(x, types.Integer) or x.signed:
        return None

    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])

    return x(x), codegen


@njit(parallel=True, **JIT)
def word_rows(words, cells, a, b, c, d, low, high, above, any_mode, bounds):
    """cells[i] = how many lanes of words[i] pass the test (any_mode: 1 if one does, else 0),
    for i in bounds[t]..bounds[t+1] on a thread per part t. above: the test is lane & a > bound
    with b = LOW - bound (a's lane sign bits clear); else (lane & a) == b and (lane & c) != d.
    low, high: each lane's bits below its sign bit, and its sign bit. cells is uint8."""
    for t in prange(bounds.size - 1):
        ws = words[bounds[t]:bounds[t + 1]]
        out = cells[bounds[t]:bounds[t + 1]]
        if above:
            if any_mode:
                for i in range(ws.size):
                    out[i] = ((ws[i] & a) + b) & high != 0
            else:
                for i in range(ws.size):
                    out[i] = _popcount(((ws[i] & a) + b) & high)
        else:
            if any_mode:
                for i in range(ws.size):
                    y, y2 = (ws[i] & a) ^ b, (ws[i] & c) ^ d
                    out[i] = ~(((y & low) + low) | y) & (((y2 & low) + low) | y2) & high != 0
            else:
                for i in range(ws.size):
                    y, y2 = (ws[i] & a) ^ b, (ws[i] & c) ^ d
                    out[i] = _popcount(~(((y & low) + low) | y) & (((y2 & low) + low) | y2) & high)


@functools.lru_cache(maxsize=256)
def constants(test: tuple, lane_bytes: int, row_bytes: int) -> tuple:
    """word_rows's (a, b, c, d, low, high, above) for `test` (four ints: (w & m) == v and
    (w & m2) != v2, then (w & top) > bound where launch_find.above found that form) on lanes of
    `lane_bytes` in words of `row_bytes`."""
    from .launch_find import above as above_form

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
