"""Byte sources: a tensor's stored bytes as a sequence of uint8 chunks of bounded size.

Raw ranges are read with positioned reads into one reused buffer per task (never mapped: a file
that shrinks while it is read must give a reason, not a SIGBUS), so resident memory stays at about
one chunk per thread; zip members are read (and inflated) as a stream from their place in the
archive, and their CRC-32 checked in the same pass.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from . import views
from .dtypes import np_dtype
from .storage.reads import READ_FLAGS, SourceError, read_exactly
from .tasks import DATASET, DEFLATE, INLINE, RAW, STORED, STRIDED, VARINT, Task

#: Default bytes per chunk: small enough to stay in cache between the read and the classification
#: (4 MiB read as fast as 32 MiB mapped in benchmarks/bench_scan.py; 32 MiB reads were 2.5x slower).
CHUNK_BYTES = 4 << 20
#: Compressed bytes read at a time from a deflate member.
INFLATE_INPUT = 1 << 20
#: Largest protobuf varint field decoded (ONNX int32_data is held in the model anyway).
VARINT_LIMIT = 256 << 20


def chunks(task: Task, item_bytes: int, chunk_bytes: int = CHUNK_BYTES):
    """Yield (first item, uint8 array of whole items) over the task's part; the array is reused
    for the next chunk. Raises SourceError for short or corrupt data, also when the file shrinks
    while it is read."""
    per_chunk = max(1, chunk_bytes // item_bytes)
    first = task.first
    count = (task.nbytes // item_bytes - first) if task.count < 0 else task.count
    if task.storage == RAW:
        yield from _raw(task.source, task.offset + first * item_bytes, count, item_bytes,
                        per_chunk, first)
    elif task.storage in (STORED, DEFLATE):
        yield from _member(task, first, count, item_bytes, per_chunk)
    elif task.storage == INLINE:
        if len(task.data) != task.nbytes:
            raise SourceError(f"inline data holds {len(task.data)} bytes, {task.nbytes} expected")
        yield first, np.frombuffer(task.data, np.uint8)[first * item_bytes:
                                                        (first + count) * item_bytes]
    elif task.storage == VARINT:
        yield from _varint(task, item_bytes)
    else:
        raise SourceError(f"unknown storage {task.storage!r}")


def _raw(path, offset, count, item_bytes, per_chunk, first):
    fd = os.open(path, READ_FLAGS)
    try:
        size = os.fstat(fd).st_size
        end = offset + count * item_bytes
        if end > size:
            raise SourceError(f"data ends at byte {end} but {path} has {size} bytes (truncated?)")
        buf = np.empty(min(per_chunk, count) * item_bytes, np.uint8)
        done = 0
        while done < count:
            n = min(per_chunk, count - done)
            read_exactly(fd, memoryview(buf)[: n * item_bytes], offset + done * item_bytes, path)
            yield first + done, buf[: n * item_bytes]
            done += n
    finally:
        os.close(fd)


def strided_layout(task: Task) -> tuple:
    """(sizes, strides) of a STRIDED task in its items: a complex view is read as its parts,
    with a last axis of 2 (strides doubled, the parts one item apart); broadcast dimensions
    (stride 0) are read once (size 1)."""
    shape = tuple(1 if d in task.broadcast else n for d, n in enumerate(task.shape))
    if len(task.grid) == len(task.shape) + 1:
        return shape + (2,), tuple(2 * s for s in task.strides) + (1,)
    return shape, task.strides


def blocks(task: Task, chunk_bytes: int = CHUNK_BYTES):
    """Yield (origin, N-d array) blocks of a STRIDED or DATASET task, each about `chunk_bytes`:
    origins index the task's `grid` (STRIDED: in storage order, see views.to_view)."""
    if task.storage == STRIDED:
        dtype = np_dtype(task.element)
        fd = os.open(task.source, READ_FLAGS)
        try:
            size = os.fstat(fd).st_size

            def read_at(view, position):
                if position + len(view) > size:
                    raise SourceError(f"a view reaches byte {position + len(view)} of "
                                      f"{task.source} ({size} bytes; truncated?)")
                read_exactly(fd, view, position, task.source)
            yield from views.blocks(read_at, task.offset, dtype, *strided_layout(task),
                                    chunk_bytes)
        finally:
            os.close(fd)
    elif task.storage == DATASET:
        from importlib import import_module
        reader = import_module(f"{__package__}.readers.{task.reader}")
        yield from reader.read_blocks(task, chunk_bytes)
    else:
        raise SourceError(f"storage {task.storage!r} has no blocks")


def _member(task, first, count, item_bytes, per_chunk):
    with open(task.source, "rb") as f:
        f.seek(task.offset)
        member = _MemberReader(f, task)
        member.skip(task.skip + first * item_bytes)
        buf = np.empty(min(per_chunk, count) * item_bytes, np.uint8)
        done = 0
        while done < count:
            n = min(per_chunk, count - done)
            member.fill(memoryview(buf)[: n * item_bytes])
            yield first + done, buf[: n * item_bytes]
            done += n
        if task.count < 0:  # the whole member was read: its CRC-32 can be checked
            member.finish()


class _MemberReader:
    """The bytes of a STORED or DEFLATE zip member in order, from the open archive `f` positioned
    at the member's data; each byte is added to the member's CRC-32 as it is read."""

    def __init__(self, f, task: Task):
        self.f, self.task = f, task
        self.inflate = zlib.decompressobj(-15) if task.storage == DEFLATE else None
        self.stored_left = task.packed if self.inflate else task.skip + task.nbytes
        self.size = self.crc = 0

    def fill(self, view: memoryview) -> None:
        """Fill `view`; SourceError when the member ends first."""
        got = 0
        while got < len(view):
            k = self._read_into(view[got:])
            if not k:
                raise SourceError(f"member {self.task.member} ends after {self.size} of its "
                                  f"{self.task.skip + self.task.nbytes} bytes (truncated or "
                                  "corrupt archive)")
            got += k

    def skip(self, n: int) -> None:
        buf = memoryview(bytearray(min(n, 1 << 20)))
        while n > 0:
            k = min(n, len(buf))
            self.fill(buf[:k])
            n -= k

    def finish(self) -> None:
        """Check that the member holds nothing more and that its CRC-32 matches."""
        if self._read_into(memoryview(bytearray(1))):
            raise SourceError(f"member {self.task.member} holds more than its "
                              f"{self.task.skip + self.task.nbytes} bytes (corrupt archive)")
        if self.crc != self.task.crc:
            raise SourceError(f"member {self.task.member}: CRC-32 mismatch (corrupt archive)")

    def _read_into(self, view: memoryview) -> int:
        k = self._inflate_into(view) if self.inflate else self._copy_into(view)
        self.crc = zlib.crc32(view[:k], self.crc)
        self.size += k
        return k

    def _copy_into(self, view):
        want = min(len(view), self.stored_left)
        k = self.f.readinto(view[:want]) if want else 0
        self.stored_left -= k
        return k

    def _inflate_into(self, view):
        try:
            while not self.inflate.eof:
                data = self.inflate.unconsumed_tail
                if not data and self.stored_left:
                    data = self.f.read(min(self.stored_left, INFLATE_INPUT))
                    self.stored_left -= len(data)
                out = self.inflate.decompress(data, len(view))
                if out:
                    view[:len(out)] = out
                    return len(out)
                if not data:  # no input left, and none was pending inside zlib either
                    return 0
            return 0
        except zlib.error as e:
            raise SourceError(f"member {self.task.member}: corrupt compressed data ({e})") from None


def _varint(task, item_bytes):
    if task.nbytes > VARINT_LIMIT:
        raise SourceError(f"typed int32_data field of {task.nbytes} bytes is over the "
                          f"{VARINT_LIMIT}-byte limit")
    with open(task.source, "rb") as f:
        f.seek(task.offset)
        data = f.read(task.nbytes)
    if len(data) != task.nbytes:
        raise SourceError("int32_data field extends past the end of the file (truncated)")
    values = decode_varints(np.frombuffer(data, np.uint8))
    if values.size != task.items:
        raise SourceError(f"int32_data holds {values.size} values, the shape needs {task.items}")
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
