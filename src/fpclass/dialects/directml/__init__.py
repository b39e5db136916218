"""DirectML's DML_ELEMENT_WISE_IS_INFINITY and DML_ELEMENT_WISE_IS_NAN on any machine: the
operator descriptors, their validation per feature level, and execution over raw buffers with
DirectML's tensor layout (sizes and strides in elements), as a host-side reference.

    >>> import numpy as np
    >>> from fpclass.dialects import directml as dml
    >>> t = dml.BufferTensorDesc(dml.TensorDataType.FLOAT32, [4])
    >>> o = dml.BufferTensorDesc(dml.TensorDataType.UINT8, [4])
    >>> op = dml.ElementWiseIsInfinityOperatorDesc(t, o, dml.IsInfinityMode.NEGATIVE).create_operator()
    >>> out = bytearray(4)
    >>> op.execute(np.array([1, -np.inf, np.inf, np.nan], np.float32), out)
    >>> list(out)
    [0, 1, 0, 0]
"""

from .arrays import is_infinity, is_nan
from .enums import LATEST_FEATURE_LEVEL, FeatureLevel, IsInfinityMode, TensorDataType, TensorFlags
from .errors import DirectMLError
from .operators import ElementWiseIsInfinityOperatorDesc, ElementWiseIsNanOperatorDesc, Operator
from .tensor import BufferTensorDesc, calc_buffer_tensor_size

__all__ = [
    "LATEST_FEATURE_LEVEL", "BufferTensorDesc", "DirectMLError", "ElementWiseIsInfinityOperatorDesc",
    "ElementWiseIsNanOperatorDesc", "FeatureLevel", "IsInfinityMode", "Operator", "TensorDataType",
    "TensorFlags", "calc_buffer_tensor_size", "is_infinity", "is_nan",
]
