"""The element-wise operators on dask arrays: one numpy call per block, same chunks, lazily."""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..operators import elementwise as numpy_path
from .inputs import as_dask_array, probe, refuse_out


def _blockwise(x, what, function, **kwargs) -> da.Array:
    x = as_dask_array(x, what)
    function(probe(x), **kwargs)  # dtype and flag errors now, not at compute time
    return x.map_blocks(function, dtype=bool, meta=np.empty((0,) * x.ndim, bool),
                        token=f"fpclass-{what}", **kwargs)


def isnan(x, out=None) -> da.Array:
    """fpclass.isnan per block: a lazy bool dask array with x's chunks."""
    refuse_out(out, "isnan")
    return _blockwise(x, "isnan", numpy_path.isnan)


def isinf(x, out=None, *, detect_negative=True, detect_positive=True) -> da.Array:
    """fpclass.isinf per block, for the selected signs: a lazy bool dask array with x's chunks."""
    refuse_out(out, "isinf")
    return _blockwise(x, "isinf", numpy_path.isinf, detect_negative=detect_negative,
                      detect_positive=detect_positive)


def isfinite(x, out=None) -> da.Array:
    """fpclass.isfinite per block: a lazy bool dask array with x's chunks."""
    refuse_out(out, "isfinite")
    return _blockwise(x, "isfinite", numpy_path.isfinite)


def isposinf(x, out=None) -> da.Array:
    """fpclass.isposinf per block (complex raises TypeError now)."""
    refuse_out(out, "isposinf")
    return _blockwise(x, "isposinf", numpy_path.isposinf)


def isneginf(x, out=None) -> da.Array:
    """fpclass.isneginf per block (complex raises TypeError now)."""
    refuse_out(out, "isneginf")
    return _blockwise(x, "isneginf", numpy_path.isneginf)
