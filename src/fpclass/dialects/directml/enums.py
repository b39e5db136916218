"""DirectML's enumerations with DirectML's values (directml.h), named in Python style."""

from __future__ import annotations

from enum import IntEnum, IntFlag


class TensorDataType(IntEnum):
    """DML_TENSOR_DATA_TYPE."""

    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12  # from DML_FEATURE_LEVEL_6_3
    INT4 = 13

    @property
    def bits(self) -> int:
        """Bits per element (0 for UNKNOWN)."""
        return _BITS[self]


_BITS = {TensorDataType.UNKNOWN: 0, TensorDataType.UINT4: 4, TensorDataType.INT4: 4}
_BITS.update({t: 8 for t in (TensorDataType.UINT8, TensorDataType.INT8)})
_BITS.update({t: 16 for t in (TensorDataType.FLOAT16, TensorDataType.UINT16, TensorDataType.INT16)})
_BITS.update({t: 32 for t in (TensorDataType.FLOAT32, TensorDataType.UINT32, TensorDataType.INT32)})
_BITS.update({t: 64 for t in (TensorDataType.FLOAT64, TensorDataType.UINT64, TensorDataType.INT64)})


class TensorFlags(IntFlag):
    """DML_TENSOR_FLAGS."""

    NONE = 0
    OWNED_BY_DML = 1


class IsInfinityMode(IntEnum):
    """DML_IS_INFINITY_MODE: which signs of infinity IS_INFINITY reports."""

    EITHER = 0
    POSITIVE = 1
    NEGATIVE = 2


class FeatureLevel(IntEnum):
    """DML_FEATURE_LEVEL: 0xMN00 for DML_FEATURE_LEVEL_M_N."""

    LEVEL_1_0 = 0x1000
    LEVEL_2_0 = 0x2000
    LEVEL_2_1 = 0x2100
    LEVEL_3_0 = 0x3000
    LEVEL_3_1 = 0x3100
    LEVEL_4_0 = 0x4000
    LEVEL_4_1 = 0x4100
    LEVEL_5_0 = 0x5000
    LEVEL_5_1 = 0x5100
    LEVEL_5_2 = 0x5200
    LEVEL_6_0 = 0x6000
    LEVEL_6_1 = 0x6100
    LEVEL_6_2 = 0x6200
    LEVEL_6_3 = 0x6300
    LEVEL_6_4 = 0x6400


#: The feature level operators are created for when none is given.
LATEST_FEATURE_LEVEL = max(FeatureLevel)


def as_member(enum: type[IntEnum], value, field: str):
    """`value` (a member or its integer value) as a member of `enum`; DirectMLError naming `field`
    and the accepted values otherwise."""
    from .errors import DirectMLError

    if isinstance(value, enum):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum(value)
        except ValueError:
            pass
    accepted = ", ".join(f"{m.name} ({m.value:#x})" if enum is FeatureLevel else f"{m.name} ({m.value})"
                         for m in enum)
    raise DirectMLError(f"{field} is {value!r}; DirectML accepts {enum.__name__} {accepted}")
