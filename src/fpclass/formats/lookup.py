"""From a NumPy dtype to its row of the format table, with the errors users see for the rest."""

from __future__ import annotations

import numpy as np

from .table import FORMATS, ML_DTYPES_INTEGERS, Format, Kind

SUPPORTED = (
    "floating point (float16, float32, float64, longdouble and the ml_dtypes formats bfloat16, "
    "float8_*, float6_*, float4_*), complex (complex64/128, ml_dtypes complex32/bcomplex32), "
    "integer, bool, datetime64 and timedelta64"
)


def _native_name(dtype: np.dtype) -> str:
    return dtype.newbyteorder("=").name if dtype.byteorder in "<>" else dtype.name


def format_of(dtype) -> Format:
    """The table row for `dtype` (a dtype, anything np.dtype takes, or a table name such as
    "float8_e4m3fn"; any byte order). Raises TypeError naming the dtype for kinds fpclass does not
    classify (object, str, bytes, void/structured)."""
    if isinstance(dtype, str) and dtype in FORMATS:  # a table name, with or without ml_dtypes loaded
        return FORMATS[dtype]
    dtype = np.dtype(dtype)
    if dtype.names is None and dtype.subdtype is None:
        name = _native_name(dtype)
        if name in FORMATS and (dtype.kind in "fc" or dtype.type.__module__ == "ml_dtypes"):
            # ml_dtypes formats are matched by name *and* origin, so an unrelated dtype that
            # happens to share a name is never taken for one.
            return FORMATS[name]
        if dtype.kind == "f":  # longdouble (float128 / float96): platform layout
            return Format(name, Kind.NATIVE, dtype.itemsize)
        if dtype.kind == "c":  # clongdouble
            return Format(name, Kind.COMPLEX, dtype.itemsize, component=None)
        if dtype.kind in "biu" or (name in ML_DTYPES_INTEGERS and dtype.type.__module__ == "ml_dtypes"):
            return Format(name, Kind.INTEGER, dtype.itemsize, bits=8 * dtype.itemsize)
        if dtype.kind in "mM":
            return Format(name, Kind.DATETIME, dtype.itemsize, bits=64)
    raise TypeError(
        f"fpclass cannot classify dtype {dtype!s} (kind {dtype.kind!r}); supported: {SUPPORTED}"
    )


def is_byteswapped(dtype) -> bool:
    """True when `dtype` is stored in the opposite of this machine's byte order."""
    dtype = np.dtype(dtype)
    return dtype.itemsize > 1 and not dtype.isnative


def component_format(f: Format) -> Format | None:
    """The format of each part of a COMPLEX format (None for clongdouble, classified by value)."""
    return FORMATS.get(f.component) if f.component else None

