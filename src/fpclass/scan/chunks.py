"""Byte sources: a tensor's stored bytes as a sequence of uint8 chunks of bounded size.

Raw ranges are mapped one chunk at a time (never the whole file, so resident memory stays at about
one chunk per thread) or read into one reused buffer; zip members are decompressed as a stream.
"""

from __future__ import annotations

import mmap
import os
import zipfile
import zlib

import numpy as np

from .tasks import DEFLATE, RAW, VARINT, Task

#: Default bytes per chunk.
CHUNK_BYTES = 32 << 20
#: Largest protobuf varint field decoded (ONNX int32_data is held in the model anyway).
VARINT_LIMIT = 256 << 20

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


class SourceError(Exception):
    """The bytes of a task cannot be read as described; the message is the one-line reason."""


def chunks(task: Task, item_bytes: int, chunk_bytes: int = CHUNK_BYTES, io: str = "mmap"):
    """Yield (first item, uint8 array of whole items) over the task's part. `io` is "mmap" or
    "read" (a reused buffer) for raw ranges. Raises SourceError for short or corrupt data."""
    per_chunk = max(1, chunk_bytes // item_bytes)
    first = task.first
    count = (task.nbytes // item_bytes - first) if task.count < 0 else task.count
    if task.storage == RAW:
        yield from _raw(task.source, task.offset + first * item_bytes, count, item_bytes,
                        per_chunk, first, io)
    elif task.storage == DEFLATE:
        yield from _deflate(task, first, count, item_bytes, per_chunk)
    elif task.storage == VARINT:
        yield from _varint(task, item_bytes)
    else:
        raise SourceError(f"unknown storage {task.storage!r}")


def _raw(path, offset, count, item_bytes, per_chunk, first, io):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        end = offset + count * item_bytes
        if end > size:
            raise SourceError(f"data ends at byte {end} but {path} has {size} bytes (truncated?)")
        buf = np.empty(per_chunk * item_bytes, np.uint8) if io == "read" else None
        done = 0
        while done < count:
            n = min(per_chunk, count - done)
            start = offset + done * item_bytes
            if buf is not None:
                f.seek(start)
                got = f.readinto(memoryview(buf)[: n * item_bytes])
                if got != n * item_bytes:
                    raise SourceError(f"{path} shrank while being read")
                yield first + done, buf[: n * item_bytes]
            else:
                base = start - start % mmap.ALLOCATIONGRANULARITY
                length = start - base + n * item_bytes
                m = mmap.mmap(f.fileno(), length, flags=mmap.MAP_SHARED | _POPULATE,
                              prot=mmap.PROT_READ, offset=base)
                # The mapping is released when the last array viewing it goes away.
                yield first + done, np.frombuffer(m, np.uint8, n * item_bytes, start - base)
                del m
            done += n


def _deflate(task, first, count, item_bytes, per_chunk):
    try:
        with zipfile.ZipFile(task.source) as z, z.open(task.member) as stream:
            _skip(stream, task.offset + first * item_bytes)
            buf = np.empty(per_chunk * item_bytes, np.uint8)
            done = 0
            while done < count:
                n = min(per_chunk, count - done)
                view = memoryview(buf)[: n * item_bytes]
                got = 0
                while got < len(view):
                    k = stream.readinto(view[got:])
                    if not k:
                        raise SourceError(f"member {task.member} ends early (truncated)")
                    got += k
                yield first + done, buf[: n * item_bytes]
                done += n
            if task.count < 0:
                while stream.read(1 << 20):  # reaching the end verifies the CRC
                    pass
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise SourceError(f"member {task.member}: corrupt compressed data ({e})") from None


def _skip(stream, n):
    while n > 0:
        got = stream.read(min(n, 1 << 20))
        if not got:
            raise SourceError("compressed member ends early (truncated)")
        n -= len(got)


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
