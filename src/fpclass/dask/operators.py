"""The element-wise operators on dask arrays: the NumPy operator of the same name per block, same
chunks, lazily."""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..catalogue import implementation
from .inputs import as_dask_array, probe, refuse_out


def blockwise(name: str, x, out=None, **flags) -> da.Array:
    """fpclass.`name` (an element-wise operator) per block: a lazy bool dask array with x's chunks."""
    refuse_out(out, name)
    x = as_dask_array(x, name)
    function = implementation(name)
    function(probe(x), **flags)  # dtype and flag errors now, not at compute time
    return x.map_blocks(function, dtype=bool, meta=np.empty((0,) * x.ndim, bool),
                        token=f"fpclass-{name}", **flags)
