"""DML_BUFFER_TENSOR_DESC: a tensor's type, sizes and strides (in elements) inside a buffer, the
minimum buffer size DirectML derives from them (DMLCalcBufferTensorSize), and DirectML's rules
for a tensor of an operator at a feature level."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from .enums import FeatureLevel, TensorDataType, TensorFlags, as_member
from .errors import DirectMLError

UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1


def _int_tuple(values, name: str) -> tuple:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}") from None


def calc_buffer_tensor_size(data_type, sizes, strides=None) -> int:
    """DirectML's minimum buffer size in bytes for a tensor (DMLCalcBufferTensorSize): elements
    spanned (product of sizes, or index of the last element + 1 with strides) times element bits,
    rounded up to whole bytes, then to a multiple of 4. 0 if any size is 0."""
    dtype = as_member(TensorDataType, data_type, "DataType")
    if dtype is TensorDataType.UNKNOWN:
        raise DirectMLError("DataType is UNKNOWN, which has no element size")
    sizes = _int_tuple(sizes, "sizes")
    if any(n < 0 for n in sizes):
        raise DirectMLError(f"Sizes {list(sizes)} has a negative entry; sizes are UINT")
    if any(n == 0 for n in sizes):
        return 0
    if strides is None:
        elements = 1
        for n in sizes:
            elements *= n
    else:
        strides = _int_tuple(strides, "strides")
        if len(strides) != len(sizes):
            raise DirectMLError(f"Strides has {len(strides)} entries but Sizes has {len(sizes)}")
        if any(s < 0 for s in strides):
            raise DirectMLError(f"Strides {list(strides)} has a negative entry; strides are UINT")
        # Exact: DirectMLX sums in a 32-bit UINT, which wraps for spans past 2^32 elements.
        elements = sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
    size_in_bytes = (elements * dtype.bits + 7) // 8
    return (size_in_bytes + 3) & ~3


@dataclass(frozen=True)
class BufferTensorDesc:
    """DML_BUFFER_TENSOR_DESC. `strides` None means packed (row-major); TotalTensorSizeInBytes
    defaults to the minimum, `calc_buffer_tensor_size`. Checked against DirectML's rules when an
    operator is created, not here."""

    data_type: TensorDataType | int
    sizes: tuple
    strides: tuple | None = None
    total_tensor_size_in_bytes: int | None = None
    guaranteed_base_offset_alignment: int = 0
    flags: TensorFlags | int = TensorFlags.NONE
    minimum_size_in_bytes: int | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self):
        sizes = _int_tuple(self.sizes, "sizes")
        strides = None if self.strides is None else _int_tuple(self.strides, "strides")
        data_type = self.data_type
        if isinstance(data_type, int) and not isinstance(data_type, bool) and \
                data_type in TensorDataType._value2member_map_:
            data_type = TensorDataType(data_type)
        object.__setattr__(self, "data_type", data_type)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "strides", strides)
        try:
            minimum = calc_buffer_tensor_size(data_type, sizes, strides)
        except DirectMLError:
            minimum = None  # reported by validation, which names the field at fault
        object.__setattr__(self, "minimum_size_in_bytes", minimum)
        if self.total_tensor_size_in_bytes is None:
            object.__setattr__(self, "total_tensor_size_in_bytes", minimum)

    @property
    def dimension_count(self) -> int:
        return len(self.sizes)

    @property
    def element_strides(self) -> tuple:
        """Strides in elements; the packed row-major strides when `strides` is None."""
        if self.strides is not None:
            return self.strides
        out, step = [], 1
        for n in reversed(self.sizes):
            out.append(step)
            step *= n
        return tuple(reversed(out))


def check_tensor(desc, name: str, level: FeatureLevel, data_types: tuple) -> BufferTensorDesc:
    """DirectML's rules for the operator tensor `name` (e.g. "InputTensor") at feature level
    `level`, accepting `data_types`; DirectMLError naming the field and the rule otherwise."""
    if not isinstance(desc, BufferTensorDesc):
        raise TypeError(f"{name} must be a BufferTensorDesc, got {type(desc).__name__}")
    flags = desc.flags
    if isinstance(flags, bool) or not isinstance(flags, int) or int(flags) & ~int(TensorFlags.OWNED_BY_DML):
        raise DirectMLError(f"{name}.Flags is {flags!r}; DirectML accepts NONE (0) or OWNED_BY_DML (1)")
    dtype = as_member(TensorDataType, desc.data_type, f"{name}.DataType")
    dims = desc.dimension_count
    if level < FeatureLevel.LEVEL_3_0:
        if dims != 4:
            raise DirectMLError(f"{name}.DimensionCount is {dims}; below DML_FEATURE_LEVEL_3_0 "
                                f"it must be exactly 4 (feature level is {level.name})")
    elif not 1 <= dims <= 8:
        raise DirectMLError(f"{name}.DimensionCount is {dims}; it must be 1 to 8")
    if dtype not in data_types:
        raise DirectMLError(f"{name}.DataType is {dtype.name}; this operator accepts "
                            + ", ".join(t.name for t in data_types))
    for i, n in enumerate(desc.sizes):
        if not 1 <= n <= UINT32_MAX:
            raise DirectMLError(f"{name}.Sizes[{i}] is {n}; every size must be 1 to 2^32-1")
    elements = 1
    for n in desc.sizes:
        elements *= n
    if elements > UINT32_MAX:
        raise DirectMLError(f"{name} has {elements} elements (Sizes {list(desc.sizes)}); "
                            "DirectML allows at most 2^32-1")
    if desc.strides is not None:
        if len(desc.strides) != dims:
            raise DirectMLError(f"{name}.Strides has {len(desc.strides)} entries; it must have "
                                f"DimensionCount ({dims})")
        for i, s in enumerate(desc.strides):
            if not 0 <= s <= UINT32_MAX:
                raise DirectMLError(f"{name}.Strides[{i}] is {s}; strides must be 0 to 2^32-1")
    total = desc.total_tensor_size_in_bytes
    minimum = desc.minimum_size_in_bytes
    if isinstance(total, bool) or not isinstance(total, int) or not 0 <= total <= UINT64_MAX:
        raise DirectMLError(f"{name}.TotalTensorSizeInBytes is {total!r}; it must be a UINT64")
    if total < minimum:
        raise DirectMLError(f"{name}.TotalTensorSizeInBytes is {total}; the sizes and strides need "
                            f"at least {minimum} (calc_buffer_tensor_size)")
    align = desc.guaranteed_base_offset_alignment
    element_bytes = max(1, dtype.bits // 8)
    if isinstance(align, bool) or not isinstance(align, int) or not 0 <= align <= UINT32_MAX or (
            align and (align & (align - 1) or align < element_bytes)):
        raise DirectMLError(f"{name}.GuaranteedBaseOffsetAlignment is {align!r}; it must be 0 or a "
                            f"power of two >= the element size ({element_bytes} bytes)")
    return desc
