"""What fpclass.check reads in the object it is given: (name, item) for every array and number
reachable from it, with an explicit stack (no recursion, whatever the nesting) and each container
walked once (cycles end; shared containers cost nothing twice).

An item is an array, for checking.py's batched count, or a finished TensorResult (a Python number,
a pandas column, something that cannot be read, with the reason), built the way the scan builds
results for values a reader holds in memory (layout.values_task, engine.run_task).
"""

from __future__ import annotations

import datetime
import enum
import numbers
import pathlib
import types
from collections import deque
from collections.abc import Iterable, Mapping

import numpy as np

from .scan.engine import run_task
from .scan.readers.reporting import values_task
from .results.report import CHECKED, Location, TensorResult
from .results.status import NOT_APPLICABLE, UNCHECKED


class Done:
    """An item whose result is already known."""

    __slots__ = ("result",)

    def __init__(self, result: TensorResult):
        self.result = result


# What a value is, by its type (answered once per type).
_ARRAY, _MAPPING, _SEQUENCE, _MODULE, _FLOAT, _COMPLEX, _ENUM = range(7)
_FRAME, _SERIES, _DATA_ARRAY, _DATASET, _SKIP, _OTHER = range(7, 13)
_CONTAINERS = (_MAPPING, _SEQUENCE, _MODULE, _FRAME, _DATASET)
#: Values that hold no floating-point data: skipped, not reported (a step count, a flag, a name).
_NO_FLOATS = (type(None), bool, numbers.Integral, str, bytes, bytearray, range, slice,
              type(Ellipsis), type, np.dtype, datetime.date, datetime.time, datetime.timedelta,
              pathlib.PurePath, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.ModuleType)
#: torch's descriptions of tensors, not data.
_TORCH_NO_FLOATS = ("dtype", "device", "layout", "memory_format", "finfo", "iinfo", "qscheme")
_KINDS: dict = {}


def _kind(cls) -> int:
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _classify(cls)
    return kind


def _classify(cls) -> int:
    top = cls.__module__.partition(".")[0]
    if top == "pandas":
        import pandas as pd
        if issubclass(cls, pd.DataFrame):
            return _FRAME
        if issubclass(cls, pd.Series):
            return _SERIES
    if top == "xarray":
        import xarray as xr
        if issubclass(cls, xr.Dataset):
            return _DATASET
        if issubclass(cls, (xr.DataArray, xr.Variable)):
            return _DATA_ARRAY
    if top == "torch" and cls.__name__ in _TORCH_NO_FLOATS:
        return _SKIP
    if callable(getattr(cls, "named_parameters", None)) \
            and callable(getattr(cls, "named_buffers", None)):
        return _MODULE
    if issubclass(cls, _NO_FLOATS):
        return _SKIP
    if hasattr(cls, "shape") and hasattr(cls, "dtype"):
        return _ARRAY
    if issubclass(cls, Mapping):
        return _MAPPING
    if issubclass(cls, (list, tuple, set, frozenset, deque)):
        return _SEQUENCE
    if issubclass(cls, enum.Enum):
        return _ENUM
    if issubclass(cls, numbers.Real):
        return _FLOAT
    if issubclass(cls, numbers.Complex):
        return _COMPLEX
    return _OTHER


def _name(node) -> str:
    """The dotted name of a path node: None for the object itself, the name itself while it is
    short, (parent node, key) below (so a name 10^5 levels deep costs its length once, not at
    every level)."""
    if node is None or node.__class__ is str:
        return node or ""
    keys = []
    while node.__class__ is tuple:
        node, key = node
        keys.append(key)
    if node is not None:
        keys.append(node)
    return ".".join(reversed(keys))


def _child(node, key: str):
    if node is None:
        return key
    if node.__class__ is str and len(node) < _SHORT:
        return f"{node}.{key}"
    return (node, key)


def _children(node, pairs) -> list:
    """(child node, value) for the (key, value) `pairs` of a container at `node`."""
    if node is None:
        return [(f"{k}", v) for k, v in pairs]
    if node.__class__ is str and len(node) < _SHORT:
        return [(f"{node}.{k}", v) for k, v in pairs]
    return [((node, f"{k}"), v) for k, v in pairs]


#: Names up to this long are built as the walk goes down; longer ones only for what is reported.
_SHORT = 1000


def _type_name(x) -> str:
    cls = type(x)
    return cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"


def items(obj, grads: bool, limit: int):
    """(name, item) for everything `obj` holds, in order; TypeError for an `obj` that is none of
    what fpclass.check takes."""
    kind = _kind(type(obj))
    if kind in (_SKIP, _OTHER, _ENUM):
        if not isinstance(obj, Iterable) or isinstance(obj, (str, bytes)):
            raise TypeError(
                "fpclass.check takes an nn.Module, a mapping of names to arrays, an iterable of "
                "arrays, a pandas or xarray object, or one array; got "
                f"{type(obj).__module__}.{type(obj).__qualname__}")
        obj = list(obj)
    stack = [(None, obj)]
    seen = set()  # ids of the containers walked: each once (the objects are alive in `obj`)
    kinds = _KINDS
    while stack:
        node, value = stack.pop()
        kind = kinds.get(type(value))
        if kind is None:
            kind = _kind(type(value))
        if kind is _ARRAY:
            yield node if node.__class__ is str else _name(node), value
            grad = getattr(value, "grad", None) if grads else None
            if grad is not None:
                yield _name(_child(node, "grad")), grad
            continue
        if kind in _CONTAINERS:
            if id(value) in seen:
                continue
            seen.add(id(value))
        if kind is _MODULE:
            yield from _module(_name(node), value, grads)
            continue
        if kind is _SKIP:
            continue
        try:
            children = _expand(kind, node, value, limit)
        except Exception as e:  # a mapping or an object whose own methods fail: reported
            name = _name(node)
            yield name, Done(_unchecked(name, _type_name(value), (),
                                        f"cannot read it: {type(e).__name__}: {e}"))
            continue
        if children.__class__ is list:
            stack.extend(reversed(children))
        else:
            name = _name(node)
            yield name, Done(children) if isinstance(children, TensorResult) else children


def _expand(kind, node, value, limit):
    """The (node, value) children of a container, or a leaf's result (or array)."""
    if kind is _MAPPING:
        return _children(node, value.items())
    if kind is _SEQUENCE:
        return _children(node, enumerate(value))
    if kind is _FRAME:
        return _children(node, ((value.columns[j], value.iloc[:, j])
                                for j in range(value.shape[1])))
    if kind is _DATASET:
        return _children(node, value.data_vars.items())
    if kind is _ENUM:
        return [(node, value.value)]
    return _leaf(kind, _name(node), value, limit)


def _module(prefix: str, module, grads: bool):
    """A module's parameters (each followed by its .grad with `grads`), then its buffers."""
    dot = prefix + "." if prefix else ""
    for name, p in module.named_parameters():
        yield dot + name, p
        if grads and p.grad is not None:
            yield dot + name + ".grad", p.grad
    for name, b in module.named_buffers():
        yield dot + name, b


def _leaf(kind, name, value, limit):
    """The result for a number or an object that is not walked, or the array a pandas or xarray
    object holds."""
    if kind is _FLOAT or kind is _COMPLEX:
        try:
            number = float(value) if kind is _FLOAT else complex(value)
        except (TypeError, ValueError, OverflowError) as e:
            return _unchecked(name, _type_name(value), (), f"cannot read it as a number: {e}")
        return run_task(values_task("", name, number, _type_name(value)), limit)
    if kind is _SERIES:
        return _series(name, value, limit)
    if kind is _DATA_ARRAY:
        return _data_array(name, value)
    return _unchecked(name, _type_name(value), (),
                      f"fpclass.check does not look inside objects of type {_type_name(value)}: "
                      "pass the arrays and numbers it holds (a dict of them)")


def _unchecked(name, dtype, shape, reason) -> TensorResult:
    return TensorResult("", name, dtype, tuple(shape), UNCHECKED, reason=reason)


def _series(name, s, limit):
    """A pandas Series (a DataFrame's column): a NumPy-backed one as its array; a nullable one
    (Float64, Int64, boolean ...) with pd.NA counted as missing, never as NaN; other extension
    types not applicable (integers, text, times) or unchecked."""
    dtype, shape = s.dtype, tuple(s.shape)
    if isinstance(dtype, np.dtype):
        return s.to_numpy(copy=False)
    stored = s.array
    data, mask = getattr(stored, "_data", None), getattr(stored, "_mask", None)
    if isinstance(data, np.ndarray) and isinstance(mask, np.ndarray) and data.dtype.kind in "fiub":
        return _masked(name, str(dtype), data, mask, limit)
    import pandas as pd
    kind = getattr(dtype, "kind", "O")
    if kind in "biumMSU" or isinstance(dtype, pd.StringDtype):
        return TensorResult("", name, str(dtype), shape, NOT_APPLICABLE,
                            reason="not a floating-point type")
    return _unchecked(name, str(dtype), shape, f"pandas {dtype} values are not read by "
                      "fpclass.check: pass s.to_numpy() (float) or a nullable Float64 column")


def _masked(name, dname, data, mask, limit) -> TensorResult:
    """A nullable column: NaN and Inf among its present values, and its pd.NA as missing."""
    missing = int(np.count_nonzero(mask))
    if data.dtype.kind in "fc":
        present = np.where(mask, np.zeros((), data.dtype), data)  # what is under pd.NA: no value
        result = run_task(values_task("", name, present, dname), limit)
    elif missing:  # integers and booleans with pd.NA: the NA are what there is to report
        result = TensorResult("", name, dname, data.shape, CHECKED, values_checked=data.size)
    else:
        return run_task(values_task("", name, data, dname), limit)
    if not missing:
        return result
    blanks = [Location((i,), "missing") for i in np.flatnonzero(mask)[:limit].tolist()]
    locations = tuple(sorted(result.locations + tuple(blanks), key=lambda loc: loc.index))
    return TensorResult(result.file, name, dname, result.shape, result.status, result.nan,
                        result.posinf, result.neginf, locations[:limit],
                        result.values_checked - (missing if data.dtype.kind in "fc" else 0),
                        result.bytes_checked, result.reason, missing=missing)


def _data_array(name, da):
    """An xarray DataArray or Variable: its data, unless dask (or another chunk manager) holds
    it lazily: that is unchecked, never computed."""
    if getattr(da, "chunks", None) is not None:
        return _unchecked(name, str(da.dtype), da.shape, "lazy (dask-backed) xarray data: "
                          "fpclass.check reads arrays in memory and does not compute; pass "
                          "x.compute(), or count lazily with fpclass.count_nonfinite(x)")
    try:
        return da.data
    except Exception as e:  # a lazily loaded variable whose file cannot be read
        return _unchecked(name, str(da.dtype), da.shape,
                          f"cannot read its data: {type(e).__name__}: {e}")
