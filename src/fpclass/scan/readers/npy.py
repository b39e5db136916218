""".npy files and .npz archives (stored or deflate members), headers only; never unpickles.

An .npy header is a Python dict literal. The form NumPy writes is matched directly; any other is
read by NumPy's own safe literal parser (no pickle, no code), so both accept the same headers.
Zip archives are checked against zip bombs before any member is read: members may not overlap or
share a name, the declared compression ratio and size are bounded, and the size must match the
.npy header. A member's CRC-32 is checked when its data is read.
"""

from __future__ import annotations

import functools
import io
import re
import struct
import zipfile
import zlib
from tokenize import TokenError

import numpy as np

from . import ReaderError
from ..signatures import NPY_MAGIC
from ..storage.members import Member
from ..storage.ranges import Range
from ..tasks import problem
from .bounds import Ranges, check_count, check_shape, elements
from .reporting import float_task, marker, not_applicable, unchecked
from .zipmembers import declared_members, local_header
from ..storage.reads import file_size, open_binary, zip_file

#: A member declaring more than this many bytes per compressed byte is refused; deflate cannot
#: exceed about 1032:1, so a larger ratio means the sizes in the directory are lies.
MAX_RATIO = 1100
#: A member declaring more than this many uncompressed bytes is refused.
MAX_MEMBER_BYTES = 1 << 40
#: NumPy refuses .npy headers over 10000 characters (`max_header_size`); a character of a version
#: 3 (UTF-8) header takes at most 4 bytes, after the 12-byte preamble.
HEADER_BYTES_LIMIT = 12 + 4 * 10000
#: Compressed bytes a deflate member may take to yield its .npy header (deflate's worst case
#: adds 5 bytes per 16 KiB block); a stream that yields nothing in these is not read further.
HEADER_INPUT_LIMIT = 2 * HEADER_BYTES_LIMIT
#: The .npy format versions NumPy reads.
VERSIONS = ((1, 0), (2, 0), (3, 0))
_MAX_INTP = 2 ** 63 - 1
_ENCRYPTED = 0x1 | 0x40      # traditional and strong encryption
_PATCHED = 0x20              # compressed patched data, which zipfile refuses

_SIZE = r"(?:0|[1-9][0-9]*)"
#: The header NumPy writes: repr of the dict, padded with spaces and a newline.
_WRITTEN = re.compile(
    r"\{'descr': '([<>|=]?[A-Za-z][A-Za-z0-9\[\]]*)', 'fortran_order': (True|False), "
    rf"'shape': \((|{_SIZE},|{_SIZE}(?:, {_SIZE})+)\), \}} *\n?")
_DTYPES: dict = {}
_LABELS: dict = {}


def _header_length(preamble: bytes) -> int:
    """Bytes from the magic string to the array data, from the first 12 bytes of an .npy stream
    (their own length when they do not start one; NumPy then says what is wrong)."""
    if preamble[:6] == NPY_MAGIC and len(preamble) >= 10:
        if preamble[6] == 1:
            return 10 + struct.unpack_from("<H", preamble, 8)[0]
        if preamble[6] in (2, 3) and len(preamble) >= 12:
            return 12 + struct.unpack_from("<I", preamble, 8)[0]
    return len(preamble)


def _read_header(first, what: str):
    """(dtype, shape, fortran_order, header bytes) of the .npy stream whose first `n` bytes
    `first(n)` gives; ReaderError naming `what` for a header NumPy would not load."""
    head = first(12)
    length = _header_length(head)
    if length > HEADER_BYTES_LIMIT:
        raise ReaderError(f"{what}: .npy header of {length} bytes is over NumPy's limit of 10000 "
                          "characters")
    if length > len(head):
        head = first(length)
    try:
        return _parse_header(head) + (length,)
    except (ValueError, SyntaxError, TypeError, EOFError, struct.error, TokenError,
            RecursionError, MemoryError) as e:
        first = str(e).splitlines()[0] if str(e) else repr(e)
        raise ReaderError(f"{what}: bad .npy header: {first}") from None


@functools.lru_cache(maxsize=256)   # an archive's members often share one header
def _parse_header(head: bytes):
    """(dtype, shape, fortran_order) of the .npy header `head`; ValueError (and the others
    NumPy's reader raises) when NumPy would refuse it, also for a negative or bool dimension."""
    version = tuple(head[6:8])
    if version not in VERSIONS:
        raise ValueError(f"unsupported .npy format version {version} (NumPy reads "
                         f"{', '.join(map(str, VERSIONS))})")
    text = head[10 if version == (1, 0) else 12:]
    written = _WRITTEN.fullmatch(text.decode("latin1")) if 0 < len(text) <= 10000 else None
    if written:
        descr, fortran, sizes = written.groups()
        dtype = _DTYPES.get(descr)
        if dtype is None:
            try:
                dtype = _DTYPES.setdefault(descr, np.dtype(descr))
            except (TypeError, ValueError):
                written = None  # NumPy's reader gives its own message for this descr
    if written:
        shape = tuple(int(d) for d in sizes.split(",") if d)
        fortran = fortran == "True"
    else:
        f = io.BytesIO(head)
        np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        shape = check_shape(shape)
    _check_size(shape, dtype.itemsize)
    return dtype, shape, fortran


def _check_size(shape, itemsize):
    """ValueError when NumPy cannot make an array of `shape`: a dimension, or the byte count of
    its non-zero dimensions (also when one is zero), over the largest signed 64-bit integer."""
    nbytes = max(itemsize, 1)
    for d in shape:
        if d > _MAX_INTP:
            raise ValueError(f"dimension {d} of shape {list(shape)} is over NumPy's limit of "
                             "2**63 - 1")
        nbytes *= d or 1
    if nbytes > _MAX_INTP:
        raise ValueError(f"shape {list(shape)} is too big for NumPy: its non-zero dimensions "
                         f"make {nbytes} bytes, over 2**63 - 1")


def _task(file, name, dtype, shape, fortran, *, nbytes, exact, storage):
    """The task for an array of `dtype` and `shape` whose data is `nbytes` bytes, read from
    `storage(bytes needed)`; `exact`: the array must take all of them, else at least its own
    size."""
    label = _LABELS.get(dtype) or _LABELS.setdefault(dtype, str(dtype))  # str() takes 5 us
    if dtype.hasobject:
        return unchecked(file, name, label, shape, "object array: never unpickled, so not checked")
    need = elements(shape) * dtype.itemsize
    if nbytes < need or (exact and nbytes != need):
        return unchecked(file, name, label, shape, f"{label} shape {list(shape)} needs {need} "
                         f"data bytes, found {nbytes}" + (" (truncated?)" if nbytes < need else ""))
    if dtype.names is not None or dtype.subdtype is not None:
        return unchecked(file, name, label, shape, "structured dtype: not checked")
    if dtype.kind == "V":
        return unchecked(file, name, label, shape, f"opaque {label} data (NumPy saves bfloat16 and "
                         "float8 arrays this way): the element format is unknown, so not checked")
    if dtype.kind not in "fc" and not _ml_float(dtype):
        return not_applicable(file, name, label, shape)
    return float_task(file, name, label, shape, dtype.str if dtype.kind in "fc" else dtype.name,
                      storage(need), order="F" if fortran else "C")


def _ml_float(dtype) -> bool:
    from ... import formats
    try:
        return formats.format_of(dtype).kind.value == "float"
    except TypeError:
        return False


def plan(path: str) -> list:
    """One task for the array of a .npy file."""
    with open_binary(path) as f:
        size = file_size(f)

        def first(n):
            f.seek(0)
            return f.read(n)

        dtype, shape, fortran, start = _read_header(first, "not a valid .npy file")
    return [marker(path, "npy"),
            _task(path, "", dtype, shape, fortran, nbytes=size - start, exact=False,
                  storage=lambda need: Range(path, start, need))]


def plan_npz(path: str) -> list:
    """One task per .npy member of an .npz (zip) archive; zip bombs, members that overlap or
    share a name, and other members are problems."""
    declared = declared_members(path)
    if declared is not None:
        check_count(declared, "zip members")
    try:
        z = zip_file(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise ReaderError(f"not a valid zip (.npz) archive: {e}") from None
    with z, open_binary(path) as raw:
        infos = z.infolist()
        check_count(len(infos), "zip members")
        tasks = [marker(path, "npz")]
        spans = Ranges(file_size(raw))
        members = []
        for info in infos:
            if not info.filename:
                tasks.append(problem(path, "a zip member has an empty name (zipfile cannot say "
                                     "whether it is a folder); not read"))
                continue
            try:
                data_at, local_name = local_header(raw, info)
            except ReaderError as e:
                tasks.append(problem(path, f"member {info.filename}: {e}"))
                continue
            name = _member_name(info)
            spans.add(name, info.header_offset, data_at + info.compress_size)
            if local_name != info.orig_filename:  # zipfile refuses such a member too
                tasks.append(problem(path, f"member {info.filename}: its local file header names "
                                     f"{local_name!r} (corrupt archive)"))
                continue
            if info.filename.endswith("/"):   # a folder: zipfile reads it as an empty member
                if not _empty_folder(raw, info, data_at):
                    tasks.append(problem(path, f"folder entry {info.filename} holds data, a "
                                         "CRC-32 or flags an empty folder has not; not read"))
                continue
            members.append((name, info, data_at))
        overlapping = set()
        for name, other in spans.overlaps():
            tasks.append(problem(path, f"zip members {name} and {other} overlap (zip bomb?)"))
            overlapping.update((name, other))
        # Neither of two overlapping members is read: which bytes are whose is unknowable.
        tasks += [_member(path, raw, name, info, data_at) for name, info, data_at in members
                  if name not in overlapping]
    return _refuse_shared_names(path, tasks)


def _refuse_shared_names(path, tasks) -> list:
    """`tasks` with every member of a name that several members share unchecked, and a problem
    naming it: np.load reads only one of them."""
    count: dict = {}
    for t in tasks:
        if t.name:
            count[t.name] = count.get(t.name, 0) + 1
    shared = {name: n for name, n in count.items() if n > 1}
    if not shared:
        return tasks
    reason = "its name is shared with another member of the archive"
    return ([unchecked(path, t.name, t.dtype, t.shape, reason) if t.name in shared else t
             for t in tasks]
            + [problem(path, f"{n} members are named {name!r}: np.load reads only one of them")
               for name, n in shared.items()])


def _empty_folder(raw, info, data_at) -> bool:
    """Whether the folder entry `info` of the open archive `raw` is empty as zip writers write
    one (zipfile reads it): no bytes, CRC-32 0, stored or the empty deflate stream."""
    if info.file_size or info.CRC or info.flag_bits & (_ENCRYPTED | _PATCHED):
        return False
    if info.compress_type == zipfile.ZIP_STORED:
        return info.compress_size == 0
    if info.compress_type != zipfile.ZIP_DEFLATED or info.compress_size != 2:
        return False
    raw.seek(data_at)
    return raw.read(2) == b"\x03\x00"


def _member_name(info) -> str:
    """The tensor name of a zip member: its file name without ".npy" (as np.load names it)."""
    return info.filename[:-4] if info.filename.endswith(".npy") else info.filename


def _member(path, raw, name, info, data_at):
    if info.flag_bits & _ENCRYPTED:
        return unchecked(path, name, "?", (), "encrypted zip member")
    if info.flag_bits & _PATCHED:
        return unchecked(path, name, "?", (), "zip member of compressed patched data")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return unchecked(path, name, "?", (),
                         f"zip compression method {info.compress_type} is not supported "
                         "(stored and deflate are)")
    if info.file_size > MAX_MEMBER_BYTES:
        return unchecked(path, name, "?", (), f"member declares {info.file_size} bytes, over the "
                         f"{MAX_MEMBER_BYTES}-byte limit (zip bomb?)")
    stored = info.compress_type == zipfile.ZIP_STORED
    if not stored and info.file_size > MAX_RATIO * max(info.compress_size, 1) + 1024:
        return unchecked(path, name, "?", (), f"member declares a compression ratio over "
                         f"{MAX_RATIO}:1, beyond what deflate can produce (zip bomb?)")
    if stored and info.compress_size != info.file_size:
        return unchecked(path, name, "?", (), "stored member sizes disagree (corrupt archive)")
    try:
        dtype, shape, fortran, start = _read_header(
            lambda n: _member_start(raw, info, data_at, n), "member is not a .npy array")
    except ReaderError as e:
        return unchecked(path, name, "?", (), str(e))
    except zlib.error as e:
        return unchecked(path, name, "?", (), f"member {info.filename}: corrupt compressed data "
                         f"({e})")
    return _task(path, name, dtype, shape, fortran, nbytes=info.file_size - start, exact=True,
                 storage=lambda need: Member(path, data_at, need, info.filename, start, info.CRC,
                                             not stored, info.compress_size))


def _member_start(raw, info, data_at, n) -> bytes:
    """The first `n` bytes of zip member `info` of the open archive `raw` (fewer when the member
    is shorter, or its deflate stream yields too little from HEADER_INPUT_LIMIT bytes)."""
    n = min(n, info.file_size)
    raw.seek(data_at)
    if info.compress_type == zipfile.ZIP_STORED:
        return raw.read(n)
    inflate = zlib.decompressobj(-15)
    out = bytearray()
    left = min(info.compress_size, HEADER_INPUT_LIMIT)
    while len(out) < n and not inflate.eof:
        data = inflate.unconsumed_tail
        if not data and left:
            data = raw.read(min(left, 4096))
            left -= len(data)
        piece = inflate.decompress(data, n - len(out))
        out += piece
        if not piece and not data:
            break
    return bytes(out)
