"""Zip archives read member by member (.npz, PyTorch checkpoints): where a member's bytes start,
and the archive defects that make a member ambiguous."""

from __future__ import annotations

import struct

from . import ReaderError

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


def data_offset(raw, info) -> int:
    """The byte of the open file `raw` where the data of zip member `info` starts (after its
    local header, whose name and extra field lengths may differ from the central directory's)."""
    raw.seek(info.header_offset)
    head = raw.read(_LOCAL_HEADER.size)
    if len(head) != _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
        raise ReaderError(f"member {info.filename}: local file header missing (corrupt archive)")
    fields = _LOCAL_HEADER.unpack(head)
    return info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]


def duplicate_names(infos) -> str:
    """The first member name that appears twice in the central directory, or ""."""
    seen: set = set()
    for info in infos:
        if info.filename in seen:
            return info.filename
        seen.add(info.filename)
    return ""
