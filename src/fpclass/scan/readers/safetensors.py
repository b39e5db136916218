"""Safetensors files and sharded checkpoints (*.safetensors.index.json): header only.

Layout: an 8-byte little-endian header length N, N bytes of JSON, then the data section; each
tensor's `data_offsets` are [begin, end) within the data section.
"""

from __future__ import annotations

import json
import os
import struct

from . import ReaderError
from ..tasks import problem
from .layout import (check_shape, elements, float_task, marker, not_applicable, overlaps, packed_task,
                     unchecked)

#: The limit the reference implementation puts on the JSON header.
HEADER_LIMIT = 100_000_000

#: safetensors dtype → (element dtype for the core, bits per element); None: not floating point.
FLOATS = {
    "F64": ("<f8", 64), "F32": ("<f4", 32), "F16": ("<f2", 16), "BF16": ("bfloat16", 16),
    "F8_E4M3": ("float8_e4m3fn", 8), "F8_E5M2": ("float8_e5m2", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8), "F6_E2M3": ("float6_e2m3fn", 6),
    "F6_E3M2": ("float6_e3m2fn", 6), "F4": ("float4_e2m1fn", 4),
    "C64": ("<c8", 64),
}
OTHERS = {"BOOL": 8, "U8": 8, "I8": 8, "U16": 16, "I16": 16, "U32": 32, "I32": 32, "U64": 64,
          "I64": 64}


def _pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate key {dup!r}")
    return dict(pairs)


def read_header(path: str) -> tuple[dict, int, int]:
    """(header dict, data section start, data section length); ReaderError for a malformed
    header."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(8)
        if len(raw) < 8:
            raise ReaderError(f"not a safetensors file: {size} bytes, too short for the "
                              "8-byte header length")
        (n,) = struct.unpack("<Q", raw)
        if n > HEADER_LIMIT:
            raise ReaderError(f"header length {n} is over the {HEADER_LIMIT}-byte limit")
        if 8 + n > size:
            raise ReaderError(f"header length {n} points past the end of the file "
                              f"({size} bytes; truncated?)")
        text = f.read(n)
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_pairs)
    except (UnicodeDecodeError, ValueError) as e:
        raise ReaderError(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ReaderError(f"header must be a JSON object, got {type(header).__name__}")
    return header, 8 + n, size - 8 - n


def plan(path: str) -> list:
    """Tasks for every tensor of a .safetensors file; tensors whose entry is malformed are
    unchecked with the reason, and layout errors (overlaps, gaps) are file problems."""
    header, start, length = read_header(path)
    tasks = [marker(path, "safetensors")]
    meta = header.pop("__metadata__", None)
    if meta is not None and not isinstance(meta, dict):
        tasks.append(problem(path, "__metadata__ must be a JSON object"))
    ranges = []
    for name, entry in header.items():
        task, rng = _tensor(path, name, entry, start, length)
        tasks.append(task)
        if rng:
            ranges.append((name, *rng))
    for name, other in overlaps(ranges):
        tasks.append(problem(path, f"data of tensor {name!r} overlaps tensor {other!r}"))
    covered = sorted(r[1:] for r in ranges if r[2] > r[1])
    pos = 0
    for begin, end in covered:
        if begin > pos:
            tasks.append(problem(path, f"data section bytes {pos}..{begin} belong to no tensor"))
        pos = max(pos, end)
    if ranges and len(ranges) == len(header) and pos < length:
        tasks.append(problem(path, f"{length - pos} trailing bytes after the last tensor"))
    return tasks


def _tensor(path, name, entry, start, length):
    """(task, (begin, end) or None) for one header entry."""
    if not isinstance(entry, dict):
        return unchecked(path, name, "?", (), "header entry is not a JSON object"), None
    dtype = entry.get("dtype")
    label = dtype if isinstance(dtype, str) else "?"
    try:
        shape = check_shape(entry.get("shape"))
    except ValueError as e:
        return unchecked(path, name, label, (), str(e)), None
    offs = entry.get("data_offsets")
    if (not isinstance(offs, list) or len(offs) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)):
        return unchecked(path, name, label, shape,
                         f"data_offsets must be two non-negative integers, got {offs!r}"), None
    begin, end = offs
    if begin > end:
        return unchecked(path, name, label, shape,
                         f"data_offsets out of order: begin {begin} > end {end}"), None
    if end > length:
        return unchecked(path, name, label, shape,
                         f"data_offsets [{begin}, {end}] point past the end of the data section "
                         f"({length} bytes; truncated?)"), (begin, end)
    if dtype in FLOATS:
        element, bits = FLOATS[dtype]
    elif dtype in OTHERS:
        element, bits = None, OTHERS[dtype]
    else:
        return unchecked(path, name, label, shape, f"unknown safetensors dtype {dtype!r}"), (begin, end)
    n = elements(shape)
    if n * bits % 8 or n * bits // 8 != end - begin:
        return unchecked(path, name, label, shape,
                         f"{dtype} shape {list(shape)} needs {n * bits / 8:g} bytes, "
                         f"data_offsets hold {end - begin}"), (begin, end)
    if element is None:
        return not_applicable(path, name, label, shape), (begin, end)
    if bits < 8:
        return packed_task(path, name, label, shape, element), (begin, end)
    return float_task(path, name, label, shape, element, source=path, offset=start + begin,
                      nbytes=end - begin), (begin, end)


def plan_index(path: str) -> list:
    """Tasks for every shard named by a sharded checkpoint's index, checking that each tensor
    the index lists is in the shard it names."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"), object_pairs_hook=_pairs)
    except (UnicodeDecodeError, ValueError) as e:
        raise ReaderError(f"index is not valid JSON: {e}") from None
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
        raise ReaderError("index has no weight_map object mapping tensor names to shard files")
    tasks = [marker(path, "safetensors-index")]
    base = os.path.dirname(path)
    for shard in sorted(set(wmap.values())):
        if os.path.isabs(shard) or ".." in shard.replace("\\", "/").split("/"):
            tasks.append(problem(path, f"shard path {shard!r} leaves the index's directory"))
            continue
        full = os.path.join(base, shard)
        try:
            shard_tasks = plan(full)
        except (ReaderError, OSError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            tasks.append(problem(full, reason))
            continue
        tasks += shard_tasks
        present = {t.name for t in shard_tasks if t.name}
        for name in sorted(n for n, s in wmap.items() if s == shard and n not in present):
            tasks.append(problem(path, f"tensor {name!r} is listed in shard {shard} but absent"))
    return tasks
