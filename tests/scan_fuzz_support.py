"""Structural fuzzing of fpclass.scan: seed files of every format with planted NaN/±Inf, mutations
that know each format's structure, independent readers (the oracles), and a supervisor that runs
batches of cases in child processes under time and memory limits. No tests here.

    python tests/scan_fuzz_support.py show FORMAT INDEX [--seed S] [--out DIR]   # one case's files

A case is (base seed, format, index): the same triple always gives the same bytes.
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import queue
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

FORMATS = ("safetensors", "npy", "npz", "onnx", "gguf")
MAIN = {"safetensors": "case.safetensors", "npy": "case.npy", "npz": "case.npz",
        "onnx": "case.onnx", "gguf": "case.gguf"}
#: ONNX external data lives in this sibling of the model.
ONNX_DATA = "case.data"

#: Limits per case: a scan that runs longer is a hang, one whose peak RSS passes MEMORY_MB fails.
SCAN_SECONDS = 10.0
ORACLE_SECONDS = 3.0
MEMORY_MB = 512
#: Address-space cap on the worker above what it maps once warm (numba reserves address space).
ADDRESS_SLACK = 1 << 30

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------------------------
# Seeds: small valid files, most with a few planted NaN/±Inf, some clean (a mutation that makes a
# clean-looking file is where a wrong "clean" hides).

def _arr(shape, dtype, plants=(), seed=0):
    """A finite random array of `dtype` with values `plants` {flat index: value} set."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    else:
        a = rng.standard_normal(shape).astype(dt)
    flat = a.reshape(-1)
    for i, v in dict(plants).items():
        flat[i] = v
    return a


def seeds(fmt: str) -> dict:
    """{seed name: {file name: bytes}} for `fmt`; the main file is MAIN[fmt]."""
    return {"safetensors": _seeds_safetensors, "npy": _seeds_npy, "npz": _seeds_npz,
            "onnx": _seeds_onnx, "gguf": _seeds_gguf}[fmt]()


def _seeds_safetensors():
    import ml_dtypes
    from test_scan_support import safetensors_bytes
    bf16 = ml_dtypes.bfloat16

    def st(tensors):
        return safetensors_bytes({k: (d, a, a.shape) for k, (d, a) in tensors.items()},
                                 header_extra={"__metadata__": {"format": "pt"}})

    planted = {"f32": ("F32", _arr((3, 4), np.float32, {1: NAN, 11: INF})),
               "f16": ("F16", _arr((8,), np.float16, {5: -INF}, 1)),
               "bf16": ("BF16", _arr((2, 2), bf16, {0: NAN}, 2)),
               "f64": ("F64", _arr((5,), np.float64, {0: INF, 4: -INF}, 3)),
               "i32": ("I32", np.arange(4, dtype=np.int32)),
               "clean": ("F32", _arr((16,), np.float32, {}, 4))}
    clean = {"w": ("F32", _arr((4, 4), np.float32, {}, 5)),
             "h": ("F16", _arr((6,), np.float16, {}, 6)),
             "b": ("BF16", _arr((4,), bf16, {}, 7)),
             "n": ("I64", np.arange(3, dtype=np.int64))}
    return {"planted": {MAIN["safetensors"]: st(planted)},
            "clean": {MAIN["safetensors"]: st(clean)}}


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _npy(a, version=None) -> bytes:
    buf = io.BytesIO()
    if version:
        np.lib.format.write_array(buf, a, version=version)
    else:
        np.save(buf, a)
    return buf.getvalue()


def _seeds_npy():
    arrays = {
        "c_f4": _arr((3, 4), np.float32, {1: NAN, 11: INF}),
        "fortran_f8": np.asfortranarray(_arr((3, 4), np.float64, {3: -INF}, 1)),
        "c8": _arr((5,), np.complex64, {1: complex(1, NAN), 3: complex(INF, 0)}, 2),
        "be_f4": _arr((6,), ">f4", {2: INF}, 3),
        "clean_f4": _arr((4, 4), np.float32, {}, 4),
        "clean_f2": _arr((7,), np.float16, {}, 5),
        "zero_d": np.array(NAN, np.float32),
        "clean_empty": np.zeros((0, 3), np.float32),
    }
    out = {name: {MAIN["npy"]: _npy(a)} for name, a in arrays.items()}
    out["clean_v2_f8"] = {MAIN["npy"]: _npy(_arr((3,), np.float64, {}, 6), version=(2, 0))}
    return out


NPZ_MEMBERS = {"a": _arr((3, 4), np.float32, {1: NAN, 11: INF}),
               "b": _arr((5,), np.float64, {}, 1),
               "c": np.arange(4, dtype=np.int32),
               "d": _arr((2,), np.complex64, {1: complex(0, -INF)}, 2)}
NPZ_CLEAN = {"w": _arr((4, 4), np.float32, {}, 3), "v": _arr((3,), np.float64, {}, 4)}


def zip_bytes(members) -> bytes:
    """members: [(name, bytes, method, force_zip64)] → a zip with fixed timestamps (np.savez writes
    each member with force_zip64, as here when asked)."""
    import warnings
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as z:
        warnings.simplefilter("ignore")  # "Duplicate name": wanted here
        for name, data, method, zip64 in members:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = method
            with z.open(info, "w", force_zip64=zip64) as f:
                f.write(data)
    return buf.getvalue()


def _seeds_npz():
    def npz(arrays, method, zip64):
        return {MAIN["npz"]: zip_bytes([(f"{k}.npy", _npy(a), method, zip64)
                                        for k, a in arrays.items()])}
    return {"stored_planted": npz(NPZ_MEMBERS, zipfile.ZIP_STORED, True),
            "deflated_planted": npz(NPZ_MEMBERS, zipfile.ZIP_DEFLATED, True),
            "stored_clean": npz(NPZ_CLEAN, zipfile.ZIP_STORED, False),
            "deflated_clean": npz(NPZ_CLEAN, zipfile.ZIP_DEFLATED, False)}


def _seeds_onnx():
    import ml_dtypes
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def raw(name, a):
        return numpy_helper.from_array(a, name)

    def typed(name, elem, a):
        return helper.make_tensor(name, elem, a.shape, a.reshape(-1).tolist(), raw=False)

    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    then_g = helper.make_graph(
        [helper.make_node("Constant", [], ["t"],
                          value=raw("then_c", _arr((2,), np.float32, {0: NAN}, 8)))],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph(
        [helper.make_node("Constant", [], ["e"], value=raw("", _arr((2,), np.float32, {}, 9)))],
        "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    sparse = helper.make_sparse_tensor(raw("sv", np.array([1.0, NAN], np.float32)),
                                       raw("si", np.array([1, 3], np.int64)), [5])
    bf = _arr((2,), ml_dtypes.bfloat16, {1: -INF}, 10).astype(np.float32)
    inits = [raw("W", _arr((2, 3), np.float32, {4: NAN})),
             typed("B", TensorProto.FLOAT, _arr((4,), np.float32, {2: INF}, 1)),
             raw("H", _arr((4,), np.float16, {0: -INF}, 2)),
             typed("D", TensorProto.DOUBLE, _arr((3,), np.float64, {}, 3)),
             typed("BF", TensorProto.BFLOAT16, bf),
             raw("I", np.array([1, 2], np.int64))]
    nodes = [helper.make_node("Constant", [], ["c"], name="const",
                              value=raw("", _arr((2,), np.float32, {1: -INF}, 4))),
             helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Constant", [], ["cf"], value_floats=[1.0, NAN, 2.0])]
    graph = helper.make_graph(nodes, "g", [cond], [out], initializer=inits,
                              sparse_initializer=[sparse])
    inline = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(inline)

    clean_g = helper.make_graph(
        [helper.make_node("Identity", ["W"], ["y"])], "g", [], [out],
        initializer=[raw("W", _arr((2,), np.float32, {}, 5)),
                     typed("B", TensorProto.FLOAT, _arr((3,), np.float32, {}, 6)),
                     raw("H", _arr((4,), np.float16, {}, 7))])
    clean = helper.make_model(clean_g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(clean)

    ext_g = helper.make_graph(
        [helper.make_node("Identity", ["W"], ["y"])], "g", [], [out],
        initializer=[raw("W", _arr((16,), np.float32, {3: NAN, 9: -INF}, 11)),
                     raw("V", _arr((8,), np.float16, {}, 12)),
                     raw("X", _arr((6,), np.float64, {}, 13))])
    ext = helper.make_model(ext_g, opset_imports=[helper.make_opsetid("", 18)])
    with tempfile.TemporaryDirectory() as d:
        onnx.save_model(ext, os.path.join(d, MAIN["onnx"]), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=ONNX_DATA, size_threshold=0)
        ext_files = {n: _read(os.path.join(d, n)) for n in (MAIN["onnx"], ONNX_DATA)}
    return {"inline": {MAIN["onnx"]: inline.SerializeToString()},
            "clean": {MAIN["onnx"]: clean.SerializeToString()},
            "external": ext_files}


def _seeds_gguf():
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quantize

    def q8(shape, bad_blocks, seed):
        q = quantize(_arr(shape, np.float32, {}, seed), Q.Q8_0)
        blocks = q.reshape(-1, 34)
        for i, bits in bad_blocks.items():
            blocks[i, :2] = np.frombuffer(struct.pack("<H", bits), np.uint8)
        return q

    def write(tensors):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, MAIN["gguf"])
            w = gguf.GGUFWriter(path, "llama")
            w.add_uint32("llama.block_count", 1)
            w.add_array("tokenizer.ggml.tokens", ["a", "bc", "def"])
            w.add_string("general.name", "fuzz")
            for name, a, raw_dtype in tensors:
                w.add_tensor(name, a, raw_dtype=raw_dtype)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            return {MAIN["gguf"]: _read(path)}

    planted = [("f32", _arr((4, 8), np.float32, {3: NAN, 17: INF}), None),
               ("f16", _arr((16,), np.float16, {5: -INF}, 1), None),
               ("q8", q8((2, 64), {1: 0x7E00, 3: 0x7C00}, 2), Q.Q8_0),
               ("bf16", quantize(_arr((8,), np.float32, {2: NAN}, 3), Q.BF16), Q.BF16),
               ("i32", np.arange(4, dtype=np.int32), None),
               ("clean", _arr((32,), np.float32, {}, 4), None)]
    clean = [("w", _arr((2, 8), np.float32, {}, 5), None),
             ("q", q8((1, 64), {}, 6), Q.Q8_0),
             ("h", _arr((4,), np.float16, {}, 7), None)]
    return {"planted": write(planted), "clean": write(clean)}


# ---------------------------------------------------------------------------------------------
# Byte-level mutations shared by every format. Each mutator takes (rng, files, fmt), changes
# `files` in place and returns a short description.

INTERESTING_8 = (0x00, 0x01, 0x7F, 0x80, 0xFF)
INTERESTING_U64 = (0, 1, 2, 7, 8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, 1 << 40,
                   (1 << 63) - 1, 1 << 63, (1 << 64) - 1)


def _header_end(fmt, b: bytes) -> int:
    """Where the structure ends and bulk data begins (best effort; the whole file if unknown)."""
    try:
        if fmt == "safetensors":
            return min(len(b), 8 + struct.unpack("<Q", b[:8])[0])
        if fmt == "npy":
            if b[6:7] == b"\x01":
                return min(len(b), 10 + struct.unpack("<H", b[8:10])[0])
            return min(len(b), 12 + struct.unpack("<I", b[8:12])[0])
        if fmt == "gguf":
            return min(len(b), gg_parse(b).header_bytes)
    except Exception:
        pass
    return len(b)


def _target(rng, files, fmt):
    """The file a byte mutation hits: usually the main file, sometimes ONNX external data."""
    if ONNX_DATA in files and rng.random() < 0.3:
        return ONNX_DATA
    return MAIN[fmt]


def m_truncate(rng, files, fmt):
    name = _target(rng, files, fmt)
    b = files[name]
    end = _header_end(fmt, b)
    cut = rng.choice([rng.randrange(0, max(1, end) + 1), rng.randrange(0, len(b) + 1),
                      len(b) - 1, len(b) - rng.randrange(1, 9), end, end - 1, end + 1])
    cut = max(0, min(len(b), cut))
    files[name] = b[:cut]
    return f"truncate {name} to {cut} of {len(b)} bytes"


def m_extend(rng, files, fmt):
    name = _target(rng, files, fmt)
    n = rng.choice([1, 3, 8, 64, 1000])
    tail = rng.choice([b"\0" * n, bytes(rng.randrange(256) for _ in range(n)),
                       struct.pack("<f", NAN) * (n // 4 + 1), files[name][-n:]])
    files[name] += tail
    return f"append {len(tail)} bytes to {name}"


def m_flip(rng, files, fmt):
    name = _target(rng, files, fmt)
    b = bytearray(files[name])
    if not b:
        return "flip: empty file"
    end = max(1, _header_end(fmt, bytes(b)) if name == MAIN[fmt] else len(b))
    spots = []
    for _ in range(rng.choice([1, 1, 2, 4])):
        i = rng.randrange(min(end, len(b)))
        b[i] ^= 1 << rng.randrange(8)
        spots.append(i)
    files[name] = bytes(b)
    return f"flip bits of {name} at {spots}"


def m_set(rng, files, fmt):
    name = _target(rng, files, fmt)
    b = bytearray(files[name])
    if len(b) < 8:
        return "set: short file"
    end = max(8, _header_end(fmt, bytes(b)))
    i = rng.randrange(min(end, len(b)) - 7)
    if rng.random() < 0.5:
        b[i] = rng.choice(INTERESTING_8)
        what = f"byte {b[i]:#x}"
    else:
        v = rng.choice(INTERESTING_U64)
        b[i:i + 8] = struct.pack("<Q", v)
        what = f"u64 {v:#x}"
    files[name] = bytes(b)
    return f"set {what} in {name} at {i}"


def m_splice(rng, files, fmt):
    """Insert or delete a few bytes inside the structure."""
    name = MAIN[fmt]
    b = files[name]
    end = max(1, _header_end(fmt, b))
    i = rng.randrange(min(end, len(b)) + 1)
    if rng.random() < 0.5 and i < len(b):
        n = rng.choice([1, 2, 4, 8])
        files[name] = b[:i] + b[i + n:]
        return f"delete {n} bytes at {i}"
    ins = rng.choice([b"\0", b"\xff", b"\0" * 4, b[i:i + 8]])
    files[name] = b[:i] + ins + b[i:]
    return f"insert {ins!r} at {i}"


def m_data_value(rng, files, fmt):
    """Write a NaN/Inf/finite pattern somewhere in the data: a value change both readers see."""
    name = _target(rng, files, fmt)
    b = bytearray(files[name])
    start = _header_end(fmt, bytes(b)) if name == MAIN[fmt] else 0
    if start >= len(b) - 1:
        return "data value: no data"
    width = rng.choice([2, 4, 8])
    i = rng.randrange(start, len(b) - width + 1) if len(b) - width >= start else start
    i -= (i - start) % width
    pattern = rng.choice([{2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000},
                          {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000},
                          {2: 0xFC00, 4: 0xFF800000, 8: 0xFFF0000000000000},
                          {2: 0x3C00, 4: 0x3F800000, 8: 0x3FF0000000000000}])[width]
    b[i:i + width] = pattern.to_bytes(width, "little")[:len(b) - i]
    files[name] = bytes(b)
    return f"data: {width}-byte {pattern:#x} at {i} of {name}"


GENERIC = [m_truncate, m_extend, m_flip, m_set, m_splice, m_data_value]


# ---------------------------------------------------------------------------------------------
# safetensors: the 8-byte length, the JSON header (edited as JSON and as text), the data.

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
# .npy: the magic/version, the header length, the header dict (edited as a dict and as text).

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


# ---------------------------------------------------------------------------------------------
# .npz: zip local headers, central directory and end record, CRCs, duplicates, and .npy members.

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
        other = _npy(rng.choice([_arr((2,), np.float32, {}, 9), _arr((2,), np.float32, {0: NAN}, 9),
                                 _arr((3, 4), np.float32, {}, 8)]))
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


# ---------------------------------------------------------------------------------------------
# ONNX: semantic edits through the onnx protobuf classes (valid wire format, odd content), and
# wire-level edits on a field tree (lengths, duplicates, packing, wire types).

def onnx_tensor_protos(model):
    """Every TensorProto in the model (graphs, subgraphs, attributes, sparse, functions,
    training info), as (owner description, TensorProto)."""
    out = []

    def graph(g, where):
        for n in g.node:
            node(n, where)
        out.extend((f"{where}initializer", t) for t in g.initializer)
        out.extend((f"{where}sparse", s.values) for s in g.sparse_initializer)

    def node(n, where):
        for a in n.attribute:
            if a.HasField("t"):
                out.append((f"{where}attr", a.t))
            out.extend((f"{where}attr", t) for t in a.tensors)
            if a.HasField("sparse_tensor"):
                out.append((f"{where}attr sparse", a.sparse_tensor.values))
            if a.HasField("g"):
                graph(a.g, where + "sub ")
            for g in a.graphs:
                graph(g, where + "sub ")

    graph(model.graph, "")
    for f in model.functions:
        for n in f.node:
            node(n, "function ")
    for ti in model.training_info:
        graph(ti.initialization, "training ")
        graph(ti.algorithm, "training ")
    return out


def m_onnx_tensor(rng, files, fmt):
    import onnx
    from onnx import TensorProto
    model = onnx.ModelProto.FromString(files[MAIN[fmt]])
    tensors = onnx_tensor_protos(model)
    if not tensors:
        return "onnx_tensor: no tensors"
    where, t = rng.choice(tensors)
    kind = rng.choice(["dims", "dims", "type", "type", "raw", "typed", "external", "external",
                       "location", "segment", "name"])
    what = f"{where} {t.name!r} {kind}"
    if kind == "dims":
        dims = list(t.dims)
        n = math.prod(dims)
        new = rng.choice([[], [0], dims + [1], dims[:-1], [n + 1], [-1], [-n], [2 ** 62],
                          [2 ** 31, 2 ** 31], dims[::-1], [0, 2 ** 62], [1] + dims])
        del t.dims[:]
        t.dims.extend(new)
        what += f" -> {new}"
    elif kind == "type":
        t.data_type = rng.choice([0, 1, 2, 7, 8, 9, 10, 11, 14, 15, 16, 17, 19, 21, 23, 24, 27,
                                  28, 40, 99])
        what += f" -> {t.data_type}"
    elif kind == "raw":
        raw = t.raw_data
        t.raw_data = rng.choice([raw[:-1], raw + b"\0", b"", raw + raw, struct.pack("<f", NAN) * 2,
                                 raw[:len(raw) // 2]])
        what += f" -> {len(t.raw_data)} bytes"
    elif kind == "typed":
        choice = rng.randrange(5)
        if choice == 0:
            t.float_data.append(NAN)
        elif choice == 1 and len(t.float_data):
            t.float_data.pop()
        elif choice == 2:
            t.int32_data.extend([0x7E00, 70000])
        elif choice == 3:
            t.double_data.append(-INF)
        else:
            t.float_data.extend([1.0, 2.0])
            t.ClearField("raw_data")
        what += f" #{choice}"
    elif kind == "external":
        if not t.external_data:
            t.data_location = TensorProto.EXTERNAL
        entries = {e.key: e for e in t.external_data}
        key = rng.choice(["location", "offset", "length", "checksum"])
        value = {"location": rng.choice(["../x.data", "/etc/hostname", "missing.data", "",
                                          ONNX_DATA, "./" + ONNX_DATA, "sub/../" + ONNX_DATA,
                                          MAIN["onnx"]]),
                 "offset": rng.choice(["-4", "abc", "4", "1", str(2 ** 40), "0", " 8", "1e3"]),
                 "length": rng.choice(["0", "1", "-1", "abc", str(2 ** 40), "64", "4"]),
                 "checksum": "0"}[key]
        if key in entries:
            entries[key].value = value
        else:
            t.external_data.add(key=key, value=value)
        what += f" {key}={value!r}"
    elif kind == "location":
        t.data_location = rng.choice([0, 1, 2])
        what += f" -> {t.data_location}"
    elif kind == "segment":
        t.segment.begin, t.segment.end = 0, 1
    else:
        t.name = rng.choice(["", "W", "B", t.name + "_", "\u00e9"])
        what += f" -> {t.name!r}"
    files[MAIN[fmt]] = model.SerializeToString()
    return f"onnx_tensor: {what}"


def m_onnx_model(rng, files, fmt):
    """Tensors added or moved: duplicate initializers, training info, attributes, functions."""
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.ModelProto.FromString(files[MAIN[fmt]])
    g = model.graph
    kind = rng.choice(["training", "training", "dup_init", "tensors_attr", "sparse_attr",
                       "function", "deep", "clear_inits"])
    bad = numpy_helper.from_array(np.array([1.0, NAN, -INF], np.float32), "T")
    if kind == "training":
        ti = model.training_info.add()
        if len(g.initializer) and rng.random() < 0.5:
            t = g.initializer.pop(rng.randrange(len(g.initializer)))
            ti.initialization.initializer.append(t)
        else:
            ti.initialization.initializer.append(bad)
        ti.initialization.name = "init"
    elif kind == "dup_init":
        if len(g.initializer):
            t = onnx.TensorProto()
            t.CopyFrom(rng.choice(list(g.initializer)))
            if t.raw_data:
                t.raw_data = bytes(len(t.raw_data))
            g.initializer.append(t)
        else:
            g.initializer.extend([bad, bad])
    elif kind == "tensors_attr":
        g.node.add().CopyFrom(helper.make_node("Custom", [], ["z"], domain="fuzz", ts=[bad, bad]))
    elif kind == "sparse_attr":
        sp = helper.make_sparse_tensor(bad, numpy_helper.from_array(np.array([0, 1, 2], np.int64)),
                                       [8])
        g.node.add().CopyFrom(helper.make_node("Constant", [], ["s"], sparse_value=sp))
    elif kind == "function":
        f = model.functions.add()
        f.name, f.domain = "fn", "fuzz"
        f.node.add().CopyFrom(helper.make_node("Constant", [], ["o"], value=bad))
    elif kind == "deep":
        inner = helper.make_graph([helper.make_node("Constant", [], ["d"], value=bad)], "d", [], [])
        for _ in range(rng.choice([2, 10, 70])):
            inner = helper.make_graph([helper.make_node("Loop", [], [], body=inner)], "d", [], [])
        g.node.add().CopyFrom(helper.make_node("Loop", [], [], body=inner))
    else:
        g.ClearField("initializer")
    files[MAIN[fmt]] = model.SerializeToString()
    return f"onnx_model: {kind}"


#: Field numbers that hold sub-messages, per message kind (a subset of onnx.proto).
PB_SCHEMA = {
    "model": {7: "graph", 25: "function", 20: "training", 14: "entry", 8: "opset"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "tensor": {13: "entry", 3: "segment"},
    "sparse": {1: "tensor", 2: "tensor"},
    "function": {7: "node"},
    "training": {1: "graph", 2: "graph"},
    "entry": {}, "opset": {}, "segment": {},
}


def _uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(b, pos):
    v = shift = 0
    while True:
        if pos >= len(b) or shift > 63:
            raise ValueError("bad varint")
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, pos
        shift += 7


def pb_parse(b, kind="model"):
    """A field tree: [[number, wire, value]]: value an int (varint/fixed), bytes, or a subtree
    (list) for known sub-message fields that parse."""
    out, pos = [], 0
    while pos < len(b):
        key, pos = _read_varint(b, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = _read_varint(b, pos)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            if pos + n > len(b):
                raise ValueError("short fixed")
            v, pos = int.from_bytes(b[pos:pos + n], "little"), pos + n
        elif wire == 2:
            n, pos = _read_varint(b, pos)
            if pos + n > len(b):
                raise ValueError("short LEN")
            v, pos = b[pos:pos + n], pos + n
            sub = PB_SCHEMA.get(kind, {}).get(number)
            if sub:
                try:
                    v = [sub, pb_parse(v, sub)]
                except ValueError:
                    pass
        else:
            raise ValueError(f"wire type {wire}")
        out.append([number, wire, v])
    return out


def pb_emit(tree, bad=None):
    """Bytes of a field tree. `bad` = (field object, how) emits that one field wrongly: its length
    off by a delta, its length as a longer (valid) varint, or its key with another wire type."""
    out = bytearray()
    for f in tree:
        number, wire, v = f
        how = bad[1] if bad is not None and bad[0] is f else None
        key_wire = how[1] if how and how[0] == "wire" else wire
        out += _uvarint(number << 3 | key_wire)
        if wire == 0:
            out += _uvarint(v)
        elif wire in (1, 5):
            out += v.to_bytes(8 if wire == 1 else 4, "little")
        else:
            body = pb_emit(v[1], bad) if isinstance(v, list) else v
            n = len(body)
            if how and how[0] == "len":
                n = max(0, n + how[1])
            enc = _uvarint(n)
            if how and how[0] == "long":
                enc = bytes(c | 0x80 for c in enc) + b"\x00"
            out += enc + body
    return bytes(out)


def _pb_fields(tree, acc=None):
    acc = [] if acc is None else acc
    for f in tree:
        acc.append((tree, f))
        if isinstance(f[2], list):
            _pb_fields(f[2][1], acc)
    return acc


def m_onnx_wire(rng, files, fmt):
    tree = pb_parse(files[MAIN[fmt]])
    fields = _pb_fields(tree)
    if not fields:
        return "onnx_wire: empty"
    kind = rng.choice(["len", "len", "long", "dup", "delete", "swap", "wire", "split", "unpack",
                       "unknown"])
    parent, f = rng.choice(fields)
    lens = [(p, x) for p, x in fields if x[1] == 2]
    bad = None
    if kind in ("len", "long") and lens:
        parent, f = rng.choice(lens)
        bad = (f, ("len", rng.choice([-1, 1, -2, 5, 1000, 2 ** 31])) if kind == "len" else ("long",))
    elif kind == "wire":
        bad = (f, ("wire", rng.choice([w for w in (0, 1, 2, 5) if w != f[1]])))
    elif kind == "dup":
        parent.insert(parent.index(f) + 1, _pb_copy(f))
    elif kind == "delete":
        parent.remove(f)
    elif kind == "swap" and len(parent) > 1:
        i, j = rng.sample(range(len(parent)), 2)
        parent[i], parent[j] = parent[j], parent[i]
    elif kind in ("split", "unpack"):
        packed = [(p, x) for p, x in fields if x[1] == 2 and isinstance(x[2], bytes)
                  and x[0] in (4, 5, 7, 10, 11) and len(x[2]) >= 8]
        if not packed:
            return "onnx_wire: no packed field"
        parent, f = rng.choice(packed)
        i = parent.index(f)
        data = f[2]
        if kind == "split":
            cut = len(data) // 2 // 4 * 4
            parent[i:i + 1] = [[f[0], 2, data[:cut]], [f[0], 2, data[cut:]]]
        elif f[0] == 4:  # float_data as unpacked fixed32 fields
            parent[i:i + 1] = [[4, 5, int.from_bytes(data[k:k + 4], "little")]
                               for k in range(0, len(data) - 3, 4)]
        else:
            return "onnx_wire: unpack of a non-float field skipped"
    else:
        parent.append([rng.choice([99, 1000, 536870911]), 2, b"\x01\x02"])
        kind = "unknown"
    files[MAIN[fmt]] = pb_emit(tree, bad)
    return f"onnx_wire: {kind} field {f[0]} (wire {f[1]})"


def _pb_copy(f):
    number, wire, v = f
    if isinstance(v, list):
        return [number, wire, [v[0], [_pb_copy(x) for x in v[1]]]]
    return [number, wire, v]


ONNX = [(m_onnx_tensor, 5), (m_onnx_model, 2), (m_onnx_wire, 4)]


# ---------------------------------------------------------------------------------------------
# GGUF: counts, versions, metadata, tensor infos, alignment, re-laid-out consistently or not.

_GG_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _gg_skip(b, pos, vtype, depth=0):
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
            pos = _gg_skip(b, pos, itype, depth + 1)
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
        end = _gg_skip(b, pos + 4, vtype)
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

STRUCTURAL = {"safetensors": SAFETENSORS, "npy": NPY, "npz": NPZ, "onnx": ONNX, "gguf": GGUF}


# ---------------------------------------------------------------------------------------------
# Cases

@dataclass
class Case:
    fmt: str
    index: int
    seed_name: str
    steps: list
    files: dict

    @property
    def id(self) -> str:
        return f"{self.fmt}#{self.index}"


_SEEDS: dict = {}


def make_case(fmt: str, index: int, base_seed: int = 0) -> Case:
    """Case `index` of `fmt`: a seed and 1-3 mutations, deterministic in (base_seed, fmt, index).
    Structural mutations that cannot parse what an earlier step left fall back to byte-level ones."""
    if fmt not in _SEEDS:
        _SEEDS[fmt] = seeds(fmt)
    rng = random.Random(f"{base_seed}:{fmt}:{index}")
    seed_name = rng.choice(sorted(_SEEDS[fmt]))
    files = dict(_SEEDS[fmt][seed_name])
    structural = STRUCTURAL[fmt]
    steps = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        if rng.random() < 0.7:
            mutator = rng.choices([m for m, _ in structural], [w for _, w in structural])[0]
        else:
            mutator = rng.choice(GENERIC)
        try:
            steps.append(mutator(rng, files, fmt))
        except Exception as e:
            fallback = rng.choice(GENERIC)
            steps.append(f"({mutator.__name__} n/a: {type(e).__name__}) " + fallback(rng, files, fmt))
    return Case(fmt, index, seed_name, steps, files)


def write_case(case: Case, root: str) -> str:
    """Writes the case's files into root/FORMAT/INDEX/ and returns the main file's path."""
    d = os.path.join(root, case.fmt, str(case.index))
    os.makedirs(d, exist_ok=True)
    for name, data in case.files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return os.path.join(d, MAIN[case.fmt])


# ---------------------------------------------------------------------------------------------
# Oracles: independent readers. Each returns {"ok": True, "tensors": {name: [counts, ...]},
# "unverified": [names]} or {"ok": False, "reason": ...}; counts are (nan, +inf, -inf).

def counts(a) -> tuple:
    """(NaN, +Inf, -Inf) of an array, complex parts counted separately as fpclass does."""
    a = np.asarray(a)
    parts = [a.real, a.imag] if a.dtype.kind == "c" else [a]
    nan = pinf = ninf = 0
    for p in parts:
        if p.dtype.kind != "f" or p.dtype.itemsize < 8:
            p = p.astype(np.float64)
        nan += int(np.isnan(p).sum())
        pinf += int(np.isposinf(p).sum())
        ninf += int(np.isneginf(p).sum())
    return nan, pinf, ninf


def oracle(fmt: str, path: str) -> dict:
    return {"safetensors": oracle_safetensors, "npy": oracle_npy, "npz": oracle_npz,
            "onnx": oracle_onnx, "gguf": oracle_gguf}[fmt](path)


def _reject(reason):
    return {"ok": False, "reason": str(reason).splitlines()[0][:300] if str(reason) else reason}


def oracle_safetensors(path):
    import ml_dtypes
    import safetensors
    dtypes = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": ml_dtypes.bfloat16,
              "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
              "F8_E8M0": ml_dtypes.float8_e8m0fnu, "C64": "<c8"}
    # float6 / float4 encode no NaN or Inf: their counts are zero by the format.
    nan_free = {"F6_E2M3", "F6_E3M2", "F4"}
    try:
        items = safetensors.deserialize(_read(path))
    except Exception as e:
        return _reject(f"safetensors.deserialize: {e}")
    tensors, unverified = {}, []
    for name, v in items:
        if v["dtype"] in dtypes:
            tensors.setdefault(name, []).append(counts(np.frombuffer(v["data"], dtypes[v["dtype"]])))
        elif v["dtype"] in nan_free:
            tensors.setdefault(name, []).append((0, 0, 0))
        elif v["dtype"] not in ("BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64"):
            unverified.append(name)
    return {"ok": True, "tensors": tensors, "unverified": unverified}


def oracle_npy(path):
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:
        return _reject(f"np.load: {type(e).__name__}: {e}")
    if not isinstance(a, np.ndarray):
        return _reject(f"np.load gave {type(a).__name__}")
    return {"ok": True, "tensors": {"": [counts(a)]} if a.dtype.kind in "fc" else {},
            "unverified": []}


def oracle_npz(path):
    """zipfile (member list, CRCs) and NumPy's .npy reader on every member. np.load itself also
    refuses a zip with bytes before its first member, which zipfile reads: that is a note."""
    tensors = {}
    try:
        with zipfile.ZipFile(path) as z:
            infos = [i for i in z.infolist() if not i.is_dir()]
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                return _reject("zip holds two members of one name (readers disagree on which counts)")
            bad = z.testzip()
            if bad is not None:
                return _reject(f"zipfile.testzip: bad CRC in {bad}")
            for info in infos:
                with z.open(info) as f:
                    a = np.lib.format.read_array(f, allow_pickle=False)
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if a.dtype.kind in "fc":
                    tensors.setdefault(key, []).append(counts(a))
    except Exception as e:
        return _reject(f"zipfile/np.lib.format.read_array: {type(e).__name__}: {e}")
    out = {"ok": True, "tensors": tensors, "unverified": []}
    try:
        with np.load(path, allow_pickle=False) as npz:
            npz.files
    except Exception as e:
        out["soft"] = f"np.load: {type(e).__name__}: {str(e)[:100]}"
    return out


#: ONNX data types whose values can be NaN/Inf and that to_array returns as float arrays.
_ONNX_FLOATS = {1, 10, 11, 14, 15, 16, 17, 18, 19, 20, 23, 24, 27, 28}


def onnx_named_tensors(model):
    """(name as fpclass reports it, TensorProto, in training info?) for every tensor and float
    attribute: an initializer's name, else "<unnamed tensor N>"; sparse values get
    " (sparse values)" (unnamed: "sparse_initializer"); an attribute's values "NODE@ATTRIBUTE",
    "[i]" added for TENSORS / SPARSE_TENSORS (NODE: the node's name, else its first output, else
    its op type; "FUNCTION/" before it in a function), FLOAT / FLOATS as FLOAT tensors."""
    from onnx import numpy_helper
    out, unnamed, training = [], [0], [False]

    def text(v):  # protobuf hands back strings that are not UTF-8 as bytes
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else v

    def tensor(t, where, suffix="", fallback=""):
        name = where or text(t.name) or fallback
        if not name:
            unnamed[0] += 1
            name = f"<unnamed tensor {unnamed[0]}>"
        out.append((name + suffix, t, training[0]))

    def short(label):
        return label[:200] + "…" if len(label) > 200 else label

    def graph(g, prefix=""):
        for n in g.node:
            node(n, prefix)
        for t in g.initializer:
            tensor(t, "")
        for s in g.sparse_initializer:
            tensor(s.values, "", " (sparse values)", "sparse_initializer")

    def node(n, prefix):
        label = text(n.name) or text(next((o for o in n.output if o), "")) or text(n.op_type)
        for a in n.attribute:
            attribute(a, prefix, prefix + short(label))

    def attribute(a, prefix, label):
        where = f"{label}@{text(a.name)}"
        if a.HasField("f"):
            tensor(numpy_helper.from_array(np.array(a.f, np.float32)), where)
        if len(a.floats):
            tensor(numpy_helper.from_array(np.array(a.floats, np.float32)), where)
        if a.HasField("t"):
            tensor(a.t, where)
        if a.HasField("sparse_tensor"):
            tensor(a.sparse_tensor.values, where, " (sparse values)")
        for i, t in enumerate(a.tensors):
            tensor(t, f"{where}[{i}]")
        for i, s in enumerate(a.sparse_tensors):
            tensor(s.values, f"{where}[{i}]", " (sparse values)")
        if a.HasField("g"):
            graph(a.g, prefix)
        for g in a.graphs:
            graph(g, prefix)

    graph(model.graph)
    for f in model.functions:
        for n in f.node:
            node(n, short(text(f.name)) + "/")
        for a in f.attribute_proto:
            attribute(a, short(text(f.name)) + "/", short(text(f.name)))
    training[0] = True
    for ti in model.training_info:
        graph(ti.initialization)
        graph(ti.algorithm)
    return out


def oracle_onnx(path):
    import onnx
    from onnx import external_data_helper, helper, numpy_helper
    try:
        model = onnx.load(path)
    except Exception as e:
        return _reject(f"onnx.load: {type(e).__name__}: {e}")
    tensors, unverified, training = {}, [], {}
    for name, t, in_training in onnx_named_tensors(model):
        if t.data_type not in _ONNX_FLOATS:
            continue
        if external_data_helper.uses_external_data(t):  # onnx.load skips training info
            try:
                external_data_helper.load_external_data_for_tensor(t, os.path.dirname(path))
            except Exception as e:
                return _reject(f"onnx external data of {name!r}: {type(e).__name__}: {e}")
        try:
            helper.tensor_dtype_to_np_dtype(t.data_type)
        except Exception:
            unverified.append(name)
            continue
        try:
            a = numpy_helper.to_array(t)
        except Exception as e:
            return _reject(f"onnx to_array({name!r}): {type(e).__name__}: {e}")
        tensors.setdefault(name, []).append(counts(a))
        if in_training:
            training.setdefault(name, []).append(counts(a))
    out = {"ok": True, "tensors": tensors, "unverified": unverified, "training": training}
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        out["soft"] = f"onnx.checker: {str(e).splitlines()[0][:200]}"
    return out


#: GGUF block types whose float fields the oracle reads: type → (block bytes, [(offset, dtype)]).
#: From ggml-common.h, typed here independently of fpclass.
_GG_BLOCKS = {2: (18, [(0, "<f2")]), 3: (20, [(0, "<f2"), (2, "<f2")]), 6: (22, [(0, "<f2")]),
              7: (24, [(0, "<f2"), (2, "<f2")]), 8: (34, [(0, "<f2")]),
              9: (36, [(0, "<f2"), (2, "<f2")]), 12: (144, [(0, "<f2"), (2, "<f2")]),
              14: (210, [(208, "<f2")])}


def _gguf_metadata_overrun(b) -> str | None:
    """Why the metadata cannot fit in the file, or None when it may (gguf-py walks a lying array
    count item by item, for seconds and hundreds of MB, before it fails)."""
    try:
        n_kv = struct.unpack_from("<Q", b, 16)[0]
        pos = 24
        for _ in range(n_kv):
            klen = struct.unpack_from("<Q", b, pos)[0]
            vtype = struct.unpack_from("<I", b, pos + 8 + klen)[0]
            pos = _gg_skip(b, pos + 12 + klen, vtype)
            if pos > len(b):
                return f"metadata runs to byte {pos} of a {len(b)}-byte file"
    except struct.error:
        return "metadata runs past the end of the file"
    except ValueError as e:
        return "metadata array count exceeds the file size" if "array count" in str(e) else None
    return None


def oracle_gguf(path):
    import gguf
    import ml_dtypes
    overrun = _gguf_metadata_overrun(_read(path))
    if overrun:
        return _reject(f"GGUF metadata: {overrun}")
    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:
        return _reject(f"gguf.GGUFReader: {type(e).__name__}: {e}")
    tensors, unverified = {}, []
    for t in reader.tensors:
        kind = int(t.tensor_type)
        if kind in (0, 1, 28):
            c = counts(t.data)
        elif kind == 30:
            c = counts(np.ascontiguousarray(t.data).view("<u2").view(ml_dtypes.bfloat16))
        elif kind in _GG_BLOCKS:
            size, fields = _GG_BLOCKS[kind]
            raw = np.ascontiguousarray(t.data).reshape(-1)
            if raw.size % size:
                return _reject(f"tensor {t.name!r}: {raw.size} bytes is not whole {size}-byte blocks")
            blocks = raw.reshape(-1, size)
            c = tuple(map(sum, zip(*(counts(np.ascontiguousarray(blocks[:, o:o + 2]).view(dt))
                                     for o, dt in fields))))
        elif kind in (24, 25, 26, 27):
            continue
        else:
            unverified.append(t.name)
            continue
        tensors.setdefault(t.name, []).append(c)
    return {"ok": True, "tensors": tensors, "unverified": unverified}


# ---------------------------------------------------------------------------------------------
# The worker: a child process that scans a batch of cases, then reads each with its oracle.
# It reports on stdout, one JSON line per event, so the parent can name the case that crashed,
# hung or ran out of memory.

def _worker(batch_file: str) -> None:
    import resource
    import signal
    import warnings

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to stderr

    def say(**msg):
        proto.write(json.dumps(msg) + "\n")

    with open(batch_file) as f:
        batch = json.load(f)
    from fpclass.scan import scan
    for path in batch["warmup"]:
        scan([path])
    for fmt in FORMATS:  # import the oracles' packages before the clock starts
        oracle(fmt, batch["warmup"][0])
    vms = _vm_bytes()
    resource.setrlimit(resource.RLIMIT_AS, (vms + ADDRESS_SLACK, vms + ADDRESS_SLACK))
    warm = _status_mb("VmRSS")
    say(ready=True, vms_mb=vms / 2 ** 20, rss_mb=warm)
    resets = _reset_peak()

    class OracleTimeout(Exception):
        pass

    def alarm(*_):
        raise OracleTimeout

    signal.signal(signal.SIGALRM, alarm)
    for case_id, path, fmt in batch["cases"]:
        say(id=case_id, phase="scan")
        _reset_peak()
        before = _status_mb("VmRSS")
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # as pytest -W error would
            try:
                report = scan([path])
                scan_out = {"exit": int(report.exit_code),
                            "files": [[p, f] for p, f in report.files],
                            "tensors": [[r.name, r.status, r.nan, r.posinf, r.neginf, r.reason,
                                         r.dtype] for r in report.tensors],
                            "problems": [p.reason for p in report.problems]}
            except BaseException as e:
                scan_out = {"raised": f"{type(e).__name__}: {e}"}
        # What a fresh, warm worker would have peaked at: its RSS when ready plus this scan's
        # growth (the heap left by earlier cases is not charged to this one).
        rss = warm + peak_rss_mb() - before if resets else peak_rss_mb()
        scan_out.update(seconds=time.perf_counter() - t, maxrss_mb=rss)
        say(id=case_id, scan=scan_out)
        if rss > MEMORY_MB and not resets:
            say(restart=f"{case_id}: scan peak RSS {rss:.0f} MB")  # else charged to later cases
            return
        detected = scan_out.get("files", [[None, fmt]])
        ofmt = detected[0][1] if detected else fmt
        ofmt = ofmt if ofmt in FORMATS else fmt
        say(id=case_id, phase="oracle")
        signal.setitimer(signal.ITIMER_REAL, ORACLE_SECONDS)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = oracle(ofmt, path)
        except OracleTimeout:
            out = {"ok": None, "reason": f"oracle ran past {ORACLE_SECONDS} s"}
        except MemoryError:
            out = {"ok": None, "reason": "oracle ran out of memory"}
        except BaseException as e:
            out = {"ok": None, "reason": f"oracle raised {type(e).__name__}: {e}"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out["format"] = ofmt
        say(id=case_id, oracle=out)
        rss = peak_rss_mb()
        if rss > MEMORY_MB * 0.8 and not resets:
            say(restart=f"{case_id}: oracle peak RSS {rss:.0f} MB")
            return


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries that over from the parent
    across fork and exec, so a child of a large process would report the parent's peak."""
    try:
        return _status_mb("VmHWM")
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux 4.0+), so each case's peak is its own; False where
    that is not possible (the worker then restarts after a large peak instead)."""
    try:
        _status_mb("VmRSS")
    except (OSError, StopIteration):
        return False
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Outcome:
    scan: dict = field(default_factory=dict)
    oracle: dict = field(default_factory=dict)
    failure: str = ""       # crash / hang of the scan, named by the supervisor


def run_cases(cases: list, workdir: str, warmup: list, workers: int = 2,
              start_seconds: float = 180.0, script: str = "") -> tuple[dict, dict]:
    """({case id: Outcome}, stats) for cases [(id, path, fmt)], run in `workers` child processes
    (`script worker BATCH`, this module's by default) in parallel. A child that dies or hangs is
    replaced and the case it was on is named."""
    outcomes: dict = {}
    stats = {"restarts": [], "ready_vms_mb": [], "ready_rss_mb": []}
    lock = threading.Lock()
    errors: list = []

    def body(k, batch):
        try:
            _supervise(k, batch, workdir, warmup, outcomes, stats, lock, start_seconds,
                       script or os.path.abspath(__file__))
        except BaseException as e:  # raised again after join
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k, cases[k::workers]))
               for k in range(workers) if cases[k::workers]]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return outcomes, stats


def _supervise(k, batch, workdir, warmup, outcomes, stats, lock, start_seconds, script):
    pending = list(batch)
    spawn = 0
    while pending:
        spawn += 1
        bfile = os.path.join(workdir, f"batch{k}.{spawn}.json")
        with open(bfile, "w") as f:
            json.dump({"cases": pending, "warmup": warmup}, f)
        errpath = os.path.join(workdir, f"worker{k}.{spawn}.stderr")
        with open(errpath, "w") as err:
            proc = subprocess.Popen([sys.executable, script, "worker", bfile],
                                    stdout=subprocess.PIPE, stderr=err, text=True)
        lines: queue.Queue = queue.Queue()

        def pump(proc=proc, lines=lines):
            for x in proc.stdout:
                lines.put(x)
            lines.put(None)

        pumping = threading.Thread(target=pump, daemon=True)
        pumping.start()
        current, phase, limit, failed, restart = None, "start", start_seconds, None, None
        while True:
            try:
                line = lines.get(timeout=limit)
            except queue.Empty:
                proc.kill()
                proc.wait()
                failed = f"no progress in {limit:.0f} s (hang)"
                break
            if line is None:
                proc.wait()
                if proc.returncode:
                    failed = (f"worker killed by signal {-proc.returncode}" if proc.returncode < 0
                              else f"worker exited with {proc.returncode}")
                break
            msg = json.loads(line)
            if msg.get("ready"):
                with lock:
                    stats["ready_vms_mb"].append(round(msg["vms_mb"]))
                    stats["ready_rss_mb"].append(round(msg["rss_mb"]))
                limit = SCAN_SECONDS
            elif "phase" in msg:
                current, phase = msg["id"], msg["phase"]
                limit = SCAN_SECONDS if phase == "scan" else ORACLE_SECONDS + 5
            elif "scan" in msg:
                outcomes.setdefault(msg["id"], Outcome()).scan = msg["scan"]
            elif "oracle" in msg:
                outcomes.setdefault(msg["id"], Outcome()).oracle = msg["oracle"]
                pending = [c for c in pending if c[0] != msg["id"]]
                current = None
            elif msg.get("restart"):
                restart = msg["restart"]
                proc.wait()
                break
        pumping.join(5)
        proc.stdout.close()
        if failed:
            if current is None:
                with open(errpath) as err:
                    raise RuntimeError(f"fuzz worker {k}: {failed} outside a case:\n"
                                       + err.read()[-3000:])
            o = outcomes.setdefault(current, Outcome())
            if phase == "scan":
                o.failure = failed
            else:
                o.oracle = {"ok": None, "reason": f"oracle: {failed}"}
        if current is not None:  # crashed, hung, or its scan's memory was reported: not rerun
            pending = [c for c in pending if c[0] != current]
        if pending:
            with lock:
                stats["restarts"].append(restart or failed or "worker ended early")


# ---------------------------------------------------------------------------------------------
# Judging one case: failures break the promise; notes are allowed differences worth counting.

def judge(case_id: str, o: Outcome) -> tuple[list, list]:
    """([(failure class, detail)], [(note class, detail)]) for one case's outcome."""
    fails, notes = [], []
    s, orc = o.scan, o.oracle
    if o.failure:
        return [("crash or hang", o.failure)], notes
    if "raised" in s:
        return [("scan raised", s["raised"])], notes
    if s.get("maxrss_mb", 0) > MEMORY_MB:
        fails.append(("memory", f"peak RSS {s['maxrss_mb']:.0f} MB"))
    if s.get("seconds", 0) > SCAN_SECONDS:
        fails.append(("slow", f"{s['seconds']:.1f} s"))
    reasons = s["problems"] + [t[5] for t in s["tensors"]]
    internal = [r for r in reasons if r and "internal error" in r]
    if internal:
        fails.append(("internal error", internal[0]))
    if s["exit"] not in (0, 1, 2):
        fails.append(("exit code", str(s["exit"])))
    clean = s["exit"] == 0
    if orc.get("ok") is None:
        if clean:
            notes.append(("clean, oracle unavailable", orc.get("reason", "")))
        return fails, notes
    if orc["ok"] is False:
        if clean:
            fails.append((f"clean but the {orc['format']} oracle rejects", orc["reason"]))
        return fails, notes
    ours: dict = {}
    for name, status, nan, pinf, ninf, reason, dtype in s["tensors"]:
        ours.setdefault(name, []).append((status, (nan, pinf, ninf), reason, dtype))
    theirs = {k: [tuple(c) for c in v] for k, v in orc["tensors"].items()}
    file_problem = bool(s["problems"])
    in_training = {k: [tuple(c) for c in v] for k, v in orc.get("training", {}).items()}
    for name, expected in theirs.items():
        mine = ours.get(name)
        if mine is None:
            hidden = sum(map(sum, expected))
            if clean or (hidden and not file_problem):
                fails.append(("training_info tensors never read" if in_training.get(name)
                              == expected else "tensor missing from the report",
                              f"{name!r}: oracle counts {expected}, fpclass exit {s['exit']}"))
            else:
                notes.append(("tensor missing, file reported", name))
            continue
        if any(m[0] != "checked" for m in mine):
            if any(m[0] == "unchecked" for m in mine):
                notes.append(("stricter (unchecked, oracle reads it)",
                              next(m[2] for m in mine if m[0] == "unchecked")))
            continue
        got = sorted(m[1] for m in mine)
        verdict = _compare(got, expected)
        if verdict and in_training.get(name) and _compare(
                got, _without(expected, in_training[name])) != "counts differ":
            verdict = "training_info tensors never read"
        if verdict:
            fails.append((verdict, f"{name!r} ({mine[0][3]}): fpclass {got}, oracle {sorted(expected)}"))
    for name in orc.get("unverified", []):
        if clean:
            notes.append(("clean, tensor unverified by the oracle", name))
    if clean and orc.get("soft"):
        notes.append((f"clean, {orc['soft'].split(':')[0]} refuses (other reader accepts)", orc["soft"]))
    if not clean and not any(f for f in fails) and s["problems"]:
        notes.append(("stricter (file problem, oracle reads it)", s["problems"][0]))
    return fails, notes


def _compare(got, expected):
    """None when fpclass's counts for one name equal the oracle's; else the failure class."""
    if got == sorted(expected):
        return None
    if len(got) < len(expected) and [sum(c) for c in zip(*got)] == [sum(c) for c in zip(*expected)]:
        return "tensors of one name merged into one result"
    return "counts differ"


def _without(expected, drop):
    rest = list(expected)
    for c in drop:
        rest.remove(c)
    return rest


def failure_kind(cls: str, detail: str) -> str:
    """A failure class plus the gist of its detail (names and numbers dropped), so that distinct
    causes of one class are listed apart."""
    import re
    gist = re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "X", detail))
    if cls.startswith("clean but"):
        return f"{cls}: {gist[:70]}"
    if cls == "internal error":
        return f"{cls}: {gist.split(':')[1].strip() if ':' in gist else gist}"
    return cls


# ---------------------------------------------------------------------------------------------

def _show(argv):
    import argparse
    p = argparse.ArgumentParser(prog="scan_fuzz_support.py show")
    p.add_argument("fmt", choices=FORMATS)
    p.add_argument("index", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    case = make_case(args.fmt, args.index, args.seed)
    path = write_case(case, args.out)
    print(f"{case.id} from seed file {case.seed_name!r}:")
    for step in case.steps:
        print("  " + step)
    print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        _worker(sys.argv[2])
    elif sys.argv[1:2] == ["show"]:
        _show(sys.argv[2:])
    else:
        sys.exit(__doc__)
