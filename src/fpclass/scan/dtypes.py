"""From the dtype names files use to NumPy dtypes the core classifies (ml_dtypes for the rest)."""

from __future__ import annotations

import functools

import numpy as np

from .. import formats


@functools.lru_cache(maxsize=None)
def np_dtype(name: str) -> np.dtype:
    """The NumPy dtype for a format-table name ("bfloat16") or a NumPy dtype string ("<f4")."""
    if name in formats.ML_DTYPES_NAMES:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@functools.lru_cache(maxsize=None)
def can_hold_nonfinite(name: str) -> bool:
    """True when some bit pattern of the element dtype `name` is a NaN or an Inf."""
    f = formats.format_of(np_dtype(name))
    return f.has_nan or f.has_inf


def component(dtype: np.dtype) -> np.dtype:
    """For a complex dtype, the dtype of each part in the same byte order (float32 for c8)."""
    return np.dtype(f"{dtype.byteorder if dtype.byteorder in '<>' else '='}f{dtype.itemsize // 2}")
