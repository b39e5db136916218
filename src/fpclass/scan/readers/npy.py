""".npy files and .npz archives (stored or deflate members), headers only; never unpickles.

An .npy header is a Python dict literal read by NumPy's safe literal parser (no pickle, no code).
Zip archives are checked against zip bombs before any member is read: members may not overlap,
the declared compression ratio and size are bounded, and the size must match the .npy header.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile

import numpy as np

from . import ReaderError
from ..tasks import DEFLATE, RAW, problem
from .layout import elements, float_task, marker, not_applicable, overlaps, unchecked

#: A member declaring more than this many bytes per compressed byte is refused; deflate cannot
#: exceed about 1032:1, so a larger ratio means the sizes in the directory are lies.
MAX_RATIO = 1100
#: A member declaring more than this many uncompressed bytes is refused.
MAX_MEMBER_BYTES = 1 << 40
MAX_MEMBERS = 1_000_000
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


def _header(f, what: str):
    """(dtype, shape, fortran_order, header bytes) of the .npy stream `f` at its start."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, SyntaxError, TypeError, EOFError, struct.error) as e:
        raise ReaderError(f"{what}: bad .npy header: {str(e).splitlines()[0] if str(e) else e!r}") from None
    return dtype, tuple(shape), fortran, f.tell()


def _task(file, name, dtype, shape, fortran, *, source, offset, nbytes, storage, member=""):
    label = str(dtype)
    if dtype.hasobject:
        return unchecked(file, name, label, shape, "object array: never unpickled, so not checked")
    if dtype.names is not None or dtype.subdtype is not None:
        return unchecked(file, name, label, shape, "structured dtype: not checked")
    if dtype.kind == "V":
        return unchecked(file, name, label, shape, f"opaque {label} data (NumPy saves bfloat16 and "
                         "float8 arrays this way): the element format is unknown, so not checked")
    if dtype.kind not in "fc" and not _ml_float(dtype):
        return not_applicable(file, name, label, shape)
    need = elements(shape) * dtype.itemsize
    if nbytes < need:
        return unchecked(file, name, label, shape,
                         f"{label} shape {list(shape)} needs {need} data bytes, found {nbytes} "
                         "(truncated?)")
    return float_task(file, name, label, shape, dtype.str if dtype.kind in "fc" else dtype.name,
                      source=source, offset=offset, nbytes=need, storage=storage, member=member,
                      order="F" if fortran else "C")


def _ml_float(dtype) -> bool:
    from ... import formats
    try:
        return formats.format_of(dtype).kind.value == "float"
    except TypeError:
        return False


def plan(path: str) -> list:
    """One task for the array of a .npy file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        dtype, shape, fortran, start = _header(f, "not a valid .npy file")
    return [marker(path, "npy"),
            _task(path, "", dtype, shape, fortran, source=path, offset=start,
                  nbytes=size - start, storage=RAW)]


def plan_npz(path: str) -> list:
    """One task per .npy member of an .npz (zip) archive; zip bombs and other members are
    problems."""
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise ReaderError(f"not a valid zip (.npz) archive: {e}") from None
    with z:
        infos = z.infolist()
        if len(infos) > MAX_MEMBERS:
            raise ReaderError(f"{len(infos)} members is over the limit of {MAX_MEMBERS}")
        tasks = [marker(path, "npz")]
        spans = []
        with open(path, "rb") as raw:
            for info in infos:
                if info.is_dir():
                    continue
                try:
                    data_at = _data_offset(raw, info)
                except ReaderError as e:
                    tasks.append(problem(path, f"member {info.filename}: {e}"))
                    continue
                spans.append((_member_name(info), info.header_offset, data_at + info.compress_size))
                tasks.append(_member(path, z, raw, info, data_at))
        for name, other in overlaps(spans):
            tasks.append(problem(path, f"zip members {name} and {other} overlap (zip bomb?)"))
            tasks = [t for t in tasks if t.name not in (name, other)]
    return tasks


def _data_offset(raw, info) -> int:
    raw.seek(info.header_offset)
    head = raw.read(_LOCAL_HEADER.size)
    if len(head) != _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
        raise ReaderError("local file header missing (corrupt archive)")
    fields = _LOCAL_HEADER.unpack(head)
    return info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]


def _member_name(info) -> str:
    """The tensor name of a zip member: its file name without ".npy" (as np.load names it)."""
    return info.filename[:-4] if info.filename.endswith(".npy") else info.filename


def _member(path, z, raw, info, data_at):
    name = _member_name(info)
    if info.flag_bits & 0x1:
        return unchecked(path, name, "?", (), "encrypted zip member")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return unchecked(path, name, "?", (),
                         f"zip compression method {info.compress_type} is not supported "
                         "(stored and deflate are)")
    if info.file_size > MAX_MEMBER_BYTES:
        return unchecked(path, name, "?", (), f"member declares {info.file_size} bytes, over the "
                         f"{MAX_MEMBER_BYTES}-byte limit (zip bomb?)")
    if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > MAX_RATIO * max(
            info.compress_size, 1) + 1024:
        return unchecked(path, name, "?", (), f"member declares a compression ratio over "
                         f"{MAX_RATIO}:1, beyond what deflate can produce (zip bomb?)")
    try:
        if info.compress_type == zipfile.ZIP_STORED:
            if info.compress_size != info.file_size:
                raise ReaderError("stored member sizes disagree (corrupt archive)")
            raw.seek(data_at)
            dtype, shape, fortran, start = _header(io.BytesIO(raw.read(min(info.file_size, 1 << 20))),
                                                   "member is not a .npy array")
            return _task(path, name, dtype, shape, fortran, source=path, offset=data_at + start,
                         nbytes=info.file_size - start, storage=RAW)
        with z.open(info) as stream:
            head = stream.read(min(info.file_size, 1 << 20))
        dtype, shape, fortran, start = _header(io.BytesIO(head), "member is not a .npy array")
        need = elements(shape) * dtype.itemsize
        if not dtype.hasobject and info.file_size - start != need:
            return unchecked(path, name, str(dtype), shape, f"member holds {info.file_size - start} "
                             f"data bytes, shape {list(shape)} of {dtype} needs {need}")
        return _task(path, name, dtype, shape, fortran, source=path, offset=start,
                     nbytes=info.file_size - start, storage=DEFLATE, member=info.filename)
    except ReaderError as e:
        return unchecked(path, name, "?", (), str(e))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        return unchecked(path, name, "?", (), f"cannot read member: {e}")
