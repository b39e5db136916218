"""One reader per file format. Each has `plan(path) -> list[Task]`, reads headers only, and raises
ReaderError with a one-line reason when the file as a whole cannot be read."""

from __future__ import annotations


class ReaderError(Exception):
    """A file cannot be read as its format; the message is the one-line reason."""


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
