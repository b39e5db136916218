"""Which reader a file needs, decided by its first bytes (magic numbers, header shape) and only
then by its extension."""

from __future__ import annotations

import json
import os
import struct

SAFETENSORS = "safetensors"
SAFETENSORS_INDEX = "safetensors-index"
NPY = "npy"
NPZ = "npz"
ONNX = "onnx"
GGUF = "gguf"

KINDS = (SAFETENSORS, SAFETENSORS_INDEX, NPY, NPZ, ONNX, GGUF)
ACCEPTED = ".safetensors (and *.safetensors.index.json), .npy, .npz, .onnx, .gguf"

_BY_EXTENSION = {".safetensors": SAFETENSORS, ".npy": NPY, ".npz": NPZ, ".onnx": ONNX,
                 ".gguf": GGUF}
#: JSON files larger than this are not read to look for a weight_map.
_INDEX_LIMIT = 64 << 20


def detect(path: str) -> str | None:
    """The kind of `path` (one of KINDS) or None when it is none of them. Content decides; the
    extension is the fallback, so a damaged file still reaches its reader, which names the damage.
    OSError propagates."""
    with open(path, "rb") as f:
        head = f.read(16)
        size = os.fstat(f.fileno()).st_size
    if head.startswith(b"\x93NUMPY"):
        return NPY
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return NPZ
    if head.startswith(b"GGUF"):
        return GGUF
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] <= size - 8:
        return SAFETENSORS
    lower = path.lower()
    if lower.endswith(".json"):
        return SAFETENSORS_INDEX if _is_index(path, size) else None
    ext = os.path.splitext(lower)[1]
    if ext in _BY_EXTENSION:
        return _BY_EXTENSION[ext]
    if head[:1] == b"\x08" and _looks_like_onnx(path):
        return ONNX
    return None


def _is_index(path: str, size: int) -> bool:
    if path.lower().endswith(".safetensors.index.json"):
        return True
    if size > _INDEX_LIMIT:
        return False
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("weight_map"), dict)


def _looks_like_onnx(path: str) -> bool:
    """A protobuf whose top level parses and holds a graph (field 7) and an ir_version."""
    from .readers.protobuf import ProtobufError, top_level_fields
    try:
        fields = top_level_fields(path)
    except (ProtobufError, OSError):
        return False
    return 1 in fields and 7 in fields
