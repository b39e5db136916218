"""Structural mutations of GGUF files: counts, versions, metadata, tensor infos and alignment,
re-laid-out consistently or not; and the small GGUF parser they (and the GGUF oracle) use."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from fuzz_seeds_core import MAIN


_GG_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gg_skip(b, pos, vtype, depth=0):
    if vtype in _GG_SCALAR:
        return pos + _GG_SCALAR[vtype]
    if vtype == 8:
        return pos + 8 + struct.unpack_from("<Q", b, pos)[0]
    if vtype == 9 and depth < 3:
        itype, count = struct.unpack_from("<IQ", b, pos)
        pos += 12
        if itype in _GG_SCALAR:
            return pos + count * _GG_SCALAR[itype]
        if count > len(b):
            raise ValueError("array count")
        for _ in range(count):
            pos = gg_skip(b, pos, itype, depth + 1)
        return pos
    raise ValueError(f"value type {vtype}")


@dataclass
class GG:
    version: int
    kvs: list            # [key bytes, vtype, raw value bytes]
    infos: list          # [name bytes, dims list, type, offset]
    data: bytes
    alignment: int
    header_bytes: int = 0


def gg_parse(b) -> GG:
    if b[:4] != b"GGUF":
        raise ValueError("magic")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", b, 4)
    if n_tensors > len(b) or n_kv > len(b):
        raise ValueError("counts")
    pos, kvs, alignment = 24, [], 32
    for _ in range(n_kv):
        klen = struct.unpack_from("<Q", b, pos)[0]
        key = b[pos + 8:pos + 8 + klen]
        pos += 8 + klen
        vtype = struct.unpack_from("<I", b, pos)[0]
        end = gg_skip(b, pos + 4, vtype)
        if end > len(b):
            raise ValueError("kv past end")
        kvs.append([key, vtype, b[pos + 4:end]])
        if key == b"general.alignment" and vtype == 4:
            alignment = struct.unpack_from("<I", b, pos + 4)[0] or 32
        pos = end
    infos = []
    for _ in range(n_tensors):
        nlen = struct.unpack_from("<Q", b, pos)[0]
        name = b[pos + 8:pos + 8 + nlen]
        pos += 8 + nlen
        nd = struct.unpack_from("<I", b, pos)[0]
        if nd > 16:
            raise ValueError("dims")
        dims = list(struct.unpack_from(f"<{nd}Q", b, pos + 4))
        pos += 4 + 8 * nd
        gtype, off = struct.unpack_from("<IQ", b, pos)
        pos += 12
        infos.append([name, dims, gtype, off])
    if alignment & (alignment - 1) or alignment > 4096:
        alignment = 32  # lay out as usual; the declared value stays in the metadata
    start = -(-pos // alignment) * alignment
    return GG(version, kvs, infos, b[start:], alignment, start)


def gg_emit(g: GG, n_tensors=None, n_kv=None, align=None) -> bytes:
    out = bytearray(b"GGUF" + struct.pack("<IQQ", g.version,
                                          len(g.infos) if n_tensors is None else n_tensors,
                                          len(g.kvs) if n_kv is None else n_kv))
    for key, vtype, raw in g.kvs:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype) + raw
    for name, dims, gtype, off in g.infos:
        out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d % (1 << 64)) for d in dims)
        out += struct.pack("<IQ", gtype % (1 << 32), off % (1 << 64))
    align = align or g.alignment
    out += b"\0" * (-len(out) % align)
    return bytes(out) + g.data


GG_TYPES = [0, 1, 2, 3, 8, 9, 10, 12, 14, 15, 24, 26, 28, 29, 30, 39, 77, 1 << 31]


def m_gg_info(rng, files, fmt):
    g = gg_parse(files[MAIN[fmt]])
    if not g.infos:
        return "gg_info: no tensors"
    i = rng.randrange(len(g.infos))
    info = g.infos[i]
    kind = rng.choice(["dims", "dims", "ndims0", "type", "type", "offset", "offset", "name",
                       "dup", "swap", "drop"])
    what = f"{info[0].decode('utf-8', 'replace')!r} {kind}"
    if kind == "dims":
        d = info[1]
        n = math.prod(d)
        info[1] = rng.choice([[0], d + [1], d[:-1] or [1], [n + 32], [2 ** 63], [2 ** 64 - 1],
                              [2 ** 32, 2 ** 32], d[::-1], [32] + d, [d[0] * 2] + d[1:] if d else [2],
                              [0] * 9, [1] * 5])
        what += f" -> {info[1]}"
    elif kind == "ndims0":
        info[1] = []
    elif kind == "type":
        info[2] = rng.choice(GG_TYPES)
        what += f" -> {info[2]}"
    elif kind == "offset":
        others = [x[3] for x in g.infos]
        info[3] = rng.choice([info[3] + 1, info[3] + g.alignment, info[3] - g.alignment,
                              len(g.data), len(g.data) + 32, 2 ** 63, rng.choice(others), 0])
        info[3] %= 1 << 64
        what += f" -> {info[3]}"
    elif kind == "name":
        info[0] = rng.choice([b"", g.infos[i - 1][0], b"\xff\xfe", info[0] * 20])
        what += f" -> {info[0][:20]!r}"
    elif kind == "dup":
        g.infos.insert(rng.randrange(len(g.infos) + 1), [info[0], list(info[1]), info[2], info[3]])
    elif kind == "swap" and len(g.infos) > 1:
        j = rng.choice([k for k in range(len(g.infos)) if k != i])
        info[3], g.infos[j][3] = g.infos[j][3], info[3]
    else:
        del g.infos[i]
    files[MAIN[fmt]] = gg_emit(g)
    return f"gg_info: {what}"


def m_gg_counts(rng, files, fmt):
    g = gg_parse(files[MAIN[fmt]])
    which = rng.choice(["tensors", "kv", "version"])
    if which == "version":
        g.version = rng.choice([1, 2, 4, 3 << 24, 0])
        files[MAIN[fmt]] = gg_emit(g)
        return f"gg_counts: version -> {g.version}"
    n = len(g.infos) if which == "tensors" else len(g.kvs)
    v = rng.choice([n + 1, n - 1, 0, n * 2, 2 ** 32, 2 ** 63]) % (1 << 64)
    files[MAIN[fmt]] = gg_emit(g, **({"n_tensors": v} if which == "tensors" else {"n_kv": v}))
    return f"gg_counts: {which} {n} -> {v}"


def _kv(key, vtype, raw):
    return [key.encode(), vtype, raw]


def m_gg_meta(rng, files, fmt):
    g = gg_parse(files[MAIN[fmt]])
    kind = rng.choice(["align", "align", "align_type", "huge_array", "nested", "dup_key",
                       "string_len", "unknown_type", "drop"])
    at = [k for k, x in enumerate(g.kvs) if x[0] == b"general.alignment"]
    relayout = None
    if kind == "align":
        v = rng.choice([0, 1, 3, 16, 64, 48, 1 << 31, 4096])
        entry = _kv("general.alignment", 4, struct.pack("<I", v))
        if at:
            g.kvs[at[0]] = entry
        else:
            g.kvs.insert(rng.randrange(len(g.kvs) + 1), entry)
        if v and not v & (v - 1) and v <= 4096 and rng.random() < 0.5:
            relayout = v  # padded to the new alignment (tensor offsets may now be misaligned)
        what = f"general.alignment = {v}" + (" (relaid out)" if relayout else "")
    elif kind == "align_type":
        vt, raw = rng.choice([(10, struct.pack("<Q", 32)), (5, struct.pack("<i", 32)),
                              (0, b"\x20"), (8, struct.pack("<Q", 2) + b"32")])
        entry = _kv("general.alignment", vt, raw)
        if at:
            g.kvs[at[0]] = entry
        else:
            g.kvs.append(entry)
        what = f"general.alignment of type {vt}"
    elif kind == "huge_array":
        count = rng.choice([2 ** 32, 2 ** 62, 10 ** 6])
        g.kvs.append(_kv("fuzz.arr", 9, struct.pack("<IQ", rng.choice([0, 4, 8]), count) + b"\0" * 8))
        what = f"array of {count} items"
    elif kind == "nested":
        depth = rng.choice([3, 6, 50])
        raw = b""
        for _ in range(depth):
            raw = struct.pack("<IQ", 9, 1) + raw
        g.kvs.append(_kv("fuzz.nest", 9, raw[:-12] + struct.pack("<IQ", 4, 0) if raw else raw))
        what = f"arrays nested {depth} deep"
    elif kind == "dup_key" and g.kvs:
        g.kvs.append(list(rng.choice(g.kvs)))
        what = "duplicate key"
    elif kind == "string_len":
        n = rng.choice([2 ** 40, 100, 2 ** 64 - 1])
        g.kvs.append(_kv("fuzz.s", 8, struct.pack("<Q", n) + b"ab"))
        what = "string length lies"
    elif kind == "unknown_type":
        g.kvs.append(_kv("fuzz.u", rng.choice([13, 255, 2 ** 31]), b"\0" * 8))
        what = "unknown value type"
    else:
        if g.kvs:
            del g.kvs[rng.randrange(len(g.kvs))]
        what = "drop a key"
    files[MAIN[fmt]] = gg_emit(g, align=relayout)
    return f"gg_meta: {what}"


GGUF = [(m_gg_info, 6), (m_gg_counts, 2), (m_gg_meta, 3)]
