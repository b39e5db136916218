"""pandas Series and DataFrames, read column by column: no upcast, no copy of the frame.

pd.NA is missing, never NaN: in a nullable (Float32, Float64, Int*, boolean) column the
element-wise answers are <NA> where the value is missing — what pandas' own numpy ufuncs answer —
and queries skip missing values, as pandas' reductions do by default (skipna). So
isnan(s).sum() == count_nan(s) and isfinite(s).all() == all_finite(s), with or without NA. A NaN
stored in a nullable column (pandas keeps NaN and NA apart there) is a NaN.

A Series gives a Series; a DataFrame gives a DataFrame of the same index and columns. Queries
give scalars (axis=None: the whole frame), a Series over the columns (axis=0) or over the rows
(axis=1); first_* / locate_* give positions (row, column) in C order, as NumPy would on the frame.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.lib.array_utils import normalize_axis_tuple

from .. import catalogue
from ..operators.queries import ClassCounts

#: The element-wise question behind each query: (operator, negate).
_HITS = {"nan": ("isnan", False), "inf": ("isinf", False), "nonfinite": ("isfinite", True),
         "finite": ("isfinite", True)}


class _Column(NamedTuple):
    label: object
    data: np.ndarray                 # the stored values: a view, never a copy
    missing: np.ndarray | None       # True where pd.NA; None for columns that cannot hold NA


def _column(s: pd.Series, label) -> _Column:
    dtype = s.dtype
    if isinstance(dtype, np.dtype):
        return _Column(label, s.to_numpy(copy=False), None)
    stored = s.array
    data, mask = getattr(stored, "_data", None), getattr(stored, "_mask", None)
    if isinstance(data, np.ndarray) and isinstance(mask, np.ndarray) and data.dtype.kind in "fiub":
        return _Column(label, data, mask)  # pandas' masked (nullable) arrays
    raise TypeError(f"column {label!r} has dtype {dtype}, which fpclass does not classify; it "
                    "takes NumPy-backed and nullable numeric columns (df.select_dtypes('number'))")


def _columns(df: pd.DataFrame):
    for j in range(df.shape[1]):
        yield _column(df.iloc[:, j], df.columns[j])


def _named(column: _Column, call):
    """call(), with a TypeError naming the column."""
    try:
        return call()
    except TypeError as e:
        raise TypeError(f"column {column.label!r}: {e}") from None


# -- element-wise ------------------------------------------------------------------------------

def _mask(name: str, column: _Column, flags: dict):
    """The element-wise answer for one column: a bool ndarray, or a nullable boolean array with
    <NA> where the column is NA."""
    values = _named(column, lambda: catalogue.implementation(name)(column.data, None, **flags))
    if column.missing is None:
        return values
    return pd.arrays.BooleanArray(values, column.missing.copy())


# -- queries -------------------------------------------------------------------------------------

def _hits(name: str, column: _Column, flags: dict) -> np.ndarray:
    """A bool mask of the values query `name` looks for, present values only."""
    op, negate = _HITS[name.rpartition("_")[2]]
    found = catalogue.implementation(op)(column.data, None, **flags)
    if negate:
        np.logical_not(found, out=found)
    if column.missing is not None:
        found &= ~column.missing
    return found


def _has_missing(column: _Column) -> bool:
    return column.missing is not None and bool(column.missing.any())


def _query(name: str, column: _Column, given: dict):
    """Query `name` of one column over its present values (axis None)."""
    flags = {k: v for k, v in given.items() if k.startswith("detect_")}
    impl = catalogue.implementation(name)
    if not _has_missing(column):
        return _named(column, lambda: impl(column.data, **given))
    if name == "class_counts":
        return _named(column, lambda: impl(column.data[~column.missing]))
    hits = _named(column, lambda: _hits(name, column, flags))
    if name.startswith("any_"):
        return np.bool_(hits.any())
    if name == "all_finite":
        return np.bool_(not hits.any())
    if name.startswith("count_"):
        return int(np.count_nonzero(hits))
    if name.startswith("first_"):
        where = np.flatnonzero(hits)
        return (int(where[0]),) if where.size else None
    limit = given["limit"]
    return np.flatnonzero(hits)[:limit].reshape(-1, 1).astype(np.int64)


def _refuse_keepdims(given: dict) -> None:
    if given.pop("keepdims", False):
        raise TypeError("keepdims is not supported for pandas objects")
    if given.pop("dtype", None) is not None:
        raise TypeError("dtype= is not supported for pandas objects; use .astype() on the answer")


def _series(name: str, s: pd.Series, args, kwargs):
    given = catalogue.arguments(name, s, args, kwargs)
    del given["x"]
    column = _column(s, s.name)
    if name in catalogue.ELEMENTWISE:
        if given.pop("out") is not None:
            raise TypeError("out= is not supported for pandas objects; use the returned Series")
        return pd.Series(_mask(name, column, given), index=s.index, name=s.name, copy=False)
    _refuse_keepdims(given)
    _axes(given.pop("axis", None), 1)
    return _query(name, column, given)


def _frame(name: str, df: pd.DataFrame, args, kwargs):
    given = catalogue.arguments(name, df, args, kwargs)
    del given["x"]
    if name in catalogue.ELEMENTWISE:
        if given.pop("out") is not None:
            raise TypeError("out= is not supported for pandas objects; use the returned DataFrame")
        masks = {j: _mask(name, c, given) for j, c in enumerate(_columns(df))}
        out = pd.DataFrame(masks, index=df.index, copy=False)  # copy=False: not consolidated
        out.columns = df.columns
        return out
    _refuse_keepdims(given)
    axis = given.pop("axis", None)
    if name in catalogue.PER_AXIS and axis is not None:
        axes = set(_axes(axis, 2))
        if axes == {0}:
            values = [_query(name, c, given) for c in _columns(df)]
            return pd.Series(values, index=df.columns, dtype=np.asarray(values).dtype)
        if axes == {1}:
            return _per_row(name, df, given)
    return _whole(name, df, given)


#: pandas' names of the axes: "index" (0: down the rows) and "columns" (1: across a row).
_AXIS_NAMES = {"index": 0, "rows": 0, "columns": 1}


def _axes(axis, ndim: int) -> tuple:
    """`axis` as positions: ints numpy-style (negative from the end; AxisError out of range, as
    numpy raises) or pandas' names "index" / "columns" (a Series has only "index")."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    positions = []
    for item in items:
        if isinstance(item, str):
            if item not in _AXIS_NAMES or _AXIS_NAMES[item] >= ndim:
                kind = "Series" if ndim == 1 else "DataFrame"
                names = ", ".join(repr(n) for n, i in _AXIS_NAMES.items() if i < ndim)
                raise ValueError(f"no axis named {item!r} for a {kind}; axes: {names} or the "
                                 f"positions 0{'' if ndim == 1 else ' and 1'}")
            item = _AXIS_NAMES[item]
        elif not isinstance(item, (int, np.integer)) or isinstance(item, (bool, np.bool_)):
            raise TypeError(f"axis must be None, an int, 'index' or 'columns', or a tuple of "
                            f"them, got {axis!r}")
        positions.append(int(item))
    return normalize_axis_tuple(tuple(positions), ndim)


def _per_row(name: str, df: pd.DataFrame, given: dict) -> pd.Series:
    flags = {k: v for k, v in given.items() if k.startswith("detect_")}
    total = np.zeros(df.shape[0], np.int64)
    for c in _columns(df):
        total += _named(c, lambda c=c: _hits(name, c, flags))
    if name.startswith("count_"):
        answer = total
    elif name == "all_finite":
        answer = total == 0
    else:
        answer = total > 0
    return pd.Series(answer, index=df.index)


def _whole(name: str, df: pd.DataFrame, given: dict):
    """A query over the whole frame, column by column, combined as NumPy would answer it for
    the frame as one (rows, columns) array."""
    if name.startswith("any_"):
        return np.bool_(any(_query(name, c, given) for c in _columns(df)))
    if name == "all_finite":
        return np.bool_(all(_query(name, c, given) for c in _columns(df)))
    if name.startswith("count_"):
        return sum(int(_query(name, c, given)) for c in _columns(df))
    if name == "class_counts":
        total = np.zeros(len(ClassCounts._fields), np.int64)
        for c in _columns(df):
            total += np.array(_query(name, c, given))
        return ClassCounts(*(int(n) for n in total))
    if name.startswith("first_"):
        firsts = [(hit[0], j) for j, c in enumerate(_columns(df))
                  if (hit := _query(name, c, given)) is not None]
        return min(firsts) if firsts else None
    found = [np.column_stack([rows[:, 0], np.full(len(rows), j, np.int64)])
             for j, c in enumerate(_columns(df)) for rows in [_query(name, c, given)]]
    if not found:
        return np.empty((0, 2), np.int64)
    rows = np.concatenate(found)
    rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    return rows if given["limit"] is None else rows[:given["limit"]]


def dispatch(name: str, x, *args, **kwargs):
    """fpclass.`name` of the Series or DataFrame `x`."""
    if isinstance(x, pd.DataFrame):
        return _frame(name, x, args, kwargs)
    if isinstance(x, pd.Series):
        return _series(name, x, args, kwargs)
    raise TypeError(f"fpclass takes pandas Series and DataFrames, got pandas "
                    f"{type(x).__qualname__}; pass its .to_numpy()")
