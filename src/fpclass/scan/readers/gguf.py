"""GGUF files (versions 2 and 3, little-endian): header, metadata and tensor infos only.

Plain float tensors (F32, F16, BF16, F64) are checked element by element. Block-quantized tensors
store small integers plus floating-point fields per block (the fp16 scale `d`, the minimum `dmin`,
MXFP4's e8m0 exponent); those fields are where NaN and Inf can hide, and each is checked in every
block through a strided view of the block array.
"""

from __future__ import annotations

import os
import struct

from . import ReaderError
from ..tasks import CHECK, Field, Task, problem
from .layout import elements, float_task, marker, not_applicable, overlaps, unchecked

#: GGML type → name, elements per block, bytes per block, float fields (name, offset, dtype).
#: Layouts from ggml-common.h; an empty field list with a reason means "cannot be checked".
_H = "<f2"
BLOCK_TYPES = {
    2: ("Q4_0", 32, 18, [("d", 0, _H)]),
    3: ("Q4_1", 32, 20, [("d", 0, _H), ("m", 2, _H)]),
    6: ("Q5_0", 32, 22, [("d", 0, _H)]),
    7: ("Q5_1", 32, 24, [("d", 0, _H), ("m", 2, _H)]),
    8: ("Q8_0", 32, 34, [("d", 0, _H)]),
    9: ("Q8_1", 32, 36, [("d", 0, _H), ("s", 2, _H)]),
    10: ("Q2_K", 256, 84, [("d", 80, _H), ("dmin", 82, _H)]),
    11: ("Q3_K", 256, 110, [("d", 108, _H)]),
    12: ("Q4_K", 256, 144, [("d", 0, _H), ("dmin", 2, _H)]),
    13: ("Q5_K", 256, 176, [("d", 0, _H), ("dmin", 2, _H)]),
    14: ("Q6_K", 256, 210, [("d", 208, _H)]),
    15: ("Q8_K", 256, 292, [("d", 0, "<f4")]),
    16: ("IQ2_XXS", 256, 66, [("d", 0, _H)]),
    17: ("IQ2_XS", 256, 74, [("d", 0, _H)]),
    18: ("IQ3_XXS", 256, 98, [("d", 0, _H)]),
    19: ("IQ1_S", 256, 50, [("d", 0, _H)]),
    20: ("IQ4_NL", 32, 18, [("d", 0, _H)]),
    21: ("IQ3_S", 256, 110, [("d", 0, _H)]),
    22: ("IQ2_S", 256, 82, [("d", 0, _H)]),
    23: ("IQ4_XS", 256, 136, [("d", 0, _H)]),
    29: ("IQ1_M", 256, 56, []),   # its fp16 scale is scattered over four 4-bit pieces
    34: ("TQ1_0", 256, 54, [("d", 52, _H)]),
    35: ("TQ2_0", 256, 66, [("d", 64, _H)]),
    39: ("MXFP4", 32, 17, [("e", 0, "float8_e8m0fnu")]),
}
PLAIN = {0: ("F32", "<f4", 4), 1: ("F16", "<f2", 2), 28: ("F64", "<f8", 8), 30: ("BF16", "bfloat16", 2)}
INTEGER = {24: ("I8", 1), 25: ("I16", 2), 26: ("I32", 4), 27: ("I64", 8)}

#: Metadata value types: fixed sizes (8: string, 9: array are variable).
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_LIMIT_ITEMS = 1 << 32
_MAX_DIMS = 8


class _Reader:
    """Sequential little-endian reads with bounds checks against the file size."""

    def __init__(self, f, size):
        self.f, self.size = f, size

    def take(self, n: int) -> bytes:
        if n < 0 or self.f.tell() + n > self.size:
            raise ReaderError(f"header runs past the end of the file at byte {self.f.tell()} "
                              f"({self.size} bytes; truncated?)")
        return self.f.read(n)

    def skip(self, n: int):
        if n < 0 or self.f.tell() + n > self.size:
            raise ReaderError(f"header runs past the end of the file at byte {self.f.tell()} "
                              f"({self.size} bytes; truncated?)")
        self.f.seek(n, 1)

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> bytes:
        return self.take(self.u64())


def _skip_value(r: _Reader, vtype: int, depth=0):
    if vtype in _SCALAR:
        r.skip(_SCALAR[vtype])
    elif vtype == 8:
        r.skip(r.u64())
    elif vtype == 9:
        if depth > 4:
            raise ReaderError("metadata arrays nested too deeply")
        itype, count = r.u32(), r.u64()
        if count > _LIMIT_ITEMS:
            raise ReaderError(f"metadata array of {count} items")
        if itype in _SCALAR:
            r.skip(_SCALAR[itype] * count)
        else:
            for _ in range(count):
                _skip_value(r, itype, depth + 1)
    else:
        raise ReaderError(f"unknown metadata value type {vtype}")


def plan(path: str) -> list:
    """Tasks for every tensor of the GGUF file at `path`."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        r = _Reader(f, size)
        magic = r.take(4) if size >= 4 else b""
        if magic != b"GGUF":
            raise ReaderError(f"not a GGUF file: magic {magic!r}, expected b'GGUF'")
        raw_version = r.take(4)
        version = struct.unpack("<I", raw_version)[0]
        if version not in (2, 3):
            if struct.unpack(">I", raw_version)[0] in (2, 3):
                raise ReaderError("big-endian GGUF files are not supported")
            raise ReaderError(f"unsupported GGUF version {version} (2 and 3 are supported)")
        n_tensors, n_kv = r.u64(), r.u64()
        if n_tensors > size or n_kv > size:
            raise ReaderError(f"header claims {n_tensors} tensors and {n_kv} metadata entries, "
                              f"more than a {size}-byte file can hold")
        alignment = 32
        for _ in range(n_kv):
            key = r.string()
            vtype = r.u32()
            if key == b"general.alignment" and vtype in (4, 5):
                alignment = r.u32()
                if alignment == 0 or alignment & (alignment - 1):
                    raise ReaderError(f"general.alignment {alignment} is not a power of two")
            else:
                _skip_value(r, vtype)
        infos = []
        for _ in range(n_tensors):
            name = r.string().decode("utf-8", "replace")
            n_dims = r.u32()
            if n_dims > _MAX_DIMS:
                raise ReaderError(f"tensor {name!r} has {n_dims} dimensions (at most {_MAX_DIMS})")
            dims = [r.u64() for _ in range(n_dims)]
            infos.append((name, dims, r.u32(), r.u64()))
        data_start = -(-f.tell() // alignment) * alignment
    tasks = [marker(path, "gguf")]
    data_size = size - data_start
    ranges = []
    for name, dims, gtype, offset in infos:
        task, nbytes = _tensor(path, name, dims, gtype, offset, data_start, data_size, alignment)
        tasks.append(task)
        if nbytes:
            ranges.append((name, offset, offset + nbytes))
    for name, other in overlaps(ranges):
        tasks.append(problem(path, f"data of tensor {name!r} overlaps tensor {other!r}"))
    return tasks


def _tensor(path, name, dims, gtype, offset, data_start, data_size, alignment):
    shape = tuple(reversed(dims))  # GGUF lists the fastest-varying dimension first
    n = elements(shape)
    if gtype in PLAIN:
        label, element, itemsize = PLAIN[gtype]
        nbytes = n * itemsize
    elif gtype in BLOCK_TYPES:
        label, block, block_bytes, fields = BLOCK_TYPES[gtype]
        if dims and dims[0] % block:
            return unchecked(path, name, label, shape, f"first dimension {dims[0]} is not a "
                             f"multiple of the {block}-element block"), 0
        nbytes = n // block * block_bytes
    elif gtype in INTEGER:
        label, itemsize = INTEGER[gtype]
        nbytes = n * itemsize
    else:
        return unchecked(path, name, f"type {gtype}", shape, f"unknown GGML type {gtype}"), 0
    if offset % alignment:
        return unchecked(path, name, label, shape,
                         f"data offset {offset} is not a multiple of the alignment {alignment}"), 0
    if offset + nbytes > data_size:
        return unchecked(path, name, label, shape, f"data [{offset}, {offset + nbytes}) lies "
                         f"past the end of the data section ({data_size} bytes; truncated?)"), nbytes
    if gtype in INTEGER:
        return not_applicable(path, name, label, shape), nbytes
    if gtype in PLAIN:
        return float_task(path, name, label, shape, element, source=path,
                          offset=data_start + offset, nbytes=nbytes), nbytes
    if not fields:
        return unchecked(path, name, label, shape,
                         f"{label} packs its scale into bit fields; not checked"), nbytes
    grid = shape[:-1] + (shape[-1] // block,) if shape else ()
    return Task(path, name, label, shape, CHECK, source=path, offset=data_start + offset,
                nbytes=nbytes, element=fields[0][2], grid=grid, block=block,
                block_bytes=block_bytes, fields=tuple(Field(*f) for f in fields)), nbytes
