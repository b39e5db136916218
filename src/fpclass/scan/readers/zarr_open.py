"""Opening zarr nodes without paying zarr's event loop per node: `zarr.open` makes one trip to
zarr's loop thread and back (0.5 ms warm; several on a busy machine, and 30-40% of a fresh
process's scan of an uncompressed store of a few arrays). A store's nodes are opened in batches,
one trip per batch, and each array of a directory store opened is kept with the exact bytes of
its metadata files: a task reading it re-opens nothing while those files hold the same bytes
(zarr would parse the same metadata), and opens it through zarr as before when they differ.
What a reader derived from a kept array's metadata alone (zarr_store: its task as planned, how
its blocks are read) can be attached to it and comes back with it, so a read of files holding
the same bytes derives nothing again: the comparison of bytes is the check.

An array (or a format 3 group) of a directory store whose metadata files leave zarr one format
is built by zarr from the documents already read, as `zarr.open` builds it (`AsyncArray(
metadata=<the document>)`), with no trip through its loop (which hops to a thread per file zarr
reads: 0.15 ms an array); any other node is opened by zarr, which then gives its answer."""

from __future__ import annotations

import asyncio
import json
import os
import threading

#: Nodes opened in one trip through zarr's event loop.
BATCH = 64
#: Arrays kept (the oldest dropped first); a metadata file over METADATA_BYTES is never kept.
KEEP = 4096
METADATA_BYTES = 1 << 20
#: The files zarr reads to open an array (v3, then v2 with its attributes).
METADATA_FILES = ("zarr.json", ".zarray", ".zattrs")

_kept: dict = {}   # (folder, member) -> (metadata bytes, the array's zarr metadata, attached)
_lock = threading.Lock()


def open_nodes(zarr, store, names, folder: str | None):
    """Yield (name, zarr.Array or zarr.Group, or the Exception zarr raised) for each of `names`
    in `store`, opened read-only in batches; `folder`: the store's directory (its arrays are
    then kept for `open_array`), None for other stores."""
    names = list(names)
    for at in range(0, len(names), BATCH):
        batch = names[at:at + BATCH]
        before = [_metadata(folder, n) if folder is not None else None for n in batch]
        built = [_built(zarr, store, n, b) for n, b in zip(batch, before)]
        rest = [k for k, node in enumerate(built) if node is None]
        opened = iter(_opened(zarr, store, [batch[k] for k in rest],
                              [_format(before[k]) for k in rest]) if rest else ())
        for name, files, node in zip(batch, before, built):
            if node is None:
                node = next(opened)
                if folder is not None and isinstance(node, zarr.Array):
                    _keep(folder, name, files, node)
            elif isinstance(node, zarr.Array):
                _store_kept(folder, name, files, node.metadata)
            yield name, node


def open_array(zarr, store, folder: str | None, member: str, open_one):
    """(array `member` of `store`, what was `attach`ed to it or None): the kept one bound to
    `store` when `folder` (the store's directory, None otherwise) holds the metadata bytes it was
    opened from, else (`open_one()`, None) (zarr's own open; kept when those bytes did not change
    while it opened)."""
    if folder is None:
        return open_one(), None
    now = _metadata(folder, member)
    with _lock:
        kept = _kept.get((folder, member))
    if now is not None and kept is not None and kept[0] == now:
        path = zarr.storage.StorePath(store, member)
        return zarr.Array(zarr.AsyncArray(metadata=kept[1], store_path=path)), kept[2]
    arr = open_one()
    if isinstance(arr, zarr.Array):
        _keep(folder, member, now, arr)
    return arr, None


def attach(folder: str, member: str, metadata, derived) -> None:
    """Keeps `derived` (what a reader derived from `metadata` alone) with array `member` of the
    store in `folder` while `metadata` is the one kept for it: `open_array` then gives it back
    with the array opened from the same metadata bytes."""
    with _lock:
        kept = _kept.get((folder, member))
        if kept is not None and kept[1] is metadata:
            _kept[(folder, member)] = (kept[0], metadata, derived)


def _format(files) -> int | None:
    """The zarr format that zarr itself picks for a node whose metadata files (METADATA_FILES'
    bytes, None each where absent) are `files`, when they leave one choice: 3 for a zarr.json
    alone, 2 for a .zarray alone; None (zarr looks) otherwise. Told the format, zarr reads that
    format's documents only, not the absent other's (70 us a node)."""
    if files is None:
        return None
    v3, v2 = files[0] is not None, files[1] is not None
    return 3 if v3 and not v2 else 2 if v2 and not v3 else None


def _built(zarr, store, name: str, files):
    """The zarr.Array (or zarr.Group of format 3) `name`, built by zarr from its metadata
    documents `files` (METADATA_FILES' bytes) as `zarr.open` builds it from the same bytes, where
    they leave zarr one format and zarr's open would take the node as that kind; else None (zarr
    opens the node)."""
    fmt = _format(files)
    if fmt is None:
        return None
    try:
        # what zarr.core.array.get_array_metadata, zarr.api.asynchronous.open and (a group)
        # AsyncGroup.open with use_consolidated=False do with these bytes
        doc = json.loads(files[0] if fmt == 3 else files[1])
        if not isinstance(doc, dict) or doc.get("zarr_format") != fmt:
            return None
        path = zarr.storage.StorePath(store, name)
        if fmt == 3 and doc.get("node_type") == "group":
            doc.pop("consolidated_metadata", None)
            return zarr.Group(zarr.AsyncGroup.from_dict(path, doc))
        if fmt == 3 and doc.get("node_type") != "array":
            return None
        if fmt == 2:
            doc["attributes"] = json.loads(files[2]) if files[2] is not None else {}
        return zarr.Array(zarr.AsyncArray(metadata=doc, store_path=path))
    except Exception:  # zarr's own open then gives its answer, or its error
        return None


def _opened(zarr, store, names, formats=None) -> list:
    """zarr's node (or the Exception it raised) for each of `names`, in one trip; `formats`:
    each one's zarr format where known (_format), else None."""
    from zarr.api import asynchronous
    from zarr.core.sync import sync

    async def every():
        return await asyncio.gather(
            *(asynchronous.open(store=store, path=n, mode="r", use_consolidated=False,
                                zarr_format=f)
              for n, f in zip(names, formats or [None] * len(names))), return_exceptions=True)

    out = []
    for node in sync(every()):
        if isinstance(node, BaseException) and not isinstance(node, Exception):
            raise node
        if isinstance(node, zarr.AsyncArray):
            node = zarr.Array(node)
        elif isinstance(node, zarr.AsyncGroup):
            node = zarr.Group(node)
        out.append(node)
    return out


def _keep(folder: str, member: str, before, arr) -> None:
    # kept only when the bytes were the same just before and just after zarr read them, so the
    # metadata kept is the one those bytes give
    if before is None or _metadata(folder, member) != before:
        return
    _store_kept(folder, member, before, arr.metadata)


def _store_kept(folder, member: str, files, metadata) -> None:
    """Keeps `metadata`, which zarr built from the bytes `files` of `member`'s metadata files."""
    if folder is None or files is None:
        return
    with _lock:
        if len(_kept) >= KEEP:
            del _kept[next(iter(_kept))]
        _kept[(folder, member)] = (files, metadata, None)


def _metadata(folder: str, member: str):
    """The bytes of the metadata files of node `member` (None for each one absent), or None when
    one cannot be read or is over METADATA_BYTES."""
    node = os.path.join(folder, *member.split("/")) if member else folder
    out = []
    for name in METADATA_FILES:
        try:
            with open(os.path.join(node, name), "rb") as f:
                # sized by fstat: a read of METADATA_BYTES + 1 allocates them (10-20 us a file);
                # read on to the same bound when the file holds more than it said
                size = os.fstat(f.fileno()).st_size
                data = f.read(min(size, METADATA_BYTES) + 1)
                if len(data) > size:
                    data += f.read(METADATA_BYTES + 1 - len(data))
        except FileNotFoundError:
            data = None
        except OSError:
            return None
        if data is not None and len(data) > METADATA_BYTES:
            return None
        out.append(data)
    return tuple(out)
