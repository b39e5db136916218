"""CF missing values and packed data: the values a CF reader returns from a variable's stored
values, as netCDF4-python does by default (auto mask and scale); one policy for every reader of a
format that carries CF attributes (NetCDF classic, NetCDF-4/HDF5). Part of the missing-value
policy of every format (scan/missing/__init__.py).

Masking (on the stored values, before unpacking): values equal to `missing_value` (each of its
values) or `_FillValue` (NaN: every NaN), else equal to the type's default fill value (integer and
float types; byte types only where the variable's fill mode is on), and values below the valid
minimum or above the valid maximum (`valid_range` when it has two values, else `valid_min` /
`valid_max`). An attribute counts only where its value converts exactly to the stored type (as
netCDF4's _check_safecast: a NaN missing_value of an integer variable declares nothing).
`_Unsigned = "true"` reads signed integers as unsigned (attributes too).

Unpacking: `scale_factor` and `add_offset` (single numbers) are applied as netCDF4 applies them,
in NumPy's arithmetic: `stored * scale_factor + add_offset` (skipped when they are 1 and 0, which
only casts to scale_factor's type), so the unpacked type is the one NumPy promotes the stored type
and the attributes' types to (int16 and float32: float32; int32 and float32: float64). A NaN or
infinite scale or offset makes every unmasked value non-finite; a finite scale whose products
overflow gives the infinities NumPy gives. Masked values are missing (counted as such), never
NaN.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from .blanks import nan_blank

#: Attributes that describe blanks and packing. Their own values are checked like any float
#: attribute, except that a NaN `_FillValue` / `missing_value` is the declared blank (see
#: attribute_values).
BLANKS = ("_FillValue", "missing_value")
RESERVED = BLANKS + ("valid_min", "valid_max", "valid_range", "scale_factor", "add_offset",
                     "_Unsigned", "actual_range")
#: Float attributes checked per file. Real files hold tens to hundreds; each is a tensor of the
#: report (about 120 us to check one that holds a NaN), so a header of millions stays bounded:
#: those beyond are reported as a file problem (unchecked), never dropped silently.
ATTRIBUTE_LIMIT = 10_000
#: netCDF's default fill values (netcdf.h NC_FILL_*), by stored type.
DEFAULT_FILLS = {"i1": -127, "u1": 255, "i2": -32767, "u2": 65535, "i4": -2147483647,
                 "u4": 4294967295, "i8": -9223372036854775806, "u8": 18446744073709551614,
                 "f4": 9.969209968386869e36, "f8": 9.969209968386869e36}


@dataclass(frozen=True)
class Policy:
    """How stored values become the values a CF reader returns (see the module docstring).
    Numbers are kept as Python numbers and dtype names, so a task carrying it stays small and
    picklable."""

    stored: str                 # dtype of the values as stored (as the reader reads them)
    view: str = ""              # dtype they are read as (_Unsigned), "" for `stored`
    blanks: tuple = ()          # (value, dtype) of masked values; NaN masks every NaN
    valid_min: object = None
    valid_max: object = None
    scale: tuple = ()           # (value, dtype) of scale_factor, () when not applied
    offset: tuple = ()          # (value, dtype) of add_offset, () when not applied
    cast: str = ""              # dtype the values are cast to (scale 1 and offset 0)

    def decode(self, stored) -> np.ma.MaskedArray:
        """The values a CF reader returns for `stored` (an array of the stored type). The masked
        values outside the valid range (and not blanks) are `out_of_range(result)`."""
        data = stored.view(self.view) if self.view else stored
        mask = np.zeros(data.shape, bool)
        outside = None
        with np.errstate(all="ignore"):
            for b in self.blanks:
                b = _scalar(*b)
                mask |= np.isnan(data) if nan_blank(b) else data == b
            if self.valid_min is not None or self.valid_max is not None:
                outside = np.zeros(data.shape, bool)
            if self.valid_min is not None:
                outside |= data < _scalar(self.valid_min, data.dtype)
            if self.valid_max is not None:
                outside |= data > _scalar(self.valid_max, data.dtype)
            if outside is not None:
                outside &= ~mask
                mask |= outside
            values = data
            if self.scale:
                values = values * _scalar(*self.scale)
            if self.offset:
                values = values + _scalar(*self.offset)
            if self.cast:
                values = values.astype(self.cast)
        out = np.ma.MaskedArray(values, mask)
        out._fpclass_outside = outside  # read by out_of_range; dropped by any view or slice
        return out

    @property
    def physical(self) -> np.dtype:
        """The dtype of the decoded values."""
        return self.decode(np.zeros(0, self.stored)).dtype

    @property
    def packed(self) -> bool:
        return bool(self.scale or self.offset or self.cast)

    def label(self, stored_label: str) -> str:
        """The type as reported: "int16 packed as float32" for packed data."""
        if not self.packed:
            return stored_label
        return f"{stored_label} packed as {self.physical.name}"


def range_policy(attrs: dict, stored: str):
    """A Policy that masks only the values of a float array outside its valid range
    (valid_range / valid_min / valid_max in `attrs`, as `policy` reads them), for formats that
    carry these attributes without netCDF's fill values (zarr); None when none is declared."""
    found = {k: attrs[k] for k in ("valid_min", "valid_max", "valid_range") if k in attrs}
    if not found or np.dtype(stored).kind != "f":
        return None
    try:
        p, _, _ = policy({**found, "_FillValue": np.nan}, stored)
    except (TypeError, ValueError):
        return None
    if p is None or (p.valid_min is None and p.valid_max is None):
        return None
    return Policy(stored, valid_min=p.valid_min, valid_max=p.valid_max)


def declared_range(attrs: dict, element: str) -> tuple:
    """(low, high, precision dtype name) of a variable's `actual_range` attribute (two finite
    numbers), for values read as `element`: the precision is the coarser of the attribute's
    type and the values' (an integer attribute: the values'). () when there is none."""
    value = attrs.get("actual_range")
    if value is None or isinstance(value, str):
        return ()
    a = np.asarray(value)
    if a.dtype.kind not in "iuf" or a.size != 2 or not np.all(np.isfinite(a)):
        return ()
    values = np.dtype(element)
    if a.dtype.kind != "f" or values.kind != "f":
        precision = values if values.kind == "f" else a.dtype
    else:
        precision = max(a.dtype, values, key=lambda d: np.finfo(d).eps)
    low, high = (v.item() for v in a.reshape(-1).astype(np.float64))
    return (low, high, precision.newbyteorder("=").name)


def with_declared_range(tasks: list, attrs: dict) -> list:
    """`tasks` with each checked floating-point one carrying its variable's actual_range
    (TensorResult.declared_range: the scan reports data that contradicts it)."""
    if "actual_range" not in attrs:
        return tasks
    out = []
    for t in tasks:
        if t.status == "check" and t.element and np.dtype(t.element).kind == "f":
            found = declared_range(attrs, t.element)
            if found:
                t = replace(t, declared_range=found)
        out.append(t)
    return out


def out_of_range(decoded) -> np.ndarray | None:
    """The mask of the values of `decoded` (as Policy.decode gave it) that a CF reader masks
    for lying outside the valid range, and that are not blanks; None when none can be."""
    return getattr(decoded, "_fpclass_outside", None)


def _scalar(value, dtype):
    return np.asarray(value).astype(dtype)[()]


def _safe(value, dtype):
    """`value` (an attribute's values) converted to `dtype`, or None where it does not convert
    exactly (netCDF4's _safecast: equal, or both NaN)."""
    att = np.asarray(value)
    if att.dtype.kind not in "biuf":
        return None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            conv = np.array(att, dtype)
            same = (att == conv) | (np.isnan(att) & np.isnan(conv)) if att.dtype.kind == "f" \
                else att == conv
    except (ValueError, TypeError, OverflowError):
        return None
    return conv.reshape(-1) if bool(np.all(same)) else None


def _number(value):
    """(value, dtype) of a single-number attribute (netCDF4's float() test), None if it is not
    one; ValueError for text (netCDF4 fails reading the variable)."""
    a = np.asarray(value)
    if a.dtype.kind in "SUO":
        raise ValueError(f"is text ({value!r})")
    if a.size != 1 or a.dtype.kind not in "biuf":
        return None
    a = a.reshape(-1).astype(a.dtype.newbyteorder("="))
    return (a[0].item(), a.dtype.str)


def policy(attrs: dict, stored: str, *, byte_fill: bool = True):
    """(Policy or None, missing, reason) for a variable of stored dtype `stored` whose CF
    attributes are `attrs` (name -> values; text as str). Policy None: the stored values are
    what a CF reader returns, except that NaN is masked where `missing` (a NaN blank). `reason`
    (a policy None and not missing) says why the values cannot be decoded: unchecked.
    `byte_fill`: the variable's fill mode is on (the default fill masks byte types too)."""
    dt = np.dtype(stored)
    if dt.kind not in "iuf" or dt.names is not None:
        return None, False, ""
    view = ""
    if dt.kind == "i" and str(attrs.get("_Unsigned", "")) in ("true", "True"):
        view = dt.byteorder.replace("=", "") + f"u{dt.itemsize}"
    read = np.dtype(view or stored)

    def cast(name):
        value = attrs.get(name)
        if value is None:
            return None
        conv = _safe(value, dt)
        return None if conv is None else conv.view(read)

    blanks = []
    missing_value, fill = cast("missing_value"), cast("_FillValue")
    if missing_value is not None:
        blanks += list(missing_value)
    if fill is not None:
        blanks += list(fill)
    elif f"{dt.kind}{dt.itemsize}" in DEFAULT_FILLS and (dt.itemsize > 1 or byte_fill):
        # In the stored type even under _Unsigned (as netCDF4 compares it: a negative default
        # fill then matches no unsigned value).
        blanks.append(np.array(DEFAULT_FILLS[f"{dt.kind}{dt.itemsize}"], stored)[()])
    valid_min = valid_max = None
    vrange = cast("valid_range")
    if vrange is not None and vrange.size == 2:
        valid_min, valid_max = vrange
    else:
        vmin, vmax = cast("valid_min"), cast("valid_max")
        valid_min = vmin[0] if vmin is not None and vmin.size else None
        valid_max = vmax[0] if vmax is not None and vmax.size else None
    try:
        scale = _number(attrs["scale_factor"]) if "scale_factor" in attrs else None
        offset = _number(attrs["add_offset"]) if "add_offset" in attrs else None
    except ValueError as e:
        return None, False, f"scale_factor or add_offset {e}: a CF reader cannot unpack it"
    valid = not (("scale_factor" in attrs and scale is None)
                 or ("add_offset" in attrs and offset is None))
    apply_scale = apply_offset = ()
    to = ""
    if valid and scale and offset:
        if offset[0] != 0.0 or scale[0] != 1.0:
            apply_scale, apply_offset = scale, offset
        else:
            to = scale[1]
    elif valid and scale and scale[0] != 1.0:
        apply_scale = scale
    elif valid and offset and offset[0] != 0.0:
        apply_offset = offset
    nan = any(nan_blank(b) for b in blanks)
    p = Policy(stored, view, tuple((b.item(), b.dtype.str) for b in blanks),
               None if valid_min is None else valid_min.item(),
               None if valid_max is None else valid_max.item(), apply_scale, apply_offset, to)
    if p.packed:
        return p, False, ""
    if read.kind != "f":
        return None, False, ""
    # Unpacked floats: masking changes what is counted only where it hides an infinity (a NaN
    # blank alone is the `missing` flag, which needs no decoding).
    hides_inf = (any(np.isinf(b) for b in blanks)
                 or (valid_min is not None and valid_min > -np.inf)
                 or (valid_max is not None and valid_max < np.inf))
    return (p if hides_inf else None), nan, ""


def decode_blocks(blocks, p: Policy, chunk_bytes: int):
    """(origin, masked values) for (origin, stored block) pairs, each block decoded in slices
    along its first axis so that memory follows `chunk_bytes`, not the block's size."""
    out = 2 * p.physical.itemsize + 4  # decoded values and their filled copy, mask, temporaries
    for origin, block in blocks:
        if block.ndim == 0 or block.size * out <= chunk_bytes:
            yield origin, p.decode(block)
            continue
        row = max(1, block.size // block.shape[0])
        step = max(1, chunk_bytes // (row * out))
        for i in range(0, block.shape[0], step):
            yield (origin[0] + i,) + tuple(origin[1:]), p.decode(block[i:i + step])


def unwritten_value(fill, stored) -> np.ndarray:
    """The value netCDF reads for an element never written (a record past a variable's stored
    extent), as one value of dtype `stored`: `fill`, the variable's `_FillValue` (its first
    value; None when it has none), else netCDF's default fill value for the type, whatever HDF5's
    own fill value or the fill mode. KeyError for a type netCDF has no default fill value for."""
    stored = np.dtype(stored)
    if fill is not None:
        return np.asarray(fill).reshape(-1)[:1].astype(stored)
    return np.array([DEFAULT_FILLS[f"{stored.kind}{stored.itemsize}"]], stored)


def too_many_attributes(dropped: int) -> str:
    return (f"{dropped} float attributes beyond the first {ATTRIBUTE_LIMIT} of the file are not "
            "checked")


def blank_attribute(name: str, values: np.ndarray) -> bool:
    """Whether attribute `name` declares a NaN blank (a NaN `_FillValue` / `missing_value`): its
    values are then not counted (attribute_values) and give no statistics (a blank is no zero)."""
    return name in BLANKS and values.dtype.kind == "f" and bool(np.isnan(values).any())


def attribute_values(name: str, values: np.ndarray) -> np.ndarray:
    """The values of float attribute `name` as they are classified: a NaN `_FillValue` or
    `missing_value` is the declared blank, not a finding, so it is not counted (given as 0);
    every other value (an infinite fill value included) is."""
    if name in BLANKS and values.dtype.kind == "f":
        return np.where(np.isnan(values), values.dtype.type(0), values)
    return values


__all__ = ["ATTRIBUTE_LIMIT", "BLANKS", "RESERVED", "Policy", "attribute_values", "blank_attribute",
           "decode_blocks", "declared_range", "out_of_range", "range_policy",
           "with_declared_range", "policy", "too_many_attributes", "unwritten_value"]
