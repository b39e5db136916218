"""kernels.unshuffle against NumPy's transposed copy (HDF5's shuffle filter, undone)."""

import numpy as np
import pytest

from fpclass.kernels.unshuffle import unshuffle


def shuffled(elements: np.ndarray, size: int, tail: bytes) -> bytes:
    """What HDF5's shuffle filter stores: byte k of every element together, then the tail."""
    raw = np.frombuffer(elements.tobytes(), np.uint8).reshape(-1, size)
    return raw.T.tobytes() + tail


@pytest.mark.parametrize("size", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("count", [0, 1, 7, 1000])
@pytest.mark.parametrize("tail", [b"", b"\x01\x02"])
def test_unshuffle_restores_the_elements(size, count, tail):
    tail = tail[:size - 1]  # bytes beyond the last whole element: fewer than one element's
    rng = np.random.default_rng(size * 1000 + count)
    elements = rng.integers(0, 256, count * size, dtype=np.uint8)
    data = shuffled(elements, size, tail)
    out = np.empty(len(data), np.uint8)
    got = unshuffle(data, size, out)
    assert got is out
    assert got.tobytes() == elements.tobytes() + tail


@pytest.mark.parametrize("size", [2, 4, 8])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_whole_words_and_unaligned_buffers(size, offset):
    """Elements of 2, 4 and 8 bytes are stored as whole words where `out` is aligned to them,
    byte by byte where it is not; `out` may be longer than the data (the rest untouched)."""
    rng = np.random.default_rng(size + offset)
    elements = rng.integers(0, 256, 999 * size, dtype=np.uint8)
    data = np.frombuffer(b"?" * offset + shuffled(elements, size, b"\x07"), np.uint8)[offset:]
    room = np.full(offset + data.size + 5, 0xAB, np.uint8)
    out = room[offset:]
    assert unshuffle(data, size, out) is out
    assert out[:data.size].tobytes() == elements.tobytes() + b"\x07"[:size - 1]
    assert (out[data.size:] == 0xAB).all() and (room[:offset] == 0xAB).all()
