"""Zarr chunks of a directory store read from their files here: uncompressed ones straight into a
reused buffer (raw_blocks), compressed ones then decoded here (packed_blocks), by the
codec their metadata names, on the scan thread that reads them: no trip through zarr's event loop
per chunk, so the chunks of a large array (cut into parts, storage.grids.PACKED_PART_BYTES)
decompress on every core. Only pipelines known exactly are taken: the chunk's elements in C order
(v2: no filters, order "C"; v3: `bytes` then one of blosc, zstd, gzip; no sharding, no storage
transformer), compressed by blosc, zstd, gzip or zlib; any other array is read through zarr.

Thread policy: blosc decompresses on one thread here, whatever thread calls it (zarr sets
numcodecs.blosc.use_threads to False when imported; while it is not False, blosc arrays are read
through zarr), so a scan's threads are the only workers; zstd and zlib have none.
"""

from __future__ import annotations

import math
import os
import zlib

import numpy as np

from . import ReaderError
from ...operators.statistics import ValueStats
from ..storage.buffers import thread_buffer
from ..storage.classified import FiniteBlock
from ..storage.grids import BlockGrid
from ..storage.reads import close_source, open_source, read_exactly, source_size
from .zarr_blosc import check_blosc_frame

#: Compressors decoded here, by their numcodecs / zarr v3 names.
CODECS = ("blosc", "zstd", "gzip", "zlib")
#: Chunks decoding to more bytes than this are read through zarr (a chunk is decoded whole here).
CHUNK_LIMIT = 256 << 20


def chunk_codec(zarr, arr) -> tuple | None:
    """(codec name, stored dtype) when every stored chunk of `arr` is its elements in C order
    compressed by one codec of CODECS and decodes to at most CHUNK_LIMIT bytes, else None (the
    array is read through zarr)."""
    md = arr.metadata
    if math.prod(arr.chunks) * np.dtype(arr.dtype).itemsize > CHUNK_LIMIT:
        return None
    if md.zarr_format == 2:
        codec = getattr(md.compressor, "codec_id", None)
        if md.filters or md.order != "C" or codec not in CODECS or not decodes_here(codec):
            return None
        return codec, np.dtype(md.dtype.to_native_dtype())
    codecs = md.codecs
    if md.storage_transformers or len(codecs) != 2 \
            or not isinstance(codecs[0], zarr.codecs.BytesCodec):
        return None
    names = {zarr.codecs.BloscCodec: "blosc", zarr.codecs.ZstdCodec: "zstd",
             zarr.codecs.GzipCodec: "gzip"}
    codec = names.get(type(codecs[1]))
    if codec is None or not decodes_here(codec):
        return None
    big = codecs[0].endian is not None and codecs[0].endian.value == "big"
    return codec, np.dtype(arr.dtype).newbyteorder(">" if big else "<")


def decodes_here(codec: str) -> bool:
    """Whether `codec` decodes on the calling thread alone: blosc only while
    numcodecs.blosc.use_threads is False (zarr's setting; a user who changed it reads through
    zarr, under their own setting)."""
    if codec != "blosc":
        return True
    import numcodecs.blosc
    return numcodecs.blosc.use_threads is False


def decode(codec: str, frame: np.ndarray, nbytes: int, out: np.ndarray, key: str):
    """The `nbytes` bytes compressed in `frame` by `codec` (in `out` when the codec writes into a
    buffer); ReaderError naming chunk `key` when they are corrupt or of another size."""
    try:
        if codec == "blosc":
            import numcodecs.blosc as blosc
            check_blosc_frame(frame, key)
            stored = int(frame[4:8].view("<u4")[0])
            if stored != nbytes:
                raise ReaderError(f"chunk {key!r}: its blosc header gives {stored} bytes, a chunk "
                                  f"holds {nbytes} (corrupt?)")
            blosc.decompress(frame, out)
            data = out
        elif codec == "zstd":
            import numcodecs.zstd as zstd
            # Always into `out`, so no frame decodes to more than a chunk (streamed, a frame
            # declaring no size grows to whatever it holds: a bomb). numcodecs checks the size
            # decoded against `out` when the frame declares none, but fills a part of `out`
            # silently when it declares less: a declared size is checked here.
            declared = zstd_size(frame)
            if declared is not None and declared != nbytes:
                raise ReaderError(f"chunk {key!r}: its zstd frame declares {declared} bytes, a "
                                  f"chunk holds {nbytes} (corrupt?)")
            data = zstd.decompress(frame, out)
        else:  # inflate releases the GIL; at most one byte more than a chunk is inflated
            inflate = zlib.decompressobj(31 if codec == "gzip" else 15)
            data = inflate.decompress(frame, nbytes + 1)
            if not inflate.eof and len(data) <= nbytes:
                raise ReaderError(f"chunk {key!r}: its {codec} stream ends early (truncated?)")
    except ReaderError:
        raise
    except Exception as e:  # the codecs raise RuntimeError, ValueError, zlib.error...
        raise ReaderError(f"chunk {key!r} cannot be decoded ({codec}): "
                          f"{type(e).__name__}: {e}") from None
    if len(data) != nbytes:
        raise ReaderError(f"chunk {key!r} decodes ({codec}) to {len(data)} bytes, a chunk holds "
                          f"{nbytes} (corrupt?)")
    return np.frombuffer(data, np.uint8)


def zstd_size(frame: np.ndarray) -> int | None:
    """The content size a zstd frame's header declares (None: not declared, or no zstd frame)."""
    if frame.size < 6 or bytes(frame[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    fhd = int(frame[4])
    single = (fhd >> 5) & 1
    size = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    if not size or frame.size < at + size:
        return None
    value = int.from_bytes(bytes(frame[at:at + size]), "little")
    return value + 256 if size == 2 else value


def packed_blocks(arr, folder: str, shape: tuple, codec: tuple, first: int, stop: int,
                  missing):
    """Yield (origin, block) for chunks [first, stop) of `arr` (chunks of `shape`, C order of the
    chunk grid) read from their files under `folder` and decoded by `codec` (chunk_codec's
    answer), cut to the array at its edges; `missing(idx)` reads a chunk never written (zarr
    gives its fill value). Memory: one compressed and one decoded chunk, reused (the thread's
    buffers)."""
    name, dtype = codec
    nbytes = math.prod(shape) * dtype.itemsize
    for idx, key, origin, path in _chunk_files(arr, folder, shape, first, stop):
        try:
            f = open(path, "rb", buffering=0)
        except FileNotFoundError:
            yield origin, missing(idx)
            continue
        with f:
            size = os.fstat(f.fileno()).st_size
            packed = thread_buffer("packed", size)
            read_exactly(f.fileno(), memoryview(packed), 0, path)
        data = decode(name, packed, nbytes, thread_buffer("decoded", nbytes), key)
        block = data.view(dtype).reshape(shape)
        inside = tuple(slice(0, min(b, n - o)) for b, n, o in zip(shape, arr.shape, origin))
        yield origin, block[inside]


def _chunk_files(arr, folder: str, shape: tuple, first: int, stop: int):
    """Yield (chunk index, key, origin, file path) for chunks [first, stop) of `arr` (chunks of
    `shape`, C order of the chunk grid) stored under `folder`."""
    key_of = arr.metadata.encode_chunk_key
    walk = BlockGrid(tuple(arr.shape), shape)
    for k in range(first, stop):
        idx = walk.index(k)
        key = key_of(idx)
        yield idx, key, tuple(i * b for i, b in zip(idx, shape)), os.path.join(folder,
                                                                                *key.split("/"))


def raw_blocks(arr, folder: str, shape: tuple, dtype: np.dtype, first: int, stop: int,
               chunk_bytes: int, missing, sieve=None):
    """Yield (origin, block) for uncompressed chunks [first, stop) of `arr` (chunks of `shape`
    holding `dtype` in C order) read from their files under `folder` straight into one reused
    buffer, `chunk_bytes` at a time (whole rows of the chunk's first axis), cut to the array at
    its edges; `missing(idx)` reads a chunk never written. Rows a `sieve`
    (operators/read_sieve.py) keeps come as FiniteBlocks without statistics, which a last
    FiniteBlock of no values brings (the sieve's)."""
    ndim = len(shape)
    row = math.prod(shape[1:]) * dtype.itemsize
    chunk = math.prod(shape) * dtype.itemsize
    rows_per_read = max(1, chunk_bytes // max(row, 1))
    buf = thread_buffer("read", min(rows_per_read * row, chunk) if ndim else chunk)
    whole_shape = tuple(arr.shape)  # (a property each look)
    for idx, key, origin, path in _chunk_files(arr, folder, shape, first, stop):
        try:
            fd = open_source(path)
        except FileNotFoundError:
            yield origin, missing(idx)
            continue
        try:
            size = source_size(fd)
            if size != chunk:
                raise ReaderError(f"chunk {key!r} holds {size} bytes; an uncompressed chunk of "
                                  f"{list(shape)} {dtype.str} holds {chunk} (corrupt?)")
            if not ndim:
                read_exactly(fd, memoryview(buf), 0, path)
                yield origin, buf.view(dtype).reshape(())
                continue
            inside = tuple(slice(0, min(c, s - o))
                           for c, s, o in zip(shape[1:], whole_shape[1:], origin[1:]))
            rows = min(shape[0], whole_shape[0] - origin[0])
            # the sieve takes rows holding no value beyond the array's edge
            whole = sieve is not None and all(s.stop == c for s, c in zip(inside, shape[1:]))
            for r in range(0, rows, rows_per_read):
                n = min(rows_per_read, rows - r)
                if whole and sieve.read_all(fd, buf, r * row, n * row):
                    yield origin, FiniteBlock(n * row // dtype.itemsize, n * row, ValueStats())
                    continue
                read_exactly(fd, memoryview(buf)[: n * row], r * row, path)
                block = buf[: n * row].view(dtype).reshape((n,) + shape[1:])
                yield (origin[0] + r,) + origin[1:], block[(slice(None),) + inside]
        finally:
            close_source(fd)
    if sieve is not None and sieve.values:
        yield (), FiniteBlock(0, 0, sieve.stats())
