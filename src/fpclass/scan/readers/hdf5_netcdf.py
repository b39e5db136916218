"""NetCDF-4 dimensions over HDF5: a variable netCDF reads longer than its dataset.

netCDF-C gives an unlimited dimension the largest extent of the datasets that use it (and of its
dimension scale); a variable whose dataset is shorter reads as the fill value past its extent
(records it never wrote): its `_FillValue`, else netCDF's default fill value. Those values are
not stored, so the scan reads none of them: where the fill value, decoded as netCDF4 decodes it
(scan/missing/cf.py), is masked or finite this changes no count; where it is NaN or infinite, the
variable is reported unchecked with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .reporting import unchecked
from ..missing import cf
from ..tasks import CHECK


@dataclass
class _Variable:
    name: str
    first: int          # its tasks are tasks[first:last]
    last: int
    shape: tuple


class Dimensions:
    """Collects the datasets of one file as the walk meets them; `apply` then checks them.
    Dimensions are read off each dimension scale's REFERENCE_LIST (fixed-size records: the
    datasets attached and their axis), never off the datasets' DIMENSION_LIST (variable-length
    references, which h5py can read for minutes from a corrupt heap)."""

    def __init__(self, h5py, f):
        self.h5py, self.f = h5py, f
        self.scales: list = []     # (own length, [(dataset address, axis)])
        self.variables: dict = {}  # dataset address -> _Variable

    def _address(self, oid):
        """The object's identity in the file: its address (H5Gget_objinfo, 2 us; H5Oget_info
        also sizes the chunk index, a millisecond for a variable of many chunks)."""
        try:
            return self.h5py.h5g.get_objinfo(oid).objno
        except AttributeError:  # an h5py without it
            return self.h5py.h5o.get_info(oid).addr

    def add(self, dset, name: str, first: int, last: int) -> None:
        """Dataset `dset`, whose tasks are tasks[first:last]; a problem here records nothing
        (the dataset is then checked as HDF5 stores it)."""
        try:
            shape = tuple(dset.shape or ())
            self.variables[self._address(dset.id)] = _Variable(name, first, last, shape)
            attrs = dset.attrs
            if attrs.get("CLASS", b"") != b"DIMENSION_SCALE" or len(shape) != 1 \
                    or "REFERENCE_LIST" not in attrs:
                return
            listed = attrs["REFERENCE_LIST"]
            attached = []
            for ref, axis in zip(listed["dataset"], listed["dimension"]):
                oid = self.h5py.h5r.dereference(ref, self.f.id)
                attached.append((self._address(oid), int(axis)))
        except Exception:
            return
        self.scales.append((shape[0], attached))

    def apply(self, tasks: list, path: str, prefix: str = "") -> None:
        """Replaces the CHECK tasks of variables netCDF reads longer than stored, whose fill
        value decodes to NaN or Inf, by unchecked ones."""
        full = {}  # dataset address -> the shape netCDF reads
        for own, attached in self.scales:
            known = [(a, axis) for a, axis in attached if a in self.variables
                     and axis < len(self.variables[a].shape)]
            length = max([own] + [self.variables[a].shape[axis] for a, axis in known])
            for a, axis in known:
                shape = full.setdefault(a, list(self.variables[a].shape))
                shape[axis] = max(shape[axis], length)
        for a, shape in full.items():
            v = self.variables[a]
            shape = tuple(shape)
            if shape == v.shape:
                continue
            extra = math.prod(shape) - math.prod(v.shape)
            for i in range(v.first, v.last):
                t = tasks[i]
                if t.status != CHECK or t.name != prefix + v.name:
                    continue
                value = _fill_decoded(self.f.get(v.name.encode("utf-8", "surrogateescape")), t)
                if value is None:
                    continue
                tasks[i] = unchecked(path, t.name, t.dtype, t.shape,
                                     f"netCDF reads it with shape {list(shape)}: {extra} values "
                                     "past the stored extent read as the fill value, which "
                                     f"decodes to {value}; they are not counted")


def _fill_decoded(dset, task):
    """The value netCDF reads past the extent of `dset` (its `_FillValue`, else netCDF's default
    fill value for the type, whatever HDF5's own fill value or the fill mode), as a CF reader
    returns it, where NaN or infinite and unmasked; else None."""
    decode = task.storage.decode
    stored = np.dtype(decode.stored if decode is not None else task.element)
    try:
        fill = cf.unwritten_value(
            dset.attrs["_FillValue"] if "_FillValue" in dset.attrs else None, stored)
    except Exception:
        return "a value that cannot be read"
    if decode is not None:
        with np.errstate(all="ignore"):
            values = decode.decode(fill)
        if np.ma.getmaskarray(values).all():
            return None
        value = np.ma.getdata(values)[0]
    else:
        value = fill[0]
        if value.dtype.kind not in "fc" or (task.missing and np.isnan(value)):
            return None
    return None if np.isfinite(value) else value


__all__ = ["Dimensions"]
