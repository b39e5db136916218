"""One reader per file format. Each has `plan(path) -> list[Task]`, reads headers only, and raises
ReaderError with a one-line reason when the file as a whole cannot be read."""

from __future__ import annotations

from ..._optional import require as _require

class ReaderError(Exception):
    """A file cannot be read as its format; the message is the one-line reason."""


def require(module: str, extra: str, needed_by: str):
    """`module` imported (an optional library a reader needs: h5py, zarr, astropy, scipy), or
    ReaderError with `fpclass._optional.require`'s message naming `extra`: the file is then a
    problem that says which extra to install. Every reader imports its optional library here."""
    try:
        return _require(module, extra, needed_by)
    except ImportError as e:
        raise ReaderError(str(e)) from None


def planner(kind: str):
    """The plan function of the reader for a detect.KINDS kind (imports only that reader)."""
    from importlib import import_module
    module = {"safetensors": "safetensors", "safetensors-index": "safetensors",
              "npy": "npy", "npz": "npy", "onnx": "onnx_model", "gguf": "gguf",
              "pytorch": "torch_checkpoint", "hdf5": "hdf5", "keras": "hdf5",
              "netcdf3": "netcdf3", "zarr": "zarr_store", "fits": "fits", "matlab": "matlab",
              "idl": "idl", "compressed": "compressed"}[kind]
    mod = import_module(f"{__name__}.{module}")
    return {"safetensors-index": getattr(mod, "plan_index", None), "npz": getattr(mod, "plan_npz", None),
            "keras": getattr(mod, "plan_keras", None)}.get(kind) or mod.plan
