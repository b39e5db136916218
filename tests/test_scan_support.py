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


#: GGUF metadata value type → struct format of its value (8, a string, is written by gguf_string).
GGUF_VALUE_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                      10: "<Q", 11: "<q", 12: "<d"}


def gguf_bytes(tensors, version=3, alignment=32, magic=b"GGUF", alignment_type=4):
    """tensors: [(name, ggml type, dims fastest-first, raw bytes)]. general.alignment is written
    as a value of `alignment_type` (4: UINT32, as the GGUF spec says)."""
    value = (gguf_string(str(alignment)) if alignment_type == 8
             else struct.pack(GGUF_VALUE_FORMATS[alignment_type], alignment))
    kv = gguf_string("general.alignment") + struct.pack("<I", alignment_type) + value
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
