"""IDL save files (.sav), read through scipy.io.readsav (`fpclass[matlab]`: scipy).

readsav decodes the whole file into memory (a compressed file is first inflated record by record
into a temporary file), so a file is bounded before it is read: at most MAX_BYTES on disk and, when
compressed, at most MAX_BYTES once its records are inflated (counted by streaming each record
through zlib, never holding it). Every float array and scalar is reported through
reporting.values_task, inside structures and pointers too (readers/decoded.py names them); strings
and integers are not applicable; null pointers hold no value."""

from __future__ import annotations

import os
import struct
import warnings
import zlib
from contextlib import redirect_stdout

from . import ReaderError, require
from .decoded import walk
from .reporting import marker
from ..signatures import IDL_COMPRESSED
from ..storage.reads import is_url, open_binary, path_size

#: Largest file, and largest total of inflated record bytes, read.
MAX_BYTES = 256 << 20
_END_MARKER = 6


def plan(path: str) -> list:
    sio = require("scipy.io", "matlab", "reading IDL .sav files")
    if is_url(path):
        raise ReaderError("IDL save files are not read from URLs (scipy.io reads them from a "
                          "local path); not checked")
    size = path_size(path)
    if size > MAX_BYTES:
        raise ReaderError(f"IDL file of {size} bytes, over the limit of {MAX_BYTES} that fpclass "
                          "loads through scipy.io (it decodes the whole file); not checked")
    with open_binary(path) as f:
        head = f.read(4)
        if head == IDL_COMPRESSED:
            inflated = _inflated_bytes(f, size)
            if inflated > MAX_BYTES:
                raise ReaderError(f"the compressed records inflate to over {MAX_BYTES} bytes, "
                                  "the limit; not checked")
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as quiet:
            warnings.simplefilter("ignore")
            with redirect_stdout(quiet):  # readsav prints notes on some records
                variables = sio.readsav(path, python_dict=True, verbose=False)
    except MemoryError:
        raise ReaderError("scipy.io ran out of memory reading the file; not checked") from None
    except Exception as e:  # readsav raises Exception, ValueError, struct and zlib errors...
        raise ReaderError(f"not a readable IDL save file: {type(e).__name__}: {e}") from None
    tasks = [marker(path, "IDL save file")]
    for name, value in variables.items():
        tasks += walk(path, name, value)
    return tasks


def _inflated_bytes(f, size: int) -> int:
    """The bytes a compressed save file's records inflate to (as readsav inflates them), counted
    as a stream; stops past MAX_BYTES."""
    total, at = 0, 4
    while at + 16 <= size:
        f.seek(at)
        rectype, low, high = struct.unpack(">lII", f.read(12))
        if rectype == _END_MARKER:
            break
        nextrec = low + (high << 32)
        begin = at + 16
        if nextrec <= begin or nextrec > size:
            raise ReaderError(f"a record at byte {at} points to byte {nextrec}, outside the file")
        f.seek(begin)
        inflate = zlib.decompressobj()
        left = nextrec - begin
        try:
            while left and total <= MAX_BYTES:
                data = f.read(min(left, 1 << 20))
                left -= len(data)
                while data and total <= MAX_BYTES:
                    total += len(inflate.decompress(data, 1 << 20))
                    data = inflate.unconsumed_tail
        except zlib.error as e:
            raise ReaderError(f"a compressed record at byte {at} is corrupt ({e})") from None
        if total > MAX_BYTES:
            return total
        at = nextrec
    return total
