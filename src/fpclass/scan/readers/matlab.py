"""MATLAB v4 and v5 (v6, v7) .mat files, read through scipy.io (`fpclass[matlab]`). v7.3 files are
HDF5 behind a 512-byte user block: detect.py sends them to the HDF5 reader.

scipy.io decodes whole variables into memory, so a file is bounded before it is loaded: at most
MAX_BYTES on disk, and (v5) at most MAX_BYTES of variables as their tags declare them, a
compressed variable's size read from the first bytes of its zlib stream (a small file that
inflates past the limit is refused, never loaded). Every float array is then reported through
reporting.values_task, inside structs, cells and objects too (readers/decoded.py names them);
sparse matrices by their stored values; function handles and opaque objects (classdef objects,
strings) are unchecked: scipy.io does not decode them."""

from __future__ import annotations

import struct
import warnings
import zlib

from . import ReaderError, require
from .decoded import walk
from .bounds import MAX_TENSORS
from .reporting import marker, unchecked, values_task
from ..signatures import matlab5_order
from .sandbox import plan_in_child
from ..storage.reads import is_url, open_binary, path_size

#: Largest file, and largest total of declared (decompressed) variable bytes, loaded.
MAX_BYTES = 256 << 20
#: Deepest nesting of cells, structs and objects loaded (scipy.io's reader recurses in C).
MAX_DEPTH = 200
_MI_MATRIX = 14
_MI_COMPRESSED = 15
_NEEDED_BY = "reading MATLAB .mat files"


def plan(path: str) -> list:
    """Bounds checked here; the file is then loaded by scipy.io in a child process
    (readers/sandbox.py): a corrupt file can crash scipy.io's C reader."""
    require("scipy.io", "matlab", _NEEDED_BY)
    require("scipy.sparse", "matlab", _NEEDED_BY)
    if is_url(path):
        raise ReaderError("MATLAB v4/v5 files are not read from URLs (scipy.io loads them whole "
                          "in a separate process); not checked")
    size = path_size(path)
    if size > MAX_BYTES:
        raise ReaderError(f"MATLAB file of {size} bytes, over the limit of {MAX_BYTES} that "
                          "fpclass loads through scipy.io (it decodes whole variables); "
                          "not checked")
    with open_binary(path) as f:
        head = f.read(128)
        order = matlab5_order(head)
        if order:
            _check_structure(f, size, order)
    return plan_in_child("matlab", path, "scipy.io")


def load(path: str) -> list:
    """The tasks of a file plan() has bounded, from scipy.io.loadmat (run in the child)."""
    sio = require("scipy.io", "matlab", _NEEDED_BY)
    version = "v5" if matlab5_order(open_head(path)) else "v4"
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


def open_head(path: str) -> bytes:
    with open_binary(path) as f:
        return f.read(128)


def _special(path, sio):
    sparse = require("scipy.sparse", "matlab", _NEEDED_BY)
    opaque = (sio.matlab.MatlabOpaque, sio.matlab.MatlabFunction)

    def special(name, value):
        if sparse.issparse(value):
            return [values_task(path, name, value.data, f"sparse {value.dtype}")]
        if isinstance(value, opaque):
            kind = "function handle" if isinstance(value, sio.matlab.MatlabFunction) else \
                "opaque object (classdef object, string, table, ...)"
            return [unchecked(path, name, "opaque", getattr(value, "shape", ()),
                              f"a MATLAB {kind}, which scipy.io does not decode")]
        return None
    return special


def _check_structure(f, size: int, order: str) -> None:
    """ReaderError unless the v5 file's variables declare at most MAX_BYTES once decompressed, at
    most MAX_DEPTH levels of cells and structs and at most MAX_TENSORS arrays in all, checked on
    the file's own tags before scipy.io loads anything (its reader recurses in C: a small file of
    deeply nested cells would overflow the stack and kill the process)."""
    declared = nodes = 0
    at = 128
    while at + 8 <= size:
        f.seek(at)
        kind, nbytes = struct.unpack(order + "II", f.read(8))
        if kind >> 16:  # small data element: 4 bytes in the tag itself
            at += 8
            continue
        if kind == _MI_COMPRESSED:
            element = _inflate(f, nbytes, MAX_BYTES - declared, at)
            at += 8 + nbytes
        else:
            element = f.read(min(nbytes, MAX_BYTES - declared + 1))
            if len(element) < min(nbytes, MAX_BYTES - declared + 1):
                raise ReaderError(f"the variable at byte {at} is cut short by the end of file")
            at += 8 + nbytes + (-nbytes) % 8
            element = struct.pack(order + "II", kind, nbytes) + element
        declared += len(element)
        if declared > MAX_BYTES:
            raise ReaderError(f"the variables declare over {MAX_BYTES} bytes once decompressed, "
                              "the limit; not checked")
        nodes += _count_arrays(element, order)


def _inflate(f, nbytes: int, room: int, at: int) -> bytes:
    """A compressed variable's element, inflated as a stream; ReaderError past `room` bytes."""
    inflate = zlib.decompressobj()
    out, left = [], nbytes
    total = 0
    try:
        while left > 0:
            data = f.read(min(left, 1 << 20))
            if not data:
                break
            left -= len(data)
            while data:
                piece = inflate.decompress(data, 1 << 20)
                total += len(piece)
                if total > room:
                    raise ReaderError(f"the variables declare over {MAX_BYTES} bytes once "
                                      "decompressed, the limit; not checked")
                out.append(piece)
                data = inflate.unconsumed_tail
    except zlib.error as e:
        raise ReaderError(f"the compressed variable at byte {at} is corrupt ({e})") from None
    return b"".join(out)


def _count_arrays(element: bytes, order: str) -> int:
    """Arrays (miMATRIX elements) inside one top-level element, walked without recursion;
    ReaderError past MAX_DEPTH levels or MAX_TENSORS arrays."""
    count = 0
    stack = [(0, len(element), 0)]
    while stack:
        begin, end, depth = stack.pop()
        if end - begin < 8:
            continue
        kind, nbytes = struct.unpack_from(order + "II", element, begin)
        if kind != _MI_MATRIX:
            continue
        count += 1
        if depth > MAX_DEPTH or count > MAX_TENSORS:
            raise ReaderError(f"cells and structs nested over {MAX_DEPTH} deep or holding over "
                              f"{MAX_TENSORS} arrays, the limits; not checked")
        at, stop = begin + 8, min(end, begin + 8 + nbytes)
        while at + 8 <= stop:  # the subelements: flags, dims, name, ..., child arrays
            kind, size = struct.unpack_from(order + "II", element, at)
            if kind >> 16:
                at += 8
                continue
            if kind == _MI_MATRIX:
                stack.append((at, stop, depth + 1))
            at += 8 + size + (-size) % 8
    return count
