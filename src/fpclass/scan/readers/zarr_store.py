"""Zarr stores, v2 and v3 (a directory, or a .zarr.zip): every array of every group, read through
zarr-python 3 in the store's own chunk grid, never whole; the store is opened read-only.

An array's blocks are its chunks (a sharded v3 array's shards when one decodes to at most
SHARD_BYTES, its inner chunks otherwise), numbered in C order over that grid; a task's first/count
select blocks. Runs of blocks that form a rectangle are read in one zarr call of up to the
engine's chunk_bytes (zarr's cost per call is about 0.3 ms). Uncompressed chunks of a directory
store (no codec but `bytes`) are read straight from their files into one reused buffer, keyed by
zarr's own chunk-key encoding; compressed ones of a pipeline known exactly (blosc, zstd, gzip or
zlib over the elements in C order) are read from their files and decoded here (`zarr_chunks`);
everything else is decoded by zarr.

Chunks never written read as the fill value, as zarr returns them, and are counted like data: a
NaN fill value is zarr's blank, so the task is `missing` and those NaN count as missing values.

Every array of the store is found at any depth, with or without group metadata above it (a v2
store written without .zgroup files), and every float value in an array's or group's attributes
(.zattrs, or zarr.json's "attributes") is checked as "path@attribute" (`zarr_nodes`).
A task reading an array whose metadata files hold the bytes it was planned from derives nothing
again: its planned task and blocks are kept with those bytes (`zarr_open.attach`).
A blosc chunk's frame length is checked before zarr decodes it (`zarr_blosc`).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from dataclasses import dataclass

import numpy as np

from . import ReaderError, require
from ..._optional import install_hint
from ..dtypes import component
from ..missing import cf, zarr_fill_is_blank
from ...operators.read_sieve import read_sieve
from ..storage.grids import BlockGrid, Grid, boxes
from ..storage.source import is_url
from ..tasks import CHECK, Task, problem
from .bounds import check_count
from .reporting import marker, not_applicable, unchecked
from .zarr_blosc import blosc_checked, blosc_frames
from .zarr_chunks import chunk_codec, decodes_here, packed_blocks, raw_blocks
from .zarr_nodes import Listing, attribute_tasks, head_reader, stored_files, strays
from .zarr_open import attach, open_array, open_nodes

#: A sharded array is read by shard when a shard decodes to at most this many bytes (one read of
#: the shard file, 9x less overhead per inner chunk in benchmarks), by inner chunk otherwise.
SHARD_BYTES = 64 << 20
#: An array of more blocks than this, nearly all never written (over 16 declared per stored
#: file), is unchecked: zarr reads a missing chunk as its fill value in about 0.1 ms, so a small
#: store declaring 2^30 chunks would take days.
SPARSE_BLOCKS = 1 << 14


#: The zarr-python this reader is written against (its data type API is 3.1's); it needs
#: Python >= 3.11.
ZARR_VERSION = (3, 1)


def _zarr():
    """zarr-python >= 3.1, imported only when a store is read."""
    need = "reading zarr stores needs zarr-python >= 3.1 (Python >= 3.11)"
    zarr = require("zarr", "zarr", "reading zarr stores (zarr-python >= 3.1, Python >= 3.11)")
    version = tuple(int(p) for p in re.findall(r"\d+", zarr.__version__)[:2])
    if version < ZARR_VERSION:
        raise ReaderError(f"{need}, {zarr.__version__} is installed: {install_hint('zarr')}")
    return zarr


def _one_line(e: Exception) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split()) or repr(e)}"


@contextlib.contextmanager
def _opened(path: str):
    """(zarr, the store at `path` opened read-only): a directory, or a zip file."""
    zarr = _zarr()
    if is_url(path):
        from ..storage import remote
        store = zarr.storage.FsspecStore.from_url(path, read_only=True,
                                                  storage_options=remote.options_for(path))
    elif os.path.isdir(path):
        store = zarr.storage.LocalStore(path, read_only=True)
    else:
        store = zarr.storage.ZipStore(path, mode="r")
    try:
        yield zarr, store
    finally:
        store.close()


def _open_node(zarr, store, path: str):
    # zarr raises what its parsers raise for bad metadata (KeyError, ValueError, TypeError, its
    # own errors): any of them means zarr refuses the node. Consolidated metadata is ignored so
    # that the arrays listed are the arrays the store holds.
    try:
        return zarr.open(store=store, path=path, mode="r", use_consolidated=False)
    except Exception as e:
        raise ReaderError(_one_line(e)) from None


def plan(path: str) -> list:
    """Tasks for every array of the store at `path` (a directory, or a .zarr.zip), at any depth,
    with or without group metadata above it: named by its path inside the store ("" for a store
    that is one array), and for every float attribute of an array or group ("path@attribute").
    ReaderError when zarr refuses the store's root or the store holds no zarr metadata; an array
    or group zarr refuses inside it is unchecked with zarr's reason."""
    with _opened(path) as (zarr, store):
        listing = Listing(path)
        if not listing.nodes:
            raise ReaderError("zarr cannot open the store: no zarr metadata (.zarray, .zgroup or "
                              "zarr.json) in it or below it")
        tasks = [marker(path, "zarr")]
        arrays, covered = set(), set()
        folder = path if isinstance(store, zarr.storage.LocalStore) else None
        for name, node in open_nodes(zarr, store, listing.nodes, folder):
            if isinstance(node, Exception):
                e = _one_line(node)
                if not name:
                    raise ReaderError(f"zarr cannot open the store: {e}") from None
                tasks.append(unchecked(path, name, "?", (),
                                       f"zarr cannot open this array or group: {e}"))
                covered.add(name)
                continue
            try:
                if isinstance(node, zarr.Array):
                    arrays.add(name)
                    tasks += cf.with_declared_range([_array_task(zarr, store, path, name, node)],
                                                    node.attrs.asdict())
                tasks += attribute_tasks(path, name, node.attrs.asdict())
            except Exception as e:  # metadata zarr opens but cannot describe (a fill value
                # of the wrong shape for the data type, for one)
                tasks.append(unchecked(path, name, "?", (), f"zarr cannot describe this array "
                                       f"or group: {_one_line(e)}"))
                covered.add(name)
        tasks += [problem(path, reason, name) for name, reason in listing.loops]
        tasks += [unchecked(path, name, "file", (), "a file inside the zarr store that is neither "
                            "zarr metadata nor a chunk, so zarr never reads it: not checked (scan "
                            "it by its own path)")
                  for name in strays(listing.files, listing.nodes, arrays, covered,
                                     head_reader(path))]
        check_count(len(tasks), "arrays and float attributes")
    return tasks


def _label(arr, md: dict) -> str:
    """The array's data type as its metadata names it: "<f4" (v2), "float32" (v3)."""
    name = md.get("dtype", md.get("data_type"))
    if isinstance(name, dict):
        name = name.get("name")
    return name if isinstance(name, str) else str(arr.dtype)


def _array_task(zarr, store, path, name, arr, md: dict | None = None) -> Task:
    dt = np.dtype(arr.dtype)
    md = arr.metadata.to_dict() if md is None else md  # (0.3 ms each time)
    label, shape = _label(arr, md), tuple(arr.shape)
    if dt.kind in "UST":
        return not_applicable(path, name, label, shape, "strings: not a floating-point type")
    if dt.hasobject:
        return unchecked(path, name, label, shape, "object array: values of any Python type, "
                         "decoded by an object codec; not read, so not checked")
    if dt.kind == "V":
        floats = [f for f, (t, *_) in (dt.fields or {}).items() if t.kind in "fcV"]
        if dt.fields is None:
            return unchecked(path, name, label, shape, f"opaque {dt.str} bytes: the element "
                             "format is unknown, so not checked")
        if floats:
            return unchecked(path, name, label, shape, "structured data type with floating-point "
                             f"fields ({', '.join(floats)}): not supported, so not checked")
        return not_applicable(path, name, label, shape, "structured data type without "
                              "floating-point fields")
    if dt.kind not in "fc":  # bool, integers, datetime64, timedelta64
        return not_applicable(path, name, label, shape)
    blocks = _Blocks.of(zarr, store, arr)
    count = math.prod(blocks.grid)
    if count > SPARSE_BLOCKS:
        stored = stored_files(path, name)
        if count > 16 * stored + SPARSE_BLOCKS:
            return unchecked(path, name, label, shape, f"{count} chunks declared, {stored} "
                             "stored: the others read as the fill value, which zarr gives one "
                             "chunk at a time (about 0.1 ms each): not checked")
    element = blocks.raw or (blocks.codec[1] if blocks.codec else dt)
    grid = shape
    if dt.kind == "c":
        element, grid = component(element), shape + (2,)
    # CF valid ranges in the attributes (as xarray's CF decoding reads them): out of range
    valid = cf.range_policy(arr.attrs.asdict(), element.str) if dt.kind == "f" else None
    task = Task(path, name, label, shape, CHECK, element=element.str, grid=grid,
                storage=Grid(path, "zarr_store", int(arr.nbytes), math.prod(blocks.grid), name,
                             decode=valid, packed=blocks.raw is None),
                missing=zarr_fill_is_blank(arr.fill_value))
    if isinstance(store, zarr.storage.LocalStore) and count <= SPARSE_BLOCKS:
        # derived from the metadata alone (the sparse check counts files): kept with its bytes
        frames = blosc_frames(md)
        attach(path, name, arr.metadata, _Read(task, blocks, frames, dt.kind == "c",
                                               frames and decodes_here("blosc")))
    return task


@dataclass(frozen=True)
class _Read:
    """What reading an array needs, derived from its metadata alone: its task as planned, its
    blocks, whether each chunk is a blosc frame (and then whether blosc decoded on the calling
    thread, zarr_chunks.decodes_here, which decides `blocks.codec`), whether it is complex."""

    task: Task
    blocks: "_Blocks | None"
    frames: bool
    complex_: bool
    blosc_here: bool


@dataclass(frozen=True)
class _Blocks:
    """How an array is read: blocks of `shape` (a chunk or a shard), `grid` of them; `raw` is the
    stored dtype when each block is an uncompressed chunk file read directly, else None; `codec`
    (zarr_chunks.chunk_codec) when each is a compressed chunk file decoded here, else None."""

    shape: tuple
    grid: tuple
    raw: np.dtype | None
    keyed: bool  # each block is one stored key (a chunk or a whole shard)
    codec: tuple | None = None

    @classmethod
    def of(cls, zarr, store, arr) -> "_Blocks":
        itemsize = np.dtype(arr.dtype).itemsize
        shape, keyed, raw, codec = tuple(arr.chunks), True, None, None
        if arr.shards is not None:
            if math.prod(arr.shards) * itemsize <= SHARD_BYTES:
                shape = tuple(arr.shards)
            else:
                keyed = False
        elif isinstance(store, zarr.storage.LocalStore):
            raw = _raw_dtype(zarr, arr)
            codec = None if raw is not None else chunk_codec(zarr, arr)
        return cls(shape, BlockGrid(arr.shape, shape).grid, raw, keyed, codec)


def _raw_dtype(zarr, arr):
    """The stored dtype when a chunk file is the chunk's elements as they are (C order, no
    compression or filter), else None."""
    md = arr.metadata
    if md.zarr_format == 2:
        if md.compressor is None and not md.filters and md.order == "C":
            return np.dtype(md.dtype.to_native_dtype())
        return None
    codecs = md.codecs
    if (len(codecs) == 1 and isinstance(codecs[0], zarr.codecs.BytesCodec)
            and not md.storage_transformers):
        big = codecs[0].endian is not None and codecs[0].endian.value == "big"
        return np.dtype(arr.dtype).newbyteorder(">" if big else "<")
    return None


def read_blocks(task: Task, chunk_bytes: int):
    """Yield (origin, block) for blocks first .. first + count - 1 of the array `task.member`, in
    C order over its block grid (several adjacent blocks at a time, up to `chunk_bytes`); complex
    blocks as float views with a trailing parts axis. ReaderError when the array changed since it
    was planned or a chunk cannot be read or decoded."""
    where = task.storage
    with _opened(where.source) as (zarr, store):
        checked = blosc_checked(zarr)(store)
        folder = where.source if isinstance(store, zarr.storage.LocalStore) else None
        try:
            arr, kept = open_array(zarr, checked, folder, where.member,
                                   lambda: _open_node(zarr, checked, where.member))
        except ReaderError as e:
            raise ReaderError(f"zarr cannot open the array: {e}") from None
        if kept is None or (kept.frames and kept.blosc_here != decodes_here("blosc")):
            # other metadata bytes than planned (or none kept): all derived again and compared
            md = arr.metadata.to_dict()
            kept = _Read(_array_task(zarr, store, task.file, task.name, arr, md), None,
                         blosc_frames(md), np.dtype(arr.dtype).kind == "c", False)
        now = kept.task
        if (now.status, now.shape, now.element) != (CHECK, task.shape, task.element) \
                or now.storage.nblocks != where.nblocks:
            blocks = now.storage.nblocks if now.storage is not None else 0
            raise ReaderError(f"the array changed since the store was planned: now {now.dtype}"
                              f"{list(now.shape)} in {blocks} blocks")
        if kept.frames:
            checked.prefix = f"{where.member}/" if where.member else ""
        blocks, complex_ = kept.blocks or _Blocks.of(zarr, store, arr), kept.complex_
        end = where.nblocks if task.count < 0 else task.first + task.count
        if blocks.raw is not None:
            # values classified as stored: a sieve keeps the statistics of chunks all finite
            sieve = read_sieve(blocks.raw, math.prod(blocks.shape) * blocks.raw.itemsize) \
                if where.decode is None and not complex_ else None
            parts = raw_blocks(arr, _folder(where), blocks.shape, blocks.raw, task.first, end,
                               chunk_bytes, lambda idx: _read(arr, blocks, idx, (1,) * len(idx)),
                               sieve)
        elif blocks.codec is not None:
            parts = packed_blocks(arr, _folder(where), blocks.shape, blocks.codec, task.first,
                                  end, lambda idx: _read(arr, blocks, idx, (1,) * len(idx)))
        else:
            parts = _zarr_blocks(arr, blocks, task.first, end, chunk_bytes)
        if where.decode is not None:
            parts = cf.decode_blocks(parts, where.decode, chunk_bytes)
        for origin, block in parts:
            if complex_:
                block = np.lib.stride_tricks.as_strided(
                    block.real, block.shape + (2,), block.strides + (block.itemsize // 2,))
                origin += (0,)
            yield origin, block


def _zarr_blocks(arr, blocks, first, end, chunk_bytes):
    block_bytes = math.prod(blocks.shape) * np.dtype(arr.dtype).itemsize
    per_read = max(1, chunk_bytes // max(block_bytes, 1))
    for idx, span in boxes(blocks.grid, first, end, per_read):
        yield _origin(blocks, idx), _read(arr, blocks, idx, span)


def _origin(blocks, idx) -> tuple:
    return tuple(i * b for i, b in zip(idx, blocks.shape))


def _region(arr, blocks, idx, span) -> tuple:
    return tuple(slice(i * b, min((i + n) * b, s))
                 for i, n, b, s in zip(idx, span, blocks.shape, arr.shape))


def _read(arr, blocks, idx, span):
    """Blocks `idx` .. `idx + span` as one array; ReaderError naming the first block that zarr
    cannot read or decode."""
    try:
        return np.asarray(arr.get_basic_selection(_region(arr, blocks, idx, span)))
    except ReaderError:
        raise
    except Exception as e:  # codecs raise anything (RuntimeError, ValueError, their own errors)
        error = e
    for one in np.ndindex(*span):  # find the block at fault, to name it
        at = tuple(i + o for i, o in zip(idx, one))
        try:
            arr.get_basic_selection(_region(arr, blocks, at, (1,) * len(at)))
        except ReaderError:
            raise
        except Exception as e:
            raise ReaderError(f"{_block_name(arr, blocks, at)} cannot be read: "
                              f"{_one_line(e)}") from None
    raise ReaderError(f"blocks {list(idx)} + {list(span)} cannot be read: {_one_line(error)}")


def _block_name(arr, blocks, idx) -> str:
    md = arr.metadata
    if blocks.keyed:
        return f"chunk {md.encode_chunk_key(idx)!r}"
    shard = tuple(i * c // s for i, c, s in zip(idx, blocks.shape, arr.shards))
    return f"inner chunk {list(idx)} of shard {md.encode_chunk_key(shard)!r}"


def _folder(where) -> str:
    """The directory of the array a Grid storage names."""
    return os.path.join(where.source, *where.member.split("/")) if where.member else where.source
