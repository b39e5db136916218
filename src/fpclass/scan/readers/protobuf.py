"""A minimal protobuf wire-format walker over a memory map: field numbers, wire types, and the
file offsets of length-delimited values, so large byte fields are located but never copied."""

from __future__ import annotations

import mmap

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class ProtobufError(Exception):
    """Malformed protobuf wire data; the message says where."""


def varint(buf, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`."""
    value = shift = 0
    while True:
        if pos >= end:
            raise ProtobufError(f"varint runs past byte {end}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtobufError(f"varint longer than 10 bytes before byte {pos}")


def fields(buf, start: int, end: int):
    """Yield (field number, wire type, value, value start, value end) for the message in
    buf[start:end]; value is the integer for VARINT/I32/I64 and None for LEN."""
    pos = start
    while pos < end:
        key = buf[pos]
        if key < 0x80:  # keys and lengths are mostly one byte: skip the general decoder
            pos += 1
        else:
            key, pos = varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"field number 0 at byte {pos}")
        if wire == LEN:
            n = buf[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                n, pos = varint(buf, pos, end)
            after = pos + n
            if after > end:
                raise ProtobufError(f"field {number} of {n} bytes at byte {pos} runs past byte "
                                    f"{end} (truncated?)")
            yield number, wire, None, pos, after
        elif wire == VARINT:
            value, after = varint(buf, pos, end)
            yield number, wire, value, pos, after
        elif wire == I64 or wire == I32:
            n = 8 if wire == I64 else 4
            if pos + n > end:
                raise ProtobufError(f"fixed-size field runs past byte {end}")
            yield number, wire, int.from_bytes(buf[pos:pos + n], "little"), pos, pos + n
            after = pos + n
        else:
            raise ProtobufError(f"unsupported wire type {wire} at byte {pos}")
        pos = after


def open_map(path: str):
    """A read-only memory map of `path` (an empty bytes object for an empty file)."""
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return b""


def top_level_fields(path: str) -> set:
    """The field numbers present at the top level of the message in `path`."""
    buf = open_map(path)
    try:
        return {number for number, *_ in fields(buf, 0, len(buf))}
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
