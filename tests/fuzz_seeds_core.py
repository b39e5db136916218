"""Seed files of the core fuzzer (tests/test_scan_fuzz.py): small valid safetensors, .npy, .npz,
ONNX and GGUF files, most with a few planted NaN/±Inf, some clean (a mutation that makes a
clean-looking file is where a wrong "clean" hides)."""

from __future__ import annotations

import io
import os
import struct
import tempfile
import zipfile

import numpy as np


FORMATS = ("safetensors", "npy", "npz", "onnx", "gguf")
MAIN = {"safetensors": "case.safetensors", "npy": "case.npy", "npz": "case.npz",
        "onnx": "case.onnx", "gguf": "case.gguf"}
#: ONNX external data lives in this sibling of the model.
ONNX_DATA = "case.data"

NAN, INF = float("nan"), float("inf")


def planted_array(shape, dtype, plants=(), seed=0):
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

    planted = {"f32": ("F32", planted_array((3, 4), np.float32, {1: NAN, 11: INF})),
               "f16": ("F16", planted_array((8,), np.float16, {5: -INF}, 1)),
               "bf16": ("BF16", planted_array((2, 2), bf16, {0: NAN}, 2)),
               "f64": ("F64", planted_array((5,), np.float64, {0: INF, 4: -INF}, 3)),
               "i32": ("I32", np.arange(4, dtype=np.int32)),
               "clean": ("F32", planted_array((16,), np.float32, {}, 4))}
    clean = {"w": ("F32", planted_array((4, 4), np.float32, {}, 5)),
             "h": ("F16", planted_array((6,), np.float16, {}, 6)),
             "b": ("BF16", planted_array((4,), bf16, {}, 7)),
             "n": ("I64", np.arange(3, dtype=np.int64))}
    return {"planted": {MAIN["safetensors"]: st(planted)},
            "clean": {MAIN["safetensors"]: st(clean)}}


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def npy_bytes(a, version=None) -> bytes:
    buf = io.BytesIO()
    if version:
        np.lib.format.write_array(buf, a, version=version)
    else:
        np.save(buf, a)
    return buf.getvalue()


def _seeds_npy():
    arrays = {
        "c_f4": planted_array((3, 4), np.float32, {1: NAN, 11: INF}),
        "fortran_f8": np.asfortranarray(planted_array((3, 4), np.float64, {3: -INF}, 1)),
        "c8": planted_array((5,), np.complex64, {1: complex(1, NAN), 3: complex(INF, 0)}, 2),
        "be_f4": planted_array((6,), ">f4", {2: INF}, 3),
        "clean_f4": planted_array((4, 4), np.float32, {}, 4),
        "clean_f2": planted_array((7,), np.float16, {}, 5),
        "zero_d": np.array(NAN, np.float32),
        "clean_empty": np.zeros((0, 3), np.float32),
    }
    out = {name: {MAIN["npy"]: npy_bytes(a)} for name, a in arrays.items()}
    out["clean_v2_f8"] = {MAIN["npy"]: npy_bytes(planted_array((3,), np.float64, {}, 6), version=(2, 0))}
    return out


NPZ_MEMBERS = {"a": planted_array((3, 4), np.float32, {1: NAN, 11: INF}),
               "b": planted_array((5,), np.float64, {}, 1),
               "c": np.arange(4, dtype=np.int32),
               "d": planted_array((2,), np.complex64, {1: complex(0, -INF)}, 2)}
NPZ_CLEAN = {"w": planted_array((4, 4), np.float32, {}, 3), "v": planted_array((3,), np.float64, {}, 4)}


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
        return {MAIN["npz"]: zip_bytes([(f"{k}.npy", npy_bytes(a), method, zip64)
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
                          value=raw("then_c", planted_array((2,), np.float32, {0: NAN}, 8)))],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph(
        [helper.make_node("Constant", [], ["e"], value=raw("", planted_array((2,), np.float32, {}, 9)))],
        "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    sparse = helper.make_sparse_tensor(raw("sv", np.array([1.0, NAN], np.float32)),
                                       raw("si", np.array([1, 3], np.int64)), [5])
    bf = planted_array((2,), ml_dtypes.bfloat16, {1: -INF}, 10).astype(np.float32)
    inits = [raw("W", planted_array((2, 3), np.float32, {4: NAN})),
             typed("B", TensorProto.FLOAT, planted_array((4,), np.float32, {2: INF}, 1)),
             raw("H", planted_array((4,), np.float16, {0: -INF}, 2)),
             typed("D", TensorProto.DOUBLE, planted_array((3,), np.float64, {}, 3)),
             typed("BF", TensorProto.BFLOAT16, bf),
             raw("I", np.array([1, 2], np.int64))]
    nodes = [helper.make_node("Constant", [], ["c"], name="const",
                              value=raw("", planted_array((2,), np.float32, {1: -INF}, 4))),
             helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Constant", [], ["cf"], value_floats=[1.0, NAN, 2.0])]
    graph = helper.make_graph(nodes, "g", [cond], [out], initializer=inits,
                              sparse_initializer=[sparse])
    inline = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(inline)

    clean_g = helper.make_graph(
        [helper.make_node("Identity", ["W"], ["y"])], "g", [], [out],
        initializer=[raw("W", planted_array((2,), np.float32, {}, 5)),
                     typed("B", TensorProto.FLOAT, planted_array((3,), np.float32, {}, 6)),
                     raw("H", planted_array((4,), np.float16, {}, 7))])
    clean = helper.make_model(clean_g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(clean)

    ext_g = helper.make_graph(
        [helper.make_node("Identity", ["W"], ["y"])], "g", [], [out],
        initializer=[raw("W", planted_array((16,), np.float32, {3: NAN, 9: -INF}, 11)),
                     raw("V", planted_array((8,), np.float16, {}, 12)),
                     raw("X", planted_array((6,), np.float64, {}, 13))])
    ext = helper.make_model(ext_g, opset_imports=[helper.make_opsetid("", 18)])
    with tempfile.TemporaryDirectory() as d:
        onnx.save_model(ext, os.path.join(d, MAIN["onnx"]), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=ONNX_DATA, size_threshold=0)
        ext_files = {n: read_bytes(os.path.join(d, n)) for n in (MAIN["onnx"], ONNX_DATA)}
    return {"inline": {MAIN["onnx"]: inline.SerializeToString()},
            "clean": {MAIN["onnx"]: clean.SerializeToString()},
            "external": ext_files}


def _seeds_gguf():
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quantize

    def q8(shape, bad_blocks, seed):
        q = quantize(planted_array(shape, np.float32, {}, seed), Q.Q8_0)
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
            return {MAIN["gguf"]: read_bytes(path)}

    planted = [("f32", planted_array((4, 8), np.float32, {3: NAN, 17: INF}), None),
               ("f16", planted_array((16,), np.float16, {5: -INF}, 1), None),
               ("q8", q8((2, 64), {1: 0x7E00, 3: 0x7C00}, 2), Q.Q8_0),
               ("bf16", quantize(planted_array((8,), np.float32, {2: NAN}, 3), Q.BF16), Q.BF16),
               ("i32", np.arange(4, dtype=np.int32), None),
               ("clean", planted_array((32,), np.float32, {}, 4), None)]
    clean = [("w", planted_array((2, 8), np.float32, {}, 5), None),
             ("q", q8((1, 64), {}, 6), Q.Q8_0),
             ("h", planted_array((4,), np.float16, {}, 7), None)]
    return {"planted": write(planted), "clean": write(clean)}
