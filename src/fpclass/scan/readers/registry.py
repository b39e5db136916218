"""The one registry of readers: READERS, in the order detection tests their content. Adding a
format is one new module in readers/ (with `plan(path) -> list[Task]`) and one entry here.
Detection (detect.py), the directory walk, the CLI help, the problem messages' list of formats
read and the format table of README.md and docs/scan.md are made from it (regenerate the tables
with `python -m fpclass.scan.readers.registry_table --write`; tests/test_reader_registry.py fails
when they differ). Each `_name` function below imports one reader, so a reader and its library load
only when a file of its kind is planned."""

from __future__ import annotations

from .contract import Reader
from ..signatures import (GGUF_MAGIC, HDF5_SIGNATURE, IDL_COMPRESSED, NPY_MAGIC, TORCH_LEGACY,
                          is_compressed, is_fits, is_matlab5, is_safetensors)


def _safetensors():
    from .safetensors import plan
    return plan


def _safetensors_index():
    from .safetensors import plan_index
    return plan_index


def _npy():
    from .npy import plan
    return plan


def _npz():
    from .npy import plan_npz
    return plan_npz


def _onnx():
    from .onnx_model import plan
    return plan


def _gguf():
    from .gguf import plan
    return plan


def _pytorch():
    from .torch_checkpoint import plan
    return plan


def _hdf5():
    from .hdf5 import plan
    return plan


def _keras():
    from .hdf5 import plan_keras
    return plan_keras


def _netcdf3():
    from .netcdf3 import plan
    return plan


def _zarr():
    from .zarr_store import plan
    return plan


def _fits():
    from .fits import plan
    return plan


def _matlab():
    from .matlab import plan
    return plan


def _idl():
    from .idl import plan
    return plan


def _compressed():
    from .compressed import plan
    return plan


READERS = (
    Reader("safetensors", "safetensors", _safetensors, (".safetensors",), content=is_safetensors,
           detected="an 8-byte header length that fits the file, then `{`"),
    Reader("safetensors-index", "safetensors index", _safetensors_index,
           known_names=("*.safetensors.index.json",), detected="a JSON file with a weight_map"),
    Reader("npy", "NumPy array", _npy, (".npy",), magic=(NPY_MAGIC,)),
    Reader("npz", "NumPy archive", _npz, (".npz",), detected="a zip whose first member is a .npy"),
    Reader("onnx", "ONNX model or TensorProto", _onnx, (".onnx",), known_names=(".pb",),
           detected="a protobuf with a graph and an ir_version; a .pb that is strictly a "
           "TensorProto"),
    Reader("gguf", "GGUF", _gguf, (".gguf",), magic=(GGUF_MAGIC,)),
    Reader("pytorch", "PyTorch checkpoint", _pytorch, known_names=(".pt", ".pth", ".bin", ".ckpt"),
           magic=(TORCH_LEGACY,), options=("allow_globals",),
           detected="a zip whose first member is a torch.save or TorchScript record; the "
           "legacy format's pickled magic number"),
    Reader("hdf5", "HDF5, NetCDF-4, MATLAB v7.3", _hdf5, (".h5", ".hdf5", ".he5"),
           known_names=(".nc", ".nc4", ".mat"), magic=(HDF5_SIGNATURE,), extra="hdf5",
           detected="the signature after a user block (512, 1024, 2048, ... bytes)"),
    Reader("keras", "Keras archive", _keras, (".keras",), extra="hdf5",
           detected="a zip named .keras"),
    Reader("netcdf3", "NetCDF classic", _netcdf3, known_names=(".nc", ".cdf"),
           magic=(b"CDF\x01", b"CDF\x02", b"CDF\x05")),
    Reader("zarr", "zarr store", _zarr, known_names=(".zarr.zip",), directories=(".zarr",),
           markers=(".zarray", ".zgroup", "zarr.json"), extra="zarr",
           detected="a zip named .zarr.zip"),
    Reader("fits", "FITS", _fits, (".fits", ".fit", ".fts", ".fz"), content=is_fits, extra="fits",
           detected="`SIMPLE  =` and a first block of printable ASCII"),
    Reader("matlab", "MATLAB v4/v5", _matlab, (".mat",), content=is_matlab5, extra="matlab",
           detected="v5: version and byte order at byte 124; v4: its name"),
    Reader("idl", "IDL save file", _idl, (".sav",), magic=(b"SR\x00\x04", IDL_COMPRESSED),
           extra="matlab"),
    Reader("compressed", "any of these in a gzip, bzip2, xz or compress stream", _compressed,
           known_names=(".gz", ".bz2", ".xz", ".Z"), content=is_compressed,
           options=("identify", "skip_by_head", "planner"),
           detected="gzip, bzip2, xz and compress magic numbers"),
)

BY_KIND = {reader.kind: reader for reader in READERS}
KINDS = tuple(BY_KIND)
#: Extension -> kind, for files whose content no reader recognises.
BY_EXTENSION = {ext: reader.kind for reader in READERS for ext in reader.extensions}
#: Directory entries that make a directory one store, read as one unit -> its kind.
MARKERS = {marker: reader.kind for reader in READERS for marker in reader.markers}


def planner(kind: str):
    """The plan function of the reader of `kind` (imports only that reader)."""
    return BY_KIND[kind].plan


def by_content(head: bytes, size: int) -> str:
    """The kind whose magic number or header test the first bytes of a file of `size` bytes
    pass, or ""."""
    for reader in READERS:
        if reader.recognizes(head, size):
            return reader.kind
    return ""


def store_kind(name: str, entries) -> str:
    """The kind of the directory called `name` holding `entries` (names) when it is a store read
    as one unit, or ""."""
    lower, entries = name.lower(), set(entries)
    for reader in READERS:
        if any(lower.endswith(d) for d in reader.directories) or entries & set(reader.markers):
            return reader.kind
    return ""


def _names(reader: Reader) -> tuple:
    return reader.extensions + reader.known_names + tuple(f"*{d}/" for d in reader.directories)


def accepted() -> str:
    """The formats read, for the CLI help and problem messages."""
    return ", ".join(f"{r.format} ({' '.join(_names(r))})" if _names(r) else r.format
                     for r in READERS)
