"""The counting and boolean queries on dask arrays, declared as chunk -> combine -> aggregate.

Each block is answered by the fused numpy query (one pass, no mask); partial answers are merged
by a tree of `split_every` (dask's `reduction`). Identities: any -> False, all -> True, counts -> 0;
an empty block yields exactly its identity, so empty chunks change nothing.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Callable

import dask
import dask.array as da
import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..catalogue import implementation
from ..operators.queries import ClassCounts, count_type
from .inputs import as_dask_array, probe


def _chunk(query: Callable, x, axis, keepdims, **flags):
    return query(x, axis=axis, keepdims=keepdims, **flags)


def _merge(how: Callable, x, axis, keepdims):
    """Combine partial answers: boolean or / and, or integer sum (no classification happens here)."""
    return how(x, axis=axis, keepdims=keepdims)


#: How partial answers merge, by the query's first word (any_*, all_*, count_*), and the dtype of
#: the answer.
_MERGES = {"any": (np.any, np.dtype(bool)), "all": (np.all, np.dtype(bool)),
           "count": (np.sum, np.dtype(np.int64))}


def reduce(name: str, x, axis=None, keepdims=False, *, split_every=None, **flags) -> da.Array:
    """Lazy fpclass.`name` (a per-axis query): the NumPy query of the same name per block, the
    partial answers merged by a tree of `split_every`."""
    query, (how, dtype) = implementation(name), _MERGES[name.partition("_")[0]]
    x = as_dask_array(x, name)
    query(probe(x), axis=axis if x.ndim else None, keepdims=keepdims, **flags)  # errors now
    if flags.get("dtype") is not None:  # counts in the caller's integer type, summed in it too
        axes = tuple(range(x.ndim)) if axis is None else normalize_axis_tuple(axis, x.ndim)
        unknown = [ax for ax in axes if math.isnan(x.shape[ax])]
        if unknown:  # no type can be shown to hold the count: refused rather than let wrap
            raise ValueError(f"dtype= needs the length of every reduced axis; axes {unknown} "
                             f"have unknown chunk sizes: call .compute_chunk_sizes() first, or "
                             f"pass dtype=None (int64)")
        dtype = count_type(flags["dtype"], x.shape, axes)
        how = partial(np.sum, dtype=dtype)
    merge = partial(_merge, how)
    return da.reduction(x, partial(_chunk, query, **flags), merge, combine=merge, axis=axis,
                        keepdims=keepdims, dtype=dtype, split_every=split_every,
                        name=f"fpclass-{name}", meta=np.empty((0,) * x.ndim, dtype))


# -- class histogram ---------------------------------------------------------------------------

_FIELDS = len(ClassCounts._fields)


def _block_class_counts(block: np.ndarray) -> np.ndarray:
    """One block's histogram as a (1, ..., 1, 9) int64 array, ready for dask's tree sum."""
    counts = implementation("class_counts")(block)
    return np.array(counts, np.int64).reshape((1,) * block.ndim + (-1,))


def _as_class_counts(totals: np.ndarray) -> ClassCounts:
    return ClassCounts(*(int(n) for n in totals))


def class_counts(name: str, x, *, split_every=None):
    """Lazy fpclass.class_counts (`name`) of the whole array: a dask Delayed computing to a
    ClassCounts. Each block yields its 9 counts; dask tree-sums them (`split_every` per step)."""
    x = as_dask_array(x, name)
    implementation(name)(probe(x))  # complex / integer / datetime raise TypeError now
    per_block = x.map_blocks(
        _block_class_counts, dtype=np.int64, new_axis=x.ndim,
        chunks=tuple((1,) * len(c) for c in x.chunks) + ((_FIELDS,),),
        meta=np.empty((0,) * (x.ndim + 1), np.int64), token="fpclass-class-counts")
    totals = per_block.sum(axis=tuple(range(x.ndim)), split_every=split_every)
    # pure=False: a key derived from `totals` would be reused by every compute of it while its
    # finalize dependency is renamed each time, which distributed rejects.
    return dask.delayed(_as_class_counts, pure=False)(totals)
