"""One reader per file format. Each has `plan(path) -> list[Task]`, reads headers only, and raises
ReaderError with a one-line reason when the file as a whole cannot be read. The contract is
readers/contract.py; the list of readers, with what each claims, is readers/registry.py."""

from __future__ import annotations

from ..._optional import require as _require


class ReaderError(Exception):
    """A file cannot be read as its format; the message is the one-line reason."""


def require(module: str, extra: str, needed_by: str):
    """`module` imported (an optional library a reader needs: h5py, zarr, astropy, scipy), or
    ReaderError with `fpclass._optional.require`'s message naming `extra`: the file is then a
    problem that says which extra to install. Every reader imports its optional library here."""
    try:
        return _require(module, extra, needed_by)
    except ImportError as e:
        raise ReaderError(str(e)) from None

