"""TensorProto <-> NumPy, without losing a bit of bfloat16 or float8 data.

onnx.numpy_helper already maps the ONNX encodings (raw_data, int32_data, external data) onto
ml_dtypes arrays bit for bit; this module adds byte-order handling and errors that name the tensor.
Caveat of the protobuf encoding itself: float32 values in `float_data` pass through a Python float,
which quiets a signalling NaN (it stays a NaN); raw_data is exact.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.external_data_helper
import onnx.helper
import onnx.numpy_helper

from .schema import type_name


def native(array: np.ndarray) -> np.ndarray:
    """`array` in this machine's byte order, same values (bits swapped, never converted)."""
    if array.dtype.isnative:
        return array
    return array.byteswap().view(array.dtype.newbyteorder("="))


def element_type_of(dtype) -> int:
    """The TensorProto element type of NumPy `dtype` (any byte order); TypeError naming the dtype
    if ONNX has no such type."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        dtype = dtype.newbyteorder("=")
    if dtype.names is not None or dtype.subdtype is not None:
        raise TypeError(f"dtype {dtype} is structured; ONNX tensors have scalar elements")
    try:
        return onnx.helper.np_dtype_to_tensor_dtype(dtype)
    except (ValueError, KeyError, TypeError):
        raise TypeError(f"dtype {dtype} has no ONNX tensor element type") from None


def dtype_of(element_type: int) -> np.dtype:
    """The NumPy (ml_dtypes for bfloat16 / float8) dtype of a TensorProto element type."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(element_type))
    except (ValueError, KeyError, TypeError):
        raise TypeError(f"{type_name(element_type)} has no NumPy dtype") from None


def to_array(tensor: onnx.TensorProto, base_dir: str | None = None) -> np.ndarray:
    """The values of `tensor` (raw_data, typed fields, or external data under `base_dir`) as an
    array of dtype_of(tensor.data_type) and shape tensor.dims; empty dims give a 0-d array."""
    if not isinstance(tensor, onnx.TensorProto):
        raise TypeError(f"expected an onnx.TensorProto, got {type(tensor).__name__}")
    if onnx.external_data_helper.uses_external_data(tensor) and base_dir is None:
        raise ValueError(f"tensor {tensor.name!r} keeps its data in an external file; pass base_dir, "
                         f"the directory the model was loaded from")
    try:
        return onnx.numpy_helper.to_array(tensor, base_dir or "")
    except (ValueError, TypeError, OSError) as e:
        raise ValueError(f"cannot read tensor {tensor.name!r} ({type_name(tensor.data_type)}): {e}") from e


def from_array(array, name: str = "") -> onnx.TensorProto:
    """A TensorProto holding `array` bit for bit in raw_data (any byte order, any strides)."""
    a = native(np.asarray(array))
    element_type_of(a.dtype)  # a clear error before onnx's own
    return onnx.numpy_helper.from_array(np.ascontiguousarray(a), name)
