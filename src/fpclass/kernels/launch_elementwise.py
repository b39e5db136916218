"""The element-wise launcher: one bit test per element, written into a uint8 mask.

It owns what surrounds the kernel (kernels/elementwise.py): odd layouts copied in pieces, the
thread count (threads.py), the parts on threads (thread_parts.py), and whether the mask bypasses
the caches.
"""

from __future__ import annotations

import numpy as np

from . import elementwise, thread_parts
from .constants import flat_test_words, scalars
from .layout import as_words, plan, source_plan
from .pieces import fresh_copy, part, pieces
from .threads import threads_for

U8 = np.dtype(np.uint8)
#: Parts of the mask on threads start at multiples of this many elements.
BLOCK = 1 << 16
#: Masks from this size on are written with non-temporal stores, past the caches, by one thread
#: or many: larger than half a typical last-level cache, they would not stay there, and skipping
#: the read of the old bytes makes writing them 1.2x faster (measured, bfloat16 isnan over 64 Mi
#: elements).
STREAM_MIN_BYTES = 16 << 20


def mask(a: np.ndarray, word: np.dtype, lanes: int, test, negate: bool, out: np.ndarray) -> None:
    """out[...] = test(a) ^ negate element-wise; `out` is a uint8 array of a's shape."""
    threads = threads_for(a.size)
    stream = out.nbytes >= STREAM_MIN_BYTES
    if threads == 1 and not stream and out.flags.c_contiguous:
        flat, _ = source_plan(a, word, lanes) if a.flags.c_contiguous else (None, None)
        if flat is not None and elementwise.mask_flat(flat, out.reshape(-1),
                                                      flat_test_words(test, word, negate, lanes)):
            return
    src = as_words(a, word)
    if src is None:  # strides or address not whole words: copy piece by piece, never whole
        for ix in pieces(a.shape):
            mask(fresh_copy(a[ix]), word, lanes, test, negate, part(out, ix))
        return
    dst = as_words(out, U8)
    p = plan(a.shape, [src, dst], reorder=True)
    m, v, m2, v2 = scalars(test, word)
    common = (src.flat, p.offsets[0], p.strides[0], dst.flat, p.offsets[1], p.strides[1], p.shape)
    bounds = thread_parts.cuts(p.size, thread_parts.parts_for(threads), BLOCK)
    thread_parts.run(elementwise.mask_range, [(*common, b0, b1, m, v, m2, v2, lanes, negate, stream)
                                              for b0, b1 in zip(bounds, bounds[1:])], threads)
