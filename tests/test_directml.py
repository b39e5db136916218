"""fpclass.directml: DirectML's IS_INFINITY / IS_NAN descriptors, validation and buffer execution.

Truth here is plain numpy (np.isinf / np.isnan and sign comparisons) and Python loops over
DirectML's addressing rule (element offset = sum(index * stride)), never fpclass itself.
"""

import itertools
import mmap

import numpy as np
import pytest

import fpclass.directml as dml
from fpclass.directml import (
    BufferTensorDesc, DirectMLError, ElementWiseIsInfinityOperatorDesc, ElementWiseIsNanOperatorDesc,
    FeatureLevel, IsInfinityMode, TensorDataType, calc_buffer_tensor_size,
)

T = TensorDataType
L = FeatureLevel
MODES = list(IsInfinityMode)
SENTINEL = 0xAB
U32_MAX = (1 << 32) - 1


# ---------------------------------------------------------------- independent truth

def truth(x, mode):
    """The spec's f(x): mode is an IsInfinityMode, or "nan"."""
    x = np.asarray(x)
    if mode == "nan":
        return np.isnan(x)
    inf = np.isinf(x)
    if mode is IsInfinityMode.POSITIVE:
        return inf & (x > 0)
    if mode is IsInfinityMode.NEGATIVE:
        return inf & (x < 0)
    return inf


def make_desc(mode, source, target):
    if mode == "nan":
        return ElementWiseIsNanOperatorDesc(source, target)
    return ElementWiseIsInfinityOperatorDesc(source, target, mode)


def offsets(sizes, strides):
    """Element offsets of every index, in row-major index order (plain Python)."""
    return [sum(i * s for i, s in zip(index, strides))
            for index in itertools.product(*(range(n) for n in sizes))]


def packed_strides(sizes):
    return [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]


def reference_execute(mode, in_bytes, in_type, in_sizes, in_strides, out_bytes, out_type, out_strides):
    """What the operator must leave in `out_bytes`: elements read at DirectML offsets, results
    written sequentially in row-major order (so the last writer wins on shared addresses)."""
    in_dtype = {T.FLOAT32: "<f4", T.FLOAT16: "<f2"}[in_type]
    out_dtype = {T.UINT8: "u1", T.UINT32: "<u4"}[out_type]
    values = np.frombuffer(bytes(in_bytes), in_dtype)
    expected = np.frombuffer(bytearray(out_bytes), np.uint8).copy()
    out_items = expected.view(out_dtype) if out_type == T.UINT8 else None
    for i_off, o_off in zip(offsets(in_sizes, in_strides), offsets(in_sizes, out_strides)):
        bit = int(truth(values[i_off], mode))
        if out_items is not None:
            out_items[o_off] = bit
        else:
            expected[o_off * 4:o_off * 4 + 4] = np.frombuffer(np.array(bit, "<u4").tobytes(), np.uint8)
    return expected


def special_f32(rng, n_random):
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan,
                         np.finfo(np.float32).max, -np.finfo(np.float32).max,
                         np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal],
                        np.float32).view(np.uint32)
    edges = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0xFFFFFFFF, 0x7FFFFFFF, 0x7F7FFFFF,
                      0x00000001, 0x80000001, 0x7F800000, 0xFF800000], np.uint32)
    random = rng.integers(0, 1 << 32, n_random, dtype=np.uint64).astype(np.uint32)
    # A quarter of the random patterns get an all-ones exponent: NaN payloads of every kind.
    random[: n_random // 4] |= np.uint32(0x7F800000)
    return np.concatenate([specials, edges, random]).view(np.float32)


def f32_in(sizes, strides=None, **kw):
    return BufferTensorDesc(T.FLOAT32, sizes, strides, **kw)


def u8_out(sizes, strides=None, **kw):
    return BufferTensorDesc(T.UINT8, sizes, strides, **kw)


def raises_invalid(match):
    return pytest.raises(DirectMLError, match=match)


# ---------------------------------------------------------------- calc_buffer_tensor_size

@pytest.mark.parametrize("data_type, sizes, strides, expected", [
    (T.FLOAT32, [3, 2, 5], None, 120),
    (T.FLOAT32, [3, 2, 5], [0, 0, 1], 20),
    (T.UINT8, [1, 1, 1, 3], None, 4),
    (T.FLOAT16, [1, 3, 2, 2], [12, 1, 6, 3], 24),
])
def test_calc_buffer_tensor_size_issue_examples(data_type, sizes, strides, expected):
    assert calc_buffer_tensor_size(data_type, sizes, strides) == expected


BITS = {T.FLOAT32: 32, T.FLOAT16: 16, T.UINT32: 32, T.UINT16: 16, T.UINT8: 8, T.INT32: 32,
        T.INT16: 16, T.INT8: 8, T.FLOAT64: 64, T.UINT64: 64, T.INT64: 64, T.UINT4: 4, T.INT4: 4}


@pytest.mark.parametrize("data_type", list(BITS))
def test_calc_buffer_tensor_size_matches_brute_force(data_type):
    rng = np.random.default_rng(int(data_type))
    for _ in range(20):
        ndim = int(rng.integers(1, 5))
        sizes = [int(n) for n in rng.integers(1, 5, ndim)]
        strides = [int(s) for s in rng.integers(0, 9, ndim)]
        for given in (None, strides):
            spanned = (len(offsets(sizes, sizes)) if given is None
                       else max(offsets(sizes, given)) + 1)
            nbytes = -(-spanned * BITS[data_type] // 8)
            assert calc_buffer_tensor_size(data_type, sizes, given) == -(-nbytes // 4) * 4


def test_calc_buffer_tensor_size_edges():
    assert calc_buffer_tensor_size(T.UINT4, [9]) == 8       # 36 bits -> 5 bytes -> 8
    assert calc_buffer_tensor_size(T.UINT8, [4]) == 4       # already a multiple of 4
    assert calc_buffer_tensor_size(T.UINT8, [5]) == 8
    assert calc_buffer_tensor_size(T.FLOAT32, [2, 0]) == 0  # no elements need no bytes
    # DirectMLX sums the last index in 32 bits; the exact size is returned here.
    assert calc_buffer_tensor_size(T.UINT8, [2, 2], [1 << 31, 1 << 31]) == (1 << 32) + 4
    with raises_invalid("UNKNOWN"):
        calc_buffer_tensor_size(T.UNKNOWN, [1])
    with raises_invalid("Strides has 1 entries but Sizes has 2"):
        calc_buffer_tensor_size(T.UINT8, [1, 2], [1])
    with raises_invalid("DataType is 42"):
        calc_buffer_tensor_size(42, [1])


def test_buffer_tensor_desc_defaults_to_the_minimum_size():
    d = BufferTensorDesc(T.FLOAT16, [1, 3, 2, 2], [12, 1, 6, 3])
    assert d.total_tensor_size_in_bytes == 24
    assert d.dimension_count == 4
    assert BufferTensorDesc(2, (2, 3)).data_type is T.FLOAT16
    assert BufferTensorDesc(T.UINT8, [2, 3, 4]).element_strides == (12, 4, 1)
    with pytest.raises(TypeError, match="sizes must be a sequence of integers"):
        BufferTensorDesc(T.UINT8, [1.5])


# ---------------------------------------------------------------- enums

def test_enum_values_are_directml_values():
    assert [int(t) for t in (T.FLOAT32, T.FLOAT16, T.UINT32, T.UINT16, T.UINT8, T.INT32, T.INT16,
                             T.INT8, T.FLOAT64, T.UINT64, T.INT64)] == list(range(1, 12))
    assert (int(dml.TensorFlags.NONE), int(dml.TensorFlags.OWNED_BY_DML)) == (0, 1)
    modes = (IsInfinityMode.EITHER, IsInfinityMode.POSITIVE, IsInfinityMode.NEGATIVE)
    assert [int(m) for m in modes] == [0, 1, 2]
    assert (L.LEVEL_1_0, L.LEVEL_2_0, L.LEVEL_2_1, L.LEVEL_3_0, L.LEVEL_5_2, L.LEVEL_6_4) == (
        0x1000, 0x2000, 0x2100, 0x3000, 0x5200, 0x6400)
    assert dml.LATEST_FEATURE_LEVEL == L.LEVEL_6_4


# ---------------------------------------------------------------- validation

FOUR_D = [1, 2, 3, 4]


@pytest.mark.parametrize("make, introduced, before", [
    (lambda: ElementWiseIsNanOperatorDesc(f32_in(FOUR_D), u8_out(FOUR_D)), L.LEVEL_2_0, L.LEVEL_1_0),
    (lambda: ElementWiseIsInfinityOperatorDesc(f32_in(FOUR_D), u8_out(FOUR_D)), L.LEVEL_2_1, L.LEVEL_2_0),
])
def test_operator_availability(make, introduced, before):
    assert make().create_operator(introduced).feature_level == introduced
    with raises_invalid("was introduced in DML_FEATURE_LEVEL_2_"):
        make().create_operator(before)


def test_error_carries_the_hresult():
    with pytest.raises(DirectMLError) as info:
        ElementWiseIsNanOperatorDesc(f32_in([0]), u8_out([0])).validate()
    assert info.value.hresult == "E_INVALIDARG"
    assert info.value.hresult_code == 0x80070057
    assert isinstance(info.value, ValueError)
    assert "InputTensor.Sizes[0] is 0" in str(info.value)


@pytest.mark.parametrize("mode", MODES + ["nan"])
@pytest.mark.parametrize("level, ndim, ok", [
    (L.LEVEL_2_1, 3, False), (L.LEVEL_2_1, 4, True), (L.LEVEL_2_1, 5, False),
    (L.LEVEL_3_0, 0, False), (L.LEVEL_3_0, 1, True), (L.LEVEL_3_0, 8, True), (L.LEVEL_3_0, 9, False),
    (L.LEVEL_6_4, 8, True), (L.LEVEL_6_4, 9, False),
])
def test_dimension_counts(mode, level, ndim, ok):
    sizes = [2] * ndim
    desc = make_desc(mode, f32_in(sizes), u8_out(sizes))
    if ok:
        desc.validate(level)
    else:
        with raises_invalid(f"InputTensor.DimensionCount is {ndim}"):
            desc.validate(level)


def test_dimension_count_of_the_output_alone():
    with raises_invalid("OutputTensor.DimensionCount is 5"):
        ElementWiseIsNanOperatorDesc(f32_in(FOUR_D), u8_out(FOUR_D + [1])).validate(L.LEVEL_2_0)


@pytest.mark.parametrize("data_type", list(T))
@pytest.mark.parametrize("mode", [IsInfinityMode.EITHER, "nan"])
def test_every_data_type(mode, data_type):
    ok_in = data_type in (T.FLOAT32, T.FLOAT16)
    ok_out = data_type in ((T.UINT8, T.UINT32) if mode == "nan" else (T.UINT8,))
    as_input = make_desc(mode, BufferTensorDesc(data_type, FOUR_D), u8_out(FOUR_D))
    as_output = make_desc(mode, f32_in(FOUR_D), BufferTensorDesc(data_type, FOUR_D))
    for desc, ok, field in ((as_input, ok_in, "InputTensor"), (as_output, ok_out, "OutputTensor")):
        if ok:
            desc.validate(L.LEVEL_2_1)
        else:
            with raises_invalid(f"{field}.DataType"):
                desc.validate(L.LEVEL_2_1)


def test_unknown_data_type_value():
    with raises_invalid("InputTensor.DataType is 99"):
        ElementWiseIsNanOperatorDesc(BufferTensorDesc(99, [2]), u8_out([2])).validate()


@pytest.mark.parametrize("in_sizes, out_sizes, match", [
    ([1, 1, 2, 3], [1, 1, 3, 2], "Sizes"),
    ([6], [1, 6], "DimensionCount"),
    ([2, 3], [2, 3], None),
])
def test_same_dimension_count_and_sizes(in_sizes, out_sizes, match):
    for mode in (IsInfinityMode.EITHER, "nan"):
        desc = make_desc(mode, f32_in(in_sizes), u8_out(out_sizes))
        if match is None:
            desc.validate()
        else:
            with raises_invalid(f"InputTensor.{match} .* and OutputTensor.{match}"):
                desc.validate()


@pytest.mark.parametrize("sizes, ok", [
    ([1, 0], False), ([1, 1], True),
    ([U32_MAX], True), ([U32_MAX + 1], False),
    ([65535, 65537], True), ([65536, 65536], False),
])
def test_sizes_and_element_count(sizes, ok):
    desc = ElementWiseIsInfinityOperatorDesc(f32_in(sizes), u8_out(sizes))
    if ok:
        desc.validate()
    else:
        with raises_invalid("InputTensor"):
            desc.validate()


def test_negative_size_is_refused():
    with raises_invalid(r"Sizes\[1\] is -2"):
        ElementWiseIsNanOperatorDesc(f32_in([2, -2]), u8_out([2, -2])).validate()


@pytest.mark.parametrize("strides, ok", [
    ([4, 1], True), ([0, 0], True), ([U32_MAX, 1], True), ([U32_MAX + 1, 1], False), ([-1, 1], False),
    ([1], False), ([3, 2, 1], False),
])
def test_strides(strides, ok):
    desc = ElementWiseIsNanOperatorDesc(f32_in([2, 3], strides, total_tensor_size_in_bytes=1 << 40),
                                        u8_out([2, 3]))
    if ok:
        desc.validate()
    else:
        with raises_invalid("InputTensor.Strides"):
            desc.validate()


@pytest.mark.parametrize("field", ["InputTensor", "OutputTensor"])
def test_total_size_exactly_the_minimum_vs_one_byte_short(field):
    sizes, strides = [1, 3, 2, 2], [12, 1, 6, 3]
    for total, ok in ((24, True), (23, False), (25, True), (1 << 62, True)):
        source = BufferTensorDesc(T.FLOAT16, sizes, strides,
                                  total_tensor_size_in_bytes=total if field == "InputTensor" else None)
        target = BufferTensorDesc(T.UINT32, sizes, strides,
                                  total_tensor_size_in_bytes=total * 2 if field == "OutputTensor" else None)
        desc = ElementWiseIsNanOperatorDesc(source, target)
        if ok:
            desc.validate(L.LEVEL_2_0)
        else:
            with raises_invalid(f"{field}.TotalTensorSizeInBytes is .*at least"):
                desc.validate(L.LEVEL_2_0)


def test_total_size_must_be_a_uint64():
    desc = ElementWiseIsNanOperatorDesc(f32_in([2], total_tensor_size_in_bytes=1 << 64), u8_out([2]))
    with raises_invalid("TotalTensorSizeInBytes is 18446744073709551616"):
        desc.validate()


@pytest.mark.parametrize("data_type, alignment, ok", [
    (T.FLOAT32, 0, True), (T.FLOAT32, 4, True), (T.FLOAT32, 8, True), (T.FLOAT32, 256, True),
    (T.FLOAT32, 2, False), (T.FLOAT32, 1, False), (T.FLOAT32, 12, False), (T.FLOAT32, 3, False),
    (T.FLOAT16, 2, True), (T.FLOAT16, 1, False), (T.FLOAT16, 6, False),
])
def test_guaranteed_base_offset_alignment(data_type, alignment, ok):
    desc = ElementWiseIsNanOperatorDesc(
        BufferTensorDesc(data_type, [4], guaranteed_base_offset_alignment=alignment), u8_out([4]))
    if ok:
        desc.validate()
    else:
        with raises_invalid("InputTensor.GuaranteedBaseOffsetAlignment"):
            desc.validate()


@pytest.mark.parametrize("alignment, ok", [(1, True), (2, True), (3, False)])
def test_output_alignment_at_one_byte_elements(alignment, ok):
    desc = ElementWiseIsNanOperatorDesc(f32_in([4]), u8_out([4], guaranteed_base_offset_alignment=alignment))
    if ok:
        desc.validate()
    else:
        with raises_invalid("OutputTensor.GuaranteedBaseOffsetAlignment"):
            desc.validate()


@pytest.mark.parametrize("flags, ok", [(0, True), (1, True), (dml.TensorFlags.OWNED_BY_DML, True),
                                       (2, False), (3, False)])
def test_flags(flags, ok):
    desc = ElementWiseIsNanOperatorDesc(f32_in([4], flags=flags), u8_out([4]))
    if ok:
        desc.validate()
    else:
        with raises_invalid("InputTensor.Flags"):
            desc.validate()


@pytest.mark.parametrize("mode, ok", [(0, True), (1, True), (2, True), (IsInfinityMode.NEGATIVE, True),
                                      (3, False), (-1, False), (True, False)])
def test_infinity_mode(mode, ok):
    desc = ElementWiseIsInfinityOperatorDesc(f32_in([4]), u8_out([4]), mode)
    if ok:
        desc.validate()
    else:
        with raises_invalid("InfinityMode is"):
            desc.validate()


@pytest.mark.parametrize("level", [0x2200, 0x7000, 0])
def test_unknown_feature_level(level):
    with raises_invalid("feature level is"):
        ElementWiseIsNanOperatorDesc(f32_in([4]), u8_out([4])).create_operator(level)


def test_feature_level_as_plain_integer():
    op = ElementWiseIsInfinityOperatorDesc(f32_in(FOUR_D), u8_out(FOUR_D)).create_operator(0x2100)
    assert op.feature_level is L.LEVEL_2_1


def test_tensor_must_be_a_buffer_tensor_desc():
    with pytest.raises(TypeError, match="InputTensor must be a BufferTensorDesc"):
        ElementWiseIsNanOperatorDesc([4], u8_out([4])).validate()


# ---------------------------------------------------------------- execution: every value

@pytest.mark.parametrize("mode", MODES + ["nan"])
def test_all_float16_patterns(mode):
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    sizes = [1, 1, 256, 256]  # 4-D: valid from the operator's first feature level
    out = bytearray([SENTINEL]) * (1 << 16)
    desc = make_desc(mode, BufferTensorDesc(T.FLOAT16, sizes), u8_out(sizes))
    desc.create_operator(L.LEVEL_2_1).execute(bytearray(x.astype("<f2").tobytes()), out)
    np.testing.assert_array_equal(np.frombuffer(out, np.uint8), truth(x, mode).astype(np.uint8))


def test_all_float16_patterns_uint32_output():
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    out = bytearray(4 << 16)
    desc = ElementWiseIsNanOperatorDesc(BufferTensorDesc(T.FLOAT16, [1 << 16]),
                                        BufferTensorDesc(T.UINT32, [1 << 16]))
    desc.create_operator().execute(x.astype("<f2").tobytes(), out)
    np.testing.assert_array_equal(np.frombuffer(out, "<u4"), np.isnan(x).astype(np.uint32))


@pytest.mark.parametrize("mode", MODES + ["nan"])
def test_float32_specials_and_random_bits(mode):
    x = special_f32(np.random.default_rng(6), 1 << 16)
    n = x.size
    target = u8_out([n])
    out = np.full(target.total_tensor_size_in_bytes, SENTINEL, np.uint8)  # n rounded up to 4
    make_desc(mode, f32_in([n]), target).create_operator().execute(x.astype("<f4"), out)
    np.testing.assert_array_equal(out[:n], truth(x, mode).astype(np.uint8))
    assert (out[n:] == SENTINEL).all()


# ---------------------------------------------------------------- execution: layouts

LAYOUTS = {
    # name: (sizes, input strides, output strides)   None = packed
    "packed": ([2, 3, 4], None, None),
    "padded rows": ([3, 4], [7, 1], [6, 1]),
    "transposed output": ([3, 4], [4, 1], [1, 3]),
    "transposed input": ([3, 4], [1, 3], None),
    "broadcast input": ([4, 5], [0, 1], None),
    "scalar broadcast": ([2, 3, 2], [0, 0, 0], [6, 2, 1]),
    "nchw sliced": ([1, 2, 3, 2], [24, 12, 4, 2], [12, 6, 2, 1]),
    "output stride 0": ([3, 4], [4, 1], [1, 0]),
    "output all stride 0": ([2, 3], None, [0, 0]),
    "interleaved output": ([3, 3], None, [1, 1]),
    "interleaved, no aliasing": ([2, 3], None, [3, 2]),
    "interleaved output, transposed input": ([3, 3], [1, 3], [1, 1]),
    "interleaved 3-d output, transposed input": ([2, 3, 4], [1, 2, 6], [1, 2, 1]),
    "output stride 0, transposed input": ([3, 4, 2], [1, 3, 12], [2, 0, 1]),
}


TYPE_CASES = [(mode, T.FLOAT32, T.UINT8) for mode in MODES + ["nan"]] + [
    (mode, T.FLOAT16, T.UINT8) for mode in MODES + ["nan"]] + [("nan", T.FLOAT32, T.UINT32)]


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("mode, in_type, out_type", TYPE_CASES)
def test_layouts_against_addressing_rule(layout, mode, in_type, out_type):
    sizes, in_strides, out_strides = LAYOUTS[layout]
    source = BufferTensorDesc(in_type, sizes, in_strides)
    target = BufferTensorDesc(out_type, sizes, out_strides)
    rng = np.random.default_rng(len(layout))
    in_dtype = "<f4" if in_type == T.FLOAT32 else "<f2"
    pool = np.array([0, -0.0, 1, -2, np.inf, -np.inf, np.nan, -np.nan, 65504, 1e-8], in_dtype)
    values = rng.choice(pool, source.total_tensor_size_in_bytes // pool.itemsize)
    in_bytes = bytearray(values.tobytes())
    out_bytes = bytearray([SENTINEL]) * (target.total_tensor_size_in_bytes + 8)  # spare tail
    expected = reference_execute(mode, in_bytes, in_type, sizes, source.element_strides,
                                 out_bytes, out_type, target.element_strides)
    make_desc(mode, source, target).create_operator().execute(in_bytes, out_bytes)
    np.testing.assert_array_equal(np.frombuffer(out_bytes, np.uint8), expected)
    assert bytes(in_bytes) == values.tobytes()  # the input is never written


@pytest.mark.parametrize("mode", [IsInfinityMode.EITHER, "nan"])
def test_large_output_broadcast_to_one_address_keeps_the_last_element(mode):
    """Many threads may classify a large tensor; the shared address still ends with the result of
    the last element in row-major order."""
    n = 1 << 20
    x = np.where(np.arange(n) % 2 == 0, np.float32(np.inf), np.float32(np.nan)).astype("<f4")
    for last in (x[-1], x[-2]):
        x[-1] = last
        out = bytearray([SENTINEL]) * 4
        make_desc(mode, f32_in([n]), u8_out([n], [0])).create_operator().execute(x, out)
        assert list(out) == [int(truth(last, mode)), SENTINEL, SENTINEL, SENTINEL]


def test_untouched_output_bytes_are_exactly_the_unaddressed_ones():
    sizes, strides = [3, 4], [9, 2]
    target = u8_out(sizes, strides)
    out = bytearray([SENTINEL]) * target.total_tensor_size_in_bytes
    x = np.full(12, np.inf, "<f4")  # every addressed byte becomes 1
    ElementWiseIsInfinityOperatorDesc(f32_in(sizes), target).create_operator().execute(x, out)
    addressed = set(offsets(sizes, strides))
    assert [i for i, b in enumerate(out) if b == 1] == sorted(addressed)
    assert all(b == SENTINEL for i, b in enumerate(out) if i not in addressed)


@pytest.mark.parametrize("mode", MODES + ["nan"])
@pytest.mark.parametrize("out_byte", [0, 3])
def test_in_place_same_as_separate_buffers(mode, out_byte):
    """Output UINT8 elements inside the input's FLOAT32 elements (same buffer)."""
    x = special_f32(np.random.default_rng(1), 500).astype("<f4")
    n = x.size
    source = f32_in([n])
    # Element i of the output lands in byte `out_byte` of input element i (stride 4 bytes).
    target = u8_out([n], [4], total_tensor_size_in_bytes=4 * n)
    separate = bytearray(4 * n)
    make_desc(mode, source, target).create_operator().execute(x.tobytes(), separate)
    shared = bytearray(x.tobytes()) + bytearray(4)  # room for the output's TotalTensorSizeInBytes
    view = memoryview(shared)
    make_desc(mode, source, target).create_operator().execute(view, view[out_byte:] if out_byte else shared)
    got = np.frombuffer(shared, np.uint8)[out_byte:4 * n:4]
    assert np.array_equal(got, np.frombuffer(separate, np.uint8)[::4])
    assert np.array_equal(got, truth(x, mode).astype(np.uint8))


def test_in_place_packed_output_over_the_input_start():
    x = special_f32(np.random.default_rng(2), 1000).astype("<f4")
    shared = bytearray(x.tobytes())
    ElementWiseIsNanOperatorDesc(f32_in([x.size]), u8_out([x.size])).create_operator().execute(shared, shared)
    out = np.frombuffer(shared, np.uint8)
    assert np.array_equal(out[:x.size], np.isnan(x).astype(np.uint8))
    assert out[x.size:].tobytes() == x.tobytes()[x.size:]  # bytes past the output are untouched


def test_unaligned_buffers():
    x = special_f32(np.random.default_rng(3), 100).astype("<f4")
    in_buf = bytearray(1) + bytearray(x.tobytes())
    out_buf = bytearray([SENTINEL]) * (x.size + 5)
    op = ElementWiseIsInfinityOperatorDesc(f32_in([x.size]), u8_out([x.size]),
                                           IsInfinityMode.POSITIVE).create_operator()
    op.execute(memoryview(in_buf)[1:], memoryview(out_buf)[1:])
    out = np.frombuffer(out_buf, np.uint8)
    assert np.array_equal(out[1:x.size + 1], (np.isinf(x) & (x > 0)).astype(np.uint8))
    assert out[0] == SENTINEL and (out[x.size + 1:] == SENTINEL).all()


# ---------------------------------------------------------------- execution: buffers

def _small_case():
    x = np.array([1, -np.inf, np.nan, np.inf], "<f4")
    return x, ElementWiseIsInfinityOperatorDesc(f32_in([4]), u8_out([4])).create_operator(), [0, 1, 0, 1]


def test_buffer_kinds():
    x, op, expected = _small_case()
    for make_input in (bytes, bytearray, lambda b: memoryview(bytearray(b)),
                       lambda b: np.frombuffer(b, np.uint8), lambda b: np.frombuffer(b, "<f4").reshape(2, 2)):
        for make_output in (bytearray, lambda n: memoryview(bytearray(n)), lambda n: np.zeros(n, np.uint8),
                            lambda n: np.zeros((2, 2), np.uint8)):
            out = make_output(4)
            op.execute(make_input(x.tobytes()), out)
            assert list(np.frombuffer(memoryview(out).cast("B"), np.uint8)) == expected


def test_mmap_buffers(tmp_path):
    x, op, expected = _small_case()
    with mmap.mmap(-1, 16) as source, mmap.mmap(-1, 8) as target:
        source[:16] = x.tobytes()
        op.execute(source, target)
        assert list(target[:4]) == expected and list(target[4:]) == [0] * 4
    path = tmp_path / "out.bin"
    path.write_bytes(bytes([SENTINEL]) * 4)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as readonly:
        with raises_invalid("output_buffer is read-only"):
            op.execute(x.tobytes(), readonly)
    assert path.read_bytes() == bytes([SENTINEL]) * 4


def _read_only_array(n):
    a = np.zeros(n, np.uint8)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("make_readonly", [bytes, lambda n: memoryview(bytearray(n)).toreadonly(),
                                           _read_only_array])
def test_read_only_output_raises(make_readonly):
    x, op, _ = _small_case()
    with raises_invalid("output_buffer is read-only"):
        op.execute(x.tobytes(), make_readonly(4))


@pytest.mark.parametrize("buffer, match", [
    ([0, 0, 0, 0], "bytes-like buffer"), ("abcd", "bytes-like buffer"),
    (np.zeros(8, np.uint8)[::2], "C-contiguous"), (np.zeros(4, object), "plain bytes"),
])
def test_non_buffers_raise_type_error(buffer, match):
    x, op, _ = _small_case()
    with pytest.raises(TypeError, match=match):
        op.execute(x.tobytes(), buffer)


@pytest.mark.parametrize("short", ["input", "output"])
def test_short_buffers_raise_before_writing(short):
    sizes, strides = [2, 3], [4, 1]
    source = BufferTensorDesc(T.FLOAT16, sizes, strides)  # needs (1*4 + 2*1 + 1) * 2 = 14 -> 16
    target = u8_out(sizes, strides, total_tensor_size_in_bytes=12)
    assert source.total_tensor_size_in_bytes == 16
    op = ElementWiseIsInfinityOperatorDesc(source, target).create_operator()
    in_buf = np.full(8 if short != "input" else 7, np.inf, "<f2").tobytes()
    out_buf = bytearray([SENTINEL]) * (12 if short != "output" else 11)
    with raises_invalid(f"{short}_buffer has {len(in_buf) if short == 'input' else 11} bytes"):
        op.execute(in_buf, out_buf)
    assert out_buf == bytearray([SENTINEL]) * len(out_buf)
    # One more byte is enough, though the elements needed fewer: the buffer is checked against
    # TotalTensorSizeInBytes.
    op.execute(np.full(8, np.inf, "<f2").tobytes(), bytearray(12))


# ---------------------------------------------------------------- the numpy convenience

def _arrays():
    rng = np.random.default_rng(4)
    base = rng.choice(np.array([0, -1.5, 2, np.inf, -np.inf, np.nan], np.float32), (4, 5, 6))
    yield "contiguous", base
    yield "strided", base[::2, 1::2]
    yield "negative strides", base[::-1, :, ::-2]
    yield "transposed", base.transpose(2, 0, 1)
    yield "byte-swapped", base.astype(">f4")
    yield "float16", base.astype(np.float16)[:, ::-1]
    ro = base.copy()
    ro.flags.writeable = False
    yield "read-only", ro
    yield "broadcast", np.broadcast_to(base[0, 0], (3, 6))
    yield "unaligned", np.frombuffer(b"\0" + base.tobytes(), np.uint8)[1:].view(np.float32)
    yield "0-d", np.array(np.inf, np.float32)
    yield "stride not whole elements", np.ndarray((5,), np.float32, buffer=base.tobytes() * 2, offset=1,
                                                  strides=(6,))


@pytest.mark.parametrize("name, x", list(_arrays()), ids=[n for n, _ in _arrays()])
@pytest.mark.parametrize("mode", MODES + ["nan"])
def test_numpy_convenience(name, x, mode):
    got = dml.is_nan(x) if mode == "nan" else dml.is_infinity(x, mode)
    assert got.dtype == np.uint8 and got.shape == x.shape
    np.testing.assert_array_equal(got, truth(x, mode).astype(np.uint8))


def test_numpy_convenience_at_old_feature_levels_pads_to_four_dims():
    x = np.array([[np.nan, 1], [-np.inf, np.inf]], np.float16)
    assert dml.is_nan(x, feature_level=L.LEVEL_2_0).tolist() == [[1, 0], [0, 0]]
    assert dml.is_infinity(x, IsInfinityMode.NEGATIVE, feature_level=L.LEVEL_2_1).tolist() == [[0, 0], [1, 0]]
    with raises_invalid("introduced in DML_FEATURE_LEVEL_2_1"):
        dml.is_infinity(x, feature_level=L.LEVEL_2_0)
    with raises_invalid("DimensionCount is 5"):
        dml.is_nan(np.zeros((1,) * 5, np.float32), feature_level=L.LEVEL_2_0)


def test_numpy_convenience_refusals():
    with raises_invalid(r"Sizes\[0\] is 0"):
        dml.is_nan(np.zeros(0, np.float32))
    with raises_invalid("DimensionCount is 9"):
        dml.is_nan(np.zeros((1,) * 9, np.float32))
    with raises_invalid("InputTensor.DataType is FLOAT64"):
        dml.is_nan(np.zeros(3))
    with raises_invalid("InfinityMode is 5"):
        dml.is_infinity(np.zeros(3, np.float32), 5)
    with pytest.raises(TypeError, match="no DirectML tensor data type"):
        dml.is_nan(np.zeros(3, np.complex64))


def test_numpy_convenience_list_input_is_float64_and_refused():
    with raises_invalid("FLOAT64"):
        dml.is_nan([1.0, float("nan")])
