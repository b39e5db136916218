"""A minimal protobuf wire-format walker over a memory map: field numbers, wire types, and the
file offsets of length-delimited values, so large byte fields are located but never copied.

It refuses what protobuf's own parser (upb, behind the Python package) refuses: keys over 5
bytes or 32 bits, field number 0, lengths over 5 bytes, varints over 10 bytes, wire types 6 and 7,
values that run past their message, and (`check_message`) sub-messages nested over 100 deep or
malformed anywhere in the tree, packed repeated fields included (walked with an explicit stack:
no recursion per level). Groups (wire types 3 and 4), which protobuf still parses as unknown
fields, are refused too.
"""

from __future__ import annotations

import errno
import mmap

import numpy as np

from ..storage.reads import file_size, is_url, open_binary

VARINT, I64, LEN, I32 = 0, 1, 2, 5
#: Kinds of packed repeated scalar fields, for `check_message` schemas (a sub-message is named by
#: its message name instead).
PACKED_VARINT, PACKED_FIXED32, PACKED_FIXED64 = "packed varint", "packed fixed32", "packed fixed64"
_PACKED = (PACKED_VARINT, PACKED_FIXED32, PACKED_FIXED64)
#: The wire types `fields(..., runs=True)` gives a run of unpacked I32 / I64 fields.
RUN32, RUN64 = -I32, -I64
#: Sub-messages protobuf parses below the top-level message (its default recursion limit).
MAX_DEPTH = 100
_MASK64 = (1 << 64) - 1
_CHUNK = 1 << 20


class ProtobufError(Exception):
    """Malformed protobuf wire data; the message says where."""


class TooManyMessages(ProtobufError):
    """A message tree larger than its reader's limit (`Budget`)."""


class Budget:
    """How many messages a walk may visit: `spend` raises TooManyMessages past `limit`, so a
    small file of many tiny messages cannot hold the walk for long."""

    __slots__ = ("limit", "left")

    def __init__(self, limit: int):
        self.limit = self.left = limit

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise TooManyMessages(f"over {self.limit:,} messages and pieces of tensor data "
                                  "(graphs, nodes, attributes, tensors, types, ...), over the "
                                  "limit")


def varint(buf, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`."""
    value = shift = 0
    while True:
        if pos >= end:
            raise ProtobufError(f"varint runs past byte {end}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:   # protobuf drops the bits past 64 of a 10th byte
            return (value if shift < 63 else value & _MASK64), pos
        shift += 7
        if shift > 63:
            raise ProtobufError(f"varint longer than 10 bytes before byte {pos}")


def fields(buf, start: int, end: int, runs: bool = False):
    """Yield (field number, wire type, value, value start, value end) for the message in
    buf[start:end]; value is the integer for VARINT/I32/I64 and None for LEN. With `runs`, a
    run of two or more I32 (I64) fields of one number in a row (a repeated float or double
    field written unpacked, one value per field) comes as one item: wire type RUN32 (RUN64),
    value the number of fields, from the first one's key to the last one's value (all with
    keys of the same bytes, so (end - start) // count bytes apart, the value last)."""
    pos = start
    while pos < end:
        at = pos
        key = buf[pos]
        if key < 0x80:  # keys and lengths are mostly one byte: skip the general decoder
            pos += 1
        else:
            key, after = varint(buf, pos, end)
            if after - pos > 5 or key >> 32:   # protobuf reads keys of up to 5 bytes, 32 bits
                raise ProtobufError(f"key at byte {pos} takes {after - pos} bytes or over 32 "
                                    "bits")
            pos = after
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"field number 0 at byte {pos}")
        if wire == LEN:
            n = buf[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                n, after = varint(buf, pos, end)
                if after - pos > 5:   # and lengths of up to 5 bytes
                    raise ProtobufError(f"length at byte {pos} takes {after - pos} bytes")
                pos = after
            after = pos + n
            if after > end:
                raise ProtobufError(f"field {number} of {n} bytes at byte {pos} runs past byte "
                                    f"{end} (truncated?)")
            yield number, wire, None, pos, after
        elif wire == VARINT:
            value = buf[pos] if pos < end else 0x80
            if value < 0x80:
                after = pos + 1
            else:
                value, after = varint(buf, pos, end)
            yield number, wire, value, pos, after
        elif wire == I64 or wire == I32:
            n = 8 if wire == I64 else 4
            if pos + n > end:
                raise ProtobufError(f"fixed-size field runs past byte {end}")
            after = pos + n
            count = _run(buf, at, pos, after, end) if runs else 1
            if count > 1:
                after = at + count * (after - at)
                yield number, -wire, count, at, after
            else:
                yield number, wire, int.from_bytes(buf[pos:after], "little"), pos, after
        else:
            raise ProtobufError(f"unsupported wire type {wire} at byte {pos}")
        pos = after


def _run(buf, at: int, pos: int, after: int, end: int) -> int:
    """How many fields like the one in buf[at:after] (its key up to `pos`, then a fixed-size
    value) follow each other from `at` with the same key bytes, within `end`: compared 1 MiB
    at a time."""
    step, key = after - at, bytes(buf[at:pos])
    width = len(key)
    if after + step > end or buf[after:after + width] != key:
        return 1
    count, pos = 1, after
    want = np.frombuffer(key, np.uint8)
    while pos + step <= end:
        m = min((end - pos) // step, _CHUNK // step + 1)
        rows = np.frombuffer(buf, np.uint8, m * step, pos).reshape(m, step)[:, :width]
        same = (rows == want).all(axis=1)
        stop = int(same.argmin()) if not same.all() else m
        del rows, same   # no view of `buf` may outlive the call
        count += stop
        pos += stop * step
        if stop < m:
            break
    return count


def check_message(buf, start: int, end: int, schema: dict, message: str, depth: int,
                  budget=None) -> None:
    """ProtobufError unless buf[start:end] parses as `message` at nesting level `depth` (the
    top-level message is 0), as protobuf parses it: `schema` maps each message name to
    {field number: sub-message name, or the PACKED_* kind of a repeated scalar field}. A field
    of another wire type than its declaration is an unknown field to protobuf, so is not
    checked further; nor are strings (proto2 does not check their UTF-8). The messages being
    read wait on an explicit stack (no recursion per level; memory as the depth), and each
    sub-message is taken from `budget` (a Budget) when one is given."""
    if depth > MAX_DEPTH:
        raise ProtobufError(f"messages nested over {MAX_DEPTH} deep at byte {start}")
    stack = [(fields(buf, start, end), schema[message], depth)]
    while stack:
        items, table, depth = stack[-1]
        for number, wire, _, a, b in items:
            kind = table.get(number) if wire == LEN else None
            if kind is None:
                continue
            if kind in _PACKED:
                check_field(buf, a, b, schema, kind, depth + 1)
                continue
            if depth + 1 > MAX_DEPTH:
                raise ProtobufError(f"messages nested over {MAX_DEPTH} deep at byte {a}")
            if budget is not None:
                budget.spend()
            stack.append((fields(buf, a, b), schema[kind], depth + 1))
            break
        else:
            stack.pop()


def check_field(buf, start: int, end: int, schema: dict, kind: str, depth: int,
                budget=None) -> None:
    """ProtobufError unless the length-delimited value buf[start:end] is a well-formed `kind`:
    a PACKED_* kind, or the name of a message of `schema` at nesting level `depth` (its
    sub-messages taken from `budget`, when given)."""
    if kind == PACKED_VARINT:
        packed_varints(buf, start, end)
    elif kind == PACKED_FIXED32 or kind == PACKED_FIXED64:
        size = 4 if kind == PACKED_FIXED32 else 8
        if (end - start) % size:
            raise ProtobufError(f"packed field of {end - start} bytes at byte {start} is not "
                                f"whole {size}-byte values")
    else:
        check_message(buf, start, end, schema, kind, depth, budget)


def packed_varints(buf, start: int, end: int) -> int:
    """The number of varints in the packed field buf[start:end]; ProtobufError when the last
    one runs past the end or one is longer than 10 bytes. Read in 1 MiB pieces, without
    copying the field."""
    count, last = 0, start - 1   # the byte that ends the varint before
    for pos in range(start, end, _CHUNK):
        run = np.frombuffer(buf, np.uint8, min(_CHUNK, end - pos), pos)
        ends = run < 0x80
        tail = ends[-11:]   # 11 bytes in a row that end no varint are too many
        bad = (not tail.any() or pos + int(ends.argmax()) - last > 10
               or _long_varint(run, ends))
        if not bad:
            count += int(np.count_nonzero(ends))
            last = pos + run.size - 1 - int(tail[::-1].argmax())
        del run, ends, tail   # no view of `buf` may outlive the call: it would keep a
        if bad:               # memory map open through the exception's traceback
            raise ProtobufError(f"packed field at byte {start} holds a varint over 10 bytes "
                                "(or ends inside one)")
    if last != end - 1:
        raise ProtobufError(f"packed field at byte {start} ends in the middle of a varint")
    return count


def _long_varint(run, ends) -> bool:
    """Whether bytes `run` (`ends`: which end a varint) hold a varint of over 10 bytes between
    two that end. Such a varint covers 4 aligned bytes that all continue it: look for those
    first (one pass over 32-bit words), and measure the gaps only where they are found (as in
    the 10-byte varints of negative numbers)."""
    words = run[:run.size // 4 * 4].view("<u4")
    if (words | 0x7F7F7F7F).max(initial=0) != 0xFFFFFFFF:
        return False
    at = np.flatnonzero(ends)
    return at.size > 1 and int(np.diff(at).max()) > 10


def open_map(path: str):
    """A read-only memory map of `path` (an empty bytes object for an empty file); for a URL, the
    file's bytes (parsed in place, so held whole: OSError past REMOTE_LIMIT)."""
    if is_url(path):
        return _remote_bytes(path)
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return b""


#: Largest protobuf (ONNX) file read from a URL: it is parsed in place, so held in memory whole
#: (a model with external data keeps its weights out of it; they are read by ranges).
REMOTE_LIMIT = 64 << 20


def _remote_bytes(path: str) -> bytes:
    with open_binary(path) as f:
        size = file_size(f)
        if size > REMOTE_LIMIT:
            raise OSError(errno.EFBIG, f"a protobuf (ONNX) file of {size} bytes from a URL is over "
                          f"the {REMOTE_LIMIT}-byte limit of what is held in memory to parse it "
                          "(keep the weights as external data, or scan a local copy)")
        return f.read()


def top_level_fields(path: str) -> set:
    """The field numbers present at the top level of the message in `path`."""
    buf = open_map(path)
    try:
        return {number for number, *_ in fields(buf, 0, len(buf))}
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
