"""One reader per file format. Each has `plan(path) -> list[Task]`, reads headers only, and raises
ReaderError with a one-line reason when the file as a whole cannot be read. The contract is
readers/contract.py; the list of readers, with what each claims, is readers/registry.py."""

from __future__ import annotations


class ReaderError(Exception):
    """A file cannot be read as its format; the message is the one-line reason."""
