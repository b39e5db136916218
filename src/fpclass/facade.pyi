"""Types of fpclass.facade. The routed public functions are built from the catalogue at import
(no `def` a type checker could read), so their signatures are declared here; their parameters
are the NumPy implementations' (tests/test_typing.py compares them). NumPy input (arrays, numbers,
sequences) gets precise result types. torch, JAX, dask, xarray and pandas objects are recognised
by a member NumPy arrays lack (a Protocol each, so none of them is imported): element-wise
functions give back the input's own type, queries Any (their answer is of the input's kind).
Other DLPack producers: pass them as Any."""

from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from .counts import ClassCounts

__all__ = ["KINDS", "KIND", "ELEMENTWISE", "PER_AXIS", "LOCATING", "PUBLIC", "arguments",
           "implementation", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "any_nan",
           "any_inf", "any_nonfinite", "all_finite", "count_nan", "count_inf", "count_nonfinite",
           "class_counts", "first_nan", "first_inf", "first_nonfinite", "locate_nan", "locate_inf",
           "locate_nonfinite"]

KINDS: dict[str, tuple[str, ...]]
KIND: dict[str, str]
ELEMENTWISE: tuple[str, ...]
PER_AXIS: tuple[str, ...]
LOCATING: tuple[str, ...]
PUBLIC: dict[str, Callable[..., Any]]

def implementation(name: str) -> Callable[..., Any]: ...
def arguments(name: str, x: object, args: Sequence[Any],
              kwargs: dict[str, Any]) -> dict[str, Any]: ...

class _Torch(Protocol):        # torch.Tensor
    def detach(self) -> Any: ...

class _Jax(Protocol):          # jax.Array
    def block_until_ready(self) -> Any: ...

class _Dask(Protocol):         # dask.array.Array
    def compute(self, **kwargs: Any) -> Any: ...

class _Xarray(Protocol):       # xarray.DataArray, xarray.Dataset
    @property
    def dims(self) -> Any: ...

class _Pandas(Protocol):       # pandas.Series, pandas.DataFrame
    @property
    def iloc(self) -> Any: ...

#: A container answered in its own kind.
_Foreign = _Torch | _Jax | _Dask | _Xarray | _Pandas
_ForeignT = TypeVar("_ForeignT", bound=_Foreign)
#: One number: a Python or NumPy scalar (the answer is one NumPy bool).
_Scalar = float | complex | np.generic
#: Input NumPy takes as it is.
_Array = np.ndarray[Any, Any] | Sequence[Any]
#: axis=: one position or a tuple of them (xarray: dim names; pandas: "index" / "columns").
_Axis = int | tuple[int, ...]
_ForeignAxis = int | str | tuple[int | str, ...]
_Out = TypeVar("_Out")

#: count_*'s dtype=: a NumPy integer type.
_Integer = type[np.integer[Any]] | np.dtype[np.integer[Any]] | str

@overload
def isnan(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isnan(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isnan(x: _ForeignT, out: None = None) -> _ForeignT: ...
@overload
def isnan(x: _Scalar | _Array | _Foreign, out: _Out) -> _Out: ...

@overload
def isinf(x: _Scalar, out: None = None, *, detect_negative: bool = True,
          detect_positive: bool = True) -> np.bool_: ...
@overload
def isinf(x: _Array, out: None = None, *, detect_negative: bool = True,
          detect_positive: bool = True) -> NDArray[np.bool_]: ...
@overload
def isinf(x: _ForeignT, out: None = None, *, detect_negative: bool = True,
          detect_positive: bool = True) -> _ForeignT: ...
@overload
def isinf(x: _Scalar | _Array | _Foreign, out: _Out, *, detect_negative: bool = True,
          detect_positive: bool = True) -> _Out: ...

@overload
def isfinite(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isfinite(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isfinite(x: _ForeignT, out: None = None) -> _ForeignT: ...
@overload
def isfinite(x: _Scalar | _Array | _Foreign, out: _Out) -> _Out: ...

@overload
def isposinf(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isposinf(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isposinf(x: _ForeignT, out: None = None) -> _ForeignT: ...
@overload
def isposinf(x: _Scalar | _Array | _Foreign, out: _Out) -> _Out: ...

@overload
def isneginf(x: _Scalar, out: None = None) -> np.bool_: ...
@overload
def isneginf(x: _Array, out: None = None) -> NDArray[np.bool_]: ...
@overload
def isneginf(x: _ForeignT, out: None = None) -> _ForeignT: ...
@overload
def isneginf(x: _Scalar | _Array | _Foreign, out: _Out) -> _Out: ...

@overload
def any_nan(x: _Scalar | _Array, axis: None = None,
            keepdims: Literal[False] = False) -> np.bool_: ...
@overload
def any_nan(x: _Scalar | _Array, axis: _Axis | None = None,
            keepdims: bool = False) -> NDArray[np.bool_] | np.bool_: ...
@overload
def any_nan(x: _Foreign, axis: _ForeignAxis | None = None, keepdims: bool = False) -> Any: ...

@overload
def any_inf(x: _Scalar | _Array, axis: None = None, keepdims: Literal[False] = False, *,
            detect_negative: bool = True, detect_positive: bool = True) -> np.bool_: ...
@overload
def any_inf(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False, *,
            detect_negative: bool = True,
            detect_positive: bool = True) -> NDArray[np.bool_] | np.bool_: ...
@overload
def any_inf(x: _Foreign, axis: _ForeignAxis | None = None, keepdims: bool = False, *,
            detect_negative: bool = True, detect_positive: bool = True) -> Any: ...

@overload
def any_nonfinite(x: _Scalar | _Array, axis: None = None,
                  keepdims: Literal[False] = False) -> np.bool_: ...
@overload
def any_nonfinite(x: _Scalar | _Array, axis: _Axis | None = None,
                  keepdims: bool = False) -> NDArray[np.bool_] | np.bool_: ...
@overload
def any_nonfinite(x: _Foreign, axis: _ForeignAxis | None = None, keepdims: bool = False) -> Any: ...

@overload
def all_finite(x: _Scalar | _Array, axis: None = None,
               keepdims: Literal[False] = False) -> np.bool_: ...
@overload
def all_finite(x: _Scalar | _Array, axis: _Axis | None = None,
               keepdims: bool = False) -> NDArray[np.bool_] | np.bool_: ...
@overload
def all_finite(x: _Foreign, axis: _ForeignAxis | None = None, keepdims: bool = False) -> Any: ...

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
def count_nan(x: _Foreign, axis: _ForeignAxis | None = None, keepdims: bool = False, *,
              dtype: Any = None) -> Any: ...

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
def count_inf(x: _Foreign, axis: _ForeignAxis | None = None, keepdims: bool = False, *,
              detect_negative: bool = True, detect_positive: bool = True,
              dtype: Any = None) -> Any: ...

@overload
def count_nonfinite(x: _Scalar | _Array, axis: None = None,
                    keepdims: Literal[False] = False, *, dtype: None = None) -> int: ...
@overload
def count_nonfinite(x: _Scalar | _Array, axis: _Axis | None = None,
                    keepdims: bool = False, *, dtype: None = None) -> NDArray[np.int64] | int: ...
@overload
def count_nonfinite(x: _Scalar | _Array, axis: _Axis | None = None, keepdims: bool = False,
                    *, dtype: _Integer) -> NDArray[np.integer[Any]] | np.integer[Any]: ...
@overload
def count_nonfinite(x: _Foreign, axis: _ForeignAxis | None = None,
                    keepdims: bool = False, *, dtype: Any = None) -> Any: ...

@overload
def class_counts(x: _Scalar | _Array) -> ClassCounts: ...
@overload
def class_counts(x: _Foreign) -> Any: ...

@overload
def first_nan(x: _Scalar | _Array) -> tuple[int, ...] | None: ...
@overload
def first_nan(x: _Foreign) -> Any: ...

@overload
def first_inf(x: _Scalar | _Array, *, detect_negative: bool = True,
              detect_positive: bool = True) -> tuple[int, ...] | None: ...
@overload
def first_inf(x: _Foreign, *, detect_negative: bool = True,
              detect_positive: bool = True) -> Any: ...

@overload
def first_nonfinite(x: _Scalar | _Array) -> tuple[int, ...] | None: ...
@overload
def first_nonfinite(x: _Foreign) -> Any: ...

@overload
def locate_nan(x: _Scalar | _Array, limit: int | None = None) -> NDArray[np.int64]: ...
@overload
def locate_nan(x: _Foreign, limit: int | None = None) -> Any: ...

@overload
def locate_inf(x: _Scalar | _Array, limit: int | None = None, *, detect_negative: bool = True,
               detect_positive: bool = True) -> NDArray[np.int64]: ...
@overload
def locate_inf(x: _Foreign, limit: int | None = None, *, detect_negative: bool = True,
               detect_positive: bool = True) -> Any: ...

@overload
def locate_nonfinite(x: _Scalar | _Array, limit: int | None = None) -> NDArray[np.int64]: ...
@overload
def locate_nonfinite(x: _Foreign, limit: int | None = None) -> Any: ...
