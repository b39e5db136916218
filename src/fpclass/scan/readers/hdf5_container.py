"""Where an HDF5 file's bytes lie: a whole file, or a window of another (the model.weights.h5
member of a .keras zip, read in place when stored, inflated once into a temporary file when
compressed)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import zipfile

from . import ReaderError
from .zipmembers import data_offset
from ..storage.reads import Window
from ..storage.reads import file_size, is_url, open_binary

#: The member of a .keras archive that holds the weights.
KERAS_WEIGHTS = "model.weights.h5"
#: Between a zip member's name and a dataset's path in a Grid storage's `member`: HDF5 link names
#: cannot hold a NUL byte.
MEMBER_SEP = "\0"


#: Compressed weights members inflated into temporary files, by (archive, member, CRC, size,
#: archive mtime and size); the newest few are kept for the tasks that read them.
_INFLATED: dict = {}
_INFLATED_KEEP = 4
_INFLATE_LOCK = threading.Lock()


def _member_bytes(path, z, info) -> tuple:
    """(file, start, size): where the bytes of zip member `info` lie as an HDF5 file. A stored
    member in place; a compressed one inflated once per process into a temporary file (its
    CRC-32 checked by zipfile as it is read)."""
    if info.flag_bits & 0x1:
        raise ReaderError(f"{info.filename} is encrypted")
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size != info.file_size:
            raise ReaderError(f"{info.filename}: stored member sizes disagree")
        with open_binary(path) as raw:
            start = data_offset(raw, info)
            if start + info.file_size > file_size(raw):
                raise ReaderError(f"{info.filename} ends past the end of the archive "
                                  "(truncated?)")
        return path, start, info.file_size
    st = os.stat(path)
    key = (os.path.realpath(path), info.filename, info.CRC, info.file_size, st.st_mtime_ns,
           st.st_size)
    with _INFLATE_LOCK:
        if key in _INFLATED and os.path.exists(_INFLATED[key]):
            _INFLATED[key] = _INFLATED.pop(key)  # the newest again
            return _INFLATED[key], 0, info.file_size
        fd, tmp = tempfile.mkstemp(prefix="fpclass-", suffix="-" + KERAS_WEIGHTS)
        try:
            with os.fdopen(fd, "wb") as out, z.open(info) as member:
                shutil.copyfileobj(member, out, 1 << 20)
        except BaseException:
            os.unlink(tmp)
            raise
        if not _INFLATED:
            atexit.register(_remove_inflated, 0)
        _INFLATED[key] = tmp
        _remove_inflated(_INFLATED_KEEP)
        return tmp, 0, info.file_size


def _remove_inflated(keep: int) -> None:
    """Delete all but the newest `keep` inflated members (an open copy stays readable where
    the system allows deleting open files)."""
    while len(_INFLATED) > keep:
        old = _INFLATED.pop(next(iter(_INFLATED)))
        try:
            os.unlink(old)
        except OSError:
            pass


def _h5_file(h5py, path: str, start: int, size: int, **options):
    """(h5py.File, files to close after it) of the HDF5 bytes [start, start + size) of `path`:
    opened natively when they are the whole file, through a window otherwise."""
    if start == 0 and not is_url(path) and size == os.path.getsize(path):
        return h5py.File(path, "r", **options), []
    window = Window(path, start, size)
    try:
        return h5py.File(window, "r", **options), [window]
    except BaseException:
        window.close()
        raise

