"""What the scan reads from a PyTorch pickle: each item a tensor, array or value the pickle
describes, as torch.load(weights_only=True) would return it (see torch_pickle)."""

from __future__ import annotations

from dataclasses import dataclass

#: torch storage class name -> torch dtype name (legacy typed storages name their dtype).
STORAGE_DTYPES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
#: torch dtype name -> (NumPy/ml_dtypes element name, bytes per element); None: not a float.
ELEMENTS = {
    "float64": ("f8", 8), "float32": ("f4", 4), "float16": ("f2", 2), "bfloat16": ("bfloat16", 2),
    "complex128": ("c16", 16), "complex64": ("c8", 8), "complex32": ("c4", 4),
    "float8_e4m3fn": ("float8_e4m3fn", 1), "float8_e5m2": ("float8_e5m2", 1),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", 1), "float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "float8_e8m0fnu": ("float8_e8m0fnu", 1), "float4_e2m1fn_x2": ("float4_e2m1fn", 1),
}
#: Integer and bool dtypes (cannot hold NaN/Inf) with their bytes per element.
INTEGERS = {"int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4,
            "uint64": 8, "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1,
            "quint2x4": 1, **{f"int{b}": 1 for b in range(1, 8)},
            **{f"uint{b}": 1 for b in range(1, 8)}}


@dataclass(frozen=True, eq=False)
class Storage:
    """A storage the pickle points at: zip member `data/<key>`, `numel` elements of `dtype`;
    a legacy storage view is elements [start, start + length) of it (length -1: all)."""

    key: str
    dtype: str        # torch dtype name; "" for an untyped storage (bytes)
    numel: int
    start: int = 0
    length: int = -1


@dataclass(frozen=True, eq=False)
class TensorView:
    """A tensor: `size`/`stride` (in elements) from element `offset` of a storage, in `dtype`.
    `flip`: "neg" when torch's lazy negation bit is set, "conj" for the lazy conjugate."""

    storage: Storage
    dtype: str
    offset: int
    size: tuple
    stride: tuple
    flip: str = ""


@dataclass(frozen=True, eq=False)
class InlineArray:
    """A NumPy array (or scalar) whose bytes are in the pickle itself."""

    dtype: str        # NumPy dtype string, e.g. "<f8"
    shape: tuple
    fortran: bool
    data: bytes


@dataclass(frozen=True, eq=False)
class Values:
    """Values the pickle holds as Python numbers: a float or complex scalar, a list of them, a
    tensor built from a list; `array` holds them as torch would (its dtype's rounding)."""

    label: str
    shape: tuple
    array: object


@dataclass(frozen=True)
class Unsupported:
    """A tensor the pickle describes in a way that is not read (nested, uninitialized...)."""

    what: str
    reason: str


@dataclass(frozen=True)
class NoData:
    """Something that holds no values at all (a meta tensor, an empty tensor)."""

    what: str
    reason: str
