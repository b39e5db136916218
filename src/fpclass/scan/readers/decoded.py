"""Values a format's own library decoded into NumPy objects (scipy.io for MATLAB and IDL files):
walked without recursion, each array reported through reporting.values_task under its path.

Names: a struct's field is `s.field`, an element of a cell, object or struct array `c[i,j]`
(zero-based, NumPy's index; left out for a single element), so a value is `s.cells[1,0].w`.
Whatever the walk does not know is unchecked, with its type named; empty containers are not
applicable (they hold no values)."""

from __future__ import annotations

import numpy as np

from .bounds import check_count
from .reporting import not_applicable, unchecked, values_task


def walk(file: str, name: str, value, special=None) -> list:
    """Tasks for `value` and everything inside it. `special(name, value)` may return a list of
    tasks for a value it knows (a sparse matrix, an opaque object), or None to walk it here."""
    tasks: list = []
    stack = [(name, value)]
    while stack:
        name, value = stack.pop()
        found = special(name, value) if special is not None else None
        if found is not None:
            tasks += found
        elif value is None:
            tasks.append(not_applicable(file, name, "null", (), "a null value (no data)"))
        elif isinstance(value, (bytes, str)):
            tasks.append(not_applicable(file, name, type(value).__name__, (),
                                        "text, not a floating-point type"))
        elif isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)):
            stack += reversed(_inside(file, name, np.asarray(value), tasks))
        else:
            tasks.append(unchecked(file, name, type(value).__name__, (),
                                   f"a value of type {type(value).__qualname__} is not read"))
        check_count(len(tasks), "values")
    return tasks


def _inside(file, name, a, tasks) -> list:
    """Report `a` when it is a plain array; else the (name, value) pairs it holds."""
    if a.dtype.names is not None:
        if not a.size or not a.dtype.names:
            tasks.append(not_applicable(file, name, "struct", a.shape, "holds no values"))
            return []
        return [(f"{name}{_at(a, i)}.{f}", a[i][f]) for i in np.ndindex(a.shape)
                for f in a.dtype.names]
    if a.dtype.kind == "O":
        if not a.size:
            tasks.append(not_applicable(file, name, "cell", a.shape, "holds no values"))
            return []
        return [(f"{name}{_at(a, i)}", a[i]) for i in np.ndindex(a.shape)]
    tasks.append(values_task(file, name, a))
    return []


def _at(a, index: tuple) -> str:
    return "" if a.size == 1 else "[" + ",".join(map(str, index)) + "]"
