"""Bytes at an offset of a file: raw elements (Range), and protobuf varints (Varints, ONNX
int32_data), read with positioned reads into one reused buffer per task, so resident memory stays
at about one chunk per thread."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._records import stored_through_slots
from . import Storage, cut
from ..dtypes import np_dtype
from .reads import SourceError, close_source, open_source, source_size, read_exactly
from .buffers import thread_buffer

#: Largest protobuf varint field decoded (ONNX int32_data is held in the model anyway).
VARINT_LIMIT = 256 << 20


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Range(Storage):
    """`nbytes` bytes at byte `offset` of file `source`: the items in storage order."""

    source: str
    offset: int
    nbytes: int
    kind = "raw"
    sieves = True

    def parts(self, task, task_bytes):
        if self.nbytes <= task_bytes or not task.grid:
            return []
        item = task.block_bytes or np_dtype(task.element).itemsize
        return cut(self.nbytes // item, self.nbytes, task_bytes, max(1, task_bytes // item))

    def chunks(self, task, item_bytes: int, chunk_bytes: int, sieve=None):
        """Yield (first item, uint8 array of whole items) over the task's part, the array reused
        for the next chunk. SourceError when the file is short, also when it shrinks while it is
        read. With a `sieve` (operators/read_sieve.py, items of its dtype), a local file's chunks
        are read through it first: a chunk it keeps whole (all finite, its statistics now in the
        sieve) is yielded as (first item, None); from the piece it stops at, the chunk is read
        and yielded as usual."""
        first = task.first
        count = (self.nbytes // item_bytes - first) if task.count < 0 else task.count
        per_chunk = max(1, chunk_bytes // item_bytes)
        offset = self.offset + first * item_bytes
        path = self.source
        fd = open_source(path)
        try:
            size = source_size(fd)
            end = offset + count * item_bytes
            if end > size:
                raise SourceError(f"data ends at byte {end} but {path} has {size} bytes "
                                  "(truncated?)")
            buf = thread_buffer("read", min(per_chunk, count) * item_bytes)
            if fd.__class__ is not int:
                sieve = None
            done = 0
            while done < count:
                n = min(per_chunk, count - done)
                if sieve is not None:
                    kept = sieve.read(fd, buf, offset + done * item_bytes, n * item_bytes)
                    if kept == n * item_bytes:
                        yield first + done, None
                        done += n
                        continue
                    done += kept // item_bytes
                    n = min(per_chunk, count - done)
                read_exactly(fd, memoryview(buf)[: n * item_bytes], offset + done * item_bytes,
                             path)
                yield first + done, buf[: n * item_bytes]
                done += n
        finally:
            close_source(fd)


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Varints(Storage):
    """A packed run of protobuf varints of `nbytes` bytes at byte `offset` of `source`, one value
    per item (ONNX int32_data holding float16/bfloat16/float8 bits)."""

    source: str
    offset: int
    nbytes: int
    kind = "varint"

    def chunks(self, task, item_bytes: int, chunk_bytes: int):
        if self.nbytes > VARINT_LIMIT:
            raise SourceError(f"typed int32_data field of {self.nbytes} bytes is over the "
                              f"{VARINT_LIMIT}-byte limit")
        data = np.empty(self.nbytes, np.uint8)
        fd = open_source(self.source)
        try:
            if self.offset + self.nbytes > source_size(fd):
                raise SourceError("int32_data field extends past the end of the file "
                                  "(truncated)")
            read_exactly(fd, memoryview(data), self.offset, self.source)
        finally:
            close_source(fd)
        values = decode_varints(data)
        if values.size != task.items:
            raise SourceError(f"int32_data holds {values.size} values, the shape needs "
                              f"{task.items}")
        if values.size and int(values.max()) >= 1 << (8 * item_bytes):
            raise SourceError(f"an int32_data value does not fit in {8 * item_bytes} bits")
        yield 0, values.astype(f"<u{item_bytes}").view(np.uint8)


def decode_varints(b: np.ndarray) -> np.ndarray:
    """The unsigned values of a packed run of protobuf varints (uint64). SourceError when the
    run ends inside a varint or a varint is longer than 10 bytes."""
    if b.size == 0:
        return np.empty(0, np.uint64)
    if b[-1] & 0x80:
        raise SourceError("packed varints end in the middle of a value")
    ends = np.flatnonzero(b < 0x80)
    starts = np.concatenate(([0], ends[:-1] + 1))
    group = np.repeat(np.arange(ends.size), ends - starts + 1)
    pos = np.arange(b.size) - starts[group]
    if pos.max() > 9:
        raise SourceError("a varint is longer than 10 bytes")
    parts = (b & 0x7F).astype(np.uint64) << (7 * pos).astype(np.uint64)
    return np.add.reduceat(parts, starts)
