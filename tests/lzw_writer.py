"""A Unix `compress` (.Z) writer for tests, checked against gzip's own decoder where it is used:
LZW, block mode, 9 to 16 bits, no CLEAR codes (the table stops growing when full)."""


def compress(data: bytes, most: int = 16) -> bytes:
    out = bytearray(b"\x1f\x9d" + bytes([0x80 | most]))
    acc = nacc = 0
    bits, mark, free = 9, len(out), 257
    table = {bytes([i]): i for i in range(256)}

    def emit(code):
        nonlocal acc, nacc, bits, mark
        acc |= code << nacc
        nacc += bits
        while nacc >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nacc -= 8
        if free > (1 << bits) - 1 and bits < most:  # the next codes are one bit wider
            if nacc:
                out.append(acc & 0xFF)
                acc = nacc = 0
            out.extend(b"\0" * ((-(len(out) - mark)) % bits))  # whole groups of `bits` bytes
            mark = len(out)
            bits += 1

    w = b""
    for c in data:
        wc = w + bytes([c])
        if wc in table:
            w = wc
            continue
        emit(table[w])
        if free < 1 << most:
            table[wc] = free
            free += 1
        w = bytes([c])
    if w:
        emit(table[w])
    if nacc:
        out.append(acc & 0xFF)
    return bytes(out)
