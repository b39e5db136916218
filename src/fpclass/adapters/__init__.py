"""Framework adapters: torch tensors, JAX and other DLPack arrays, xarray and pandas objects in,
answers in the caller's container out.

`adapter_for(x)` recognizes a foreign array by the module its type (or a base class) is defined
in, as array-api-compat's is_torch_array does, so answering never imports a framework the caller
has not imported. Each adapter module has `dispatch(name, x, *args, **kwargs)`: the public
function `name` applied to `x`.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..catalogue import implementation

#: The top-level package a type comes from -> the module that handles it.
ADAPTERS = {
    "dask": "fpclass.dask", "distributed": "fpclass.dask",
    "torch": "fpclass.adapters.torch",
    "jax": "fpclass.adapters.dlpack", "jaxlib": "fpclass.adapters.dlpack",
    "cupy": "fpclass.adapters.dlpack",
    "xarray": "fpclass.adapters.xarray",
    "pandas": "fpclass.adapters.pandas",
}
#: Used for any other object that exports DLPack or CUDA array interfaces.
DLPACK = "fpclass.adapters.dlpack"


def adapter_for(x):
    """The adapter module for `x`, or None when `x` goes to the NumPy path (ndarrays and their
    subclasses, scalars, lists, anything numpy.asarray takes)."""
    cls = type(x)
    target = ADAPTERS.get(cls.__module__.partition(".")[0])
    if target is None:
        if isinstance(x, np.ndarray) or isinstance(x, np.generic):
            return None
        for base in cls.__mro__[1:-1]:  # a subclass defined elsewhere (a user's torch.Tensor)
            target = ADAPTERS.get(base.__module__.partition(".")[0])
            if target is not None:
                break
        else:
            if hasattr(cls, "__dlpack__") or hasattr(cls, "__cuda_array_interface__"):
                target = DLPACK
            else:
                return None
    return importlib.import_module(target)


def route(name: str, x, *args, **kwargs):
    """The public function `name` applied to `x`, whatever its container: its adapter's answer,
    or the NumPy implementation's (what fpclass.`name` does; for adapters holding other arrays)."""
    adapter = adapter_for(x)
    if adapter is not None:
        return adapter.dispatch(name, x, *args, **kwargs)
    return implementation(name)(x, *args, **kwargs)
