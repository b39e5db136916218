"""Where stored bytes come from: a local file (a file descriptor, read with positioned reads) or a
remote one named by a URL (`s3://`, `https://`, `hf://`, any fsspec protocol; see remote.py).

Every read of the scan goes through `open_source` / `source_size` / `close_source` and
reads.read_exactly, or through reads.open_binary for a reader that wants a file object. A local file
stays a plain int descriptor, so the local path costs one type test per read; fsspec is imported
only when a URL appears."""

from __future__ import annotations

import os
import re

#: Flags for os.open of a file read by the scan.
READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")

#: Threads (each one request in flight, one chunk buffer) of a scan of URLs when the caller sets
#: none: network latency, not the cores, bounds a stream's rate.
REMOTE_STREAMS = 8

#: Bytes a file object over a remote file reads ahead (each read of a remote file is a request).
REMOTE_BUFFER = 1 << 20


def is_url(path) -> bool:
    """Whether `path` names a remote file by a URL ("scheme://...") rather than a local path."""
    return isinstance(path, str) and "://" in path and _URL.match(path) is not None


def open_source(path: str):
    """A handle for positioned reads of `path`: an int descriptor for a local file, a
    remote.RemoteFile for a URL (its identity checked against the one seen first)."""
    if is_url(path):
        from . import remote
        return remote.RemoteFile(path)
    return os.open(path, READ_FLAGS)


def source_size(handle) -> int:
    """The size in bytes of the file behind an `open_source` handle."""
    if handle.__class__ is int:
        return os.fstat(handle).st_size
    return handle.size


def close_source(handle) -> None:
    """Close an `open_source` handle; for a remote file, SourceError when it changed while it
    was open."""
    if handle.__class__ is int:
        os.close(handle)
    else:
        handle.close()


def path_size(path: str) -> int:
    """os.path.getsize for local paths and URLs."""
    if is_url(path):
        from . import remote
        return remote.RemoteFile(path).size
    return os.path.getsize(path)


def real(path: str) -> str:
    """A key naming the file `path` once: its real path, or the URL as given."""
    return path if is_url(path) else os.path.realpath(path)
