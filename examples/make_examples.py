"""Write the small example files in this directory, deterministically (same bytes every run).

    python examples/make_examples.py [OUTPUT_DIR]

Each file is a few KB; examples/README.md says what `fpclass scan` reports for each. The writers
here are minimal on purpose (safetensors and GGUF are written byte by byte), so the examples do not
depend on the packages that normally write these formats; the ONNX model uses the `onnx` package.
"""

from __future__ import annotations

import json
import os
import struct
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def write_safetensors(path, tensors):
    """tensors: {name: (safetensors dtype, ndarray)}, written in the given order."""
    header, blobs, pos = {}, [], 0
    for name, (dtype, a) in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _gguf_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, tensors, alignment=32):
    """tensors: {name: (ggml type id, dims fastest-first, raw bytes)}; GGUF version 3."""
    kv = [(_gguf_string("general.architecture") + struct.pack("<I", 8) + _gguf_string("example")),
          (_gguf_string("general.alignment") + struct.pack("<II", 4, alignment))]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv)
    data, offsets = b"", []
    for name, (gtype, dims, raw) in tensors.items():
        data += b"\0" * (-len(data) % alignment)
        offsets.append(len(data))
        data += raw
    for (name, (gtype, dims, raw)), off in zip(tensors.items(), offsets):
        out += _gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", gtype, off)
    out += b"\0" * (-len(out) % alignment)
    with open(path, "wb") as f:
        f.write(out + data)


def q8_0_blocks(values: np.ndarray) -> np.ndarray:
    """Quantize float32 rows to GGML Q8_0 blocks (fp16 scale d, then 32 int8): (n_blocks, 34) u8."""
    v = values.reshape(-1, 32).astype(np.float32)
    d = np.abs(v).max(axis=1) / 127
    q = np.round(v / np.where(d == 0, 1, d)[:, None]).astype(np.int8)
    blocks = np.zeros((v.shape[0], 34), np.uint8)
    blocks[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = q.view(np.uint8)
    return blocks


def _pickle_torch_state(tensors) -> bytes:
    """The pickle torch.save writes for {name: tensor}, opcode by opcode (protocol 2): each tensor
    is torch._utils._rebuild_tensor_v2 of a persistent storage reference ("storage", storage
    class, key, "cpu", numel). Keys are the storages' indices."""
    def text(s):
        b = s.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    def ints(values):
        return b"(" + b"".join(b"J" + struct.pack("<i", v) for v in values) + b"t"

    out = b"\x80\x02}("
    for key, (name, (storage, a)) in enumerate(tensors.items()):
        strides = [s // a.itemsize for s in a.strides]
        out += text(name) + b"ctorch._utils\n_rebuild_tensor_v2\n("
        out += b"(" + text("storage") + f"ctorch\n{storage}\n".encode() + text(str(key))
        out += text("cpu") + b"J" + struct.pack("<i", a.size) + b"tQ"
        out += b"J\0\0\0\0" + ints(a.shape) + ints(strides) + b"\x89"
        out += b"ccollections\nOrderedDict\n)Rt" + b"R"
    return out + b"u."


def write_torch(path, tensors):
    """A PyTorch zip checkpoint of {name: (storage class, ndarray)}, as torch.save lays it out
    (archive/data.pkl, archive/data/<key> stored and 64-byte aligned, byteorder, version), with
    fixed timestamps so regenerating gives the same bytes. torch.load reads it."""
    import zipfile
    prefix = os.path.splitext(os.path.basename(path))[0]
    members = [("data.pkl", _pickle_torch_state(tensors)), ("byteorder", b"little")]
    members += [(f"data/{i}", np.ascontiguousarray(a).tobytes())
                for i, (_, a) in enumerate(tensors.values())]
    members.append(("version", b"3\n"))
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(f"{prefix}/{name}", date_time=(2020, 1, 1, 0, 0, 0))
            # torch aligns each record's data to 64 bytes with an "FB" padding extra field
            start = z.fp.tell() + 30 + len(info.filename) + 4
            info.extra = b"FB" + struct.pack("<H", -start % 64) + b"Z" * (-start % 64)
            z.writestr(info, data)


def write_h5(path, rng):
    """An HDF5 file of climate-style fields (needs h5py): a chunked, compressed float32 field whose
    _FillValue is NaN (its NaNs are declared blanks) holding one +Inf, and an integer mask. No
    timestamps, so regenerating gives the same bytes."""
    import h5py
    t = (15 + 10 * rng.standard_normal((4, 6))).astype(np.float32)
    t[0, 2] = t[3, 5] = np.nan   # missing observations
    t[2, 1] = np.inf             # a fault
    with h5py.File(path, "w", libver="earliest", track_order=False) as f:
        group = f.create_group("surface")
        d = group.create_dataset("temperature", data=t, chunks=(2, 3), compression="gzip",
                                 track_times=False)
        d.attrs["_FillValue"] = np.float32(np.nan)
        d.attrs["units"] = "degC"
        group.create_dataset("land_mask", data=(t > 15).astype(np.int8), track_times=False)


def make(out: str) -> list:
    rng = np.random.default_rng(7)
    written = []

    def path(name):
        written.append(name)
        return os.path.join(out, name)

    bf16, e5m2 = ml_dtypes.bfloat16, ml_dtypes.float8_e5m2
    write_safetensors(path("clean.safetensors"), {
        "embed.weight": ("F32", rng.standard_normal((8, 4)).astype(np.float32)),
        "layer.0.weight": ("BF16", rng.standard_normal((4, 4)).astype(bf16)),
        "layer.0.bias": ("F16", np.zeros(4, np.float16)),
        "position_ids": ("I64", np.arange(8, dtype=np.int64)),
    })

    w = rng.standard_normal((4, 8)).astype(bf16)
    w[2, 5] = np.nan
    scales = np.ones(16, e5m2)
    scales[15] = -np.inf
    write_safetensors(path("nan_inf.safetensors"), {
        "layer.0.weight": ("BF16", w),
        "layer.0.scale": ("F8_E5M2", scales),
        "layer.0.bias": ("F32", np.zeros(8, np.float32)),
    })

    x = rng.standard_normal((3, 4)).astype(np.float32)
    x[0, 0] = np.inf
    with open(path("arrays.npz"), "wb") as f:
        np.savez_compressed(f, activations=x, bias=np.zeros(4, np.float16),
                            labels=np.arange(3, dtype=np.int32))
    _fix_zip_times(os.path.join(out, "arrays.npz"))

    _onnx(out, rng)
    os.chmod(os.path.join(out, "tiny.onnx.data"), 0o644)  # onnx creates it private
    written += ["tiny.onnx", "tiny.onnx.data"]

    token = rng.standard_normal((4, 8)).astype(np.float32)
    blocks = q8_0_blocks(rng.standard_normal((2, 64)).astype(np.float32))
    blocks[2, 0:2] = np.array([np.nan], "<f2").view(np.uint8)   # row 1, first block: d = NaN
    write_gguf(path("tiny.gguf"), {
        "token_embd.weight": (0, [8, 4], token.tobytes()),
        "output_norm.weight": (1, [8], np.ones(8, "<f2").tobytes()),
        "blk.0.attn_q.weight": (8, [64, 2], blocks.tobytes()),
    })

    exp_avg = rng.standard_normal((4, 4)).astype(np.float32) * 1e-3
    exp_avg_sq = exp_avg ** 2 + np.float32(1e-8)
    exp_avg[1, 3] = np.nan
    write_torch(path("optimizer.pt"), {
        "state.0.exp_avg": ("FloatStorage", exp_avg),
        "state.0.exp_avg_sq": ("FloatStorage", exp_avg_sq),
        "state.0.step": ("FloatStorage", np.array(10.0, np.float32)),
    })

    write_h5(path("fields.h5"), rng)
    return written


def _fix_zip_times(path):
    """Rewrite the archive with fixed member timestamps, so regenerating gives the same bytes."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        members = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w") as z:
        for info, data in members:
            fixed = zipfile.ZipInfo(info.filename, date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(fixed, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)


def _onnx(out, rng):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "W")
    b = numpy_helper.from_array(np.full(4, 0.5, np.float32), "B")
    half = helper.make_tensor("half", TensorProto.FLOAT16, [2],
                              [1.0, -2.0])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"]),
         helper.make_node("Add", ["XW", "B"], ["Y0"]),
         helper.make_node("Constant", [], ["H"], name="const_half", value=half),
         helper.make_node("Cast", ["H"], ["Hf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["Y0", "Hf"], ["Y"])],
        "tiny", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=[w, b])
    model = helper.make_model(graph, producer_name="fpclass-examples",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for name in ("tiny.onnx", "tiny.onnx.data"):
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
    # W goes to tiny.onnx.data; B (16 bytes) stays inline in raw_data.
    onnx.save_model(model, os.path.join(out, "tiny.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="tiny.onnx.data", size_threshold=32)


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else HERE
    os.makedirs(target, exist_ok=True)
    for name in make(target):
        print(os.path.join(target, name))
