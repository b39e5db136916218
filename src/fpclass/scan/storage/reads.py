"""Positioned reads: the one way the scan reads stored bytes at a place of a file, and the one
error type for bytes that cannot be read as described.

Reads are positioned (never mapped: a file that shrinks while it is read must give a reason, not
a SIGBUS), so a file descriptor can be shared by threads.
"""

from __future__ import annotations

import io
import os

#: Flags for os.open of a file read by the scan.
READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


class SourceError(Exception):
    """The bytes of a task cannot be read as described; the message is the one-line reason."""


def read_exactly(fd: int, view: memoryview, position: int, path: str) -> None:
    """Fill `view` from byte `position` of `fd` (the file `path`, named in messages);
    SourceError when the file ends first."""
    got = 0
    while got < len(view):
        if hasattr(os, "preadv"):
            k = os.preadv(fd, [view[got:]], position + got)
        else:  # Windows: no positioned reads in the os module
            os.lseek(fd, position + got, os.SEEK_SET)
            k = os.readv(fd, [view[got:]])
        if k == 0:
            raise SourceError(f"{path} ended at byte {position + got} while being read "
                              "(truncated during the scan?)")
        got += k


def open_checked(path: str, end: int, what: str = "data") -> int:
    """A file descriptor of `path`, which must hold at least `end` bytes; SourceError
    otherwise (the descriptor is then closed)."""
    fd = os.open(path, READ_FLAGS)
    size = os.fstat(fd).st_size
    if end > size:
        os.close(fd)
        raise SourceError(f"{what} ends at byte {end} but {path} has {size} bytes (truncated?)")
    return fd


class Window(io.RawIOBase):
    """Bytes [start, start + size) of the file `path` (size None: to the end of the file as it is
    when opened), as a seekable file object of their own (for h5py and astropy), read with
    positioned reads: a .keras member in place, or one FITS HDU without the headers before it."""

    def __init__(self, path: str, start: int, size: int | None = None):
        super().__init__()
        self.name, self._fd = path, -1
        self._fd = os.open(path, READ_FLAGS)
        if size is None:
            size = max(0, os.fstat(self._fd).st_size - start)
        self._start, self._size, self._pos = start, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, pos, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def readinto(self, buf):
        n = max(0, min(len(buf), self._size - self._pos))
        if n:
            read_exactly(self._fd, memoryview(buf).cast("B")[:n], self._start + self._pos,
                         self.name)
        self._pos += n
        return n

    def close(self):
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        super().close()
