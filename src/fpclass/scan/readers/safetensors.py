"""Safetensors files and sharded checkpoints (*.safetensors.index.json): header only.

Layout: an 8-byte little-endian header length N, N bytes of JSON, then the data section; each
tensor's `data_offsets` are [begin, end) within the data section.
"""

from __future__ import annotations

import json
import os
import re
import struct
from array import array
from json.decoder import scanstring

import numpy as np

from . import ReaderError
from ..storage.ranges import Range
from ..tasks import Task, problem
from .bounds import Ranges, check_count, check_shape, elements
from .reporting import float_task, marker, not_applicable, packed_task, unchecked
from ..storage.reads import file_size, open_binary

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
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup!r}")
    return obj


def _integer(text: str):
    """A JSON integer as the safetensors library's parser (serde_json) reads it: "-0" is the
    float -0.0 there, so no size or offset."""
    return -0.0 if text == "-0" else int(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_integer)
_SPACE = re.compile(r"[ \t\n\r]*")
_DELIMITER = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")
_SIZE = r"(?:0|[1-9][0-9]*)"
#: A header member as the safetensors library writes it (compact, keys in this order): read by
#: one match instead of the JSON decoder, which takes ten times as long.
_WRITTEN = re.compile(rf'"([^"\\\x00-\x1f]*)":\{{"dtype":"([A-Z0-9_]+)",'
                      rf'"shape":\[((?:{_SIZE}(?:,{_SIZE})*)?)\],'
                      rf'"data_offsets":\[({_SIZE}),({_SIZE})\]\}}')
_DTYPES = {name: name for name in (*FLOATS, *OTHERS)}
_KINDS = {"[": "array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}


def _members(text: str):
    """Yield (name, value) for each member of the JSON object `text`, one at a time (json.loads
    would hold every entry of a million-entry header at once); a tensor entry as the safetensors
    library writes it comes as the tuple (dtype, shape, begin, end). ValueError as json.loads
    gives, also for a duplicate name; ReaderError when `text` is JSON of another type."""
    try:
        yield from _parse_members(text)
    except ValueError as e:
        raise ReaderError(f"header is not valid JSON: {e}") from None


def _parse_members(text: str):
    pos = _SPACE.match(text).end()
    if text[pos:pos + 1] != "{":
        first = text[pos:pos + 1]
        kind = _KINDS.get(first, "number" if first and first in "-0123456789" else "")
        if kind:
            raise ReaderError(f"header must be a JSON object, got a JSON {kind}")
        raise json.JSONDecodeError("Expecting value", text, pos)
    pos = _SPACE.match(text, pos + 1).end()
    closed = text[pos:pos + 1] == "}"
    if closed:
        pos = _SPACE.match(text, pos + 1).end()
    seen: set = set()
    shapes: dict = {}
    while not closed:
        written = _WRITTEN.match(text, pos)
        if written:
            name, dtype, dims, begin, end = written.groups()
            shape = shapes.get(dims)
            if shape is None:  # one tuple per shape, not per tensor; the same for dtypes
                shape = shapes[dims] = tuple(map(int, dims.split(","))) if dims else ()
            value = (_DTYPES.get(dtype, dtype), shape, int(begin), int(end))
            pos = written.end()
        else:
            if text[pos:pos + 1] != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes",
                                           text, pos)
            name, pos = scanstring(text, pos + 1)
            pos = _SPACE.match(text, pos).end()
            if text[pos:pos + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
            value, pos = _DECODER.raw_decode(text, _SPACE.match(text, pos + 1).end())
        if name in seen:
            raise ValueError(f"duplicate key {name!r}")
        seen.add(name)
        yield name, value
        delimiter = _DELIMITER.match(text, pos)
        if not delimiter:
            raise json.JSONDecodeError("Expecting ',' delimiter", text,
                                       _SPACE.match(text, pos).end())
        closed, pos = delimiter.group(1) == "}", delimiter.end()
    if pos != len(text):
        raise json.JSONDecodeError("Extra data", text, pos)


def read_header(path: str) -> tuple:
    """(iterator of the header's (name, entry) pairs, data section start, data section length);
    ReaderError for a malformed header, also while iterating."""
    with open_binary(path) as f:
        size = file_size(f)
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
        text = text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReaderError(f"header is not valid JSON: {e}") from None
    return _members(text), 8 + n, size - 8 - n


def plan(path: str) -> list:
    """Tasks for every tensor of a .safetensors file; tensors whose entry is malformed are
    unchecked with the reason, and layout errors (overlaps, bytes of no tensor) are file
    problems."""
    header, start, length = read_header(path)
    tasks = [marker(path, "safetensors")]
    ranges = Ranges(length)
    empty_at, empty_names = array("q"), []   # zero-size tensors not at offset 0
    shapes: dict = {}
    for name, entry in header:
        if name == "__metadata__":
            if entry is not None and not (isinstance(entry, dict)
                                          and all(type(v) is str for v in entry.values())):
                tasks.append(problem(path, "__metadata__ must be a JSON object of strings (or "
                                     "null)"))
            continue
        check_count(len(tasks))
        if type(entry) is not tuple:  # not as the safetensors library writes it: check it all
            entry = _entry(path, name, entry)
            if isinstance(entry, Task):
                tasks.append(entry)
                continue
        dtype, shape, begin, end = entry
        shape = shapes.setdefault(shape, shape)
        tasks.append(_tensor(path, name, dtype, shape, begin, end, start, length, ranges))
        if begin == end and 0 < begin <= length:
            empty_at.append(begin)
            empty_names.append(name)
    for name, other in ranges.overlaps():
        tasks.append(problem(path, f"data of tensor {name!r} overlaps tensor {other!r}"))
    # The safetensors library sorts the tensors by data_offsets and requires each to begin where
    # the one before ends: a zero-size tensor too, so it must sit where a tensor begins or ends.
    if empty_names:
        boundaries = np.concatenate((ranges.begins, ranges.ends)).astype(np.int64)
        stray = np.flatnonzero(~np.isin(np.frombuffer(empty_at, np.int64), boundaries))
        tasks += [problem(path, f"zero-size tensor {empty_names[i]!r} at data offset "
                          f"{empty_at[i]} is not where a tensor begins or ends (the safetensors "
                          "library refuses the file)") for i in stray.tolist()]
    for begin, end in ranges.uncovered():
        tasks.append(problem(path, f"data section bytes {begin}..{end} belong to no tensor"))
    return tasks


def _entry(path, name, entry):
    """(dtype, shape, begin, end) of a header entry, or an unchecked task saying what is wrong."""
    if not isinstance(entry, dict):
        return unchecked(path, name, "?", (), "header entry is not a JSON object")
    dtype = entry.get("dtype")
    label = dtype if isinstance(dtype, str) else "?"
    try:
        shape = check_shape(entry.get("shape"))
    except ValueError as e:
        return unchecked(path, name, label, (), str(e))
    offs = entry.get("data_offsets")
    if (type(offs) is not list or len(offs) != 2
            or not all(type(o) is int and o >= 0 for o in offs)):
        return unchecked(path, name, label, shape,
                         f"data_offsets must be two non-negative integers, got {offs!r}")
    return dtype, shape, offs[0], offs[1]


def _tensor(path, name, dtype, shape, begin, end, start, length, ranges):
    """The task for one tensor; its byte range goes to `ranges`."""
    label = dtype if isinstance(dtype, str) else "?"
    if begin > end:
        return unchecked(path, name, label, shape,
                         f"data_offsets out of order: begin {begin} > end {end}")
    ranges.add(name, begin, end)
    if end > length:
        return unchecked(path, name, label, shape,
                         f"data_offsets [{begin}, {end}] point past the end of the data section "
                         f"({length} bytes; truncated?)")
    if dtype in FLOATS:
        element, bits = FLOATS[dtype]
    elif dtype in OTHERS:
        element, bits = None, OTHERS[dtype]
    else:
        return unchecked(path, name, label, shape, f"unknown safetensors dtype {dtype!r}")
    n = elements(shape)
    if n * bits % 8 or n * bits // 8 != end - begin:
        return unchecked(path, name, label, shape,
                         f"{dtype} shape {list(shape)} needs {n * bits / 8:g} bytes, "
                         f"data_offsets hold {end - begin}")
    if element is None:
        return not_applicable(path, name, label, shape)
    if bits < 8:
        return packed_task(path, name, label, shape, element)
    return float_task(path, name, label, shape, element, Range(path, start + begin, end - begin))


def plan_index(path: str) -> list:
    """Tasks for every shard named by a sharded checkpoint's index, checking that each tensor
    the index lists is in the shard it names."""
    try:
        with open_binary(path) as f:
            doc = json.loads(f.read().decode("utf-8"), object_pairs_hook=_pairs)
    except (UnicodeDecodeError, ValueError) as e:
        raise ReaderError(f"index is not valid JSON: {e}") from None
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
        raise ReaderError("index has no weight_map object mapping tensor names to shard files")
    tasks = [marker(path, "safetensors-index")]
    base = os.path.dirname(path)
    listed: dict = {}
    for name, shard in wmap.items():
        listed.setdefault(shard, []).append(name)
    for shard in sorted(listed):
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
        for name in sorted(n for n in listed[shard] if n not in present):
            tasks.append(problem(path, f"tensor {name!r} is listed in shard {shard} but absent"))
    return tasks
