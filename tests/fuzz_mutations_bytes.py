"""Byte-level mutations shared by every format of the core fuzzer. Each mutator takes
(rng, files, fmt), changes `files` ({file name: bytes}) in place and returns a short description."""

from __future__ import annotations

import struct

from fuzz_mutations_gguf import gg_parse
from fuzz_seeds_core import MAIN, NAN, ONNX_DATA


INTERESTING_8 = (0x00, 0x01, 0x7F, 0x80, 0xFF)
INTERESTING_U64 = (0, 1, 2, 7, 8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, 1 << 40,
                   (1 << 63) - 1, 1 << 63, (1 << 64) - 1)


def _header_end(fmt, b: bytes) -> int:
    """Where the structure ends and bulk data begins (best effort; the whole file if unknown)."""
    try:
        if fmt == "safetensors":
            return min(len(b), 8 + struct.unpack("<Q", b[:8])[0])
        if fmt == "npy":
            if b[6:7] == b"\x01":
                return min(len(b), 10 + struct.unpack("<H", b[8:10])[0])
            return min(len(b), 12 + struct.unpack("<I", b[8:12])[0])
        if fmt == "gguf":
            return min(len(b), gg_parse(b).header_bytes)
    except Exception:
        pass
    return len(b)


def _target(rng, files, fmt):
    """The file a byte mutation hits: usually the main file, sometimes ONNX external data."""
    if ONNX_DATA in files and rng.random() < 0.3:
        return ONNX_DATA
    return MAIN[fmt]


def m_truncate(rng, files, fmt):
    name = _target(rng, files, fmt)
    b = files[name]
    end = _header_end(fmt, b)
    cut = rng.choice([rng.randrange(0, max(1, end) + 1), rng.randrange(0, len(b) + 1),
                      len(b) - 1, len(b) - rng.randrange(1, 9), end, end - 1, end + 1])
    cut = max(0, min(len(b), cut))
    files[name] = b[:cut]
    return f"truncate {name} to {cut} of {len(b)} bytes"


def m_extend(rng, files, fmt):
    name = _target(rng, files, fmt)
    n = rng.choice([1, 3, 8, 64, 1000])
    tail = rng.choice([b"\0" * n, bytes(rng.randrange(256) for _ in range(n)),
                       struct.pack("<f", NAN) * (n // 4 + 1), files[name][-n:]])
    files[name] += tail
    return f"append {len(tail)} bytes to {name}"


def m_flip(rng, files, fmt):
    name = _target(rng, files, fmt)
    b = bytearray(files[name])
    if not b:
        return "flip: empty file"
    end = max(1, _header_end(fmt, bytes(b)) if name == MAIN[fmt] else len(b))
    spots = []
    for _ in range(rng.choice([1, 1, 2, 4])):
        i = rng.randrange(min(end, len(b)))
        b[i] ^= 1 << rng.randrange(8)
        spots.append(i)
    files[name] = bytes(b)
    return f"flip bits of {name} at {spots}"


def m_set(rng, files, fmt):
    name = _target(rng, files, fmt)
    b = bytearray(files[name])
    if len(b) < 8:
        return "set: short file"
    end = max(8, _header_end(fmt, bytes(b)))
    i = rng.randrange(min(end, len(b)) - 7)
    if rng.random() < 0.5:
        b[i] = rng.choice(INTERESTING_8)
        what = f"byte {b[i]:#x}"
    else:
        v = rng.choice(INTERESTING_U64)
        b[i:i + 8] = struct.pack("<Q", v)
        what = f"u64 {v:#x}"
    files[name] = bytes(b)
    return f"set {what} in {name} at {i}"


def m_splice(rng, files, fmt):
    """Insert or delete a few bytes inside the structure."""
    name = MAIN[fmt]
    b = files[name]
    end = max(1, _header_end(fmt, b))
    i = rng.randrange(min(end, len(b)) + 1)
    if rng.random() < 0.5 and i < len(b):
        n = rng.choice([1, 2, 4, 8])
        files[name] = b[:i] + b[i + n:]
        return f"delete {n} bytes at {i}"
    ins = rng.choice([b"\0", b"\xff", b"\0" * 4, b[i:i + 8]])
    files[name] = b[:i] + ins + b[i:]
    return f"insert {ins!r} at {i}"


def m_data_value(rng, files, fmt):
    """Write a NaN/Inf/finite pattern somewhere in the data: a value change both readers see."""
    name = _target(rng, files, fmt)
    b = bytearray(files[name])
    start = _header_end(fmt, bytes(b)) if name == MAIN[fmt] else 0
    if start >= len(b) - 1:
        return "data value: no data"
    width = rng.choice([2, 4, 8])
    i = rng.randrange(start, len(b) - width + 1) if len(b) - width >= start else start
    i -= (i - start) % width
    pattern = rng.choice([{2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000},
                          {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000},
                          {2: 0xFC00, 4: 0xFF800000, 8: 0xFFF0000000000000},
                          {2: 0x3C00, 4: 0x3F800000, 8: 0x3FF0000000000000}])[width]
    b[i:i + width] = pattern.to_bytes(width, "little")[:len(b) - i]
    files[name] = bytes(b)
    return f"data: {width}-byte {pattern:#x} at {i} of {name}"


GENERIC = [m_truncate, m_extend, m_flip, m_set, m_splice, m_data_value]
