"""The format table: how every supported storage format encodes NaN, ±Inf, zero and subnormals.

This is the one place in fpclass that decides what a NaN is. docs/formats.md lists the stored bit
patterns each row means (tests/test_formats_doc.py checks them); everything else (kernels,
operators, queries, dialects, scan, dask) asks this table. Rows are keyed by NumPy dtype name, so
looking a format up never imports ml_dtypes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    """How values of a dtype are classified."""

    FLOAT = "float"        # a binary floating-point format, classified by bit pattern
    COMPLEX = "complex"    # two FLOAT components; NaN/Inf if either part is
    INTEGER = "integer"    # integers and bool: never NaN, never Inf (numpy's convention)
    DATETIME = "datetime"  # datetime64/timedelta64: NaT counts as NaN (numpy's convention)
    NATIVE = "native"      # long double: platform-specific layout, classified by value


class NaN(enum.Enum):
    """Which bit patterns of a FLOAT format are NaN."""

    NONE = "none"                    # every pattern is a number (float6, float4)
    IEEE = "exponent all ones, mantissa ≠ 0"
    MAX_MAGNITUDE = "S.1111.111 (both signs)"  # the *fn formats: the slot Inf would use is a number
    NEGATIVE_ZERO = "0x80 only"      # the *fnuz formats: the -0 pattern is the single NaN
    ALL_ONES = "0xFF only"           # e8m0: unsigned exponent-only scale


@dataclass(frozen=True)
class Format:
    """One storage format: its bit layout and which special values it has.

    `bits` is the number of meaningful bits; `itemsize` the stored bytes (float6/float4 use one byte,
    the upper bits are padding). For COMPLEX, `component` names the format of each part.
    """

    name: str
    kind: Kind
    itemsize: int
    bits: int = 0
    exponent_bits: int = 0
    mantissa_bits: int = 0
    signed: bool = True
    nan: NaN = NaN.NONE
    inf: bool = False
    negative_zero: bool = True
    component: str | None = None

    # -- bit masks, in native byte order -------------------------------------------------------
    @property
    def mantissa_mask(self) -> int:
        return (1 << self.mantissa_bits) - 1

    @property
    def exponent_mask(self) -> int:
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def sign_mask(self) -> int:
        return (1 << (self.exponent_bits + self.mantissa_bits)) if self.signed else 0

    @property
    def value_mask(self) -> int:
        """Every meaningful bit (padding bits of float6/float4 excluded)."""
        return (1 << self.bits) - 1

    @property
    def magnitude_mask(self) -> int:
        return self.exponent_mask | self.mantissa_mask

    # -- capabilities --------------------------------------------------------------------------
    @property
    def has_nan(self) -> bool:
        if self.kind is Kind.COMPLEX:
            return FORMATS[self.component].has_nan if self.component else True
        return self.nan is not NaN.NONE or self.kind is Kind.DATETIME or self.kind is Kind.NATIVE

    @property
    def has_inf(self) -> bool:
        if self.kind is Kind.COMPLEX:
            return FORMATS[self.component].has_inf if self.component else True
        return self.inf or self.kind is Kind.NATIVE

    @property
    def has_zero(self) -> bool:
        return self.kind is Kind.FLOAT and self.nan is not NaN.ALL_ONES

    @property
    def has_subnormals(self) -> bool:
        return self.kind is Kind.FLOAT and self.mantissa_bits > 0


def _float(name, bits, e, m, nan, inf, *, signed=True, negative_zero=True, itemsize=None):
    return Format(name, Kind.FLOAT, itemsize or (bits + 7) // 8, bits, e, m, signed, nan, inf,
                  negative_zero)


_IEEE = NaN.IEEE
_FORMATS = [
    #      name                   bits  e   m  NaN encoding        Inf
    _float("float64",              64, 11, 52, _IEEE,              True),
    _float("float32",              32,  8, 23, _IEEE,              True),
    _float("float16",              16,  5, 10, _IEEE,              True),
    _float("bfloat16",             16,  8,  7, _IEEE,              True),
    _float("float8_e5m2",           8,  5,  2, _IEEE,              True),
    _float("float8_e4m3",           8,  4,  3, _IEEE,              True),
    _float("float8_e3m4",           8,  3,  4, _IEEE,              True),
    _float("float8_e4m3fn",         8,  4,  3, NaN.MAX_MAGNITUDE,  False),
    _float("float8_e4m3fnuz",       8,  4,  3, NaN.NEGATIVE_ZERO,  False, negative_zero=False),
    _float("float8_e5m2fnuz",       8,  5,  2, NaN.NEGATIVE_ZERO,  False, negative_zero=False),
    _float("float8_e4m3b11fnuz",    8,  4,  3, NaN.NEGATIVE_ZERO,  False, negative_zero=False),
    _float("float8_e8m0fnu",        8,  8,  0, NaN.ALL_ONES,       False, signed=False,
           negative_zero=False),
    _float("float6_e2m3fn",         6,  2,  3, NaN.NONE,           False, itemsize=1),
    _float("float6_e3m2fn",         6,  3,  2, NaN.NONE,           False, itemsize=1),
    _float("float4_e2m1fn",         4,  2,  1, NaN.NONE,           False, itemsize=1),
    Format("complex64", Kind.COMPLEX, 8, component="float32"),
    Format("complex128", Kind.COMPLEX, 16, component="float64"),
    Format("complex32", Kind.COMPLEX, 4, component="float16"),     # ml_dtypes
    Format("bcomplex32", Kind.COMPLEX, 4, component="bfloat16"),   # ml_dtypes
]

#: Every format fpclass knows, by NumPy dtype name.
FORMATS: dict[str, Format] = {f.name: f for f in _FORMATS}

#: The ml_dtypes formats (their dtype names are the ml_dtypes attribute names).
ML_DTYPES_NAMES: tuple[str, ...] = tuple(
    f.name for f in _FORMATS if f.name not in ("float64", "float32", "float16", "complex64", "complex128")
)

#: ml_dtypes' sub-byte integer types, classified like any integer.
ML_DTYPES_INTEGERS: tuple[str, ...] = ("int1", "int2", "int4", "uint1", "uint2", "uint4")
