"""Structural mutations of .npz files: zip local headers, central directory and end record, CRCs,
duplicate and rebuilt members, prefixes, and the .npy members inside."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np

from fuzz_mutations_headers import m_npy_dict, m_npy_header
from fuzz_seeds_core import MAIN, NAN, npy_bytes, planted_array, zip_bytes


_LOCAL = {"version": (4, "<H"), "flags": (6, "<H"), "method": (8, "<H"), "crc": (14, "<I"),
          "csize": (18, "<I"), "usize": (22, "<I"), "name_len": (26, "<H"),
          "extra_len": (28, "<H")}
_CENTRAL = {"flags": (8, "<H"), "method": (10, "<H"), "crc": (16, "<I"), "csize": (20, "<I"),
            "usize": (24, "<I"), "name_len": (28, "<H"), "extra_len": (30, "<H"),
            "comment_len": (32, "<H"), "disk": (34, "<H"), "offset": (42, "<I")}
_EOCD = {"disk_entries": (8, "<H"), "entries": (10, "<H"), "cd_size": (12, "<I"),
         "cd_offset": (16, "<I"), "comment_len": (20, "<H")}


def zip_layout(b):
    """(eocd offset, [central entry offsets], [local header offsets]) of zip bytes."""
    eocd = b.rindex(b"PK\x05\x06")
    central, local = [], []
    pos = b.find(b"PK\x01\x02")
    while pos >= 0 and pos < eocd:
        central.append(pos)
        n, m, k = struct.unpack_from("<3H", b, pos + 28)
        local.append(struct.unpack_from("<I", b, pos + 42)[0])
        pos = b.find(b"PK\x01\x02", pos + 46 + n + m + k)
    return eocd, central, local


def _mutated(rng, v, bits, others=()):
    top = (1 << bits) - 1
    return rng.choice([v + 1, v - 1, 0, top, v ^ 1, v + 2 ** 16, rng.randrange(top + 1)]
                      + list(others)) & top


def m_zip_field(rng, files, fmt):
    b = bytearray(files[MAIN[fmt]])
    eocd, central, local = zip_layout(bytes(b))
    where = rng.choice(["central", "local", "eocd", "central"])
    if where == "eocd":
        fieldname = rng.choice(list(_EOCD))
        off, pack = _EOCD[fieldname]
        at = eocd
    else:
        table = _CENTRAL if where == "central" else _LOCAL
        heads = central if where == "central" else [o for o in local if o < len(b)]
        if not heads:
            return "zip_field: no entries"
        at = rng.choice(heads)
        fieldname = rng.choice(list(table))
        off, pack = table[fieldname]
    v = struct.unpack_from(pack, b, at + off)[0]
    others = ([struct.unpack_from("<I", b, c + 42)[0] for c in central]
              if fieldname == "offset" else [])
    if fieldname == "method":
        others = [0, 8, 12, 14, 99]
    new = _mutated(rng, v, 8 * struct.calcsize(pack), others)
    struct.pack_into(pack, b, at + off, new)
    files[MAIN[fmt]] = bytes(b)
    return f"zip_field: {where} {fieldname} {v} -> {new}"


def m_zip_crc(rng, files, fmt):
    """One member's CRC changed in both headers: the structure agrees, the data does not."""
    b = bytearray(files[MAIN[fmt]])
    _, central, local = zip_layout(bytes(b))
    i = rng.randrange(len(central))
    crc = struct.unpack_from("<I", b, central[i] + 16)[0]
    new = crc ^ (1 << rng.randrange(32))
    struct.pack_into("<I", b, central[i] + 16, new)
    if local[i] + 18 <= len(b):
        struct.pack_into("<I", b, local[i] + 14, new)
    files[MAIN[fmt]] = bytes(b)
    return f"zip_crc: member {i} crc {crc:#x} -> {new:#x} in both headers"


def m_zip_member_data(rng, files, fmt):
    """A byte of a member's (stored or compressed) data changed; the CRC is left alone."""
    b = bytearray(files[MAIN[fmt]])
    _, central, local = zip_layout(bytes(b))
    i = rng.randrange(len(central))
    lo = local[i]
    n, m = struct.unpack_from("<2H", b, lo + 26)
    start = lo + 30 + n + m
    size = struct.unpack_from("<I", b, central[i] + 20)[0]
    if size in (0, 0xFFFFFFFF) or start + size > len(b):
        size = max(1, min(64, len(b) - start))
    # past the .npy header of a stored member, so the values change, not the header
    j = start + rng.randrange(min(size, 200) if rng.random() < 0.3 else size)
    if j >= len(b):
        return "zip_member_data: out of range"
    b[j] = rng.choice([b[j] ^ 0x01, b[j] ^ 0x80, 0xFF, 0x7F, 0x00])
    files[MAIN[fmt]] = bytes(b)
    return f"zip_member_data: member {i} byte {j - start}"


def _members(b):
    with zipfile.ZipFile(io.BytesIO(b)) as z:
        return [(i.filename, z.read(i), i.compress_type, False) for i in z.infolist()]


def m_zip_rebuild(rng, files, fmt):
    """A valid zip with different members: duplicate names, renames, other compressions, or a
    member whose .npy bytes are mutated (the zip itself consistent)."""
    members = _members(files[MAIN[fmt]])
    kind = rng.choice(["dup", "dup", "rename", "method", "npy", "npy", "npy", "drop", "dir",
                       "nonnpy"])
    i = rng.randrange(len(members))
    name, data, method, z64 = members[i]
    what = f"{kind} {name}"
    if kind == "dup":
        other = npy_bytes(rng.choice([planted_array((2,), np.float32, {}, 9), planted_array((2,), np.float32, {0: NAN}, 9),
                                 planted_array((3, 4), np.float32, {}, 8)]))
        pair = [(name, other, method, z64)]
        members = members[:i] + pair + members[i:] if rng.random() < 0.5 else members + pair
    elif kind == "rename":
        new = rng.choice([name[:-4], name.upper(), "../" + name, "/" + name, "dir/" + name,
                          name + ".npy", "", members[i - 1][0]])
        members[i] = (new, data, method, z64)
        what += f" -> {new!r}"
    elif kind == "method":
        members[i] = (name, data, rng.choice([zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA,
                                              zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]), z64)
        what += f" -> method {members[i][2]}"
    elif kind == "npy":
        box = {"m": data}
        try:
            sub = rng.choice([m_npy_dict, m_npy_dict, m_npy_header, _npy_data])(rng, box, fmt, key="m")
        except Exception as e:
            sub = f"(npy mutation failed: {type(e).__name__})"
        members[i] = (name, box["m"], method, z64)
        what += f": {sub}"
    elif kind == "drop":
        del members[i]
    elif kind == "dir":
        members.insert(i, ("sub/", b"", zipfile.ZIP_STORED, False))
    else:
        members.insert(i, ("notes.txt", b"hello", zipfile.ZIP_STORED, False))
    files[MAIN[fmt]] = zip_bytes(members)
    return f"zip_rebuild: {what}"


def _npy_data(rng, files, fmt, key=None):
    key = key or MAIN[fmt]
    b = files[key]
    k = rng.choice([1, 2, 4, 8, 16])
    if rng.random() < 0.5:
        files[key] = b[:-k]
        return f"npy data truncated by {k}"
    files[key] = b + b"\x00" * k
    return f"npy data extended by {k}"


def m_zip_prefix(rng, files, fmt):
    pre = rng.choice([b"\0" * 16, b"MZ" + b"\0" * 62, b"PK\x03\x04" + b"\0" * 26])
    files[MAIN[fmt]] = pre + files[MAIN[fmt]]
    return f"zip_prefix: {len(pre)} bytes"


NPZ = [(m_zip_field, 5), (m_zip_crc, 1), (m_zip_member_data, 2), (m_zip_rebuild, 4),
       (m_zip_prefix, 1)]
