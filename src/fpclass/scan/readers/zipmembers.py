"""Zip archives read member by member (.npz, PyTorch checkpoints): where a member's bytes start,
and the archive defects that make a member ambiguous."""

from __future__ import annotations

import struct

from . import ReaderError
from ..signatures import ZIP_MAGIC
from ..storage.reads import open_binary

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


def local_header(raw, info) -> tuple:
    """(the byte of the open archive `raw` where the data of member `info` starts, the file name
    its local header gives); ReaderError when the local header is missing. The local header's
    name and extra field lengths may differ from the central directory's."""
    raw.seek(info.header_offset)
    head = raw.read(_LOCAL_HEADER.size)
    if len(head) != _LOCAL_HEADER.size or head[:4] != ZIP_MAGIC:
        raise ReaderError("local file header missing (corrupt archive)")
    fields = _LOCAL_HEADER.unpack(head)
    name = raw.read(fields[-2])
    try:
        name = name.decode("utf-8" if fields[3] & 0x800 else "cp437")
    except UnicodeDecodeError:
        pass
    return info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1], name


def data_offset(raw, info) -> int:
    """The byte of the open file `raw` where the data of zip member `info` starts."""
    try:
        return local_header(raw, info)[0]
    except ReaderError as e:
        raise ReaderError(f"member {info.filename}: {e}") from None


def duplicate_names(infos) -> str:
    """The first member name that appears twice in the central directory, or ""."""
    seen: set = set()
    for info in infos:
        if info.filename in seen:
            return info.filename
        seen.add(info.filename)
    return ""


def declared_members(path: str) -> int | None:
    """How many members the archive's end-of-central-directory record (zip64's where present)
    declares, read from the file's last bytes before zipfile parses the directory (which costs
    about 500 bytes a member); None when no such record is found (zipfile then says why)."""
    with open_binary(path) as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - (1 << 16) - 22))
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + 22 > len(tail):
            return None
        count = struct.unpack_from("<H", tail, at + 10)[0]
        locator = at - 20
        if count == 0xFFFF and locator >= 0 and tail[locator:locator + 4] == b"PK\x06\x07":
            (record,) = struct.unpack_from("<Q", tail, locator + 8)
            f.seek(record)
            head = f.read(56)
            if len(head) == 56 and head[:4] == b"PK\x06\x06":
                count = struct.unpack_from("<Q", head, 32)[0]
        return count
