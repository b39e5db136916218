"""Odd layouts: arrays whose strides or address are not whole words are copied in pieces.

A launcher that meets such an array (its words cannot be viewed: layout.as_words gives None)
runs itself on fresh copies of C-order pieces of it, never on a copy of the whole.
"""

from __future__ import annotations

import numpy as np

#: Elements per piece.
PIECE = 1 << 20


def pieces(shape, limit=PIECE):
    """Index tuples that cut an array of `shape` into C-order pieces of at most `limit` elements."""
    if len(shape) == 0 or int(np.prod(shape)) <= limit:
        yield ()
        return
    inner = int(np.prod(shape[1:]))
    if inner <= limit:
        step = max(1, limit // max(inner, 1))
        for i in range(0, shape[0], step):
            yield (slice(i, i + step),)
    else:
        for i in range(shape[0]):
            for rest in pieces(shape[1:], limit):
                yield (i,) + rest


def first_flat(ix, shape) -> int:
    """C-order position of the first element of the piece `ix` (from `pieces`)."""
    first = [i.start if isinstance(i, slice) else i for i in ix] + [0] * (len(shape) - len(ix))
    return int(np.ravel_multi_index(first, shape)) if shape else 0


def part(out: np.ndarray, ix) -> np.ndarray:
    """The view of `out` at piece `ix` (indexing a 0-d array with () would give a scalar)."""
    return out[ix] if ix else out


def fresh_copy(piece) -> np.ndarray:
    """A fresh, aligned, C-contiguous copy (ascontiguousarray would keep unaligned data as is)."""
    return np.array(piece, order="C", copy=True)
