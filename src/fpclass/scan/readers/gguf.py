"""GGUF files (versions 2 and 3, little-endian): header, metadata and tensor infos only.

Plain float tensors (F32, F16, BF16, F64) are checked element by element. Block-quantized tensors
store small integers plus floating-point fields per block (the fp16 scale `d`, the minimum `dmin`,
MXFP4's e8m0 exponent); those fields are where NaN and Inf can hide, and each is checked in every
block through a strided view of the block array.
"""

from __future__ import annotations

import mmap
import struct

from . import ReaderError
from ..signatures import GGUF_MAGIC
from ..storage.ranges import Range
from ..tasks import CHECK, Field, Task, problem
from .bounds import Ranges, check_count, elements
from .reporting import float_task, marker, not_applicable, unchecked
from .protobuf import open_map
from ..storage.reads import file_size, is_url, open_binary

#: GGML type → name, elements per block, bytes per block, float fields (name, offset, dtype).
#: Layouts from ggml-common.h (a type in UNCHECKED_BLOCKS is not checked).
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
#: Block types whose scales are not checked, and why.
UNCHECKED_BLOCKS = {
    9: "ggml's Q8_1 blocks take 36 bytes, gguf-py's 40: which bytes hold the tensor is "
       "ambiguous, so not checked",
    29: "IQ1_M packs its scale into bit fields; not checked",
}
_FIELDS = {gtype: tuple(Field(*f) for f in spec[3]) for gtype, spec in BLOCK_TYPES.items()}
PLAIN = {0: ("F32", "<f4", 4), 1: ("F16", "<f2", 2), 28: ("F64", "<f8", 8), 30: ("BF16", "bfloat16", 2)}
INTEGER = {24: ("I8", 1), 25: ("I16", 2), 26: ("I32", 4), 27: ("I64", 8)}

#: Metadata value types: fixed sizes (8: string, 9: array are variable).
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
VALUE_TYPES = {0: "UINT8", 1: "INT8", 2: "UINT16", 3: "INT16", 4: "UINT32", 5: "INT32",
               6: "FLOAT32", 7: "BOOL", 8: "STRING", 9: "ARRAY", 10: "UINT64", 11: "INT64",
               12: "FLOAT64"}
_UINT32 = 4
_LIMIT_ITEMS = 1 << 32
_MAX_DIMS = 8
#: The fewest bytes a tensor info (empty name, no dimensions) and a metadata entry (empty key,
#: one-byte value) take: a header claiming more than its file can hold is refused unread.
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8
_MIN_ENTRY = 8 + 4 + 1
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_TYPE_AND_OFFSET = struct.Struct("<IQ").unpack_from
_DIMS = [struct.Struct(f"<{n}Q").unpack_from for n in range(_MAX_DIMS + 1)]


class _Reader:
    """Little-endian reads at a position of the mapped file, bounds-checked against its size."""

    def __init__(self, buf, size):
        self.buf, self.size, self.pos = buf, size, 0
        self.have = len(buf)  # less than `size` when only the head of a remote file is held

    def _past_end(self):
        return ReaderError(f"header runs past the end of the file at byte {self.pos} "
                           f"({self.size} bytes; truncated?)")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise self._past_end()
        if self.pos + n > self.have:
            raise _NeedMore
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def skip(self, n: int):
        if n < 0 or self.pos + n > self.size:
            raise self._past_end()
        self.pos += n

    def u32(self) -> int:
        if self.pos + 4 > self.size:
            raise self._past_end()
        if self.pos + 4 > self.have:
            raise _NeedMore
        self.pos += 4
        return _U32(self.buf, self.pos - 4)[0]

    def u64(self) -> int:
        if self.pos + 8 > self.size:
            raise self._past_end()
        if self.pos + 8 > self.have:
            raise _NeedMore
        self.pos += 8
        return _U64(self.buf, self.pos - 8)[0]

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
        elif itype == 8:
            _skip_strings(r, count)
        else:
            for _ in range(count):
                _skip_value(r, itype, depth + 1)
    else:
        raise ReaderError(f"unknown metadata value type {vtype}")


def _skip_strings(r: _Reader, count: int):
    # A tokenizer's vocabulary: hundreds of thousands of strings, so a tight loop.
    if count * 8 > r.size - r.pos:
        raise r._past_end()
    buf, pos, last = r.buf, r.pos, r.size - 8
    for _ in range(count):
        if pos > last:
            r.pos = pos
            raise r._past_end()
        pos += 8 + _U64(buf, pos)[0]
    r.skip(pos - r.pos)


class _NeedMore(Exception):
    """The header goes on past the bytes held (a remote file's head)."""


#: First bytes of a remote GGUF file read for its header (doubled until the header fits).
REMOTE_HEAD = 4 << 20


def plan(path: str) -> list:
    """Tasks for every tensor of the GGUF file at `path` (a URL: its header read by ranges)."""
    if is_url(path):
        return _plan_remote(path)
    buf = open_map(path)
    try:
        return _plan(path, buf)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _plan_remote(path: str) -> list:
    # The header (metadata, tensor infos) lies before the data section: read a head of the file,
    # twice as long each time the header runs past it.
    with open_binary(path) as f:
        size = file_size(f)
        want = min(size, REMOTE_HEAD)
        while True:
            f.seek(0)
            head = f.read(want)
            try:
                return _plan(path, head, size)
            except (_NeedMore, struct.error):
                if want >= size:
                    raise ReaderError("header runs past the end of the file (truncated?)") \
                        from None
                want = min(size, 2 * want)


def _plan(path, buf, size=None) -> list:
    size = len(buf) if size is None else size
    r = _Reader(buf, size)
    magic = r.take(4) if size >= 4 else b""
    if magic != GGUF_MAGIC:
        raise ReaderError(f"not a GGUF file: magic {magic!r}, expected {GGUF_MAGIC!r}")
    raw_version = r.take(4)
    version = struct.unpack("<I", raw_version)[0]
    if version not in (2, 3):
        if struct.unpack(">I", raw_version)[0] in (2, 3):
            raise ReaderError("big-endian GGUF files are not supported")
        raise ReaderError(f"unsupported GGUF version {version} (2 and 3 are supported)")
    n_tensors, n_kv = r.u64(), r.u64()
    if n_tensors * _MIN_TENSOR_INFO + n_kv * _MIN_ENTRY > size - r.pos:
        raise ReaderError(f"header claims {n_tensors} tensors and {n_kv} metadata entries, "
                          f"more than a {size}-byte file can hold (truncated?)")
    check_count(n_tensors)
    alignment = None
    keys: set = set()
    for _ in range(n_kv):
        key = r.string()
        if key in keys:
            raise ReaderError(f"metadata key {_text(key, 'metadata key')!r} appears twice "
                              "(llama.cpp and gguf-py refuse the file)")
        keys.add(key)
        _text(key, "metadata key")   # gguf-py refuses a key that is not UTF-8
        vtype = r.u32()
        if key != b"general.alignment":
            _skip_value(r, vtype)
            continue
        if vtype != _UINT32:
            raise ReaderError(f"general.alignment has value type {vtype} "
                              f"({VALUE_TYPES.get(vtype, 'unknown')}); it must be UINT32 "
                              f"(type {_UINT32})")
        alignment = r.u32()
        if alignment == 0 or alignment & (alignment - 1):
            raise ReaderError(f"general.alignment {alignment} is not a power of two")
    alignment = alignment or 32
    # Tensor offsets count from the data section, which starts after the tensor infos: find
    # their end first, so that each task is made once, as its info is read.
    data_start = -(-_tensor_infos_end(r, n_tensors) // alignment) * alignment
    tasks = [marker(path, "gguf")]
    data_size = size - data_start
    ranges = Ranges(max(data_size, 0))
    shapes: dict = {}
    names = []
    pos = r.pos
    for _ in range(n_tensors):
        (n,) = _U64(buf, pos)
        raw = buf[pos + 8:pos + 8 + n]
        try:
            name = raw.decode()
        except UnicodeDecodeError:
            name = _text(raw, "tensor name")   # raises, naming it
        names.append(name)
        pos += 8 + n
        (n_dims,) = _U32(buf, pos)
        dims = _DIMS[n_dims](buf, pos + 4)
        gtype, offset = _TYPE_AND_OFFSET(buf, pos + 4 + 8 * n_dims)
        pos += 16 + 8 * n_dims
        shape = dims[::-1]  # GGUF lists the fastest-varying dimension first
        shape = shapes.setdefault(shape, shape)
        task, nbytes = _tensor(path, name, dims, shape, gtype, offset, data_start, data_size,
                               alignment)
        tasks.append(task)
        ranges.add(name, offset, offset + nbytes)
    if pos > len(buf):
        raise _NeedMore
    if len(set(names)) != len(names):   # one set at the end: a third of the time of a check
        seen: set = set()                # per tensor
        twice = next(name for name in names if name in seen or seen.add(name))
        raise ReaderError(f"two tensors are named {twice!r} (llama.cpp and gguf-py refuse the "
                          "file)")
    for name, other in ranges.overlaps():
        tasks.append(problem(path, f"data of tensor {name!r} overlaps tensor {other!r}"))
    return tasks


def _text(raw: bytes, what: str) -> str:
    """`raw` decoded as UTF-8, as GGUF strings are; ReaderError naming `what` when it is not."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReaderError(f"{what} {raw!r} is not valid UTF-8 ({e.reason} at byte {e.start})") \
            from None


def _tensor_infos_end(r: _Reader, n_tensors: int) -> int:
    """The byte after the tensor infos that start at `r.pos`; ReaderError for a malformed one."""
    buf, pos, size = r.buf, r.pos, r.size
    for _ in range(n_tensors):
        if pos + 12 > size:
            break
        n = _U64(buf, pos)[0]
        if pos + 12 + n > size:
            break
        n_dims = _U32(buf, pos + 8 + n)[0]
        if n_dims > _MAX_DIMS:
            name = buf[pos + 8:pos + 8 + n].decode("utf-8", "replace")
            raise ReaderError(f"tensor {name!r} has {n_dims} dimensions (at most {_MAX_DIMS})")
        pos += 8 + n + 4 + 8 * n_dims + 12
    else:
        if pos <= size:
            return pos
    r.pos = min(pos, size)
    raise r._past_end()


def _tensor(path, name, dims, shape, gtype, offset, data_start, data_size, alignment):
    n = elements(shape)
    if gtype in PLAIN:
        label, element, itemsize = PLAIN[gtype]
        nbytes = n * itemsize
    elif gtype in BLOCK_TYPES:
        label, block, block_bytes, fields = BLOCK_TYPES[gtype]
        if not dims:
            return unchecked(path, name, label, shape, f"a {label} tensor needs at least one "
                             f"dimension, a whole number of {block}-element blocks"), 0
        if dims[0] % block:
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
        return float_task(path, name, label, shape, element,
                          Range(path, data_start + offset, nbytes)), nbytes
    if gtype in UNCHECKED_BLOCKS:
        return unchecked(path, name, label, shape, UNCHECKED_BLOCKS[gtype]), nbytes
    return Task(path, name, label, shape, CHECK, element=fields[0][2],
                grid=shape[:-1] + (shape[-1] // block,), block=block, block_bytes=block_bytes,
                fields=_FIELDS[gtype], storage=Range(path, data_start + offset, nbytes)), nbytes
