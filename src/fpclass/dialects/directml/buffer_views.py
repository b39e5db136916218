"""Caller's buffers as NumPy views: raw bytes, then a tensor's elements at its sizes and strides.
No copies: every array made here shares the caller's memory."""

from __future__ import annotations

import numpy as np

from .enums import TensorDataType
from .errors import DirectMLError
from .tensor import BufferTensorDesc

#: Element dtypes of the tensor data types these operators read or write. DirectML buffers are
#: little-endian (Windows on x86 / ARM), whatever machine reads them here.
ELEMENT_DTYPES = {
    TensorDataType.FLOAT32: np.dtype("<f4"), TensorDataType.FLOAT16: np.dtype("<f2"),
    TensorDataType.UINT32: np.dtype("<u4"), TensorDataType.UINT8: np.dtype("u1"),
}


def raw_bytes(buffer, name: str, *, writable: bool) -> np.ndarray:
    """`buffer` (bytearray, bytes, memoryview, mmap, C-contiguous ndarray: anything exporting a
    contiguous buffer) as a 1-D uint8 array over the same memory. TypeError if it is not a
    contiguous buffer; DirectMLError if `writable` and it is read-only."""
    if isinstance(buffer, np.ndarray):
        if not buffer.flags.c_contiguous:
            raise TypeError(f"{name} must be C-contiguous; got a numpy array with strides {buffer.strides}")
        if buffer.dtype.hasobject:
            raise TypeError(f"{name} must hold plain bytes, got a numpy array of dtype {buffer.dtype}")
        raw = buffer.reshape(-1).view(np.uint8)
    else:
        try:
            view = memoryview(buffer)
        except TypeError:
            raise TypeError(f"{name} must be a bytes-like buffer (bytearray, memoryview, mmap, numpy "
                            f"array), got {type(buffer).__name__}") from None
        if not view.c_contiguous:
            raise TypeError(f"{name} must be a C-contiguous buffer")
        raw = np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view, np.uint8)
    if writable and not raw.flags.writeable:
        raise DirectMLError(f"{name} is read-only; the output is written in place")
    return raw


def check_length(raw: np.ndarray, desc: BufferTensorDesc, name: str) -> None:
    """DirectMLError if `raw` is shorter than the tensor's TotalTensorSizeInBytes."""
    if raw.nbytes < desc.total_tensor_size_in_bytes:
        raise DirectMLError(f"{name} has {raw.nbytes} bytes; its tensor's TotalTensorSizeInBytes is "
                            f"{desc.total_tensor_size_in_bytes}")


def tensor_view(raw: np.ndarray, desc: BufferTensorDesc) -> np.ndarray:
    """The elements of `desc` inside `raw` (a validated tensor in a long-enough buffer), as an
    ndarray of shape `desc.sizes` sharing raw's memory (zero strides stay zero)."""
    dtype = ELEMENT_DTYPES[desc.data_type]
    strides = tuple(s * dtype.itemsize for s in desc.element_strides)
    return np.ndarray(desc.sizes, dtype, buffer=raw, strides=strides)
