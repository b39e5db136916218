"""HDF5 types as fpclass reads them: each leaf of a dataset's (or attribute's) HDF5 file type
is a float read as stored, or not applicable, or unchecked with the reason (see hdf5.py).

Types are read off the HDF5 file type, never through a conversion: IEEE binary16/32/64 floats in
either byte order (and the platform's long double, bfloat16 little-endian), complex numbers
(h5py's compound {r, i} or HDF5 2's complex class) as their parts, array types as extra trailing
axes, and compound types field by field: one leaf per floating-point field, named ".field"
(nested: ".outer.inner"); integer, string, enum, bitfield, time and reference data are not
applicable; opaque data, variable-length sequences of floats and floats of a non-IEEE layout
are unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import require
from ..dtypes import np_dtype
from ..tasks import CHECK, NOT_APPLICABLE, UNCHECKED


#: IEEE 754 layouts: bytes -> ((sign, exponent position, exponent bits, mantissa position,
#: mantissa bits), exponent bias).
_IEEE = {2: ((15, 10, 5, 0, 10), 15), 4: ((31, 23, 8, 0, 23), 127),
         8: ((63, 52, 11, 0, 52), 1023)}
_BFLOAT16 = ((15, 7, 8, 0, 7), 127)


def _h5py():
    return require("h5py", "hdf5", "reading HDF5, NetCDF-4 and Keras files")


@dataclass(frozen=True)
class Part:
    """One leaf of a dataset's type: a float (or complex) value at byte `offset` of each record,
    with array axes `sub` ((size, byte stride) each); or a leaf that is not read (`status`)."""

    suffix: str              # "" for the whole record, ".field" for compound fields
    label: str               # the type as reported: "<f4", ">c8", "<i4", "string", ...
    status: str = CHECK      # CHECK | not_applicable | unchecked
    reason: str = ""
    offset: int = 0
    element: str = ""        # NumPy dtype of each float (complex: of each part)
    sub: tuple = ()          # ((size, byte stride), ...) of array-type axes
    complex: bool = False

    @property
    def sub_shape(self) -> tuple:
        return tuple(n for n, _ in self.sub)

    @property
    def grid_tail(self) -> tuple:
        """Axes the values have beyond the dataset's shape."""
        return self.sub_shape + ((2,) if self.complex else ())


def _float_element(h5t, tid) -> tuple[str, str]:
    """(NumPy dtype of the HDF5 float type `tid`, "") when its bits are a layout fpclass reads,
    else ("", why not)."""
    size, order = tid.get_size(), tid.get_order()
    bo = {h5t.ORDER_LE: "<", h5t.ORDER_BE: ">"}.get(order)
    fields, bias = tid.get_fields(), tid.get_ebias()
    plain = tid.get_precision() == 8 * size and tid.get_offset() == 0
    implied = tid.get_norm() == h5t.NORM_IMPLIED
    if bo and plain and implied and _IEEE.get(size) == (fields, bias):
        return f"{bo}f{size}", ""
    if bo == "<" and plain and implied and size == 2 and (fields, bias) == _BFLOAT16:
        return "bfloat16", ""
    native = h5t.NATIVE_LDOUBLE
    if bo and size not in _IEEE and size == native.get_size() and (
            fields, bias, tid.get_precision(), tid.get_offset(), tid.get_norm()) == (
            native.get_fields(), native.get_ebias(), native.get_precision(), native.get_offset(),
            native.get_norm()):
        return f"{bo}f{size}", ""
    if order not in (h5t.ORDER_LE, h5t.ORDER_BE):
        return "", f"{8 * size}-bit float of byte order {order} (neither little nor big endian)"
    s, epos, esize, mpos, msize = fields
    return "", (f"{8 * size}-bit float of a layout fpclass does not read (sign bit {s}, exponent "
                f"bits {epos}+{esize} bias {bias}, mantissa bits {mpos}+{msize}, precision "
                f"{tid.get_precision()}, offset {tid.get_offset()})")


def _complex_base(h5py, tid):
    """The float type of each part when `tid` is a complex number as h5py reads one (a compound
    of two equal floats named by h5py's complex_names, at offsets 0 and size), else None."""
    h5t = h5py.h5t
    if tid.get_class() != h5t.COMPOUND or tid.get_nmembers() != 2:
        return None
    names = tuple(tid.get_member_name(i).decode("utf-8", "replace") for i in range(2))
    a, b = tid.get_member_type(0), tid.get_member_type(1)
    if (names != tuple(h5py.get_config().complex_names) or a.get_class() != h5t.FLOAT
            or not a.equal(b) or tid.get_member_offset(0) != 0
            or tid.get_member_offset(1) != a.get_size() or tid.get_size() != 2 * a.get_size()):
        return None
    return a


def parts(h5py, tid, suffix: str = "", offset: int = 0, sub: tuple = ()) -> list:
    """The leaves of the HDF5 type `tid` (see Part), in the type's member order. (holds_no_floats
    skips attributes without calling this: it may say True only where every leaf here is not
    applicable.)"""
    h5t = h5py.h5t
    cls = tid.get_class()
    size = tid.get_size()
    base = _complex_base(h5py, tid)
    if base is None and cls == getattr(h5t, "COMPLEX", object()):
        base = tid.get_super()
    if base is not None:
        element, why = _float_element(h5t, base)
        label = ("complex" if not element else "complex bfloat16" if element == "bfloat16"
                 else f"{element[0]}c{2 * base.get_size()}")
        if not element:
            return [Part(suffix, label, UNCHECKED, f"complex parts: {why}")]
        return [Part(suffix, label, offset=offset, element=element, sub=sub, complex=True)]
    if cls == h5t.FLOAT:
        element, why = _float_element(h5t, tid)
        if not element:
            return [Part(suffix, f"float{8 * size}", UNCHECKED, why)]
        return [Part(suffix, element, offset=offset, element=element, sub=sub)]
    if cls == h5t.COMPOUND:
        out = []
        for i in range(tid.get_nmembers()):
            name = tid.get_member_name(i).decode("utf-8", "replace")
            out += parts(h5py, tid.get_member_type(i), f"{suffix}.{name}",
                         offset + tid.get_member_offset(i), sub)
        return out
    if cls == h5t.ARRAY:
        inner = tid.get_super()
        dims = tuple(int(d) for d in tid.get_array_dims())
        strides, step = [], inner.get_size()
        for d in reversed(dims):
            strides.insert(0, step)
            step *= d
        return parts(h5py, inner, suffix, offset, sub + tuple(zip(dims, strides)))
    if cls == h5t.INTEGER:
        return [Part(suffix, _int_label(h5t, tid), NOT_APPLICABLE, "integers")]
    if cls == h5t.STRING:
        return [Part(suffix, "string", NOT_APPLICABLE, "strings")]
    if cls == h5t.ENUM:
        return [Part(suffix, "enum", NOT_APPLICABLE, "enumerated integers (h5py's bool "
                     "included)")]
    if cls == h5t.BITFIELD:
        return [Part(suffix, f"bitfield{8 * size}", NOT_APPLICABLE, "bit fields")]
    if cls == h5t.REFERENCE:
        return [Part(suffix, "reference", NOT_APPLICABLE,
                     "object references (the objects they name are checked where they are)")]
    if cls == h5t.TIME:
        return [Part(suffix, "time", NOT_APPLICABLE, "time values")]
    if cls == h5t.VLEN:
        inner = parts(h5py, tid.get_super())
        if all(p.status == NOT_APPLICABLE for p in inner):
            return [Part(suffix, "vlen", NOT_APPLICABLE, "variable-length sequences of "
                         + inner[0].reason if inner else "empty sequences")]
        return [Part(suffix, "vlen", UNCHECKED, "variable-length sequences (of "
                     f"{', '.join(p.label for p in inner)}) are not read")]
    if cls == h5t.OPAQUE:
        tag = tid.get_tag().decode("utf-8", "replace")
        return [Part(suffix, f"opaque{8 * size}", UNCHECKED,
                     f"opaque {size}-byte values (tag {tag!r}): bytes of no declared type")]
    return [Part(suffix, f"type class {cls}", UNCHECKED, f"HDF5 type class {cls} is not read")]


def holds_no_floats(h5py, tid) -> bool:
    """Whether every leaf `parts` gives the HDF5 type `tid` is not applicable (integers, text,
    enums, bit fields, references, times, and compounds, arrays and variable-length sequences
    of those), found without building the leaves (a REFERENCE_LIST record's: 37 us)."""
    h5t = h5py.h5t
    cls = tid.get_class()
    if cls in (h5t.INTEGER, h5t.STRING, h5t.ENUM, h5t.BITFIELD, h5t.REFERENCE, h5t.TIME):
        return True
    if cls == h5t.COMPOUND:
        return all(holds_no_floats(h5py, tid.get_member_type(i))
                   for i in range(tid.get_nmembers()))
    if cls in (h5t.ARRAY, h5t.VLEN):
        return holds_no_floats(h5py, tid.get_super())
    return False


class Types:
    """`parts` and `holds_no_floats` for the types of one file, each answer remembered for the
    types HDF5 finds equal to one asked before (H5Tequal compares every property both read): a
    file repeats a few types, and reading one again costs calls that each make a new type id
    (a compound's members, a sequence's base)."""

    #: Types remembered per type class and size.
    KEEP = 8

    def __init__(self, h5py):
        self.h5py = h5py
        self._seen: dict = {}  # (class, size) -> [[type, parts or None, holds_no_floats or None]]

    def _entry(self, tid, cls):
        """The entry of a type equal to `tid`, made where there is none (None where KEEP types
        of its class and size are remembered already)."""
        same = self._seen.setdefault((cls, tid.get_size()), [])
        for entry in same:
            if tid.equal(entry[0]):
                return entry
        if len(same) >= self.KEEP:
            return None
        same.append([tid, None, None])
        return same[-1]

    def parts(self, tid) -> list:
        """parts(h5py, tid), a new list each time. Remembered for atomic types only: H5Tequal
        finds compounds equal whatever their members' order, which the parts follow (and
        a compound is complex only as (r, i))."""
        h5t = self.h5py.h5t
        cls = tid.get_class()
        if cls in (h5t.COMPOUND, h5t.ARRAY, h5t.VLEN):
            return parts(self.h5py, tid)
        return list(self._remembered(tid, cls, 1, parts))

    def holds_no_floats(self, tid) -> bool:
        """holds_no_floats(h5py, tid)."""
        h5t = self.h5py.h5t
        cls = tid.get_class()
        if cls not in (h5t.COMPOUND, h5t.ARRAY, h5t.VLEN):  # answered by the class alone
            return holds_no_floats(self.h5py, tid)
        return self._remembered(tid, cls, 2, holds_no_floats)

    def _remembered(self, tid, cls, slot: int, answer):
        """answer(h5py, tid), kept in slot `slot` of the entry of `tid`'s type."""
        entry = self._entry(tid, cls)
        if entry is None:
            return answer(self.h5py, tid)
        if entry[slot] is None:
            entry[slot] = answer(self.h5py, tid)
        return entry[slot]

def _int_label(h5t, tid) -> str:
    bo = {h5t.ORDER_LE: "<", h5t.ORDER_BE: ">"}.get(tid.get_order(), "|")
    signed = "i" if tid.get_sign() == h5t.SGN_2 else "u"
    return f"{bo if tid.get_size() > 1 else '|'}{signed}{tid.get_size()}"


def _type_label(h5py, tid) -> str:
    found = parts(h5py, tid)
    return found[0].label if len(found) == 1 else "compound"



def leaf_values(buf, shape, record: int, part: Part, full=None) -> np.ndarray:
    """The values of leaf `part` in C-ordered records of `record` bytes, shape `full` (default
    `shape`), held by `buf`, cut to `shape`: a view, with the leaf's array axes and a complex
    number's parts as trailing axes."""
    full = full or shape
    strides, step = [], record
    for n in reversed(full):
        strides.insert(0, step)
        step *= n
    element = np_dtype(part.element)
    shape = tuple(shape) + part.sub_shape
    strides += [s for _, s in part.sub]
    if part.complex:
        shape += (2,)
        strides.append(element.itemsize)
    return np.ndarray(shape, element, buf, part.offset, tuple(strides))
