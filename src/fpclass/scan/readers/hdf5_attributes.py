"""The attributes of one HDF5 object as the plan reads them (hdf5.py): each opened once and its
type read once, whichever checks need it (float values, CF attributes, a dimension scale's CLASS,
NAME and REFERENCE_LIST), values read as h5py's `obj.attrs[name]` reads them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .hdf5_types import Types, leaf_values
from .reporting import unchecked, values_task
from ..missing import cf
from ..tasks import CHECK, NOT_APPLICABLE

#: Attributes larger than this are reported unchecked, not read (HDF5 keeps large attributes in
#: dense storage; real ones are a few bytes).
ATTRIBUTE_BYTES = 16 << 20


class Attributes:
    """The attributes of object `oid` (a low-level id), named `names` in h5py's order (as
    hdf5_walk.attribute_names lists them). `opened(name)` opens one and reads its type once for
    every check that asks."""

    __slots__ = ("h5py", "oid", "names", "_set", "_opened")

    def __init__(self, h5py, oid, names):
        self.h5py, self.oid, self.names = h5py, oid, names
        self._set = set(names)
        self._opened: dict = {}

    def __contains__(self, name) -> bool:
        return name in self._set

    def any_of(self, names: frozenset) -> bool:
        """Whether any of `names` is among the attributes."""
        return not names.isdisjoint(self._set)

    def opened(self, name, keep: bool = True) -> tuple:
        """(attribute id, its HDF5 file type) of attribute `name` (text names encoded as h5py
        encodes them), kept open for the next caller where `keep`, else handed over (HDF5 looks
        through every open attribute of the file at each open: an object's thousand attributes
        are never held open together); HDF5's error where it cannot be opened (tried again at
        each call)."""
        found = self._opened.pop(name, None) if not keep else self._opened.get(name)
        if found is None:
            aid = self.h5py.h5a.open(self.oid, name.encode("utf-8", "surrogateescape"))
            found = (aid, aid.get_type())
            if keep:
                self._opened[name] = found
        return found

    def one_text(self, name):
        """The bytes of attribute `name` as stored where it holds one fixed-length string (read
        in its own type: no conversion), else None."""
        aid, tid = self.opened(name)
        if tid.get_class() != self.h5py.h5t.STRING or tid.is_variable_str() \
                or aid.get_storage_size() != tid.get_size():
            return None
        raw = np.empty((), np.dtype((np.void, tid.get_size())))
        aid.read(raw, mtype=tid)
        return raw.tobytes()

    def value(self, name):
        """Attribute `name` as h5py's `obj.attrs[name]` gives it (the same reads: h5py's memory
        type for the attribute's type, top-level array types as extra axes, variable-length
        text decoded, a scalar as a NumPy scalar, an empty one as h5py.Empty)."""
        h5py = self.h5py
        aid, tid = self.opened(name)
        shape = aid.shape
        if shape is None:
            return h5py.Empty(tid.dtype)
        dtype = tid.dtype
        htype = h5py.h5t.py_create(dtype)
        if dtype.subdtype is not None:
            dtype, sub = dtype.subdtype
            shape = shape + sub
        arr = np.zeros(shape, dtype=dtype, order="C")
        aid.read(arr, mtype=htype)
        info = h5py.h5t.check_string_dtype(dtype)
        if info and info.length is None:
            arr = np.array([b.decode("utf-8", "surrogateescape") for b in arr.flat],
                           dtype=dtype).reshape(arr.shape)
        return arr[()] if arr.ndim == 0 else arr


#: A dimension scale's CLASS.
SCALE = b"DIMENSION_SCALE"


def class_of(attrs: Attributes):
    """The object's CLASS attribute as h5py reads it (`obj.attrs.get("CLASS", b"")`), for the
    checks that compare it with SCALE (b"DIMENSION_SCALE" for a dimension scale); None where
    h5py cannot read it. One string whose bytes are SCALE and NUL padding (as HDF5's dimension
    scales write it) is SCALE without h5py's conversion: h5py's string conversions (to its
    NUL-padded type of the same size) keep those bytes to the first NUL, and a NumPy string drops
    trailing NULs; as a one-element array (which h5py gives where the dataspace is not scalar)
    it compares with SCALE as the scalar does. Anything else is read by h5py's rules."""
    if "CLASS" not in attrs:
        return b""
    try:
        if (attrs.one_text("CLASS") or b"").rstrip(b"\0") == SCALE:
            return SCALE
        return attrs.value("CLASS")
    except KeyError:  # h5py's error for an attribute it cannot open: get's default
        return b""
    except Exception:
        return None


def float_attributes(h5py, attrs: Attributes, path, owner, types: Types) -> list:
    """Tasks for the attributes that can hold floats, named "owner@attribute" (nested fields:
    "owner@attribute.field"); a NaN fill value is not counted (cf.attribute_values). Attributes
    that hold no float (integers, text, references) are not listed. Every attribute is opened
    and its type read (`types`: the file's)."""
    out = []
    for attr in attrs.names:
        try:
            aid, tid = attrs.opened(attr, keep=False)
            if types.holds_no_floats(tid):
                continue
        except Exception as e:
            out.append(unchecked(path, f"{owner}@{attr}", "?", (), f"cannot be read: {e}"))
            continue
        full = f"{owner}@{attr}"
        try:
            leaves = [p for p in types.parts(tid) if p.status != NOT_APPLICABLE]
            if not leaves or aid.get_space().get_simple_extent_type() == h5py.h5s.NULL:
                continue
            shape = tuple(aid.shape)
            if any(p.status != CHECK for p in leaves):
                out += [unchecked(path, full + p.suffix, p.label, shape + p.sub_shape, p.reason)
                        for p in leaves if p.status != CHECK]
                leaves = [p for p in leaves if p.status == CHECK]
            if not leaves:
                continue
            if aid.get_storage_size() > ATTRIBUTE_BYTES:
                out += [unchecked(path, full + p.suffix, p.label, shape + p.sub_shape,
                                  f"an attribute of {aid.get_storage_size()} bytes is not read")
                        for p in leaves]
                continue
            raw = np.empty(shape, np.dtype((np.void, tid.get_size())))
            aid.read(raw, mtype=tid)
            for p in leaves:
                values = leaf_values(raw, shape, tid.get_size(), p)
                blank = not p.suffix and cf.blank_attribute(attr, values)
                if not p.suffix:
                    values = cf.attribute_values(attr, values)
                task = values_task(path, full + p.suffix, values, p.label)
                out.append(replace(task, stats=False) if blank else task)
        except Exception as e:
            out.append(unchecked(path, full, "?", (), f"cannot be read: {e}"))
    return out


def cf_attributes(attrs: Attributes) -> dict:
    """The CF attributes among `attrs` ({name: values}, text as str); one h5py cannot read
    declares nothing."""
    found = {}
    for key in cf.RESERVED:
        if key not in attrs:
            continue
        try:
            value = attrs.value(key)
        except Exception:
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, np.ndarray) and value.dtype.kind in "SO" and value.size == 1:
            value = value.reshape(-1)[0]
            value = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        found[key] = value
    return found


__all__ = ["ATTRIBUTE_BYTES", "Attributes", "SCALE", "cf_attributes", "class_of",
           "float_attributes"]
