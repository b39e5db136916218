"""A decoder for Unix `compress` (.Z) streams: LZW with 9- to 16-bit codes, after Mark Adler's
unlzw (pigz), in pure Python (about 10-30 MB/s of output). Table strings up to _CACHED bytes are
kept whole (memory at most 65536 x _CACHED bytes); longer ones are rebuilt from their prefix
chain, so a hostile stream cannot make the table grow quadratically."""

from __future__ import annotations

_CACHED = 1024
_CLEAR = 256


class LZWError(ValueError):
    """The stream is not a valid compress stream."""


def _decode(data: bytes):
    """Yield the decompressed bytes of compress stream `data`, a block at a time."""
    if len(data) < 3 or data[:2] != b"\x1f\x9d":
        raise LZWError("not a compress (.Z) stream")
    flags = data[2]
    most = flags & 0x1F
    block_mode = bool(flags & 0x80)
    if flags & 0x60 or not 9 <= most <= 16:
        raise LZWError(f"unknown compress flags 0x{flags:02x}")
    if len(data) == 3:
        return
    bits, mask, end = 9, 0x1FF, 256 if block_mode else 255
    strings: list = [bytes([i]) for i in range(256)] + [None] * (65536 - 256)
    prefix = [0] * 65536
    suffix = bytearray(65536)
    pos, mark, buf, left = 3, 3, 0, 0
    prev = final = -1
    out = bytearray()
    n = len(data)

    def string(code):
        s = strings[code]
        if s is not None:
            return s
        tail = bytearray()
        while strings[code] is None:
            tail.append(suffix[code])
            code = prefix[code]
        tail.reverse()
        return strings[code] + bytes(tail)

    while True:
        if end >= mask and bits < most:
            rem = (pos - mark) % bits
            if rem:
                pos += bits - rem
            buf = left = 0
            mark = pos
            bits += 1
            mask = (mask << 1) | 1
        while left < bits:
            if pos >= n:
                if out:
                    yield bytes(out)
                return
            buf |= data[pos] << left
            pos += 1
            left += 8
        code = buf & mask
        buf >>= bits
        left -= bits
        if prev < 0:  # the first code is a literal
            if code > 255:
                raise LZWError("the first code is not a literal")
            prev = final = code
            out.append(code)
            continue
        if code == _CLEAR and block_mode:
            rem = (pos - mark) % bits
            if rem:
                pos += bits - rem
            buf = left = 0
            mark = pos
            bits, mask, end = 9, 0x1FF, 255
            continue
        if code > end:
            if code != end + 1 or prev > end:
                raise LZWError(f"invalid code {code} at byte {pos}")
            s = string(prev)
            s = s + s[:1]
        else:
            s = string(code)
        final = s[0]
        if end < mask:
            end += 1
            prefix[end] = prev
            suffix[end] = final
            head = strings[prev]
            strings[end] = head + bytes((final,)) if head is not None and \
                len(head) < _CACHED else None
        prev = code
        out += s
        if len(out) >= 1 << 20:
            yield bytes(out)
            out.clear()


class LZWReader:
    """A read-only file of the decompressed bytes of the .Z file at `path` (`mode` "rb")."""

    def __init__(self, path, mode: str = "rb"):
        with open(path, "rb") as f:
            self._blocks = _decode(f.read())
        self._pending = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            block = next(self._blocks, None)
            if block is None:
                break
            self._pending += block
        if size < 0:
            size = len(self._pending)
        data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._blocks.close()
