"""Rows of 4 or 8 bytes reduced along their own axis into one-byte cells (any_*, all_finite,
counts with dtype=uint8), a row a word (kernels/row_words.py): every stored pattern of every 8-
and 16-bit format in every lane of a row, each query, against the NumPy twin's element tests
(fpclass.twin) summed by NumPy, through both launchers; rows off a word boundary, read-only and
byte-swapped input; and the wider cells, which the shuffles (kernels/rows.py) still answer."""

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin
from fpclass.kernels import row_words
from samples import NARROW, all_patterns, random_bits

#: query -> (fpclass function, keyword arguments, the twin's element mask, reduced with any)
QUERIES = {
    "count_nan": (fpclass.count_nan, {}, twin.isnan, False),
    "count_inf": (fpclass.count_inf, {}, twin.isinf, False),
    "count_posinf": (fpclass.count_inf, {"detect_negative": False}, twin.isposinf, False),
    "count_neginf": (fpclass.count_inf, {"detect_positive": False}, twin.isneginf, False),
    "count_nonfinite": (fpclass.count_nonfinite, {}, lambda x: ~twin.isfinite(x), False),
    "any_nan": (fpclass.any_nan, {}, twin.isnan, True),
    "any_inf": (fpclass.any_inf, {}, twin.isinf, True),
    "any_posinf": (fpclass.any_inf, {"detect_negative": False}, twin.isposinf, True),
    "any_nonfinite": (fpclass.any_nonfinite, {}, lambda x: ~twin.isfinite(x), True),
    "all_finite": (fpclass.all_finite, {}, lambda x: twin.isfinite(x), None),
}
ONE_BYTE = [d for d in NARROW if d.itemsize == 1]
TWO_BYTES = [d for d in NARROW if d.itemsize == 2]


@pytest.fixture
def word_calls(monkeypatch):
    """How many blocks row_words.word_rows answered."""
    calls = []
    kernel = row_words.word_rows

    def counted(*args):
        calls.append(args[0].dtype)
        return kernel(*args)

    monkeypatch.setattr(row_words, "word_rows", counted)
    return calls


def every_pattern_in_every_lane(dtype, width, seed=0):
    """Rows of `width`: each lane in turn runs through every stored pattern, the other lanes hold
    random patterns (so a row has 0..width hits); then as many rows of random patterns."""
    patterns = all_patterns(dtype)
    blocks = []
    for lane in range(width):
        block = random_bits(dtype, patterns.size * width, seed + lane).reshape(-1, width)
        block[:, lane] = patterns
        blocks.append(block)
    blocks.append(random_bits(dtype, patterns.size * width, seed + width).reshape(-1, width))
    return np.concatenate(blocks)


def check(x, dtypes=(np.uint8, None)):
    for name, (ours, flags, mask, any_mode) in QUERIES.items():
        elements = mask(x)
        if any_mode is None:
            want = elements.all(axis=-1)
        elif any_mode:
            want = elements.any(axis=-1)
        for dtype in ([None] if any_mode is not False else dtypes):
            if any_mode is False:
                want = np.count_nonzero(elements, axis=-1).astype(dtype or np.int64)
            got = ours(x, axis=-1, **flags, **({} if dtype is None else {"dtype": dtype}))
            np.testing.assert_array_equal(got, want, err_msg=f"{name} dtype={dtype} {x.dtype}")
            assert got.dtype == want.dtype, (name, got.dtype)


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("dtype", ONE_BYTE, ids=str)
def test_one_byte_formats_every_pattern_in_every_lane(dtype, width, launcher, word_calls):
    x = every_pattern_in_every_lane(dtype, width)
    check(x)
    if launcher != "numpy" and (~twin.isfinite(all_patterns(dtype))).any():
        assert word_calls, "the rows were not answered a row a word"


@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize("dtype", TWO_BYTES, ids=str)
def test_two_byte_formats_every_pattern_in_every_lane(dtype, width, launcher, word_calls):
    x = every_pattern_in_every_lane(dtype, width)
    check(x, dtypes=(np.uint8,))
    swapped = x.astype(x.dtype.newbyteorder())
    check(swapped, dtypes=(np.uint8,))
    if launcher != "numpy":
        assert len(word_calls) >= 2


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(">f4")], ids=str)
def test_float32_rows_of_two(dtype, launcher, word_calls):
    bits = np.array([0, 1, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00000, 0x7FFFFFFF, 0x3F800000,
                     0x807FFFFF, 0x80000000], np.uint32)
    x = np.concatenate([random_bits(np.uint32, 4096).reshape(-1, 2),
                        np.stack(np.meshgrid(bits, bits), -1).reshape(-1, 2)]).view(np.float32)
    x = x.astype(dtype)
    check(x, dtypes=(np.uint8,))
    if launcher != "numpy":
        assert word_calls


@pytest.mark.parametrize("dtype", [np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.float16)], ids=str)
def test_rows_off_a_word_boundary_and_read_only(dtype, launcher, word_calls):
    width = 8 // dtype.itemsize
    x = every_pattern_in_every_lane(dtype, width, seed=5)[:2000]
    buffer = np.empty(x.nbytes + 8, np.uint8)
    off = buffer[dtype.itemsize:dtype.itemsize + x.nbytes].view(dtype).reshape(x.shape)
    off[...] = x
    check(off, dtypes=(np.uint8,))
    assert not word_calls, "rows off a word boundary are the shuffles' (another numba type)"
    x.flags.writeable = False
    check(x, dtypes=(np.uint8,))
    if launcher != "numpy":
        assert word_calls


def test_higher_dimensions_wider_cells_and_short_blocks(launcher, word_calls):
    # blocks of rows (3-D plans), rows too short for a step, and cells wider than a byte
    x = every_pattern_in_every_lane(np.dtype(ml_dtypes.float8_e5m2), 4)
    blocks = random_bits(ml_dtypes.float8_e5m2, 3 * 1200 * 4, 7).reshape(3, 1200, 4)[:, 100:]
    check(blocks, dtypes=(np.uint8, np.uint16, np.uint32, None))
    check(x, dtypes=(np.uint16, np.uint32, np.uint64))
    check(x[:15], dtypes=(np.uint8,))
    check(x[:, None, :], dtypes=(np.uint8,))
