"""The chunked float32 arrays bench_dask.py times, built lazily three ways.

A module of its own so that dask pickles these functions by reference: the LocalCluster's workers
import it (bench_dask.py puts this folder on their path) and keep their own chunk pool, where
functions of a __main__ script would be shipped by value with every task, pool and all.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

TILE = 1 << 18  # float32 elements in the random tile each chunk repeats (1 MiB)


def _chunk(seed: int, n: int, block_id=None) -> np.ndarray:
    rng = np.random.default_rng([seed, block_id[0]])
    tile = rng.standard_normal(TILE, dtype=np.float32)
    out = np.resize(tile, n)
    if block_id[0] == 3:  # one NaN and one -Inf deep inside one chunk: no early exit anywhere
        out[n // 2] = np.nan
        out[n // 2 + 1] = -np.inf
    return out


def _layout(gib: float, chunk_mib: int) -> tuple[int, int]:
    per_chunk = chunk_mib * (1 << 20) // 4
    return per_chunk, max(1, int(gib * (1 << 30)) // (per_chunk * 4))


def make_array(gib: float, chunk_mib: int, seed: int = 0) -> da.Array:
    per_chunk, n_chunks = _layout(gib, chunk_mib)
    return da.map_blocks(_chunk, seed, per_chunk, chunks=((per_chunk,) * n_chunks,),
                         dtype=np.float32, meta=np.empty((0,), np.float32))


POOL = 8  # distinct chunks each process keeps for --source memory
_pool: dict = {}


def _pooled_chunk(seed: int, n: int, block_id=None) -> np.ndarray:
    """Chunk b is a read-only view of one of POOL chunks made once per process (chunk 3, with
    the NaN and -Inf, is its own): an in-memory array, read from memory, never generated twice."""
    b = block_id[0]
    key = (seed, n, 3 if b == 3 else (b % POOL if b % POOL != 3 else POOL))
    if key not in _pool:
        _pool[key] = _chunk(seed, n, block_id=(key[2],))
        _pool[key].flags.writeable = False
    return _pool[key][:]


def fill_pool(seed: int, n: int) -> None:
    """Make this process's pooled chunks now, before anything is timed."""
    for b in range(POOL + 1):
        _pooled_chunk(seed, n, block_id=(b,))


def memory_array(gib: float, chunk_mib: int, seed: int = 0) -> da.Array:
    per_chunk, n_chunks = _layout(gib, chunk_mib)
    return da.map_blocks(_pooled_chunk, seed, per_chunk, chunks=((per_chunk,) * n_chunks,),
                         dtype=np.float32, meta=np.empty((0,), np.float32))


def _mapped_chunk(path: str, n: int, block_id=None) -> np.ndarray:
    return np.load(path, mmap_mode="r")[block_id[0] * n:(block_id[0] + 1) * n]


def write_file(path: str, gib: float, chunk_mib: int, seed: int = 0) -> None:
    """The chunks of make_array(gib, chunk_mib, seed), written to one .npy file."""
    per_chunk, n_chunks = _layout(gib, chunk_mib)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(per_chunk * n_chunks,))
    for b in range(n_chunks):
        out[b * per_chunk:(b + 1) * per_chunk] = _chunk(seed, per_chunk, block_id=(b,))
    out.flush()
    del out


def file_array(path: str, gib: float, chunk_mib: int) -> da.Array:
    per_chunk, n_chunks = _layout(gib, chunk_mib)
    return da.map_blocks(_mapped_chunk, path, per_chunk, chunks=((per_chunk,) * n_chunks,),
                         dtype=np.float32, meta=np.empty((0,), np.float32))
