"""Types of fpclass.twin: the NumPy twin of every public function. It takes what numpy.asarray
takes (torch tensors and other objects with __array__ included) and answers in NumPy types, as
fpclass does for NumPy input. The signatures are the public functions' (tests/test_typing.py
compares them with the twin's own)."""

from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from .counts import ClassCounts

__all__ = [
    "ClassCounts", "all_finite", "any_inf", "any_nan", "any_nonfinite", "class_counts", "count_inf",
    "count_nan", "count_nonfinite", "first_inf", "first_nan", "first_nonfinite", "isfinite",
    "isinf", "isnan", "isneginf", "isposinf", "locate_inf", "locate_nan", "locate_nonfinite",
    "values",
]

class _SupportsArray(Protocol):
    def __array__(self) -> np.ndarray[Any, Any]: ...

#: One number: a Python or NumPy scalar (the answer is one NumPy bool).
_Scalar = float | complex | np.generic
#: Anything numpy.asarray turns into an array.
_Array = np.ndarray[Any, Any] | Sequence[Any] | _SupportsArray
_Axis = int | tuple[int, ...]
_Out = TypeVar("_Out")

def values(x: _Scalar | _Array) -> NDArray[Any]: ...

#: count_*'s dtype=: a NumPy integer type.
_Integer = type[np.integer[Any]] | np.dtype[np.integer[Any]] | str

@overload
def isnan(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isnan(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isnan(x: _Scalar | _Array, out: _Out) -> _Out: ...

@overload
def isinf(x: _Scalar, out: None = None, *, detect_negative: bool = True,
          detect_positive: bool = True) -> np.bool_: ...
@overload
def isinf(x: _Array, out: None = None, *, detect_negative: bool = True,
          detect_positive: bool = True) -> NDArray[np.bool_]: ...
@overload
def isinf(x: _Scalar | _Array, out: _Out, *, detect_negative: bool = True,
          detect_positive: bool = True) -> _Out: ...

@overload
def isfinite(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isfinite(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isfinite(x: _Scalar | _Array, out: _Out) -> _Out: ...

@overload
def isposinf(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isposinf(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isposinf(x: _Scalar | _Array, out: _Out) -> _Out: ...

@overload
def isneginf(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isneginf(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isneginf(x: _Scalar | _Array, out: _Out) -> _Out: ...

@overload
def any_nan(x: _Scalar | _Array, axis: None = None,
            keepdims: Literal[False] = False) -> np.bool_: ...
@overload
def any_nan(x: _Scalar | _Array, axis: _Axis | None = None,
            keepdims: bool = False) -> NDArray[np.bool_] | np.bool_: ...

@overload
def any_inf(x: _Scalar | _Array, axis: None = None, keepdims: Literal[False] = False, *,
            detect_negative: bool = True, detect_positive: bool = True) -> np.bool_: ...
@overload
def any_inf(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False, *,
            detect_negative: bool = True,
            detect_positive: bool = True) -> NDArray[np.bool_] | np.bool_: ...

@overload
def any_nonfinite(x: _Scalar | _Array, axis: None = None,
                  keepdims: Literal[False] = False) -> np.bool_: ...
@overload
def any_nonfinite(x: _Scalar | _Array, axis: _Axis | None = None,
                  keepdims: bool = False) -> NDArray[np.bool_] | np.bool_: ...

@overload
def all_finite(x: _Scalar | _Array, axis: None = None,
               keepdims: Literal[False] = False) -> np.bool_: ...
@overload
def all_finite(x: _Scalar | _Array, axis: _Axis | None = None,
               keepdims: bool = False) -> NDArray[np.bool_] | np.bool_: ...

@overload
def count_nan(x: _Scalar | _Array, axis: None = None, keepdims: Literal[False] = False, *,
              dtype: None = None) -> int: ...
@overload
def count_nan(x: _Scalar | _Array, axis: _Axis | None = None,
              keepdims: bool = False, *, dtype: None = None) -> NDArray[np.int64] | int: ...
@overload
def count_nan(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False, *,
              dtype: _Integer) -> NDArray[np.integer[Any]] | np.integer[Any]: ...

@overload
def count_inf(x: _Scalar | _Array, axis: None = None, keepdims: Literal[False] = False, *,
              detect_negative: bool = True, detect_positive: bool = True,
              dtype: None = None) -> int: ...
@overload
def count_inf(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False, *,
              detect_negative: bool = True,
              detect_positive: bool = True, dtype: None = None) -> NDArray[np.int64] | int: ...
@overload
def count_inf(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False, *,
              detect_negative: bool = True, detect_positive: bool = True,
              dtype: _Integer) -> NDArray[np.integer[Any]] | np.integer[Any]: ...

@overload
def count_nonfinite(x: _Scalar | _Array, axis: None = None,
                    keepdims: Literal[False] = False, *, dtype: None = None) -> int: ...
@overload
def count_nonfinite(x: _Scalar | _Array, axis: _Axis | None = None,
                    keepdims: bool = False, *, dtype: None = None) -> NDArray[np.int64] | int: ...
@overload
def count_nonfinite(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False,
                    *, dtype: _Integer) -> NDArray[np.integer[Any]] | np.integer[Any]: ...

def class_counts(x: _Scalar | _Array) -> ClassCounts: ...

def first_nan(x: _Scalar | _Array) -> tuple[int, ...] | None: ...

def first_inf(x: _Scalar | _Array, *, detect_negative: bool = True,
              detect_positive: bool = True) -> tuple[int, ...] | None: ...

def first_nonfinite(x: _Scalar | _Array) -> tuple[int, ...] | None: ...

def locate_nan(x: _Scalar | _Array, limit: int | None = None) -> NDArray[np.int64]: ...

def locate_inf(x: _Scalar | _Array, limit: int | None = None, *, detect_negative: bool = True,
               detect_positive: bool = True) -> NDArray[np.int64]: ...

def locate_nonfinite(x: _Scalar | _Array, limit: int | None = None) -> NDArray[np.int64]: ...
