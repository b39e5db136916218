"""Independent readers (the oracles) of the core fuzzer's formats, and its worker script: the
supervisor (fuzz_supervisor.run_cases) starts `python tests/fuzz_oracles_core.py worker BATCH`.

An oracle returns {"ok": True, "tensors": {name: [counts, ...]}, "unverified": [names]} or
{"ok": False, "reason": ...}; counts are (nan, +inf, -inf)."""

from __future__ import annotations

import os
import struct
import sys
import zipfile

import numpy as np

from fuzz_mutations_gguf import gg_skip
from fuzz_seeds_core import FORMATS, read_bytes
from fuzz_supervisor import serve


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


def reject(reason):
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
        items = safetensors.deserialize(read_bytes(path))
    except Exception as e:
        return reject(f"safetensors.deserialize: {e}")
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
        return reject(f"np.load: {type(e).__name__}: {e}")
    if not isinstance(a, np.ndarray):
        return reject(f"np.load gave {type(a).__name__}")
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
                return reject("zip holds two members of one name (readers disagree on which counts)")
            bad = z.testzip()
            if bad is not None:
                return reject(f"zipfile.testzip: bad CRC in {bad}")
            for info in infos:
                with z.open(info) as f:
                    a = np.lib.format.read_array(f, allow_pickle=False)
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if a.dtype.kind in "fc":
                    tensors.setdefault(key, []).append(counts(a))
    except Exception as e:
        return reject(f"zipfile/np.lib.format.read_array: {type(e).__name__}: {e}")
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
        return reject(f"onnx.load: {type(e).__name__}: {e}")
    tensors, unverified, training = {}, [], {}
    for name, t, in_training in onnx_named_tensors(model):
        if t.data_type not in _ONNX_FLOATS:
            continue
        if external_data_helper.uses_external_data(t):  # onnx.load skips training info
            try:
                external_data_helper.load_external_data_for_tensor(t, os.path.dirname(path))
            except Exception as e:
                return reject(f"onnx external data of {name!r}: {type(e).__name__}: {e}")
        try:
            helper.tensor_dtype_to_np_dtype(t.data_type)
        except Exception:
            unverified.append(name)
            continue
        try:
            a = numpy_helper.to_array(t)
        except Exception as e:
            return reject(f"onnx to_array({name!r}): {type(e).__name__}: {e}")
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
            pos = gg_skip(b, pos + 12 + klen, vtype)
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
    overrun = _gguf_metadata_overrun(read_bytes(path))
    if overrun:
        return reject(f"GGUF metadata: {overrun}")
    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:
        return reject(f"gguf.GGUFReader: {type(e).__name__}: {e}")
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
                return reject(f"tensor {t.name!r}: {raw.size} bytes is not whole {size}-byte blocks")
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


if __name__ == "__main__":
    if sys.argv[1:2] != ["worker"]:
        sys.exit(__doc__)
    serve(sys.argv[2], oracle, FORMATS)
