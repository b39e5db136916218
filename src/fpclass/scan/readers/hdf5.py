"""HDF5 files (.h5, .hdf5, .he5, Keras .weights.h5), NetCDF-4 files (HDF5 underneath) and .keras
archives (a zip holding model.weights.h5), through h5py: planning. Types are in hdf5_types.py,
where a file's bytes lie (.keras members) in hdf5_container.py, block reading in hdf5_blocks.py,
the walk in hdf5_walk.py, NetCDF-4 dimensions in hdf5_netcdf.py.

Walk: the root group and every object reachable from it by hard links, once, depth first in name
order, each opened from its parent group (time linear in the objects, whatever the nesting).
Soft links only name objects of this file that the walk reaches by their hard link, and are not
listed again. External links, external raw storage and virtual datasets point outside the file:
they are unchecked, never followed. A NetCDF-4 dimension that is not a variable (a dimension
scale netCDF writes without data) is not a tensor.

Datasets: one task per floating-point leaf of the type (hdf5_types). A contiguous dataset whose
bytes lie in this file, whose values fill its records, is a task of Range storage (positioned
reads, no h5py at read time); every other dataset is one of Grid storage read by
hdf5_blocks.read_blocks. A dataset of one integer or float type carries CF attributes
(scan/missing/cf.py): packed values (scale_factor, add_offset) and masks that can hide an
infinity (an infinite fill value, a valid range) make it a Grid task that decodes its values as
netCDF4 does; a NaN _FillValue / missing_value alone
counts NaN as missing.

Attributes: those of every object walked (file, groups, datasets) whose type can hold floats
are checked as values, named "object@attribute" ("@attribute" for the root group).
"""

from __future__ import annotations

import math
import zipfile
import zlib

import numpy as np

from . import ReaderError
from .hdf5_blocks import block_shape, read_blocks
from .hdf5_attributes import Attributes, cf_attributes, class_of, float_attributes
from .hdf5_netcdf import Dimensions, is_bare_dimension
from .hdf5_walk import attribute_names, name_of, walk
from .hdf5_container import KERAS_WEIGHTS, MEMBER_SEP, _h5_file, _member_bytes
from .hdf5_types import Part, Types, _h5py, _type_label
from .reporting import marker, not_applicable, unchecked
from ..missing import cf, nan_blank
from .zipmembers import duplicate_names
from ..dtypes import np_dtype
from ..storage.grids import BlockGrid, Grid
from ..storage.ranges import Range
from ..storage.reads import path_size, zip_file
from ..tasks import CHECK, NOT_APPLICABLE, Field, Task, problem


# -- planning ---------------------------------------------------------------------------------

def plan(path: str) -> list:
    """Tasks for every dataset of the HDF5 (or NetCDF-4) file at `path`."""
    h5py = _h5py()
    size = path_size(path)
    try:
        f, closers = _h5_file(h5py, path, 0, size)
    except OSError as e:
        raise ReaderError(f"not a readable HDF5 file: {e}") from None
    try:
        with f:
            return [marker(path, "hdf5")] + _plan_file(h5py, f, path, 0, size, "", "")
    finally:
        for c in closers:
            c.close()


def plan_keras(path: str) -> list:
    """Tasks for every dataset of the model.weights.h5 member of a .keras archive, named
    "model.weights.h5/<dataset path>". A stored member (as keras writes it) is read in place:
    its contiguous datasets at their offsets in the archive. A compressed one is inflated once
    into a temporary file, which its datasets are read from (see `_inflated`)."""
    h5py = _h5py()
    try:
        z = zip_file(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise ReaderError(f"not a .keras archive (zip): {e}") from None
    with z:
        infos = z.infolist()
        dup = duplicate_names(infos)
        if dup:
            raise ReaderError(f"zip member {dup!r} appears twice (which one keras reads is "
                              "undefined)")
        names = [i.filename for i in infos]
        if KERAS_WEIGHTS not in names:
            raise ReaderError(f"a .keras archive holds its weights in {KERAS_WEIGHTS}; this one "
                              f"has none (members: {', '.join(names[:8])}"
                              f"{', ...' if len(names) > 8 else ''})")
        info = z.getinfo(KERAS_WEIGHTS)
        try:
            where = _member_bytes(path, z, info)
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:
            raise ReaderError(f"{KERAS_WEIGHTS}: corrupt member ({e})") from None
    try:
        f, closers = _h5_file(h5py, *where)
    except OSError as e:
        raise ReaderError(f"{KERAS_WEIGHTS}: not a readable HDF5 file: {e}") from None
    try:
        stored = where[0] == path
        return [marker(path, "keras")] + _plan_file(
            h5py, f, path, where[1] if stored else None, where[2],
            KERAS_WEIGHTS + "/", KERAS_WEIGHTS + MEMBER_SEP)
    finally:
        f.close()
        for c in closers:
            c.close()


def _plan_file(h5py, f, path, start, size, prefix, member_prefix) -> list:
    """Tasks for the datasets and float attributes of the open file `f`, whose bytes are bytes
    [start, start + size) of `path` (start None: not readable in place)."""
    tasks: list = []
    walked = kept = dropped = opened = 0
    dims = Dimensions(h5py, f)
    types = Types(h5py)
    dataset_id = h5py.h5d.DatasetID
    try:
        for node, oid, address, count in walk(h5py, f, path, prefix, tasks):
            walked += 1
            if walked > MAX_OBJECTS:
                tasks.append(problem(path, f"{prefix}the file holds more than {MAX_OBJECTS} "
                                     "groups and datasets, over the limit: the rest are not read "
                                     "(each costs the scan about 70 us to open)"))
                break
            unlisted, cpl = "", None
            try:
                names, cpl = attribute_names(h5py, oid, count)
            except Exception as e:
                names, unlisted = [], f"the attributes cannot be listed: {e}"
            is_dataset = isinstance(oid, dataset_id)
            if not names and not unlisted and not is_dataset:
                continue  # a group without attributes: its name is never built
            attrs = Attributes(h5py, oid, names)
            name = name_of(node)
            owner = prefix + name
            if unlisted:
                tasks.append(unchecked(path, f"{owner}@", "?", (), unlisted))
            if is_dataset:
                first = len(tasks)
                scale = class_of(attrs)
                shape = _UNREAD
                try:
                    shape = oid.shape
                    found = _dataset(h5py, oid, path, owner, start, size, member_prefix + name,
                                     attrs, types, scale, cpl, shape)
                    if "actual_range" in attrs:
                        found = cf.with_declared_range(found, cf_attributes(attrs))
                    tasks += found
                except Exception as e:
                    tasks.append(unchecked(path, owner, "?", (), f"cannot be read: {e}"))
                if ("CLASS" in attrs or "DIMENSION_LIST" in attrs) and shape is not _UNREAD:
                    dims.add(name, first, len(tasks), address, shape, scale, attrs)
            if len(names) > OBJECT_ATTRIBUTES or opened + len(names) > FILE_ATTRIBUTES:
                tasks.append(unchecked(path, f"{owner}@", "attributes", (len(names),),
                                       f"{len(names)} attributes are not read (at most "
                                       f"{OBJECT_ATTRIBUTES} per object and {FILE_ATTRIBUTES} "
                                       "per file are)"))
            elif names:
                opened += len(names)
                found = float_attributes(h5py, attrs, path, owner, types)
                room = cf.ATTRIBUTE_LIMIT - kept
                tasks += found[:room]
                kept += min(room, len(found))
                dropped += max(0, len(found) - room)
    except Exception as e:  # a corrupt group: what was walked is still planned
        tasks.append(problem(path, f"{prefix}the walk of the file's groups stopped after "
                             f"{walked} objects: {e}"))
    dims.apply(tasks, path, prefix)
    if dropped:
        tasks.append(problem(path, prefix + cf.too_many_attributes(dropped)))
    return tasks


#: Most groups and datasets one file may hold. HDF5 opens each object through its library, about
#: 70 us apiece here (the walk, not the data; 40-60 us since the plan uses h5py's low-level ids),
#: so a 64 MB file of tiny datasets (200,000 of them) took 14-18 s; this keeps every file within
#: the 10 s of docs/scan.md. The objects past it are a problem of the file (exit 2, never clean);
#: those before it are reported as usual.
MAX_OBJECTS = 100_000
#: Attributes read per object and per file: HDF5 opens an attribute of an object holding many
#: (dense storage) in time growing with their number (350 us each among 30,000), so a small file
#: could hold hours of work. Real objects hold a few, NetCDF-4 variables tens.
OBJECT_ATTRIBUTES = 1000
FILE_ATTRIBUTES = 200_000
_UNREAD = object()
_RESERVED, _BLANKS = frozenset(cf.RESERVED), frozenset(cf.BLANKS)


def _dataset(h5py, dsid, path, name, start, size, member, attrs, types, scale=b"", dcpl=None,
             shape=_UNREAD) -> list:
    """Tasks for one dataset (`dsid`: its low-level id), whose attributes are `attrs`
    (hdf5_attributes.Attributes; `types`: the file's hdf5_types.Types; `scale`: its CLASS
    attribute, None where unreadable; `dcpl`: its creation property list and `shape` its shape
    where already at hand): one per leaf of its type (its CF attributes applied to a plain
    integer or float type)."""
    h5d = h5py.h5d
    shape = dsid.shape if shape is _UNREAD else shape
    tid = dsid.get_type()
    if shape is None:
        return [not_applicable(path, name, _type_label(h5py, tid), (),
                               "null dataspace: the dataset holds no values")]
    if "CLASS" in attrs and is_bare_dimension(dsid, scale, attrs):
        return []
    dcpl = dcpl if dcpl is not None else dsid.get_create_plist()
    layout = dcpl.get_layout()
    where = ""
    if layout == h5d.VIRTUAL:
        n = dcpl.get_virtual_count()
        files = sorted({dcpl.get_virtual_filename(i) for i in range(n)})
        where = (f"virtual dataset: its values come from {n} source dataset(s) in "
                 f"{', '.join(files[:3])}{', ...' if len(files) > 3 else ''}, not followed")
    elif dcpl.get_external_count():
        files = [dcpl.get_external(i)[0].decode("utf-8", "replace")
                 for i in range(dcpl.get_external_count())]
        where = (f"raw data stored in external file(s) {', '.join(files[:3])}"
                 f"{', ...' if len(files) > 3 else ''}, not read (only data in this file is)")
    leaves = types.parts(tid)
    decode, missing = None, False
    stored = _plain_stored(h5py, tid, leaves) if attrs.any_of(_RESERVED) else ""
    if stored:
        byte_fill = dcpl.get_fill_time() != h5d.FILL_TIME_NEVER
        decode, missing, why = cf.policy(cf_attributes(attrs), stored, byte_fill=byte_fill)
        if why:
            return [unchecked(path, name, leaves[0].label, tuple(shape), why)]
    elif len(leaves) == 1 and leaves[0].complex and attrs.any_of(_BLANKS):
        # complex data (no CF type): a NaN fill or missing value still declares NaN a blank
        found = cf_attributes(attrs)
        missing = any(nan_blank(found[k]) for k in cf.BLANKS if k in found)
    record = tid.get_size()
    n = math.prod(shape)
    if decode is not None:
        label = (decode.label(np.dtype(stored).newbyteorder("=").name) if decode.packed
                 else leaves[0].label)
        physical = decode.physical
        if physical.kind not in "fc":
            return [not_applicable(path, name, label, tuple(shape),
                                   f"packed integers unpack to {physical.name}")]
        if where:
            return [unchecked(path, name, label, tuple(shape), where)]
        blocks = BlockGrid(shape, block_shape(dsid, dcpl, shape, layout, h5d, record)).count
        return [Task(path, name, label, tuple(shape), CHECK, element=physical.str,
                     grid=tuple(shape), fields=(Field("", 0, stored),),
                     storage=Grid(path, "hdf5", n * record, blocks, member, decode=decode,
                                  packed=_filtered(dcpl, layout, h5d)))]
    out = []
    for p in leaves:
        full = name + p.suffix
        pshape = tuple(shape) + p.sub_shape
        if p.status == NOT_APPLICABLE:
            out.append(not_applicable(path, full, p.label, pshape, p.reason))
            continue
        if p.status != CHECK:
            out.append(unchecked(path, full, p.label, pshape, p.reason))
            continue
        if where:
            out.append(unchecked(path, full, p.label, pshape, where))
            continue
        item = np_dtype(p.element).itemsize
        values = math.prod(p.grid_tail)
        nbytes = n * values * item
        grid = pshape + ((2,) if p.complex else ())
        # One Task per leaf, built once (dataclasses.replace costs 15 us: files hold 100,000s)
        common = dict(element=p.element, grid=grid, missing=missing and not p.suffix)
        raw = _raw_offset(dsid, layout, h5d, p, item * values == record)
        if raw is not None and start is not None:
            offset, stored_bytes = raw
            if stored_bytes != nbytes:
                out.append(unchecked(path, full, p.label, pshape, f"contiguous storage holds "
                                     f"{stored_bytes} bytes, {nbytes} expected"))
            elif offset + nbytes > size:
                out.append(unchecked(path, full, p.label, pshape, f"data at bytes {offset}.."
                                     f"{offset + nbytes} lies past the end of the file "
                                     f"({size} bytes; truncated?)"))
            else:
                out.append(Task(path, full, p.label, pshape, CHECK,
                                storage=Range(path, start + offset, nbytes), **common))
            continue
        blocks = BlockGrid(shape, block_shape(dsid, dcpl, shape, layout, h5d, record)).count
        out.append(Task(path, full, p.label, pshape, CHECK,
                        storage=Grid(path, "hdf5", nbytes, blocks, member,
                                     packed=_filtered(dcpl, layout, h5d)),
                        fields=(Field(p.suffix, p.offset, p.element),), **common))
    return out


def _filtered(dcpl, layout, h5d) -> bool:
    """Whether the dataset's chunks pass through filters (compression): decoded, not only read."""
    return layout == h5d.CHUNKED and dcpl.get_nfilters() > 0


def _plain_stored(h5py, tid, leaves) -> str:
    """The NumPy dtype of a dataset whose type is one IEEE float or integer (what CF attributes
    apply to), else ""."""
    h5t = h5py.h5t
    if len(leaves) != 1 or leaves[0].suffix or leaves[0].sub:
        return ""
    cls = tid.get_class()
    if cls == h5t.FLOAT and leaves[0].status == CHECK and leaves[0].element != "bfloat16" \
            and not leaves[0].complex:
        return leaves[0].element
    if cls == h5t.INTEGER:
        return leaves[0].label
    return ""


def _raw_offset(dsid, layout, h5d, part: Part, fills_record: bool):
    """(byte offset in the HDF5 file, stored bytes) of a contiguous, allocated dataset whose
    records are exactly `part`'s values in C order; None otherwise."""
    if layout != h5d.CONTIGUOUS or part.offset or not fills_record:
        return None
    step = np_dtype(part.element).itemsize * (2 if part.complex else 1)
    for n, stride in reversed(part.sub):
        if stride != step:
            return None
        step *= n
    if dsid.get_space_status() != h5d.SPACE_STATUS_ALLOCATED:
        return None  # never written: read_blocks gives the fill value
    offset = dsid.get_offset()
    return (offset, dsid.get_storage_size()) if offset is not None else None


__all__ = ["plan", "plan_keras", "read_blocks"]
