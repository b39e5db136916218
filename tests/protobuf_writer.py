"""Writing protobuf fields by hand, for hostile ONNX files (tests and benchmarks/bench_scan.py)."""


def varint(v: int) -> bytes:
    """`v` (>= 0) as a protobuf base-128 varint."""
    out = bytearray()
    while True:
        out.append(v & 0x7F | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def field(number: int, wire: int, payload=b"") -> bytes:
    """One protobuf field: a LEN payload (wire 2, bytes), a varint (wire 0, int) or raw bytes
    (other wires)."""
    key = varint(number << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + (varint(payload) if wire == 0 else payload)
