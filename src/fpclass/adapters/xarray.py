"""xarray DataArrays and Datasets: the public functions applied to their data, answered as xarray.

Element-wise answers go through xarray's apply_ufunc (dims, coords and name kept; dask-backed data
stays a lazy dask array, since fpclass itself answers dask lazily). Per-axis queries come back as
DataArrays without the reduced dims (axis: positions or dim names). A Dataset is handled variable
by variable: a Dataset for element-wise answers, {variable: answer} for queries.
"""

from __future__ import annotations

import functools

import numpy as np
import xarray as xr
from numpy.lib.array_utils import normalize_axis_tuple

from .. import catalogue
from . import route


def dispatch(name: str, x, *args, **kwargs):
    """fpclass.`name` of the DataArray or Dataset `x`."""
    if isinstance(x, xr.Dataset):
        return _dataset(name, x, args, kwargs)
    if isinstance(x, xr.DataArray):
        return _data_array(name, x, args, kwargs)
    raise TypeError(f"fpclass takes xarray DataArray and Dataset objects, got "
                    f"xarray {type(x).__qualname__}; pass its .data")


def _public(name):
    """fpclass.`name` for an xarray object's data, which may be dask, numpy or a duck array."""
    return functools.partial(route, name)


def _data_array(name, da, args, kwargs):
    given = catalogue.arguments(name, da, args, kwargs)
    del given["x"]
    if name in catalogue.ELEMENTWISE:
        if given.pop("out") is not None:
            raise TypeError("out= is not supported for xarray objects; use the returned DataArray")
        # attrs kept, as xarray's own isnull keeps them
        return xr.apply_ufunc(_public(name), da, kwargs=given, dask="allowed", keep_attrs=True)
    axis = given.get("axis")
    if axis is None:
        return _public(name)(da.data, **given)
    reduced = _axes(da, axis)
    given["axis"] = reduced
    answer = _public(name)(da.data, **given)
    keep = given["keepdims"]
    dims = da.dims if keep else tuple(d for i, d in enumerate(da.dims) if i not in reduced)
    gone = {da.dims[i] for i in reduced}
    coords = {k: c for k, c in da.coords.items() if not gone & set(c.dims)}
    return xr.DataArray(answer, dims=dims, coords=coords, name=da.name)


def _axes(da, axis) -> tuple:
    """`axis` (positions or dim names, one or a tuple) as sorted positions of da's dims."""
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    positions = []
    for item in items:
        if isinstance(item, str):
            if item not in da.dims:
                raise ValueError(f"axis {item!r} is not a dimension of this DataArray; its dims "
                                 f"are {da.dims}")
            positions.append(da.dims.index(item))
        else:
            positions.append(item)
    return tuple(sorted(normalize_axis_tuple(tuple(positions), da.ndim)))


def _dataset(name, ds, args, kwargs):
    """Variable by variable, as xarray's own ds.isnull().any(dim) answers: a dim named in `axis`
    reduces the variables that have it (one without any is answered element by element), and a
    string variable holds no NaN and no Inf (class_counts leaves it out)."""
    given = catalogue.arguments(name, ds, args, kwargs)
    named = _named_dims(given.get("axis"))
    if named:
        missing = [d for d in named if d not in ds.dims]
        if missing:
            raise ValueError(f"fpclass.{name}: axis {missing[0]!r} is not a dimension of this "
                             f"Dataset; its dims are {tuple(ds.dims)}")
    answers = {}
    for key, variable in ds.data_vars.items():
        if variable.dtype.kind in "US":
            if name == "class_counts":
                continue
            variable = variable.copy(data=np.broadcast_to(np.zeros((), np.int8), variable.shape))
        own = {k: v for k, v in given.items() if k != "x"}
        if named:
            own["axis"] = tuple(d for d in named if d in variable.dims)
        try:
            answers[key] = _data_array(name, variable, (), own)
        except (TypeError, ValueError) as e:
            raise type(e)(f"fpclass.{name}: Dataset variable {key!r} ({variable.dtype}): {e}") \
                from None
    if name in catalogue.ELEMENTWISE:
        return xr.Dataset(answers, coords=ds.coords, attrs=ds.attrs)
    return answers


def _named_dims(axis) -> tuple:
    """The dim names in `axis` when it names dims (positions: ())."""
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(items) if items and all(isinstance(i, str) for i in items) else ()
