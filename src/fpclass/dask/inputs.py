"""What every dask entry point does first: accept a dask array and validate it like numpy would,
without touching its data."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np


def as_dask_array(x, what: str) -> da.Array:
    """`x` if it is a dask array; TypeError naming the accepted input otherwise."""
    if isinstance(x, da.Array):
        return x
    hint = " (convert a dask DataFrame with .to_dask_array(lengths=True))" \
        if hasattr(x, "to_dask_array") else ""
    raise TypeError(f"fpclass.dask.{what} needs a dask.array.Array, got {type(x).__module__}."
                    f"{type(x).__qualname__}{hint}")


def refuse_out(out, what: str) -> None:
    if out is not None:
        raise TypeError(f"fpclass.dask.{what}: out= is not supported for dask arrays (they are "
                        "immutable); use the returned lazy array")


def probe(x: da.Array) -> np.ndarray:
    """An empty numpy array with x's dtype and (where possible) ndim: running the numpy function
    on it raises the same dtype / axis / flag errors at graph-construction time, reading nothing."""
    return np.empty((0,) * max(x.ndim, 1), x.dtype)


def known_shape(x: da.Array, what: str) -> tuple[int, ...]:
    """x's shape, which locating needs for global indices; ValueError for unknown chunk sizes."""
    if any(math.isnan(n) for n in x.shape):
        raise ValueError(f"fpclass.dask.{what} needs known chunk sizes to give global indices; "
                         "call x.compute_chunk_sizes() first")
    return tuple(int(n) for n in x.shape)


def block_offsets(x: da.Array) -> list[np.ndarray]:
    """Per axis, the start index of each block along it."""
    return [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64) for c in x.chunks]
