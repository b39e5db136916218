"""NetCDF-4 dimensions over HDF5: a variable netCDF reads longer than its dataset.

netCDF-C gives an unlimited dimension the largest extent of the datasets that use it (and of its
dimension scale); a variable whose dataset is shorter reads as the fill value past its extent
(records it never wrote): its `_FillValue`, else netCDF's default fill value. Those values are
not stored, so the scan reads none of them: where the fill value, decoded as netCDF4 decodes it
(scan/missing/cf.py), is masked or finite this changes no count; where it is NaN or infinite, the
variable is reported unchecked with the reason. Also here: a dataset's CLASS, read once, and
netCDF's bare dimensions (dimension scales without data, not tensors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .reporting import unchecked
from ..missing import cf
from ..tasks import CHECK


#: One REFERENCE_LIST record in memory: the object reference as HDF5 gives it (hobj_ref_t, the
#: object's address) and the axis, wide enough for any integer of 4 bytes or less; both in the
#: machine's own byte order, as HDF5 writes memory types.
_RECORD = np.dtype({"names": ["dataset", "dimension"], "formats": ["=u8", "=i8"],
                    "offsets": [0, 8], "itemsize": 16})


def _record_type(h5t, dimension=None):
    """The HDF5 memory type of _RECORD; with `dimension`, the file type of a REFERENCE_LIST as
    HDF5's dimension scales write it (its axis of that integer type)."""
    t = h5t.create(h5t.COMPOUND, _RECORD.itemsize)
    t.insert(b"dataset", 0, h5t.STD_REF_OBJ)
    t.insert(b"dimension", 8, h5t.NATIVE_INT64 if dimension is None else dimension)
    return t


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
        self._record = None        # _RECORD's HDF5 memory type, made once
        self._written: list = []   # REFERENCE_LIST types as HDF5 writes them (one check each)

    def _address(self, oid) -> int:
        """The object's address in the file, as the walk and object references give it."""
        return self.h5py.h5o.get_info(oid).addr

    def add(self, name: str, first: int, last: int, address: int, shape, cls, attrs) -> None:
        """The dataset at `address` in the file (the walk's), of shape `shape` (None: null
        dataspace), whose tasks are tasks[first:last] (`cls`: its CLASS attribute as
        hdf5_attributes.class_of reads it; `attrs`: its hdf5_attributes.Attributes); a problem
        here records nothing more (the dataset is then checked as HDF5 stores it)."""
        shape = tuple(shape or ())
        self.variables[address] = _Variable(name, first, last, shape)
        try:
            if cls != b"DIMENSION_SCALE" or len(shape) != 1 or "REFERENCE_LIST" not in attrs:
                return
            attached = self._attached(attrs)
        except Exception:
            return
        self.scales.append((shape[0], attached))

    def _attached(self, attrs) -> list:
        """[(address of a dataset, its axis)] that the REFERENCE_LIST among the scale's
        attributes `attrs` lists. In the layout HDF5's dimension scales write (a compound of an
        object reference "dataset" and an integer "dimension"), the references are read as HDF5
        gives them in memory (hobj_ref_t: the object's address) without opening each object; in
        any other, h5py reads them and each is dereferenced."""
        h5py = self.h5py
        h5t = h5py.h5t
        aid, tid = attrs.opened("REFERENCE_LIST")
        shape = aid.shape
        if self._record is None:
            self._record = _record_type(h5t)
            self._written = [_record_type(h5t, t) for t in (h5t.STD_U32LE, h5t.STD_I32LE)]
        if shape is not None and (any(tid.equal(t) for t in self._written) or (
                tid.get_class() == h5t.COMPOUND and tid.get_nmembers() == 2
                and (tid.get_member_name(0), tid.get_member_name(1)) == (b"dataset", b"dimension")
                and tid.get_member_type(0).equal(h5t.STD_REF_OBJ)
                and tid.get_member_type(1).get_class() == h5t.INTEGER
                and tid.get_member_type(1).get_size() <= 4)):
            listed = np.empty(shape, _RECORD)
            aid.read(listed, mtype=self._record)
        else:
            listed = attrs.value("REFERENCE_LIST")
            listed = [(self._address(h5py.h5r.dereference(ref, self.f.id)), axis)
                      for ref, axis in zip(listed["dataset"], listed["dimension"])]
            return [(a, int(axis)) for a, axis in listed]
        return [(int(a), int(axis)) for a, axis in zip(listed["dataset"], listed["dimension"])]

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


def is_bare_dimension(dsid, cls, attrs) -> bool:
    """A NetCDF-4 dimension without a variable: a dimension scale (`cls`: its CLASS attribute)
    netCDF writes with no data ("This is a netCDF dimension but not a netCDF variable"), never
    allocated (`dsid`: the dataset's low-level id, `attrs`: its Attributes)."""
    if cls != b"DIMENSION_SCALE" or dsid.get_storage_size() != 0:
        return False  # a coordinate variable, its NAME not read
    try:
        if "NAME" not in attrs:
            return False
        aid, _ = attrs.opened("NAME")
        raw = attrs.one_text("NAME")
        if raw is not None and \
                aid.get_space().get_simple_extent_type() == attrs.h5py.h5s.SCALAR:
            # h5py's conversions of one string keep its bytes to the first NUL (or drop its
            # trailing spaces): the text, which holds neither, begins the same either way
            return raw.startswith(BARE)
        name = attrs.value("NAME")
    except KeyError:  # as h5py's attrs.get("NAME", b"")
        return False
    except Exception:
        return False
    name = name if isinstance(name, bytes) else str(name).encode()
    return name.startswith(BARE)


#: What the NAME of a netCDF dimension without a variable begins with.
BARE = b"This is a netCDF dimension but not a netCDF variable"


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


__all__ = ["Dimensions", "is_bare_dimension"]
