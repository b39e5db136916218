"""Positioned reads: the one way the scan reads stored bytes at a place of a file, and the one
error type for bytes that cannot be read as described.

Reads are positioned (never mapped: a file that shrinks while it is read must give a reason, not
a SIGBUS), so a file descriptor can be shared by threads.
"""

from __future__ import annotations

import io
import os
import zipfile

from .errors import SourceError
from .source import REMOTE_BUFFER, close_source, is_url, open_source, path_size, source_size

__all__ = ["SourceError", "Window", "close_source", "file_size", "is_url", "open_binary",
           "open_checked", "open_source", "path_size", "read_exactly", "source_size", "zip_file"]


#: Bytes a Window over a remote file reads ahead of a small read.
REMOTE_BLOCK = 1 << 20


def read_exactly(fd: int, view: memoryview, position: int, path: str) -> None:
    """Fill `view` from byte `position` of `fd` (the file `path`, named in messages; `fd` an
    open_source handle); SourceError when the file ends first."""
    if fd.__class__ is not int:
        return fd.read_into(view, position)
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
    fd = open_source(path)
    size = source_size(fd)
    if end > size:
        close_source(fd)
        raise SourceError(f"{what} ends at byte {end} but {path} has {size} bytes (truncated?)")
    return fd


class Window(io.RawIOBase):
    """Bytes [start, start + size) of the file `path` (size None: to the end of the file as it is
    when opened), as a seekable file object of their own (for h5py and astropy), read with
    positioned reads: a .keras member in place, or one FITS HDU without the headers before it.
    `path` may be a URL (`file_size` is then the whole file's size)."""

    def __init__(self, path: str, start: int, size: int | None = None):
        super().__init__()
        self.name, self._fd = path, -1
        self._fd = open_source(path)
        self.file_size = source_size(self._fd)
        if size is None:
            size = max(0, self.file_size - start)
        self._start, self._size, self._pos = start, size, 0
        self._block = None  # (start, bytes) read ahead of small reads of a remote file

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
            view = memoryview(buf).cast("B")[:n]
            if self._fd.__class__ is int or n >= REMOTE_BLOCK:
                read_exactly(self._fd, view, self._start + self._pos, self.name)
            else:
                self._remote_small(view, self._start + self._pos)
        self._pos += n
        return n

    def _remote_small(self, view: memoryview, at: int) -> None:
        # Parsers (HDF5, zip, pickle) make many small reads; each is a request on a remote
        # file, so a block around them is read once and kept.
        block = self._block
        if block is None or not (block[0] <= at and at + len(view) <= block[0] + len(block[1])):
            end = min(self._start + self._size, at + REMOTE_BLOCK)
            data = bytearray(end - at)
            read_exactly(self._fd, memoryview(data), at, self.name)
            self._block = block = (at, data)
        view[:] = memoryview(block[1])[at - block[0]: at - block[0] + len(view)]

    def close(self):
        try:
            if self._fd != -1:
                fd, self._fd = self._fd, -1
                close_source(fd)  # a remote file: SourceError when it changed while open
        finally:
            super().close()


def open_binary(path: str):
    """A buffered, seekable binary file object of `path` (local or remote), for readers that parse
    headers with read/seek; `file_size(f)` gives its size."""
    if is_url(path):
        return io.BufferedReader(Window(path, 0), REMOTE_BUFFER)
    return open(path, "rb")


def zip_file(path: str) -> zipfile.ZipFile:
    """zipfile.ZipFile of `path` (local or remote), closing what it opened when it closes."""
    if not is_url(path):
        return zipfile.ZipFile(path)
    f = open_binary(path)
    try:
        return _OwnedZip(f)
    except BaseException:
        f.close()
        raise


class _OwnedZip(zipfile.ZipFile):
    def close(self):
        f = self.fp
        try:
            super().close()
        finally:
            if f is not None:
                f.close()


def file_size(f) -> int:
    """The size of the file behind `f` (from `open_binary`, or any real file)."""
    raw = getattr(f, "raw", f)
    size = getattr(raw, "file_size", None)
    return size if size is not None else os.fstat(f.fileno()).st_size
