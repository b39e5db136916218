"""Temporary files a scan makes while planning (a compressed file's decompressed copy), and when
they are removed: at the end of the `session()` they were made in (engine.scan holds one for
planning and running its tasks), or at exit for those made outside any session (engine.plan
called directly, its tasks run later)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading

_local = threading.local()
_outside: list = []  # directories made outside a session, removed at exit


@contextlib.contextmanager
def session():
    """Temporary files made in this thread inside the block are removed when it ends."""
    outer = getattr(_local, "directory", None), getattr(_local, "in_session", False)
    _local.directory, _local.in_session = None, True
    try:
        yield
    finally:
        made = _local.directory
        _local.directory, _local.in_session = outer
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def directory() -> str:
    """This thread's scratch directory for the current session (made on first use)."""
    made = getattr(_local, "directory", None)
    if made is None:
        made = tempfile.mkdtemp(prefix="fpclass-scan-")
        _local.directory = made
        if not getattr(_local, "in_session", False):
            _outside.append(made)
    return made


def holds(path: str) -> bool:
    """Whether `path` is a file of this thread's scratch directory (a decompressed copy)."""
    made = getattr(_local, "directory", None)
    return made is not None and os.path.abspath(path).startswith(made + os.sep)


@atexit.register
def _remove_outside() -> None:
    for made in _outside:
        shutil.rmtree(made, ignore_errors=True)
