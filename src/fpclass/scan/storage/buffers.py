"""Byte buffers that the tasks one thread runs in turn reuse: a large compressed dataset is cut
into many parts (grids.PACKED_PART_BYTES), and fresh buffers per part cost their page faults again
and again (measured: 16 MiB parts of a gzip dataset 28% slower than one task without this); a
fresh 4 MiB read buffer per task costs the same for every tensor or chunk file read raw."""

from __future__ import annotations

import threading

import numpy as np

#: Buffers up to this size are kept for the thread's next task (one per role: at most a few
#: of them per thread); larger ones are used once.
KEEP_BYTES = 8 << 20

_local = threading.local()


def thread_buffer(role: str, nbytes: int) -> np.ndarray:
    """A uint8 array of `nbytes` for `role` ("read": raw bytes read in chunks, "packed": stored
    bytes, "decoded": their decoding, "inflated": a stage between), reused by this thread's next calls for the same role: what it
    holds lasts until then."""
    kept = _local.__dict__.setdefault("kept", {})
    buf = kept.get(role)
    if buf is None or buf.size < nbytes:
        buf = np.empty(nbytes, np.uint8)
        if nbytes <= KEEP_BYTES:
            kept[role] = buf
    return buf[:nbytes]
