"""What a file is, for the scan: a format fpclass reads, a format that holds tensors fpclass does not
read (the scan must then say it could not check it), or a file that holds no tensors (skipped).
Content decides first (magic numbers, header shape), the name second."""

from __future__ import annotations

import json
import os
import re
import stat
import struct
from dataclasses import dataclass

SAFETENSORS = "safetensors"
SAFETENSORS_INDEX = "safetensors-index"
NPY = "npy"
NPZ = "npz"
ONNX = "onnx"
GGUF = "gguf"
PYTORCH = "pytorch"
HDF5 = "hdf5"          # HDF5 and NetCDF-4 files
KERAS = "keras"        # a .keras zip holding model.weights.h5
NETCDF3 = "netcdf3"    # NetCDF classic and 64-bit offset / data files
ZARR = "zarr"          # a zarr store: a directory, or a .zarr.zip
FITS = "fits"

KINDS = (SAFETENSORS, SAFETENSORS_INDEX, NPY, NPZ, ONNX, GGUF, PYTORCH, HDF5, KERAS, NETCDF3, ZARR,
         FITS)
ACCEPTED = (".safetensors (and *.safetensors.index.json), .npy, .npz, .onnx, .gguf, PyTorch "
            "checkpoints (.pt, .pth, .bin, .ckpt), HDF5 (.h5, .hdf5, .keras), NetCDF (.nc), "
            "zarr stores, FITS")

_BY_EXTENSION = {".safetensors": SAFETENSORS, ".npy": NPY, ".npz": NPZ, ".onnx": ONNX,
                 ".gguf": GGUF, ".h5": HDF5, ".hdf5": HDF5, ".he5": HDF5, ".keras": KERAS,
                 ".fits": FITS, ".fit": FITS, ".fts": FITS, ".fz": FITS}

#: Extensions of files that hold tensors in formats fpclass does not read: such a file is never
#: passed over quietly.
CLAIMS_BY_EXTENSION = {
    ".pt": "PyTorch checkpoint", ".pth": "PyTorch checkpoint", ".ckpt": "checkpoint",
    ".bin": "binary weights file (PyTorch, OpenVINO IR, ...)",
    ".pkl": "Python pickle", ".pickle": "Python pickle", ".joblib": "joblib pickle",
    ".h5": "HDF5 file", ".hdf5": "HDF5 file", ".he5": "HDF5 file", ".keras": "Keras archive",
    ".nc": "NetCDF file", ".nc4": "NetCDF file", ".cdf": "NetCDF file",
    ".fits": "FITS file", ".fit": "FITS file", ".fts": "FITS file", ".fz": "FITS file",
    ".zarr": "zarr store", ".msgpack": "msgpack (Flax) checkpoint",
    ".tflite": "TensorFlow Lite model", ".pb": "TensorFlow protobuf",
    ".pdparams": "PaddlePaddle parameters", ".pdopt": "PaddlePaddle optimizer state",
    ".params": "MXNet parameters", ".ggml": "GGML file",
}
#: TensorFlow checkpoint shards: variables.data-00000-of-00001.
_TF_SHARD = re.compile(r"\.data-\d{5}-of-\d{5}$")

#: Magic numbers of formats fpclass reads, beside those tested in _by_content.
_KINDS_BY_MAGIC = (
    (b"\x89HDF\r\n\x1a\n", HDF5), (b"CDF\x01", NETCDF3), (b"CDF\x02", NETCDF3),
    (b"CDF\x05", NETCDF3), (b"SIMPLE  =", FITS),
)
#: Magic numbers of tensor formats fpclass does not read (checked before any name).
_CLAIMS_BY_MAGIC = (
    (b"lmgg", "GGML file"), (b"fmgg", "GGMF file"), (b"tjgg", "GGJT file"),
)
#: torch.save's legacy format starts with its magic number, pickled.
_TORCH_LEGACY = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")
#: Magic numbers of common files that hold no tensors.
_OTHER_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image (PNG)"), (b"\xff\xd8\xff", "image (JPEG)"),
    (b"GIF8", "image (GIF)"), (b"%PDF-", "PDF document"),
)
_TOKENIZER_NAMES = {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
                    "sentencepiece.model"}

#: Bytes read to identify a file (and to tell text from binary).
HEAD_BYTES = 8192
#: JSON files larger than this are not read to look for a weight_map.
_INDEX_LIMIT = 64 << 20


@dataclass(frozen=True)
class Identity:
    """One of: `kind` (a reader in KINDS reads it), `claims` (holds tensors in the format named,
    which fpclass does not read), or `skip` (holds no tensors: why)."""

    kind: str | None = None
    claims: str = ""
    skip: str = ""


def is_torch_legacy(head: bytes) -> bool:
    """Whether `head` starts like torch.save's legacy (pre-1.6) format."""
    return head.startswith(_TORCH_LEGACY)


def claims_by_name(name: str) -> str:
    """The tensor format a file (or directory) name announces, or "" when it announces none."""
    lower = name.lower()
    ext = os.path.splitext(lower)[1]
    if lower.endswith(".zarr.zip"):
        return "zarr store (zip)"
    if ext in CLAIMS_BY_EXTENSION:
        return CLAIMS_BY_EXTENSION[ext]
    if ext in _BY_EXTENSION or lower.endswith(".safetensors.index.json"):
        return ext.lstrip(".") + " file" if ext in _BY_EXTENSION else "safetensors index"
    if _TF_SHARD.search(lower):
        return "TensorFlow checkpoint shard"
    return ""


def identify(path: str) -> Identity:
    """What the regular file at `path` is. Opens it without blocking (a FIFO swapped in is not
    waited on); OSError propagates."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return Identity(skip="not a regular file")
        head = f.read(HEAD_BYTES)
    size = st.st_size
    name = os.path.basename(path)
    by_content = _by_content(head, size, name)
    if by_content is not None:
        return by_content
    lower = name.lower()
    if lower.endswith(".json"):
        if _is_index(path, size):
            return Identity(SAFETENSORS_INDEX)
        return Identity(skip="text file (JSON)")
    ext = os.path.splitext(lower)[1]
    if ext in _BY_EXTENSION:  # damaged: its reader names the damage
        return Identity(_BY_EXTENSION[ext])
    if head[:1] == b"\x08" and _looks_like_onnx(path):
        return Identity(ONNX)
    claimed = claims_by_name(name)
    if claimed:
        return Identity(claims=claimed)
    if lower in _TOKENIZER_NAMES or ext == ".spm":
        return Identity(skip="tokenizer model (sentencepiece)")
    if _is_text(head):
        return Identity(skip="text file")
    return Identity(skip="unrecognized binary file (no tensor format found)")


def _by_content(head: bytes, size: int, name: str) -> Identity | None:
    if head.startswith(b"\x93NUMPY"):
        return Identity(NPY)
    if head.startswith(b"GGUF"):
        return Identity(GGUF)
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] <= size - 8:
        return Identity(SAFETENSORS)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip(head, name)
    for magic, kind in _KINDS_BY_MAGIC:
        if head.startswith(magic):
            return Identity(kind)
    for magic, what in _CLAIMS_BY_MAGIC:
        if head.startswith(magic):
            return Identity(claims=what)
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return Identity(claims="TensorFlow Lite model")
    if is_torch_legacy(head):
        return Identity(PYTORCH)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return Identity(claims="Python pickle (never unpickled)")
    for magic, what in _OTHER_MAGIC:
        if head.startswith(magic):
            return Identity(skip=what)
    return None


def _zip(head: bytes, name: str) -> Identity:
    """A zip archive: .npz when its name or first member says so; a PyTorch checkpoint (or
    TorchScript archive) when its first member is one of their records; another archive
    otherwise."""
    first = ""
    if head.startswith(b"PK\x03\x04") and len(head) >= 30:
        n = struct.unpack_from("<H", head, 26)[0]
        first = head[30:30 + n].decode("utf-8", "replace")
    if first == "data.pkl" or _torch_record(first):
        return Identity(PYTORCH)
    lower = name.lower()
    if lower.endswith(".npz") or first.endswith(".npy"):
        return Identity(NPZ)
    if lower.endswith(".keras"):
        return Identity(KERAS)
    if lower.endswith(".zarr.zip"):
        return Identity(ZARR)
    claimed = claims_by_name(name)
    if claimed:
        return Identity(claims=claimed)
    return Identity(skip="zip archive holding no .npy arrays")


def _torch_record(name: str) -> bool:
    """Whether a zip's first member is one torch.save or torch.jit.save writes: a record in the
    archive's folder (data.pkl, a storage, TorchScript's constants and code)."""
    folder, _, rel = name.partition("/")
    head, _, key = rel.partition("/")
    return bool(folder) and (rel in ("data.pkl", "constants.pkl", "version", "byteorder",
                                     ".format_version") or head in (".data", "code") or
                             head in ("data", "constants") and key.isdigit())


def _is_text(head: bytes) -> bool:
    """No NUL byte and valid UTF-8 (a character cut at the end of `head` allowed)."""
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3 and e.reason == "unexpected end of data"


def _is_index(path: str, size: int) -> bool:
    if path.lower().endswith(".safetensors.index.json"):
        return True
    if size > _INDEX_LIMIT:
        return False
    try:
        with open(path, "rb") as f:
            data = f.read()
        if b'"weight_map"' not in data:
            return False
        doc = json.loads(data)
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
