"""Copying the kernels compiled into a private numba cache into the real one, entry by entry.

Two processes compiling into one cache folder lose entries: numba's IndexDataCacheFile.save()
loads a function's index, names the new data file by the first free number and saves the index,
so concurrent savers overwrite each other's index (and can pick the same data file name). A
parallel warm-up therefore compiles in workers, each into its own NUMBA_CACHE_DIR, and the parent
merges each worker's entries here, through numba's own index/data files, one saver at a time.
"""

from __future__ import annotations

import pickle
from pathlib import Path

_KERNELS = Path(__file__).resolve().parent


def merge_into(private_root: str | Path, target: str | Path) -> int:
    """Copy every entry of the kernels' caches under `private_root` (a worker's NUMBA_CACHE_DIR)
    into the cache folder `target` (compile_cache.cache_dir()); how many entries. An index whose
    source stamp is not the current source's (a kernel file edited meanwhile) is skipped."""
    from numba.core.caching import IndexDataCacheFile, _hash_source_file
    from numba.core.compiler_lock import global_compiler_lock

    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    stamps: dict = {}
    copied = 0
    with global_compiler_lock:
        for index in sorted(Path(private_root).glob("*/*.nbi")):
            source = _KERNELS / (index.name.split(".", 1)[0] + ".py")
            if not source.exists():
                continue
            if source not in stamps:
                st = source.stat()
                stamps[source] = _hash_source_file(str(source), st.st_mtime, st.st_size)
            base = index.name[:-len(".nbi")]
            theirs = IndexDataCacheFile(str(index.parent), base, stamps[source])
            ours = IndexDataCacheFile(str(target), base, stamps[source])
            for key, name in theirs._load_index().items():
                ours.save(key, theirs._load_data(name))
                copied += 1
    return copied


def index_keys(folder: str | Path) -> dict:
    """{index file name: set of its keys} for the kernels' cache `folder` (for tests and checks:
    what numba would find there), the stale indexes included."""
    out = {}
    for index in Path(folder).glob("*.nbi"):
        with open(index, "rb") as f:
            pickle.load(f)                      # numba's version
            _, overloads = pickle.loads(f.read())
        out[index.name] = set(overloads)
    return out
