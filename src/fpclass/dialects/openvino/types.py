"""OpenVINO element types and IR port precisions, and the NumPy / ml_dtypes dtype of each.

    >>> element_type("f32").precision, element_type("FP16").name
    ('FP32', 'f16')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import IRError


@dataclass(frozen=True)
class ElementType:
    """One OpenVINO element type: its name (`f32`), its IR port precision (`FP32`), the NumPy or
    ml_dtypes dtype holding its values (None where NumPy has none), and whether it is real."""

    name: str
    precision: str
    dtype_name: str | None
    real: bool = False

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of this element type; IRError for types NumPy cannot hold."""
        if self.dtype_name is None:
            raise IRError(f"element type {self.name} has no NumPy equivalent")
        if hasattr(np, self.dtype_name):
            return np.dtype(self.dtype_name)
        import ml_dtypes  # only the narrow formats need it
        return np.dtype(getattr(ml_dtypes, self.dtype_name))

    def __str__(self) -> str:
        return self.name


# OpenVINO's f8e4m3 is OCP FP8 E4M3 (no Inf, NaN S.1111.111), ml_dtypes' float8_e4m3fn;
# f8e8m0 is the OCP MX scale (NaN 0xFF), float8_e8m0fnu; f4e2m1 is float4_e2m1fn.
ELEMENT_TYPES: tuple[ElementType, ...] = (
    ElementType("f16", "FP16", "float16", True),
    ElementType("bf16", "BF16", "bfloat16", True),
    ElementType("f32", "FP32", "float32", True),
    ElementType("f64", "FP64", "float64", True),
    ElementType("f8e4m3", "F8E4M3", "float8_e4m3fn", True),
    ElementType("f8e5m2", "F8E5M2", "float8_e5m2", True),
    ElementType("f8e8m0", "F8E8M0", "float8_e8m0fnu", True),
    ElementType("f4e2m1", "F4E2M1", "float4_e2m1fn", True),
    ElementType("boolean", "BOOL", "bool"),
    ElementType("i4", "I4", "int4"),
    ElementType("i8", "I8", "int8"),
    ElementType("i16", "I16", "int16"),
    ElementType("i32", "I32", "int32"),
    ElementType("i64", "I64", "int64"),
    ElementType("u1", "BIN", None),
    ElementType("u2", "U2", "uint2"),
    ElementType("u3", "U3", None),
    ElementType("u4", "U4", "uint4"),
    ElementType("u6", "U6", None),
    ElementType("u8", "U8", "uint8"),
    ElementType("u16", "U16", "uint16"),
    ElementType("u32", "U32", "uint32"),
    ElementType("u64", "U64", "uint64"),
    ElementType("nf4", "NF4", None),
    ElementType("string", "STRING", None),
)

REAL_TYPES: tuple[str, ...] = tuple(t.name for t in ELEMENT_TYPES if t.real)
BOOLEAN = ELEMENT_TYPES[8]

_BY_NAME = {t.name: t for t in ELEMENT_TYPES}
_BY_PRECISION = {t.precision: t for t in ELEMENT_TYPES}
_BY_DTYPE = {t.dtype_name: t for t in ELEMENT_TYPES if t.real}


def element_type(spelling: str, where: str = "") -> ElementType:
    """The element type named by an OpenVINO type name (`f32`) or IR precision (`FP32`), in any
    case, as OpenVINO's IR reader accepts them. IRError naming `where` for anything else."""
    if isinstance(spelling, ElementType):
        return spelling
    key = str(spelling)
    found = _BY_NAME.get(key.lower()) or _BY_PRECISION.get(key.upper())
    if found is None:
        at = f"{where}: " if where else ""
        raise IRError(f"{at}unknown element type {key!r}; accepted: "
                      + ", ".join(f"{t.name}/{t.precision}" for t in ELEMENT_TYPES))
    return found


def from_dtype(dtype) -> ElementType:
    """The real OpenVINO element type holding `dtype`'s values (any byte order); IRError otherwise."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        if isinstance(dtype, str):  # an ml_dtypes name NumPy does not know by itself
            import ml_dtypes
            dtype = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
        else:
            raise
    name = dtype.newbyteorder("=").name if dtype.byteorder in "<>" else dtype.name
    found = _BY_DTYPE.get(name)
    if found is None:
        raise IRError(f"dtype {dtype} has no OpenVINO real element type; accepted: "
                      + ", ".join(f"{t.dtype_name} ({t.name})" for t in ELEMENT_TYPES if t.real))
    return found
