"""Structural mutations of the two formats whose structure is a length-prefixed text header:
safetensors (the 8-byte length, the JSON header edited as JSON and as text, the data) and .npy
(the magic and version, the header length, the header dict edited as a dict and as text)."""

from __future__ import annotations

import ast
import json
import math
import struct

from fuzz_seeds_core import MAIN


# ---------------------------------------------------------------------------------------------
# safetensors

def st_split(b):
    n = struct.unpack("<Q", b[:8])[0]
    doc = json.loads(b[8:8 + n].decode("utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("header is not an object")
    return doc, b[8 + n:]


def st_join(doc, data, pad=True, compact=False):
    text = json.dumps(doc, separators=(",", ":") if compact else None).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


ST_DTYPES = ["F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F4",
             "C64", "I64", "I32", "U8", "BOOL", "f32", "F32 ", "", None, 4, "Q8_0"]


def _st_shape_edit(rng, shape):
    n = math.prod(shape) if all(isinstance(d, int) for d in shape) else 1
    return rng.choice([[], [0], shape + [1], shape[:-1], [1] + shape, [n], [n + 1], [-1],
                       [-n] + shape[1:], [2 ** 40], [2 ** 64], [2 ** 63, 0], [2 ** 32, 2 ** 32],
                       [float(n)], [str(n)], None, [[n]], [True] * len(shape), shape[::-1],
                       [0, 2 ** 62]])


def _st_offsets_edit(rng, offs, others, length):
    b, e = offs if isinstance(offs, list) and len(offs) == 2 else (0, 0)
    other = rng.choice(others) if others else [0, 0]
    return rng.choice([[e, b], [b, e + 1], [b, max(b, e - 1)], [max(0, b - 1), e], [b + 4, e + 4],
                       [0, e - b] if isinstance(e, int) else [0, 0], other, [b, b], [e, e],
                       [b, e, e], [b], [float(b), float(e)], [-1, e], [b, 2 ** 64], [b, 2 ** 63],
                       [str(b), str(e)], None, [False, True], [b, length], [length, length],
                       [0, length]])


def m_st_json(rng, files, fmt):
    b = files[MAIN[fmt]]
    doc, data = st_split(b)
    names = [k for k in doc if k != "__metadata__"]
    entries = [v for k, v in doc.items() if k != "__metadata__" and isinstance(v, dict)]
    others = [v.get("data_offsets") for v in entries]
    kind = rng.choice(["shape", "dtype", "offsets", "offsets", "drop_key", "extra_key", "entry",
                       "delete", "duplicate", "swap", "reorder", "metadata", "rename", "zero"])
    what = kind
    if kind in ("shape", "dtype", "offsets", "drop_key", "extra_key", "entry") and names:
        name = rng.choice(names)
        e = doc[name]
        what = f"{kind} of {name!r}"
        if not isinstance(e, dict) or kind == "entry":
            doc[name] = rng.choice([[], "F32", None, 3, {"dtype": "F32"}, {}])
        elif kind == "shape":
            shape = e.get("shape") if isinstance(e.get("shape"), list) else []
            e["shape"] = _st_shape_edit(rng, shape)
            what += f" -> {e['shape']}"
        elif kind == "dtype":
            e["dtype"] = rng.choice(ST_DTYPES)
            what += f" -> {e['dtype']!r}"
        elif kind == "offsets":
            e["data_offsets"] = _st_offsets_edit(rng, e.get("data_offsets"), others, len(data))
            what += f" -> {e['data_offsets']}"
        elif kind == "drop_key":
            key = rng.choice(["dtype", "shape", "data_offsets"])
            e.pop(key, None)
            what += f": {key}"
        else:
            e[rng.choice(["extra", "dtype ", "__proto__"])] = rng.choice([1, "x", None, [1]])
    elif kind == "delete" and names:
        name = rng.choice(names)
        del doc[name]
        what = f"delete {name!r}"
    elif kind == "duplicate" and names:
        name = rng.choice(names)
        doc[name + "_copy"] = json.loads(json.dumps(doc[name]))
        what = f"duplicate {name!r}"
    elif kind == "swap" and len(entries) >= 2:
        x, y = rng.sample(entries, 2)
        x["data_offsets"], y["data_offsets"] = y.get("data_offsets"), x.get("data_offsets")
        what = "swap data_offsets of two tensors"
    elif kind == "reorder":
        items = list(doc.items())
        rng.shuffle(items)
        doc = dict(items)
    elif kind == "metadata":
        doc["__metadata__"] = rng.choice([[], "x", {"a": 1}, {"a": None}, {"a": {"b": "c"}},
                                          None, {"format": "pt", "": ""}])
        what = f"__metadata__ -> {doc['__metadata__']!r}"
    elif kind == "rename" and names:
        name = rng.choice(names)
        new = rng.choice(["", "__metadata__", "a" * 300, "\u00e9\u4e2d", "x\x00y", name.upper()])
        doc[new] = doc.pop(name)
        what = f"rename {name!r} -> {new!r}"
    else:  # zero: add a zero-size tensor at some offset
        at = rng.choice([0, len(data), len(data) // 2, len(data) + 8])
        doc["zero"] = {"dtype": rng.choice(["F32", "F16"]), "shape": rng.choice([[0], [0, 3], []]),
                       "data_offsets": [at, at]}
        what = f"zero-size tensor at {at} shape {doc['zero']['shape']}"
    files[MAIN[fmt]] = st_join(doc, data, pad=rng.random() < 0.8, compact=rng.random() < 0.3)
    return f"st_json: {what}"


def m_st_length(rng, files, fmt):
    b = files[MAIN[fmt]]
    n = struct.unpack("<Q", b[:8])[0]
    v = rng.choice([n - 8, n - 1, n + 1, n + 8, 0, 2, len(b) - 8, len(b) - 7, len(b),
                    100_000_001, 1 << 63, rng.randrange(1 << 64)])
    v %= 1 << 64
    files[MAIN[fmt]] = struct.pack("<Q", v) + b[8:]
    return f"st_length: {n} -> {v}"


def m_st_text(rng, files, fmt):
    """Text edits of the JSON that a JSON round trip cannot make; the length is kept right."""
    b = files[MAIN[fmt]]
    n = struct.unpack("<Q", b[:8])[0]
    text, data = b[8:8 + n], b[8 + n:]
    body = text.rstrip(b" ")
    kind = rng.choice(["dup_key", "bom", "trailing", "number", "nonutf8", "nul", "empty",
                       "nested", "whitespace", "dup_key"])
    if kind == "dup_key":
        # the first tensor entry repeated under the same name, pointing at other bytes
        doc = json.loads(body)
        names = [k for k in doc if k != "__metadata__"]
        if not names:
            return "st_text: no tensor"
        name = rng.choice(names)
        e = dict(doc[name]) if isinstance(doc[name], dict) else {}
        e["data_offsets"] = rng.choice([[0, 0], [0, len(data)], e.get("data_offsets", [0, 0])])
        extra = json.dumps(name).encode() + b":" + json.dumps(e).encode()
        body = body[:-1] + (b"," if len(doc) else b"") + extra + b"}"
        if rng.random() < 0.5:  # the duplicate first instead of last
            body = b"{" + extra + (b"," if len(doc) else b"") + body[1:-len(extra) - 2] + b"}"
    elif kind == "bom":
        body = b"\xef\xbb\xbf" + body
    elif kind == "trailing":
        body = body + rng.choice([b"x", b"{}", b"\0", b"\n}"])
    elif kind == "number":
        nums = [m for m in range(len(body)) if body[m:m + 1].isdigit()
                and not body[m - 1:m].isdigit()]
        if not nums:
            return "st_text: no number"
        i = rng.choice(nums)
        j = i
        while j < len(body) and body[j:j + 1].isdigit():
            j += 1
        body = body[:i] + rng.choice([b"1e3", b"1.0", b"-0", b"1E400", b"0x10", b"01", b"NaN",
                                      b"Infinity", b"99999999999999999999999"]) + body[j:]
    elif kind == "nonutf8":
        i = body.find(b'"') + 1
        body = body[:i] + b"\xff\xfe" + body[i:]
    elif kind == "nul":
        body = body + b"\0" * 8
    elif kind == "empty":
        body = rng.choice([b"{}", b"", b"[]", b"null", b'{"__metadata__":{}}'])
    elif kind == "nested":
        body = b'{"a":' * 200 + b"{}" + b"}" * 200
    else:
        body = body.replace(b",", b" ,\n\t")
    text = body + b" " * (-len(body) % 8)
    files[MAIN[fmt]] = struct.pack("<Q", len(text)) + text + data
    return f"st_text: {kind}"


def m_st_empty_header(rng, files, fmt):
    """The known trap: a header declaring nothing, followed by (NaN) data."""
    _, data = st_split(files[MAIN[fmt]])
    header = rng.choice([b"{}", b'{"__metadata__":{"format":"pt"}}'])
    header += b" " * (-len(header) % 8)
    files[MAIN[fmt]] = struct.pack("<Q", len(header)) + header + data
    return f"st_empty_header: {header.strip()!r} + {len(data)} data bytes"


SAFETENSORS = [(m_st_json, 6), (m_st_length, 1), (m_st_text, 2), (m_st_empty_header, 1)]


# ---------------------------------------------------------------------------------------------
# .npy

def npy_split(b):
    """(version, header dict, data) of .npy bytes; ValueError when not parseable."""
    if b[:6] != b"\x93NUMPY":
        raise ValueError("no magic")
    major = b[6]
    if major == 1:
        n, start = struct.unpack("<H", b[8:10])[0], 10
    else:
        n, start = struct.unpack("<I", b[8:12])[0], 12
    d = ast.literal_eval(b[start:start + n].decode("latin1"))
    if not isinstance(d, dict):
        raise ValueError("header is not a dict")
    return (b[6], b[7]), d, b[start + n:]


def npy_join(version, text: bytes, data, pad=True, newline=True):
    if newline:
        text += b"\n"
    hlen_size = 2 if version[0] == 1 else 4
    if pad:
        text = text[:-1] + b" " * (-(10 + hlen_size - 2 + len(text)) % 64) + text[-1:]
    pack = "<H" if hlen_size == 2 else "<I"
    n = len(text) % (1 << (8 * hlen_size))
    return b"\x93NUMPY" + bytes(version) + struct.pack(pack, n) + text + data


def _dict_text(d):
    return ("{" + "".join(f"{k!r}: {v!r}, " for k, v in d.items()) + "}").encode("latin1")


NPY_DESCRS = ["<f4", ">f4", "<f8", ">f8", "<f2", ">f2", "<c8", ">c16", "<f16", "|u1", "<i4",
              "|b1", "|V4", "|V2", "<M8[s]", "O", "|S4", "<U1", [("a", "<f4")],
              ("<f4", (2,)), "<f3", "bfloat16", "float8_e4m3fn", "f4", "=f8", "|f1"]


def m_npy_dict(rng, files, fmt, key=None):
    key = key or MAIN[fmt]
    version, d, data = npy_split(files[key])
    shape = d.get("shape") if isinstance(d.get("shape"), tuple) else (1,)
    n = math.prod(shape) if all(isinstance(x, int) for x in shape) else 1
    kind = rng.choice(["descr", "descr", "shape", "shape", "shape", "fortran", "extra", "missing"])
    if kind == "descr":
        d["descr"] = rng.choice(NPY_DESCRS)
        what = f"descr -> {d['descr']!r}"
    elif kind == "shape":
        d["shape"] = rng.choice([(), (0,), (n,), (n + 1,), (max(n - 1, 0),), (-1,), (-n,) + shape[1:],
                                 (2 ** 62,), (2 ** 64,), (2 ** 63, 0), (n, 0), (1,) + shape,
                                 shape[::-1], (2.0,), ("2",), None, (True,), [n], (-1, -n),
                                 (2 ** 32, 2 ** 32), (0, -1)])
        what = f"shape -> {d['shape']!r}"
    elif kind == "fortran":
        d["fortran_order"] = rng.choice([not d.get("fortran_order"), 1, "yes", None])
        what = f"fortran_order -> {d['fortran_order']!r}"
    elif kind == "extra":
        d["extra"] = 1
        what = "extra key"
    else:
        k = rng.choice(["descr", "shape", "fortran_order"])
        d.pop(k, None)
        what = f"missing {k}"
    files[key] = npy_join(version, _dict_text(d), data, pad=rng.random() < 0.9)
    return f"npy_dict: {what}"


def m_npy_header(rng, files, fmt, key=None):
    """Version bytes, header-length field and header text, edited below the dict level."""
    key = key or MAIN[fmt]
    b = files[key]
    version, d, data = npy_split(b)
    kind = rng.choice(["version", "hlen", "text", "nonewline", "version_relayout"])
    if kind == "version":
        v = rng.choice([(0, 0), (2, 0), (3, 0), (4, 0), (1, 1), (0xFF, 0)])
        files[key] = b[:6] + bytes(v) + b[8:]
        return f"npy_header: version bytes -> {v}"
    if kind == "version_relayout":
        v = rng.choice([(1, 0), (2, 0), (3, 0)])
        files[key] = npy_join(v, _dict_text(d), data)
        return f"npy_header: rewritten as version {v}"
    hlen_at, pack = (8, "<H") if version[0] == 1 else (8, "<I")
    if kind == "hlen":
        n = struct.unpack_from(pack, b, hlen_at)[0]
        v = rng.choice([n - 1, n + 1, n - 16, n + 16, 0, len(b), 0xFFFF])
        v %= 1 << (8 * struct.calcsize(pack))
        files[key] = b[:hlen_at] + struct.pack(pack, v) + b[hlen_at + struct.calcsize(pack):]
        return f"npy_header: header length {n} -> {v}"
    text = _dict_text(d)
    if kind == "nonewline":
        files[key] = npy_join(version, text, data, newline=False)
        return "npy_header: no newline"
    edits = [(b"'descr'", b"'descr' "), (b"'shape': (", b"'shape':("), (b", }", b"}"),
             (b"False", b"0"), (b"True", b"1"), (b"'", b'"'), (b"{", b"{ 'descr': '<f8', "),
             (b"(", b"[("), (b" ", b"\t")]
    old, new = rng.choice(edits)
    files[key] = npy_join(version, text.replace(old, new, 1), data)
    return f"npy_header: text {old!r} -> {new!r}"


NPY = [(m_npy_dict, 5), (m_npy_header, 2)]
