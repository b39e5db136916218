"""The counting and boolean queries on dask arrays, declared as chunk -> combine -> aggregate.

Each block is answered by the fused numpy query (one pass, no mask); partial answers are merged
by a tree of `split_every` (dask's `reduction`). Identities: any -> False, all -> True, counts -> 0;
an empty block yields exactly its identity, so empty chunks change nothing.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import dask
import dask.array as da
import numpy as np

from ..operators import queries as numpy_path
from .inputs import as_dask_array, probe


def _chunk(query: Callable, x, axis, keepdims, **flags):
    return query(x, axis=axis, keepdims=keepdims, **flags)


def _merge(how: Callable, x, axis, keepdims):
    """Combine partial answers: boolean or / and, or integer sum (no classification happens here)."""
    return how(x, axis=axis, keepdims=keepdims)


#: name -> (numpy query, how partial answers merge, result dtype).
_REDUCTIONS = {
    "any_nan": (numpy_path.any_nan, np.any, np.dtype(bool)),
    "any_inf": (numpy_path.any_inf, np.any, np.dtype(bool)),
    "any_nonfinite": (numpy_path.any_nonfinite, np.any, np.dtype(bool)),
    "all_finite": (numpy_path.all_finite, np.all, np.dtype(bool)),
    "count_nan": (numpy_path.count_nan, np.sum, np.dtype(np.int64)),
    "count_inf": (numpy_path.count_inf, np.sum, np.dtype(np.int64)),
    "count_nonfinite": (numpy_path.count_nonfinite, np.sum, np.dtype(np.int64)),
}


def _reduce(name, x, axis, keepdims, split_every, **flags) -> da.Array:
    query, how, dtype = _REDUCTIONS[name]
    x = as_dask_array(x, name)
    query(probe(x), axis=axis if x.ndim else None, keepdims=keepdims, **flags)  # errors now
    merge = partial(_merge, how)
    return da.reduction(x, partial(_chunk, query, **flags), merge, combine=merge, axis=axis,
                        keepdims=keepdims, dtype=dtype, split_every=split_every,
                        name=f"fpclass-{name}", meta=np.empty((0,) * x.ndim, dtype))


def any_nan(x, axis=None, keepdims=False, *, split_every=None) -> da.Array:
    """Lazy numpy-equivalent of isnan(x).any(axis, keepdims=keepdims)."""
    return _reduce("any_nan", x, axis, keepdims, split_every)


def any_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True,
            split_every=None) -> da.Array:
    """Lazy isinf(x, detect_negative=..., detect_positive=...).any(axis)."""
    return _reduce("any_inf", x, axis, keepdims, split_every, detect_negative=detect_negative,
                   detect_positive=detect_positive)


def any_nonfinite(x, axis=None, keepdims=False, *, split_every=None) -> da.Array:
    """Lazy (~isfinite(x)).any(axis)."""
    return _reduce("any_nonfinite", x, axis, keepdims, split_every)


def all_finite(x, axis=None, keepdims=False, *, split_every=None) -> da.Array:
    """Lazy isfinite(x).all(axis)."""
    return _reduce("all_finite", x, axis, keepdims, split_every)


def count_nan(x, axis=None, keepdims=False, *, split_every=None) -> da.Array:
    """Lazy int64 count_nonzero(isnan(x), axis)."""
    return _reduce("count_nan", x, axis, keepdims, split_every)


def count_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True,
              split_every=None) -> da.Array:
    """Lazy int64 count_nonzero(isinf(x, ...), axis) for the selected signs."""
    return _reduce("count_inf", x, axis, keepdims, split_every, detect_negative=detect_negative,
                   detect_positive=detect_positive)


def count_nonfinite(x, axis=None, keepdims=False, *, split_every=None) -> da.Array:
    """Lazy int64 count_nonzero(~isfinite(x), axis)."""
    return _reduce("count_nonfinite", x, axis, keepdims, split_every)


# -- class histogram ---------------------------------------------------------------------------

_FIELDS = len(numpy_path.ClassCounts._fields)


def _block_class_counts(block: np.ndarray) -> np.ndarray:
    """One block's histogram as a (1, ..., 1, 9) int64 array, ready for dask's tree sum."""
    return np.array(numpy_path.class_counts(block), np.int64).reshape((1,) * block.ndim + (-1,))


def _as_class_counts(totals: np.ndarray) -> numpy_path.ClassCounts:
    return numpy_path.ClassCounts(*(int(n) for n in totals))


def class_counts(x, *, split_every=None):
    """Lazy fpclass.class_counts of the whole array: a dask Delayed computing to a ClassCounts.
    Each block yields its 9 counts; dask tree-sums them (`split_every` inputs per step)."""
    x = as_dask_array(x, "class_counts")
    numpy_path.class_counts(probe(x))  # complex / integer / datetime raise TypeError now
    per_block = x.map_blocks(
        _block_class_counts, dtype=np.int64, new_axis=x.ndim,
        chunks=tuple((1,) * len(c) for c in x.chunks) + ((_FIELDS,),),
        meta=np.empty((0,) * (x.ndim + 1), np.int64), token="fpclass-class-counts")
    totals = per_block.sum(axis=tuple(range(x.ndim)), split_every=split_every)
    # pure=False: a key derived from `totals` would be reused by every compute of it while its
    # finalize dependency is renamed each time, which distributed rejects.
    return dask.delayed(_as_class_counts, pure=False)(totals)
