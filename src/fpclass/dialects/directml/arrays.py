"""The numpy convenience: run IS_INFINITY or IS_NAN on an ndarray, as DirectML would on a buffer
holding it, and get a uint8 array back."""

from __future__ import annotations

import numpy as np

from .enums import LATEST_FEATURE_LEVEL, FeatureLevel, IsInfinityMode, TensorDataType, as_member
from .operators import ElementWiseIsInfinityOperatorDesc, ElementWiseIsNanOperatorDesc
from .tensor import BufferTensorDesc

_DATA_TYPES = {
    "float32": TensorDataType.FLOAT32, "float16": TensorDataType.FLOAT16,
    "float64": TensorDataType.FLOAT64, "uint32": TensorDataType.UINT32,
    "uint16": TensorDataType.UINT16, "uint8": TensorDataType.UINT8, "int32": TensorDataType.INT32,
    "int16": TensorDataType.INT16, "int8": TensorDataType.INT8, "uint64": TensorDataType.UINT64,
    "int64": TensorDataType.INT64,
}


def is_infinity(x, infinity_mode=IsInfinityMode.EITHER, *, feature_level=LATEST_FEATURE_LEVEL):
    """DML_ELEMENT_WISE_IS_INFINITY on array `x` (float16/float32): uint8 1/0 of x's shape.
    Raises DirectMLError where DirectML would (empty arrays, more than 8 dimensions...)."""
    return _run(lambda i, o: ElementWiseIsInfinityOperatorDesc(i, o, infinity_mode), x, feature_level)


def is_nan(x, *, feature_level=LATEST_FEATURE_LEVEL):
    """DML_ELEMENT_WISE_IS_NAN on array `x` (float16/float32): uint8 1/0 of x's shape.
    Raises DirectMLError where DirectML would (empty arrays, more than 8 dimensions...)."""
    return _run(ElementWiseIsNanOperatorDesc, x, feature_level)


def _run(make_desc, x, feature_level):
    level = as_member(FeatureLevel, feature_level, "feature level")
    x = x if isinstance(x, np.ndarray) else np.asarray(x)
    data_type = _DATA_TYPES.get(x.dtype.name) if x.dtype.kind in "fiu" else None
    if data_type is None:
        raise TypeError(f"x has dtype {x.dtype}, which has no DirectML tensor data type; "
                        "IS_INFINITY and IS_NAN take float32 or float16")
    source = x
    if not source.dtype.isnative or any(s % source.itemsize for s in source.strides):
        # DirectML has no byte order and counts strides in whole elements: such data is copied.
        source = np.ascontiguousarray(source, dtype=source.dtype.newbyteorder("="))
    # DirectML strides are unsigned: a reversed axis is read forwards, its result flipped back.
    reversed_axes = tuple(i for i, s in enumerate(source.strides) if s < 0)
    if reversed_axes:
        source = np.flip(source, reversed_axes)
    if source.ndim == 0:
        source = source.reshape(1)
    if level < FeatureLevel.LEVEL_3_0 and source.ndim < 4:  # the usual padding to NCHW
        source = source[(np.newaxis,) * (4 - source.ndim)]
    sizes = source.shape
    out = np.empty(sizes, np.uint8)
    desc = make_desc(
        BufferTensorDesc(data_type, sizes, [s // source.itemsize for s in source.strides]),
        BufferTensorDesc(TensorDataType.UINT8, sizes))
    desc.create_operator(level).execute_views(source, out)
    result = out.reshape(x.shape)
    return np.flip(result, reversed_axes) if reversed_axes else result
