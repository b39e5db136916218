"""MATLAB v4 and v5 (v6, v7) .mat files, read through scipy.io (`fpclass[matlab]`). v7.3 files are
HDF5 behind a 512-byte user block: detect.py sends them to the HDF5 reader.

scipy.io decodes whole variables into memory, so a file is bounded before it is loaded: at most
MAX_BYTES on disk, and (v5) at most MAX_BYTES of variables as their tags declare them, a
compressed variable's size read from the first bytes of its zlib stream (a small file that
inflates past the limit is refused, never loaded). Every float array is then reported through
layout.values_task, inside structs, cells and objects too (readers/decoded.py names them);
sparse matrices by their stored values; function handles and opaque objects (classdef objects,
strings) are unchecked: scipy.io does not decode them."""

from __future__ import annotations

import os
import struct
import warnings
import zlib

from . import ReaderError
from .decoded import walk
from .layout import marker, unchecked, values_task
from ..._optional import require

#: Largest file, and largest total of declared (decompressed) variable bytes, loaded.
MAX_BYTES = 256 << 20
_MI_COMPRESSED = 15


def plan(path: str) -> list:
    sio = require("scipy.io", "matlab", "reading MATLAB .mat files")
    require("scipy.sparse", "matlab", "reading MATLAB .mat files")
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise ReaderError(f"MATLAB file of {size} bytes, over the limit of {MAX_BYTES} that "
                          "fpclass loads through scipy.io (it decodes whole variables); not checked")
    with open(path, "rb") as f:
        head = f.read(128)
        version = "v5" if len(head) == 128 and head[126:128] in (b"IM", b"MI") else "v4"
        if version == "v5":
            declared = _declared_bytes(f, size, "<" if head[126:128] == b"IM" else ">")
            if declared > MAX_BYTES:
                raise ReaderError(f"the variables declare {declared} bytes once decompressed, "
                                  f"over the limit of {MAX_BYTES}; not checked")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # mat_dtype=False: the stored types (mat_dtype=True casts complex data to real,
            # dropping the imaginary parts); a double variable MATLAB stored as integers comes
            # back as integers, which hold no NaN or Inf.
            variables = sio.loadmat(path, mat_dtype=False, squeeze_me=False,
                                    struct_as_record=True, chars_as_strings=False)
    except MemoryError:
        raise ReaderError("scipy.io ran out of memory reading the file; not checked") from None
    except Exception as e:  # scipy.io raises ValueError, TypeError, MatReadError, zlib errors...
        raise ReaderError(f"not a readable MATLAB file: {type(e).__name__}: {e}") from None
    tasks = [marker(path, f"MATLAB {version}")]
    special = _special(path, sio)
    for name, value in variables.items():
        if name in ("__header__", "__version__", "__globals__"):
            continue
        tasks += walk(path, name, value, special)
    return tasks


def _special(path, sio):
    import scipy.sparse
    opaque = (sio.matlab.MatlabOpaque, sio.matlab.MatlabFunction)

    def special(name, value):
        if scipy.sparse.issparse(value):
            return [values_task(path, name, value.data, f"sparse {value.dtype}")]
        if isinstance(value, opaque):
            kind = "function handle" if isinstance(value, sio.matlab.MatlabFunction) else \
                "opaque object (classdef object, string, table, ...)"
            return [unchecked(path, name, "opaque", getattr(value, "shape", ()),
                              f"a MATLAB {kind}, which scipy.io does not decode")]
        return None
    return special


def _declared_bytes(f, size: int, order: str) -> int:
    """The bytes the v5 file's top-level data elements declare, a compressed one's as its zlib
    stream's inner tag says (the size scipy.io inflates it to)."""
    total, at = 0, 128
    while at + 8 <= size:
        f.seek(at)
        kind, nbytes = struct.unpack(order + "II", f.read(8))
        if kind >> 16:  # small data element: 4 bytes in the tag itself
            at += 8
            continue
        if kind == _MI_COMPRESSED:
            inner = zlib.decompressobj()
            try:
                tag = inner.decompress(f.read(min(nbytes, 1 << 16)), 8)
            except zlib.error as e:
                raise ReaderError(f"a compressed variable at byte {at} is not a zlib stream "
                                  f"({e})") from None
            if len(tag) == 8:
                total += 8 + struct.unpack(order + "II", tag)[1]
            at += 8 + nbytes
        else:
            total += 8 + nbytes
            at += 8 + nbytes + (-nbytes) % 8
    return total
