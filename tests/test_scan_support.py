"""Writers of small test files for the scan tests (independent of fpclass.scan); no tests here."""

import json
import struct

import numpy as np


def safetensors_bytes(tensors, header_extra=None, pad=True):
    """tensors: {name: (dtype, ndarray or raw bytes, shape)} in order → file bytes."""
    header, blobs, pos = {}, [], 0
    for name, (dtype, a, shape) in tensors.items():
        data = a if isinstance(a, bytes) else np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    if header_extra:
        header.update(header_extra)
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(path, tensors):
    path.write_bytes(safetensors_bytes({k: (d, a, a.shape) for k, (d, a) in tensors.items()}))
    return path


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_bytes(tensors, version=3, alignment=32, magic=b"GGUF"):
    """tensors: [(name, ggml type, dims fastest-first, raw bytes)]."""
    kv = gguf_string("general.alignment") + struct.pack("<II", 4, alignment)
    kv += gguf_string("tokenizer.tokens") + struct.pack("<IIQ", 9, 8, 2) + gguf_string("a") + gguf_string("bc")
    out = magic + struct.pack("<IQQ", version, len(tensors), 2) + kv
    data, offsets = b"", []
    for _, _, _, raw in tensors:
        data += b"\0" * (-len(data) % alignment)
        offsets.append(len(data))
        data += raw
    for (name, gtype, dims, _), off in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", gtype, off)
    out += b"\0" * (-len(out) % alignment)
    return out + data
