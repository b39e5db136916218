"""Zip members (a .npz's arrays): read, and inflated when compressed, as a stream from their
place in the archive, their CRC-32 checked in the same pass."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from ..._records import stored_through_slots
from . import Storage
from .buffers import thread_buffer
from .reads import SourceError, open_binary

#: Compressed bytes read at a time from a deflate member.
INFLATE_INPUT = 1 << 20


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Member(Storage):
    """Zip member `name` of archive `source`, whose data starts at byte `offset`: `packed`
    compressed bytes when `deflate`, else stored as they are. It holds `skip` bytes (a .npy
    header) then the `nbytes` of the tensor, nothing after; the whole member is read in one
    pass and its CRC-32 must be `crc`."""

    source: str
    offset: int
    nbytes: int
    name: str
    skip: int
    crc: int
    deflate: bool = False
    packed: int = 0

    @property
    def kind(self) -> str:
        return "deflate" if self.deflate else "stored"

    def chunks(self, task, item_bytes: int, chunk_bytes: int):
        first = task.first
        count = (self.nbytes // item_bytes - first) if task.count < 0 else task.count
        per_chunk = max(1, chunk_bytes // item_bytes)
        with open_binary(self.source) as f:
            f.seek(self.offset)
            member = _MemberReader(f, self)
            member.skip(self.skip + first * item_bytes)
            buf = thread_buffer("read", min(per_chunk, count) * item_bytes)
            done = 0
            while done < count:
                n = min(per_chunk, count - done)
                member.fill(memoryview(buf)[: n * item_bytes])
                yield first + done, buf[: n * item_bytes]
                done += n
            if task.count < 0:  # the whole member was read: its CRC-32 can be checked
                member.finish()


class _MemberReader:
    """The bytes of a zip member in order, from the open archive `f` positioned at the member's
    data; each byte is added to the member's CRC-32 as it is read."""

    def __init__(self, f, m: Member):
        self.f, self.m = f, m
        self.inflate = zlib.decompressobj(-15) if m.deflate else None
        self.stored_left = m.packed if self.inflate else m.skip + m.nbytes
        self.size = self.crc = 0

    def fill(self, view: memoryview) -> None:
        """Fill `view`; SourceError when the member ends first."""
        got = 0
        while got < len(view):
            k = self._read_into(view[got:])
            if not k:
                raise SourceError(f"member {self.m.name} ends after {self.size} of its "
                                  f"{self.m.skip + self.m.nbytes} bytes (truncated or corrupt "
                                  "archive)")
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
            raise SourceError(f"member {self.m.name} holds more than its "
                              f"{self.m.skip + self.m.nbytes} bytes (corrupt archive)")
        if self.crc != self.m.crc:
            raise SourceError(f"member {self.m.name}: CRC-32 mismatch (corrupt archive)")

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
            raise SourceError(f"member {self.m.name}: corrupt compressed data ({e})") from None
