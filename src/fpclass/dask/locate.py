"""first_* and locate_* on dask arrays: global N-d indices in C order, computed lazily.

Each block is searched by the numpy query; its local hits are shifted by the block's offset and
turned into global C-order positions. Within a block, local C order agrees with global C order,
so the global first hit is the smallest of the blocks' first hits, and the global first `limit`
hits are among the blocks' first `limit` hits: every partial answer stays at most `limit` long.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import dask
import numpy as np

from ..catalogue import implementation
from .inputs import as_dask_array, block_offsets, known_shape, probe

#: A block without a hit reports this position; it is larger than any real one.
_NONE = np.iinfo(np.int64).max
#: Partial answers merged per step when the caller gives no split_every.
DEFAULT_SPLIT_EVERY = 8


def _global_positions(local: np.ndarray, offset, shape) -> np.ndarray:
    """(k, ndim) block-local indices -> sorted global C-order positions (int64)."""
    if not shape:
        return np.zeros(len(local), np.int64)
    index = tuple(local[:, d] + offset[d] for d in range(len(shape)))
    return np.ravel_multi_index(index, shape).astype(np.int64, copy=False)


def _block_first(block, locate: Callable, offsets, shape, block_id=None):
    offset = [offsets[d][i] for d, i in enumerate(block_id)]
    hit = _global_positions(locate(block, 1), offset, shape)
    return np.full((1,) * block.ndim, hit[0] if hit.size else _NONE, np.int64)


def _as_index(position, shape):
    position = int(position)
    if position == _NONE:
        return None
    return tuple(int(i) for i in np.unravel_index(position, shape)) if shape else ()


def _first(name, locate: Callable, x, split_every):
    x = as_dask_array(x, name)
    locate(probe(x), 1)  # dtype and flag errors now
    shape = known_shape(x, name)
    flat = x.reshape(1) if x.ndim == 0 else x  # one code path: blocks always have an index
    per_block = flat.map_blocks(
        _block_first, locate, block_offsets(flat), known_shape(flat, name), dtype=np.int64,
        chunks=tuple((1,) * len(c) for c in flat.chunks),
        meta=np.empty((0,) * flat.ndim, np.int64), token=f"fpclass-{name}")
    # pure=False: see reductions.class_counts (a Delayed over a dask array needs a fresh key)
    return dask.delayed(_as_index, pure=False)(per_block.min(split_every=split_every), shape)


def _block_hits(block, locate: Callable, limit, offset, shape) -> np.ndarray:
    return _global_positions(locate(block, limit), offset, shape)


def _merge_hits(limit, *parts) -> np.ndarray:
    merged = np.sort(np.concatenate(parts))
    return merged if limit is None else merged[:limit]


def _as_indices(positions, shape) -> np.ndarray:
    if not shape:
        return np.empty((len(positions), 0), np.int64)
    return np.stack(np.unravel_index(positions, shape), axis=-1).reshape(len(positions), len(shape))


def _locate(name, locate: Callable, x, limit, split_every):
    x = as_dask_array(x, name)
    locate(probe(x), limit)  # dtype, flag and limit errors now
    shape = known_shape(x, name)
    flat = x.reshape(1) if x.ndim == 0 else x
    offsets = block_offsets(flat)
    blocks = flat.to_delayed(optimize_graph=False)  # keeps x's keys: shared with other queries
    search = dask.delayed(_block_hits, pure=True)
    parts = [search(blocks[ix], locate, limit, [offsets[d][i] for d, i in enumerate(ix)],
                    flat.shape)
             for ix in np.ndindex(*blocks.shape)]
    merge = dask.delayed(partial(_merge_hits, limit), pure=True)
    k = split_every or DEFAULT_SPLIT_EVERY
    if k < 2:
        raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}")
    while len(parts) > 1:
        parts = [merge(*parts[i:i + k]) for i in range(0, len(parts), k)]
    return dask.delayed(_as_indices, pure=True)(parts[0] if parts else np.empty(0, np.int64), shape)


def _search(name: str, flags: dict) -> Callable:
    """The NumPy locate_* query that finds what `name` (first_* or locate_*) looks for."""
    query = implementation("locate_" + name.partition("_")[2])
    return partial(query, **flags) if flags else query


def first(name: str, x, *, split_every=None, **flags):
    """Lazy fpclass.`name` (first_*): a Delayed global N-d index of the first hit in C order, or
    None."""
    return _first(name, _search(name, flags), x, split_every)


def locate(name: str, x, limit=None, *, split_every=None, **flags):
    """Lazy fpclass.`name` (locate_*): Delayed (k, ndim) int64 indices of the first `limit` hits
    (None: all) in C order."""
    return _locate(name, _search(name, flags), x, limit, split_every)
