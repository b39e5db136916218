"""Structure-aware mutations of PyTorch checkpoints for the torch fuzzer (torch_fuzz.py): pickle
opcodes re-emitted with one changed (ints: shapes, strides, offsets, counts; strings: storage keys;
globals), zip members (names, case, byte order record, compression, TorchScript pickles), the
legacy format's storage counts, key list and endianness flag, storage values, and raw bytes.
Each mutator takes (rng, file bytes) and returns (new bytes, description)."""

from __future__ import annotations

import io
import pickletools
import struct
import zipfile

from fuzz_seeds_core import zip_bytes

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------------------------
# The two containers: a zip of members, and the legacy format's five pickles then storages.

def zip_members(b: bytes) -> list:
    with zipfile.ZipFile(io.BytesIO(b)) as z:
        return [[i.filename, z.read(i), i.compress_type] for i in z.infolist()]


def zip_join(members) -> bytes:
    return zip_bytes([(n, d, m, False) for n, d, m in members])


def pickle_ends(b: bytes, start: int = 0) -> int:
    """The byte after the pickle starting at `start`."""
    for op, _, pos in pickletools.genops(io.BytesIO(b[start:])):
        if op.name == "STOP":
            return start + pos + 1
    raise ValueError("no STOP")


def legacy_split(b: bytes) -> tuple:
    """(the five pickles' bytes, storage region)."""
    parts, pos = [], 0
    for _ in range(5):
        end = pickle_ends(b, pos)
        parts.append(b[pos:end])
        pos = end
    return parts, b[pos:]


def _is_zip(b: bytes) -> bool:
    return b[:4] == b"PK\x03\x04"


# ---------------------------------------------------------------------------------------------
# Pickle opcode mutations: ops are re-emitted as their raw bytes, the mutated one re-encoded.

def ops_of(p: bytes) -> list:
    """[(opcode name, argument, raw bytes)] of one pickle."""
    out = []
    listed = list(pickletools.genops(io.BytesIO(p)))
    for k, (op, arg, pos) in enumerate(listed):
        end = listed[k + 1][2] if k + 1 < len(listed) else len(p)
        out.append((op.name, arg, p[pos:end]))
    return out


def enc_int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(1 << 31) <= v < (1 << 31):
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def enc_str(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


INTS = ("BININT1", "BININT2", "BININT", "LONG1", "INT", "LONG")
STRS = ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8")
INTERESTING_INTS = (0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 16, 255, 256, 1 << 20, 1 << 31, (1 << 31) - 1,
                    1 << 40, (1 << 62), -1, -2)
GLOBALS = [
    ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_qtensor"),
    ("torch._utils", "_rebuild_sparse_tensor"), ("torch", "FloatStorage"),
    ("torch", "DoubleStorage"), ("torch", "HalfStorage"), ("torch", "BFloat16Storage"),
    ("torch", "LongStorage"), ("torch", "ByteStorage"), ("torch", "ComplexFloatStorage"),
    ("torch", "BoolStorage"), ("torch", "float32"), ("torch", "float16"),
    ("collections", "OrderedDict"), ("collections", "Counter"), ("builtins", "set"),
    ("torch.nn.parameter", "Parameter"), ("numpy", "frombuffer"), ("os", "system"),
    ("torch", "Size"), ("torch", "tensor"), ("builtins", "float"),
]
STORAGE_KEYS = ["0", "1", "2", "3", "4", "5", "6", "7", "00", "a", "10", "é", "0 "]


def m_pickle(rng, p: bytes) -> tuple:
    """(mutated pickle, description)."""
    ops = ops_of(p)
    kind = rng.choice(["int", "int", "int", "int", "str", "global", "delete", "dup", "swap",
                       "insert", "float", "tuple", "tuple"])
    idx = list(range(len(ops) - 1))  # never the STOP
    if kind == "tuple":
        tuples = _int_tuples(ops)
        if tuples:
            first, end = rng.choice(tuples)
            how = rng.choice(["zeros", "times", "window", "one"])
            for k in range(first, end):
                v = ops[k][1]
                new = {"zeros": 0, "times": v * rng.choice([3, 64, 1000]), "window": 1,
                       "one": v if k != first else 1}[how]
                ops[k] = (ops[k][0], new, enc_int(new))
            return _emit(ops), f"int tuple at ops #{first}-{end - 1}: {how}"
        kind = "int"
    if kind == "int":
        cands = [k for k in idx if ops[k][0] in INTS]
        if cands:
            k = rng.choice(cands)
            v = ops[k][1]
            new = rng.choice([rng.choice(INTERESTING_INTS), v + 1, v - 1, v * 2, v + 4,
                              rng.randrange(0, 64)])
            ops[k] = (ops[k][0], new, enc_int(new))
            return _emit(ops), f"int #{k} {v} -> {new}"
        kind = "str"
    if kind == "str":
        cands = [k for k in idx if ops[k][0] in STRS]
        if cands:
            k = rng.choice(cands)
            v = ops[k][1]
            new = rng.choice([rng.choice(STORAGE_KEYS), v.upper(), v + "x", "", "storage", "cpu",
                              "meta", "neg", "conj", v[:-1]])
            ops[k] = (ops[k][0], new, enc_str(new))
            return _emit(ops), f"str #{k} {v!r} -> {new!r}"
        kind = "global"
    if kind == "global":
        cands = [k for k in idx if ops[k][0] in ("GLOBAL", "STACK_GLOBAL")]
        cands = [k for k in cands if ops[k][0] == "GLOBAL"]
        if cands:
            k = rng.choice(cands)
            mod, name = rng.choice(GLOBALS)
            ops[k] = ("GLOBAL", f"{mod} {name}", b"c" + f"{mod}\n{name}\n".encode())
            return _emit(ops), f"global #{k} {ops[k][1]!r} -> {mod}.{name}"
        kind = "delete"
    k = rng.choice(idx) if idx else 0
    if kind == "delete":
        del ops[k]
        return _emit(ops), f"delete op #{k}"
    if kind == "dup":
        ops.insert(k, ops[k])
        return _emit(ops), f"duplicate op #{k} {ops[k][0]}"
    if kind == "swap" and k + 2 < len(ops):
        ops[k], ops[k + 1] = ops[k + 1], ops[k]
        return _emit(ops), f"swap ops #{k} and #{k + 1}"
    if kind == "float":
        cands = [k for k in idx if ops[k][0] in INTS]
        if cands:
            k = rng.choice(cands)
            v = rng.choice([NAN, INF, -INF, 0.5])
            ops[k] = ("BINFLOAT", v, b"G" + struct.pack(">d", v))
            return _emit(ops), f"int #{k} -> float {v}"
    extra = rng.choice([b"N", b"}", b")", b"]", b"G" + struct.pack(">d", NAN), b"\x88", b"K\x01",
                        b"0", b"1", b"t"])
    ops.insert(k, ("?", None, extra))
    return _emit(ops), f"insert {extra!r} before op #{k}"


def _int_tuples(ops) -> list:
    """(first, end) op ranges of the tuples of ints (a tensor's sizes and strides)."""
    out = []
    for k, (name, _, _) in enumerate(ops):
        n = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}.get(name)
        if name == "TUPLE":
            j = k - 1
            while j >= 0 and ops[j][0] in INTS:
                j -= 1
            if j >= 0 and ops[j][0] == "MARK" and j + 1 < k:
                out.append((j + 1, k))
        elif n and k >= n and all(ops[j][0] in INTS for j in range(k - n, k)):
            out.append((k - n, k))
    return out


def _emit(ops) -> bytes:
    return b"".join(raw for _, _, raw in ops)


# ---------------------------------------------------------------------------------------------
# Mutators: each takes (rng, data) and returns (new data, description).

def m_main_pickle(rng, b):
    if _is_zip(b):
        members = zip_members(b)
        ks = [k for k, m in enumerate(members) if m[0].endswith(".pkl")]
        k = rng.choice(ks)
        members[k][1], what = m_pickle(rng, members[k][1])
        return zip_join(members), f"{members[k][0]}: {what}"
    parts, rest = legacy_split(b)
    k = rng.choice([3, 3, 3, 3, 4, 2])
    parts[k], what = m_pickle(rng, parts[k])
    return b"".join(parts) + rest, f"legacy pickle {k}: {what}"


def _patterns(width):
    return [{1: 0x7F, 2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000},
            {1: 0x7C, 2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000},
            {1: 0xFC, 2: 0xFC00, 4: 0xFF800000, 8: 0xFFF0000000000000},
            {1: 0x3C, 2: 0x3C00, 4: 0x3F800000, 8: 0x3FF0000000000000}]


def _poke(rng, data: bytes) -> tuple:
    if not data:
        return data, "empty"
    width = rng.choice([w for w in (1, 2, 4, 8) if w <= len(data)])
    i = rng.randrange(0, len(data) - width + 1)
    i -= i % width
    pattern = rng.choice(_patterns(width))[width]
    order = rng.choice(["little", "little", "big"])
    b = bytearray(data)
    b[i:i + width] = pattern.to_bytes(width, order)
    return bytes(b), f"{width}-byte {pattern:#x} ({order}) at {i}"


def m_storage_value(rng, b):
    """Write a NaN/Inf/finite pattern into a storage: a value change both readers see."""
    if _is_zip(b):
        members = zip_members(b)
        ks = [k for k, m in enumerate(members) if "/data/" in m[0] or "/constants/" in m[0]]
        if not ks:
            return b, "no storage"
        k = rng.choice(ks)
        members[k][1], what = _poke(rng, members[k][1])
        return zip_join(members), f"storage {members[k][0]}: {what}"
    parts, rest = legacy_split(b)
    if len(rest) < 8:
        return b, "no storage"
    # The first storage's count is in elements of at least a byte: its first `count` bytes are
    # its own (the next storage's count lies further on).
    count = max(0, min(struct.unpack("<q", rest[:8])[0], len(rest) - 8))
    new, what = _poke(rng, rest[8:8 + count])
    return b"".join(parts) + rest[:8] + new + rest[8 + count:], f"legacy storage 0: {what}"


def m_zip_member(rng, b):
    if not _is_zip(b):
        return m_legacy_layout(rng, b)
    members = zip_members(b)
    names = [m[0] for m in members]
    prefix = names[0].split("/")[0]
    kind = rng.choice(["case", "byteorder", "byteorder", "delete", "dup_case", "first",
                       "deflate", "constants", "truncate", "prefix", "add_storage"])
    k = rng.randrange(len(members))
    if kind == "case":
        name = members[k][0]
        head, _, tail = name.rpartition("/")
        members[k][0] = f"{head}/{tail.upper()}" if tail.upper() != tail else f"{head.upper()}/{tail}"
        what = f"rename {name} -> {members[k][0]}"
    elif kind == "byteorder":
        text = rng.choice([b"big", b"little", b"BIG", b"big\n", b"middle", b""])
        name = rng.choice([f"{prefix}/byteorder", f"{prefix}/BYTEORDER", f"{prefix}/ByteOrder"])
        members = [m for m in members if m[0].lower() != f"{prefix}/byteorder"]
        members.insert(rng.randrange(1, len(members) + 1), [name, text, zipfile.ZIP_STORED])
        what = f"byteorder record {name} = {text!r}"
    elif kind == "delete" and len(members) > 1:
        what = f"delete {members[k][0]}"
        del members[k]
    elif kind == "dup_case":
        name = members[k][0]
        head, _, tail = name.rpartition("/")
        other = f"{head}/{tail.upper()}" if tail.upper() != tail else f"{head.upper()}/{tail}"
        data, _ = _poke(rng, members[k][1])
        members.insert(rng.randrange(len(members) + 1), [other, data, zipfile.ZIP_STORED])
        what = f"add {other} beside {name}"
    elif kind == "first":
        members.insert(0, members.pop(k))
        what = f"move {members[0][0]} first"
    elif kind == "deflate":
        members[k][2] = zipfile.ZIP_DEFLATED
        what = f"deflate {members[k][0]}"
    elif kind == "constants":
        pk = next(m for m in members if m[0].endswith("data.pkl"))
        members.append([f"{prefix}/constants.pkl", pk[1], zipfile.ZIP_STORED])
        for m in list(members):
            if "/data/" in m[0]:
                members.append([m[0].replace("/data/", "/constants/"), m[1], zipfile.ZIP_STORED])
        what = "add constants.pkl (a TorchScript archive's)"
    elif kind == "truncate":
        cut = rng.randrange(len(members[k][1]) + 1)
        members[k][1] = members[k][1][:cut]
        what = f"truncate {members[k][0]} to {cut}"
    elif kind == "prefix":
        new = rng.choice(["other", "a/b", ""])
        members[k][0] = (new + "/" if new else "") + members[k][0].split("/", 1)[-1]
        what = f"member {k} -> {members[k][0]}"
    else:
        members.append([f"{prefix}/data/{rng.choice(STORAGE_KEYS)}",
                        struct.pack("<4f", NAN, 1.0, INF, -INF), zipfile.ZIP_STORED])
        what = f"add storage {members[-1][0]}"
    return zip_join(members), what


def m_legacy_layout(rng, b):
    """The legacy storage counts, the key list and the little_endian flag."""
    if _is_zip(b):
        return m_zip_member(rng, b)
    parts, rest = legacy_split(b)
    kind = rng.choice(["count", "count", "flag", "keys"])
    if kind == "flag":
        p = parts[2]
        flip = p.replace(b"\x88", b"\x89", 1) if b"\x88" in p else p.replace(b"\x89", b"\x88", 1)
        parts[2] = flip
        return b"".join(parts) + rest, "flip the little_endian flag"
    if kind == "keys":
        parts[4], what = m_pickle(rng, parts[4])
        return b"".join(parts) + rest, f"key list: {what}"
    if len(rest) < 8:
        return b, "no storage"
    v = struct.unpack("<q", rest[:8])[0]
    new = rng.choice([0, v - 1, v + 1, v * 2, 1 << 40, (1 << 62), -1, 1 << 31])
    return b"".join(parts) + struct.pack("<q", new) + rest[8:], f"first count {v} -> {new}"


def m_bytes(rng, b):
    kind = rng.choice(["truncate", "flip", "extend"])
    if kind == "truncate":
        cut = rng.randrange(len(b) + 1)
        return b[:cut], f"truncate to {cut} of {len(b)}"
    if kind == "extend":
        return b + b"\0" * rng.choice([1, 8, 100]), "append zeros"
    a = bytearray(b)
    i = rng.randrange(len(a))
    a[i] ^= 1 << rng.randrange(8)
    return bytes(a), f"flip a bit at {i}"


MUTATORS = [(m_main_pickle, 8), (m_storage_value, 4), (m_zip_member, 4), (m_legacy_layout, 3),
            (m_bytes, 1)]


