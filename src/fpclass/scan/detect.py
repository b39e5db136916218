"""What a file is, for the scan: a format fpclass reads, a format that holds tensors fpclass does not
read or a binary file of no known kind (the scan must then say it could not check it), or a file
known to hold no tensors (text, or a kind named by its magic number: skipped). Content decides
first (magic numbers, header shape), the name second. The formats fpclass reads, their names and
magic numbers come from the reader registry (readers/registry.py, their header tests from
signatures.py); the tables here are of what fpclass does not read."""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import zipfile
from dataclasses import dataclass

from .readers import registry
from .storage.reads import file_size, is_url, open_binary
# Detection's header tests and magic numbers, also importable from here.
from .signatures import (COMPRESSIONS, FITS_MAGIC, GGUF_MAGIC, HDF5_SIGNATURE,  # noqa: F401
                         IDL_COMPRESSED, NPY_MAGIC, TORCH_LEGACY_MAGIC, ZIP_MAGIC, compression,
                         is_text, is_torch_legacy, matlab5_order, standin)

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
MATLAB = "matlab"      # MATLAB v4 and v5 (v7) .mat files; v7.3 is HDF5 behind a user block
IDL = "idl"            # IDL save files (.sav)
COMPRESSED = "compressed"  # a gzip, bzip2, xz or compress (.Z) stream around another file

KINDS = registry.KINDS
#: What the scan reads, for problem messages.
ACCEPTED = registry.accepted()
_BY_EXTENSION = registry.BY_EXTENSION

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

#: Magic numbers of tensor formats fpclass does not read (checked before any name).
_CLAIMS_BY_MAGIC = (
    (b"lmgg", "GGML file"), (b"fmgg", "GGMF file"), (b"tjgg", "GGJT file"),
    # Archives and compressed streams fpclass does not open: they may hold any file.
    (b"\x28\xb5\x2f\xfd", "zstd-compressed file"), (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"Rar!\x1a\x07", "RAR archive"), (b"\x04\x22\x4d\x18", "LZ4-compressed file"),
    # Columnar data files: their float columns are not read.
    (b"ARROW1", "Apache Arrow file"), (b"PAR1", "Parquet file"), (b"ORC", "ORC file"),
)
#: Magic numbers of common files that hold no tensors: skipped with the kind named. Only
#: signatures of at least three fixed bytes (or checked further in _other_kind) are trusted.
_OTHER_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image (PNG)"), (b"\xff\xd8\xff", "image (JPEG)"),
    (b"GIF87a", "image (GIF)"), (b"GIF89a", "image (GIF)"), (b"II*\x00", "image (TIFF)"),
    (b"MM\x00*", "image (TIFF)"), (b"\x00\x00\x01\x00\x01\x00", "image (ICO)"),
    (b"%PDF-", "PDF document"), (b"%!PS", "PostScript document"),
    (b"fLaC", "audio (FLAC)"), (b"OggS", "audio/video (Ogg)"), (b"ID3", "audio (MP3)"),
    (b"MThd", "audio (MIDI)"), (b"\x1a\x45\xdf\xa3", "video (Matroska/WebM)"),
    (b"FLV\x01", "video (FLV)"),
    (b"wOFF", "font (WOFF)"), (b"wOF2", "font (WOFF2)"), (b"OTTO", "font (OpenType)"),
    (b"ttcf", "font (TrueType collection)"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x7fELF", "compiled code (ELF)"), (b"\xcf\xfa\xed\xfe", "compiled code (Mach-O)"),
    (b"\xce\xfa\xed\xfe", "compiled code (Mach-O)"),
    (b"\xca\xfe\xba\xbe", "compiled code (Mach-O universal / Java class)"),
    (b"\x00asm", "compiled code (WebAssembly)"),
    (b"\x00\x00\x00\x01Bud1", "macOS folder metadata (.DS_Store)"),
)
#: RIFF containers by their form type (bytes 8-12).
_RIFF = {b"WAVE": "audio (WAV)", b"AVI ": "video (AVI)", b"WEBP": "image (WebP)"}
#: ISO base media (MP4, MOV, HEIC, AVIF): "ftyp" at byte 4.
_ISO_MEDIA = "audio/video/image (ISO media: MP4, MOV, HEIC, ...)"
#: Extensions of zip members that hold no tensors: a zip of only these is skipped.
_HARMLESS_MEMBERS = {
    ".txt", ".md", ".rst", ".json", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".xml", ".html",
    ".htm", ".css", ".js", ".py", ".c", ".h", ".cpp", ".sh", ".csv", ".tsv", ".tex", ".bib",
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".tif", ".tiff", ".bmp", ".ico", ".pdf",
    ".wav", ".flac", ".mp3", ".ogg", ".mp4", ".ttf", ".otf", ".woff", ".woff2", ".license",
}
_TOKENIZER_NAMES = {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
                    "sentencepiece.model"}
#: What a binary file no format accounts for is reported as: unchecked (a problem, exit 2).
UNRECOGNIZED = "unrecognized binary file"

#: Bytes of 8-bit text: printable ASCII, tab, line ends, form feed, escape, and 0x80-0xFF.
#: Bytes read to identify a file (and to tell text from binary).
HEAD_BYTES = 8192
#: JSON files larger than this are not read to look for a weight_map.
_INDEX_LIMIT = 64 << 20


@dataclass(frozen=True)
class Identity:
    """One of: `kind` (a reader in KINDS reads it), `claims` (holds tensors in the format named,
    which fpclass does not read; with `standin`, the message for a pointer named as a tensor file
    whose content was never fetched), or `skip` (holds no tensors: why)."""

    kind: str | None = None
    claims: str = ""
    skip: str = ""
    #: With `claims`: the whole problem message (a pointer standing for a file not fetched).
    standin: bool = False


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
    if is_url(path):
        f = open_binary(path)
    else:
        f = open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb", closefd=True)
    with f:
        if not is_url(path) and not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return Identity(skip="not a regular file")
        head = f.read(HEAD_BYTES)
        size = file_size(f)
        name = os.path.basename(path)
        pointer = standin(head, size)
        if pointer:
            return _standin(name, *pointer)
        by_content = _by_content(head, size, name)
        if by_content is not None and by_content.claims.startswith("zip archive"):
            by_content = _zip_members(f)
        if by_content is None and hdf5_offset(f, head, size) is not None:
            by_content = Identity(HDF5)  # behind a user block (MATLAB v7.3 files)
    if by_content is not None:
        return by_content
    lower = name.lower()
    if lower.endswith(".json"):
        if _is_index(path, size):
            return Identity(SAFETENSORS_INDEX)
        return Identity(skip="text file (JSON)")
    ext = os.path.splitext(lower)[1]
    if ext in _BY_EXTENSION and not (ext == ".mat" and is_text(head)):
        return Identity(_BY_EXTENSION[ext])  # damaged: its reader names the damage
    if ext == ".pb":   # ONNX test data: one TensorProto per file (decided by its reader)
        from .readers.onnx_tensor import is_tensor_file
        if is_tensor_file(path):
            return Identity(ONNX)
    if head[:1] == b"\x08" and _looks_like_onnx(path):
        return Identity(ONNX)
    claimed = claims_by_name(name)
    if claimed:
        return Identity(claims=claimed)
    if lower in _TOKENIZER_NAMES or ext == ".spm":
        return Identity(skip="tokenizer model (sentencepiece)")
    if is_text(head):
        return Identity(skip="text file")
    if ext == ".pyc" and head[2:4] == b"\r\n":
        return Identity(skip="compiled code (Python bytecode)")
    if ext in (".ttf", ".otf") and head[:4] in (b"\x00\x01\x00\x00", b"true"):
        return Identity(skip="font (TrueType)")
    return Identity(claims=UNRECOGNIZED)


#: Name endings the readers take on content alone (`.pt`, `.gz`, ...), beside their extensions.
_KNOWN_NAMES = tuple(n.lstrip("*").lower() for r in registry.READERS for n in r.known_names)


def named_as_tensors(name: str) -> str:
    """The tensor format a name announces (claims_by_name, or a name a reader takes on content,
    such as `.gz`), or ""."""
    lower = name.lower()
    return claims_by_name(name) or next(
        (f"{n} file" for n in _KNOWN_NAMES if lower.endswith(n)), "")


def _standin(name: str, what: str, command: str) -> Identity:
    """A pointer left by a version-control tool: a problem when named as a tensor file (its
    tensors were not checked), else a skipped text file saying what it is."""
    claimed = named_as_tensors(name)
    if claimed:
        return Identity(claims=f"{what}, not the {claimed} it stands for: the content was never "
                        f"fetched (run `{command}`), so not checked", standin=True)
    return Identity(skip=f"text file ({what}: run `{command}` to fetch the file)")


def skip_by_head(head: bytes, name: str) -> str:
    """Why a file named `name` that starts with `head` holds no tensors, when its first bytes and
    name alone tell (text not named as any format, a kind known by its magic number); "" when the
    whole file is needed. For a compressed file's stream, not decompressed further then."""
    by_content = _by_content(head, 1 << 62, name)
    if by_content is not None:
        return by_content.skip
    lower = name.lower()
    ext = os.path.splitext(lower)[1]
    if ext in _BY_EXTENSION or claims_by_name(name) or lower.endswith(".json"):
        return ""
    return "text file" if is_text(head) else ""


def hdf5_offset(f, head: bytes, size: int) -> int | None:
    """Where the HDF5 superblock of open file `f` starts: 0, or after a user block, at 512, 1024,
    2048, ... (the HDF5 specification's only places for it); None when it has none."""
    at = 0
    while at + 8 <= size:
        if at + 8 <= len(head):
            sig = head[at:at + 8]
        else:
            f.seek(at)
            sig = f.read(8)
        if sig == HDF5_SIGNATURE:
            return at
        at = at * 2 if at else 512
    return None


def _by_content(head: bytes, size: int, name: str) -> Identity | None:
    if head.startswith((ZIP_MAGIC, b"PK\x05\x06")):
        return _zip(head, name)
    kind = registry.by_content(head, size)
    if kind:
        return Identity(kind)
    for magic, what in _CLAIMS_BY_MAGIC:
        if head.startswith(magic):
            return Identity(claims=what)
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return Identity(claims="TensorFlow Lite model")
    if len(head) >= 262 and head[257:262] == b"ustar":
        return Identity(claims="tar archive (its members are not read)")
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return Identity(claims="Python pickle (never unpickled)")
    other = _other_kind(head)
    return Identity(skip=other) if other else None


def _other_kind(head: bytes) -> str:
    """The kind of a common file that holds no tensors, by its magic number, or ""."""
    for magic, what in _OTHER_MAGIC:
        if head.startswith(magic):
            return what
    if head[:4] == b"RIFF" and head[8:12] in _RIFF:
        return _RIFF[head[8:12]]
    if head[4:8] == b"ftyp" and head[8:12].isascii():
        return _ISO_MEDIA
    if head[:2] == b"MZ" and len(head) >= 64:
        pe = struct.unpack_from("<I", head, 60)[0]
        if head[pe:pe + 4] == b"PE\x00\x00":
            return "compiled code (Windows PE)"
    return ""


def _zip(head: bytes, name: str) -> Identity:
    """A zip archive: .npz when its name or first member says so; a PyTorch checkpoint (or
    TorchScript archive) when its first member is one of their records; another archive
    otherwise."""
    first = ""
    if head.startswith(ZIP_MAGIC) and len(head) >= 30:
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
    return Identity(claims="zip archive (its members are not read)")


def _zip_members(f) -> Identity:
    """A zip archive no reader takes: skipped when no member's name is of a tensor format (or a
    compressed or unnamed file), named as unchecked otherwise."""
    try:
        names = zipfile.ZipFile(f).namelist()
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        return Identity(claims=f"zip archive that cannot be listed ({e})")
    for member in names:
        base = member.rsplit("/", 1)[-1]
        if not base:
            continue  # a directory entry
        lower = base.lower()
        ext = os.path.splitext(lower)[1]
        if ext not in _HARMLESS_MEMBERS:
            return Identity(claims=f"zip archive holding {member!r} (its members are not read)")
    return Identity(skip="zip archive holding no tensor files (by its members' names)")


def _torch_record(name: str) -> bool:
    """Whether a zip's first member is one torch.save or torch.jit.save writes: a record in the
    archive's folder (data.pkl, a storage, TorchScript's constants and code)."""
    folder, _, rel = name.partition("/")
    head, _, key = rel.partition("/")
    return bool(folder) and (rel in ("data.pkl", "constants.pkl", "version", "byteorder",
                                     ".format_version") or head in (".data", "code") or
                             head in ("data", "constants") and key.isdigit())


def _is_index(path: str, size: int) -> bool:
    if path.lower().endswith(".safetensors.index.json"):
        return True
    if size > _INDEX_LIMIT:
        return False
    try:
        with open_binary(path) as f:
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
