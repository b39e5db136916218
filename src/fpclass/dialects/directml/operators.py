"""DML_ELEMENT_WISE_IS_INFINITY_OPERATOR_DESC and DML_ELEMENT_WISE_IS_NAN_OPERATOR_DESC: DirectML's
validation per feature level, and execution over raw buffers through the fpclass core."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import fpclass

from .buffer_views import check_length, raw_bytes, tensor_view
from .enums import LATEST_FEATURE_LEVEL, FeatureLevel, IsInfinityMode, TensorDataType, as_member
from .errors import DirectMLError
from .execution import write_result
from .tensor import BufferTensorDesc, check_tensor

_FLOAT_INPUTS = (TensorDataType.FLOAT32, TensorDataType.FLOAT16)


class _OperatorDesc:
    """What both descriptors share: validation of the two tensors, and operator creation."""

    NAME: str
    INTRODUCED: FeatureLevel
    OUTPUT_TYPES: tuple

    def validate(self, feature_level=LATEST_FEATURE_LEVEL) -> None:
        """Raise DirectMLError (E_INVALIDARG) where DirectML's CreateOperator would refuse this
        descriptor on a device of `feature_level`."""
        level = as_member(FeatureLevel, feature_level, "feature level")
        if level < self.INTRODUCED:
            raise DirectMLError(f"{self.NAME} was introduced in DML_FEATURE_LEVEL_"
                                f"{self.INTRODUCED.name[6:]}; the feature level is {level.name}")
        self._validate_attributes()
        source = check_tensor(self.input_tensor, "InputTensor", level, _FLOAT_INPUTS)
        target = check_tensor(self.output_tensor, "OutputTensor", level, self.OUTPUT_TYPES)
        if source.dimension_count != target.dimension_count:
            raise DirectMLError(f"InputTensor.DimensionCount ({source.dimension_count}) and "
                                f"OutputTensor.DimensionCount ({target.dimension_count}) must be equal")
        if source.sizes != target.sizes:
            raise DirectMLError(f"InputTensor.Sizes {list(source.sizes)} and OutputTensor.Sizes "
                                f"{list(target.sizes)} must be equal")

    def create_operator(self, feature_level=LATEST_FEATURE_LEVEL) -> "Operator":
        """The operator for a device of `feature_level` (IDMLDevice::CreateOperator): validates,
        then returns an Operator whose `execute` runs on buffers."""
        self.validate(feature_level)
        return Operator(self, FeatureLevel(feature_level))

    def _validate_attributes(self) -> None:
        pass

    def _classify(self, source: np.ndarray, out: np.ndarray) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class ElementWiseIsInfinityOperatorDesc(_OperatorDesc):
    """DML_ELEMENT_WISE_IS_INFINITY_OPERATOR_DESC: 1 where the input is an infinity of the sign
    `infinity_mode` selects, else 0 (FLOAT32/FLOAT16 in, UINT8 out; from feature level 2_1)."""

    input_tensor: BufferTensorDesc
    output_tensor: BufferTensorDesc
    infinity_mode: IsInfinityMode | int = IsInfinityMode.EITHER

    NAME = "DML_OPERATOR_ELEMENT_WISE_IS_INFINITY"
    INTRODUCED = FeatureLevel.LEVEL_2_1
    OUTPUT_TYPES = (TensorDataType.UINT8,)

    def _validate_attributes(self) -> None:
        as_member(IsInfinityMode, self.infinity_mode, "InfinityMode")

    def _classify(self, source, out):
        mode = IsInfinityMode(self.infinity_mode)
        fpclass.isinf(source, out=out, detect_negative=mode is not IsInfinityMode.POSITIVE,
                      detect_positive=mode is not IsInfinityMode.NEGATIVE)


@dataclass(frozen=True)
class ElementWiseIsNanOperatorDesc(_OperatorDesc):
    """DML_ELEMENT_WISE_IS_NAN_OPERATOR_DESC: 1 where the input is an IEEE-754 NaN, else 0
    (FLOAT32/FLOAT16 in, UINT8 or UINT32 out; from feature level 2_0)."""

    input_tensor: BufferTensorDesc
    output_tensor: BufferTensorDesc

    NAME = "DML_OPERATOR_ELEMENT_WISE_IS_NAN"
    INTRODUCED = FeatureLevel.LEVEL_2_0
    OUTPUT_TYPES = (TensorDataType.UINT8, TensorDataType.UINT32)

    def _classify(self, source, out):
        fpclass.isnan(source, out=out)


class Operator:
    """A validated operator (IDMLOperator) for one feature level; `execute` runs it."""

    def __init__(self, desc: _OperatorDesc, feature_level: FeatureLevel):
        self.desc = desc
        self.feature_level = feature_level

    def __repr__(self):
        return f"Operator({self.desc!r}, feature_level={self.feature_level.name})"

    def execute(self, input_buffer, output_buffer) -> None:
        """Write 1/0 into `output_buffer` at the output tensor's elements, for the elements of the
        input tensor in `input_buffer`; every other output byte is left as it was. Buffers are
        bytes-like (bytearray, memoryview, mmap, numpy array); they may be the same memory. Both
        are checked (length >= TotalTensorSizeInBytes, output writable) before anything is written."""
        source_raw = raw_bytes(input_buffer, "input_buffer", writable=False)
        target_raw = raw_bytes(output_buffer, "output_buffer", writable=True)
        check_length(source_raw, self.desc.input_tensor, "input_buffer")
        check_length(target_raw, self.desc.output_tensor, "output_buffer")
        self.execute_views(tensor_view(source_raw, self.desc.input_tensor),
                           tensor_view(target_raw, self.desc.output_tensor))

    def execute_views(self, source: np.ndarray, out: np.ndarray) -> None:
        """`execute` on arrays already shaped as the tensors (non-negative strides, may overlap)."""
        write_result(self.desc._classify, source, out)
