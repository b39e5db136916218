"""HDF5 files (.h5, .hdf5, .he5, Keras .weights.h5), NetCDF-4 files (HDF5 underneath) and .keras
archives (a zip holding model.weights.h5), through h5py.

Walk: every dataset reachable from the root by hard links, once (HDF5's own visit, which keeps
group cycles from looping; soft links only name objects of this file that the walk reaches by
their hard link, and are not listed again). External links, external raw storage and virtual
datasets point outside the file: they are unchecked, never followed.

Types are read off the HDF5 file type, never through a conversion: IEEE binary16/32/64 floats in
either byte order (and the platform's long double, bfloat16 little-endian), complex numbers
(h5py's compound {r, i} or HDF5 2's complex class) as their parts, array types as extra trailing
axes, and compound types field by field: one task per floating-point field, named
"dataset.field" (nested: "dataset.outer.inner"); integer, string, enum, bitfield, time and
reference data are not applicable; opaque data, variable-length sequences of floats and floats of
a non-IEEE layout are unchecked.

Reading: a contiguous dataset whose bytes lie in this file, whose values fill its records, is a
RAW task (positioned reads, no h5py at read time). Every other dataset is a DATASET task read by
`read_blocks`, block by block in the dataset's own chunking (a contiguous or compact one in slabs
of about SLAB_BYTES), each block read with HDF5's file type as the memory type so the bytes come
back as stored (decompressed, never converted). Chunks that are unfiltered, shuffled or
deflated are read with positioned reads at the offset HDF5 gives for them and decoded here:
faster than through h5py (measured 2.5x for shuffle + deflate, 1.4x unfiltered), and outside the
lock h5py holds around every HDF5 call, so parts of a dataset decompress in parallel. A block whose storage was never allocated holds the fill value
everywhere: it is read as one element through HDF5 (what every reader of the file gets); a finite
fill value is reported checked from that one value, a NaN or Inf one is counted for every element
of the block.
"""

from __future__ import annotations

import atexit
import functools
import io
import math
import os
import shutil
import tempfile
import threading
import zipfile
import zlib
from dataclasses import dataclass, replace

import numpy as np

from . import ReaderError
from ... import count_nonfinite
from .layout import marker, not_applicable, unchecked
from .zipmembers import data_offset, duplicate_names
from ..chunks import SourceError, _read_at
from ..dtypes import np_dtype
from ..tasks import CHECK, DATASET, NOT_APPLICABLE, RAW, UNCHECKED, Field, Task, problem

INSTALL = "install fpclass[hdf5] (h5py) to read HDF5, NetCDF-4 and Keras files"
#: Contiguous and compact datasets read through h5py are read in slabs of about this many bytes.
SLAB_BYTES = 4 << 20
#: The member of a .keras archive that holds the weights.
KERAS_WEIGHTS = "model.weights.h5"
#: Between a zip member's name and a dataset's path in a DATASET task's `member`: HDF5 link names
#: cannot hold a NUL byte.
MEMBER_SEP = "\0"
#: CF attributes that declare a blank.
FILL_ATTRIBUTES = ("_FillValue", "missing_value")

#: IEEE 754 layouts: bytes -> ((sign, exponent position, exponent bits, mantissa position,
#: mantissa bits), exponent bias).
_IEEE = {2: ((15, 10, 5, 0, 10), 15), 4: ((31, 23, 8, 0, 23), 127),
         8: ((63, 52, 11, 0, 52), 1023)}
_BFLOAT16 = ((15, 7, 8, 0, 7), 127)


def _h5py():
    try:
        import h5py
    except ImportError:
        raise ReaderError(f"h5py is not installed: {INSTALL}") from None
    return h5py


# -- types ------------------------------------------------------------------------------------

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
    """The leaves of the HDF5 type `tid` (see Part), in the type's member order."""
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


def _int_label(h5t, tid) -> str:
    bo = {h5t.ORDER_LE: "<", h5t.ORDER_BE: ">"}.get(tid.get_order(), "|")
    signed = "i" if tid.get_sign() == h5t.SGN_2 else "u"
    return f"{bo if tid.get_size() > 1 else '|'}{signed}{tid.get_size()}"


# -- planning ---------------------------------------------------------------------------------

def plan(path: str) -> list:
    """Tasks for every dataset of the HDF5 (or NetCDF-4) file at `path`."""
    h5py = _h5py()
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ReaderError(f"not a readable HDF5 file: {e}") from None
    with f:
        size = os.path.getsize(path)
        return [marker(path, "hdf5")] + _plan_file(h5py, f, path, 0, size, "", "")


def plan_keras(path: str) -> list:
    """Tasks for every dataset of the model.weights.h5 member of a .keras archive, named
    "model.weights.h5/<dataset path>". A stored member (as keras writes it) is read in place:
    its contiguous datasets at their offsets in the archive. A compressed one is inflated once
    into a temporary file, which its datasets are read from (see `_inflated`)."""
    h5py = _h5py()
    try:
        z = zipfile.ZipFile(path)
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
    """Tasks for the datasets of the open file `f`, whose bytes are bytes [start, start + size)
    of `path` (start None: not readable in place)."""
    names: list = []
    tasks: list = []
    try:
        f.visit(names.append)
    except Exception as e:  # a corrupt group: what was walked is still planned
        tasks.append(problem(path, f"{prefix}the walk of the file's groups stopped after "
                             f"{len(names)} objects: {e}"))
    for name in names:
        try:
            obj = f.get(name)
            if not isinstance(obj, h5py.Dataset):
                continue
            tasks += _dataset(h5py, obj, path, prefix + name, start, size, member_prefix + name)
        except Exception as e:
            tasks.append(unchecked(path, prefix + name, "?", (), f"cannot be read: {e}"))
    try:
        f.visititems_links(lambda name, link: _external(h5py, link, name, path, prefix, tasks))
    except Exception as e:
        tasks.append(problem(path, f"{prefix}the walk of the file's links stopped: {e}"))
    return tasks


def _external(h5py, link, name, path, prefix, tasks) -> None:
    if isinstance(link, h5py.ExternalLink):
        tasks.append(unchecked(path, prefix + name, "external link", (),
                               f"external link to {link.filename}:{link.path}: data in another "
                               "file, not followed"))


def _dataset(h5py, dset, path, name, start, size, member) -> list:
    """Tasks for one dataset: one per leaf of its type."""
    h5d = h5py.h5d
    shape = dset.shape
    tid = dset.id.get_type()
    if shape is None:
        return [not_applicable(path, name, _type_label(h5py, tid), (),
                               "null dataspace: the dataset holds no values")]
    dcpl = dset.id.get_create_plist()
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
    missing = _declares_nan_blank(dset)
    record = tid.get_size()
    n = math.prod(shape)
    out = []
    for p in parts(h5py, tid):
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
        base = Task(path, full, p.label, pshape, CHECK, source=path, element=p.element,
                    grid=grid, missing=missing and not p.suffix)
        raw = _raw_offset(dset, layout, h5d, p, item * values == record)
        if raw is not None and start is not None:
            offset, stored = raw
            if stored != nbytes:
                out.append(unchecked(path, full, p.label, pshape, f"contiguous storage holds "
                                     f"{stored} bytes, {nbytes} expected"))
            elif offset + nbytes > size:
                out.append(unchecked(path, full, p.label, pshape, f"data at bytes {offset}.."
                                     f"{offset + nbytes} lies past the end of the file "
                                     f"({size} bytes; truncated?)"))
            else:
                out.append(replace(base, storage=RAW, offset=start + offset, nbytes=nbytes))
            continue
        blocks = math.prod(_grid(shape, block_shape(dset, layout, h5d, record)))
        out.append(replace(base, storage=DATASET, reader="hdf5", member=member, nbytes=nbytes,
                           blocks=blocks, fields=(Field(p.suffix, p.offset, p.element),)))
    return out


def _raw_offset(dset, layout, h5d, part: Part, fills_record: bool):
    """(byte offset in the HDF5 file, stored bytes) of a contiguous, allocated dataset whose
    records are exactly `part`'s values in C order; None otherwise."""
    if layout != h5d.CONTIGUOUS or part.offset or not fills_record:
        return None
    step = np_dtype(part.element).itemsize * (2 if part.complex else 1)
    for n, stride in reversed(part.sub):
        if stride != step:
            return None
        step *= n
    if dset.id.get_space_status() != h5d.SPACE_STATUS_ALLOCATED:
        return None  # never written: read_blocks gives the fill value
    offset = dset.id.get_offset()
    return (offset, dset.id.get_storage_size()) if offset is not None else None


def block_shape(dset, layout, h5d, record: int) -> tuple:
    """The shape of the blocks a dataset is read in: its chunks (the whole dataset when no
    chunk was ever written: one fill value); for a contiguous or compact dataset, whole
    trailing axes and a piece of the next one, about SLAB_BYTES."""
    shape = tuple(dset.shape)
    if layout == h5d.CHUNKED:
        return tuple(dset.chunks) if dset.id.get_num_chunks() else shape
    out = list(shape)
    span = record
    for axis in range(len(shape) - 1, -1, -1):
        if span * shape[axis] <= SLAB_BYTES:
            span *= shape[axis]
            continue
        out[axis] = max(1, SLAB_BYTES // span)
        for outer in range(axis):
            out[outer] = 1
        break
    return tuple(out)


def _grid(shape, block) -> tuple:
    return tuple(-(-s // b) if b else 0 for s, b in zip(shape, block))


def _declares_nan_blank(dset) -> bool:
    """Whether a CF `_FillValue` or `missing_value` attribute of `dset` is NaN."""
    for key in FILL_ATTRIBUTES:
        try:
            if key not in dset.attrs:
                continue
            value = np.asarray(dset.attrs[key])
            if value.dtype.kind in "fc" and np.isnan(value).any():
                return True
        except Exception:  # an attribute of a type h5py cannot read declares nothing
            continue
    return False


def _type_label(h5py, tid) -> str:
    found = parts(h5py, tid)
    return found[0].label if len(found) == 1 else "compound"


# -- reading ----------------------------------------------------------------------------------

#: HDF5 filters decoded here, so that chunks are read without holding h5py's lock.
FILTER_DEFLATE, FILTER_SHUFFLE = 1, 2


def _decodes(code: int, cd: tuple) -> bool:
    return code == FILTER_DEFLATE or (code == FILTER_SHUFFLE and len(cd) >= 1 and cd[0] > 0)


def _unshuffle(data, size: int, out: np.ndarray) -> np.ndarray:
    """HDF5's shuffle filter undone: byte k of every `size`-byte element was stored together
    (k = 0, 1, ...), then the bytes left over from a whole number of elements."""
    src = np.frombuffer(data, np.uint8)
    n = src.size // size
    _unshuffle_kernel()(src, out, size, n)
    out[n * size:] = src[n * size:]
    return out


def _unshuffle_loops(src, out, size, n):
    # Reads in order, writes with a stride: 5-10x faster than NumPy's transposed copy (measured).
    for k in range(size):
        base = k * n
        for i in range(n):
            out[i * size + k] = src[base + i]


@functools.lru_cache(maxsize=None)
def _unshuffle_kernel():
    import numba
    from ...kernels.walk import JIT
    return numba.njit(**JIT)(_unshuffle_loops)


class _Window(io.RawIOBase):
    """Bytes [start, start + size) of a file, as a seekable file object (for h5py)."""

    def __init__(self, raw, start: int, size: int):
        super().__init__()
        self._raw, self._start, self._size, self._pos = raw, start, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, pos, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def readinto(self, buf):
        n = max(0, min(len(buf), self._size - self._pos))
        if n:
            _read_at(self._raw.fileno(), memoryview(buf).cast("B")[:n], self._start + self._pos,
                     self._raw.name)
        self._pos += n
        return n


#: Compressed weights members inflated into temporary files, by (archive, member, CRC, size,
#: archive mtime and size); the newest few are kept for the tasks that read them.
_INFLATED: dict = {}
_INFLATED_KEEP = 4
_INFLATE_LOCK = threading.Lock()


def _member_bytes(path, z, info) -> tuple:
    """(file, start, size): where the bytes of zip member `info` lie as an HDF5 file. A stored
    member in place; a compressed one inflated once per process into a temporary file (its
    CRC-32 checked by zipfile as it is read)."""
    if info.flag_bits & 0x1:
        raise ReaderError(f"{info.filename} is encrypted")
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size != info.file_size:
            raise ReaderError(f"{info.filename}: stored member sizes disagree")
        with open(path, "rb") as raw:
            start = data_offset(raw, info)
            if start + info.file_size > os.fstat(raw.fileno()).st_size:
                raise ReaderError(f"{info.filename} ends past the end of the archive "
                                  "(truncated?)")
        return path, start, info.file_size
    st = os.stat(path)
    key = (os.path.realpath(path), info.filename, info.CRC, info.file_size, st.st_mtime_ns,
           st.st_size)
    with _INFLATE_LOCK:
        if key in _INFLATED and os.path.exists(_INFLATED[key]):
            _INFLATED[key] = _INFLATED.pop(key)  # the newest again
            return _INFLATED[key], 0, info.file_size
        fd, tmp = tempfile.mkstemp(prefix="fpclass-", suffix="-" + KERAS_WEIGHTS)
        try:
            with os.fdopen(fd, "wb") as out, z.open(info) as member:
                shutil.copyfileobj(member, out, 1 << 20)
        except BaseException:
            os.unlink(tmp)
            raise
        if not _INFLATED:
            atexit.register(_remove_inflated, 0)
        _INFLATED[key] = tmp
        _remove_inflated(_INFLATED_KEEP)
        return tmp, 0, info.file_size


def _remove_inflated(keep: int) -> None:
    """Delete all but the newest `keep` inflated members (an open copy stays readable where
    the system allows deleting open files)."""
    while len(_INFLATED) > keep:
        old = _INFLATED.pop(next(iter(_INFLATED)))
        try:
            os.unlink(old)
        except OSError:
            pass


def _h5_file(h5py, path: str, start: int, size: int, **options):
    """(h5py.File, files to close after it) of the HDF5 bytes [start, start + size) of `path`:
    opened natively when they are the whole file, through a window otherwise."""
    if start == 0 and size == os.path.getsize(path):
        return h5py.File(path, "r", **options), []
    raw = open(path, "rb")
    try:
        return h5py.File(_Window(raw, start, size), "r", **options), [raw]
    except BaseException:
        raw.close()
        raise


def _open(h5py, task: Task) -> tuple:
    """(h5py.File, its file closers, the dataset's path, (file, start) where the HDF5 bytes
    lie) for a DATASET task."""
    if MEMBER_SEP not in task.member:
        f, closers = _h5_file(h5py, task.source, 0, os.path.getsize(task.source),
                              rdcc_nbytes=0)
        return f, closers, task.member, (task.source, 0)
    zname, dpath = task.member.split(MEMBER_SEP, 1)
    with zipfile.ZipFile(task.source) as z:
        where = _member_bytes(task.source, z, z.getinfo(zname))
    f, closers = _h5_file(h5py, *where, rdcc_nbytes=0)
    return f, closers, dpath, where[:2]


def read_blocks(task: Task, chunk_bytes: int):
    """Yield (origin, block) for blocks [first, first + count) of a DATASET task, in the
    dataset's chunk order (C order of the chunk grid); see the module docstring."""
    h5py = _h5py()
    try:
        f, closers, dpath, raw = _open(h5py, task)
    except (OSError, KeyError, ReaderError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise SourceError(f"cannot open {task.member.replace(MEMBER_SEP, '/')}: {e}") from None
    try:
        with f:
            dset = f.get(dpath)
            if not isinstance(dset, h5py.Dataset):
                raise SourceError(f"{dpath} is no longer a dataset (the file changed?)")
            yield from _Blocks(h5py, dset, task, raw).blocks()
    finally:
        for c in closers:
            c.close()


class _Blocks:
    """Reads the blocks of one dataset leaf."""

    def __init__(self, h5py, dset, task: Task, raw: tuple):
        self.h5py, self.dset, self.task = h5py, dset, task
        self.raw_path, self.raw_start = raw  # where the HDF5 file's bytes lie
        h5d = h5py.h5d
        self.id = dset.id
        self.ftype = self.id.get_type()
        self.record = self.ftype.get_size()
        field = task.fields[0] if task.fields else Field("", 0, task.element)
        found = [p for p in parts(h5py, self.ftype) if p.suffix == field.name]
        if not found or found[0].element != task.element or found[0].offset != field.offset:
            raise SourceError("the dataset's type differs from the one planned (the file "
                              "changed?)")
        self.part = found[0]
        self.shape = tuple(dset.shape or ())
        if self.shape + self.part.sub_shape != tuple(task.shape):
            raise SourceError(f"the dataset's shape is {list(self.shape)}, "
                              f"{list(task.shape)} was planned (the file changed?)")
        dcpl = self.id.get_create_plist()
        self.layout = dcpl.get_layout()
        self.block = block_shape(dset, self.layout, h5d, self.record)
        self.grid = _grid(self.shape, self.block)
        if math.prod(self.grid) != task.blocks:
            raise SourceError(f"the dataset has {math.prod(self.grid)} blocks, {task.blocks} "
                              "were planned (the file changed?)")
        # Chunks unfiltered or through the filters decoded here are read at their offsets,
        # without HDF5 (whose lock lets one thread read at a time).
        self.filters = [dcpl.get_filter(i)[:3] for i in range(dcpl.get_nfilters())]
        self.direct = (self.layout == h5d.CHUNKED
                       and all(_decodes(code, cd) for code, _, cd in self.filters))
        self.packed = None
        self.item = np_dtype(task.element).itemsize
        # Storage never allocated reads as the fill value, unless HDF5 writes none there.
        self.no_fill = (dcpl.get_fill_time() == h5d.FILL_TIME_NEVER
                        or dcpl.fill_value_defined() == h5d.FILL_VALUE_UNDEFINED)
        self.buf = None

    def blocks(self):
        total = math.prod(self.grid)
        first = self.task.first
        last = total if self.task.count < 0 else min(total, first + self.task.count)
        h5d = self.h5py.h5d
        unallocated = (self.layout == h5d.CONTIGUOUS
                       and self.id.get_space_status() != h5d.SPACE_STATUS_ALLOCATED)
        fd = None
        try:
            for b in range(first, last):
                coords = np.unravel_index(b, self.grid) if self.grid else ()
                start = tuple(int(c) * s for c, s in zip(coords, self.block))
                count = tuple(min(s, n - o) for s, n, o in zip(self.block, self.shape, start))
                origin = start + (0,) * len(self.part.grid_tail)
                if self.layout == h5d.CHUNKED:
                    info = self.id.get_chunk_info_by_coord(start)
                    if info.byte_offset is None:
                        yield origin, self._fill(start, count)
                    elif self.direct:
                        if fd is None:
                            fd = os.open(self.raw_path, os.O_RDONLY | getattr(os, "O_BINARY",
                                                                                    0))
                        yield origin, self._chunk_at(fd, info, count)
                    else:
                        yield origin, self._read(start, count)
                elif unallocated:
                    yield origin, self._fill(start, count)
                else:
                    yield origin, self._read(start, count)
        finally:
            if fd is not None:
                os.close(fd)

    def _buffer(self, nbytes: int) -> np.ndarray:
        if self.buf is None or self.buf.size < nbytes:
            self.buf = np.empty(nbytes, np.uint8)
        return self.buf[:nbytes]

    def _view(self, buf, count, full=None):
        """The leaf's values in records of shape `full` (default `count`) held by `buf`, cut to
        `count`."""
        full = full or count
        strides, step = [], self.record
        for n in reversed(full):
            strides.insert(0, step)
            step *= n
        p = self.part
        shape = tuple(count) + p.sub_shape
        strides += [s for _, s in p.sub]
        if p.complex:
            shape += (2,)
            strides.append(self.item)
        return np.ndarray(shape, np_dtype(self.task.element), buf, p.offset, tuple(strides))

    def _read(self, start, count):
        """Records [start, start + count) through HDF5, in the file's own type."""
        h5s = self.h5py.h5s
        buf = self._buffer(math.prod(count) * self.record)
        fspace = self.id.get_space()
        if self.shape:
            if not math.prod(count):
                return self._view(buf, count)
            fspace.select_hyperslab(start, count)
            mspace = h5s.create_simple(count)
        else:
            mspace = h5s.create(h5s.SCALAR)
        self.id.read(mspace, fspace, buf, mtype=self.ftype)
        return self._view(buf, count)

    def _chunk_at(self, fd, info, count):
        """A chunk read at its offset in the file and decoded here (chunks are stored whole,
        even at the dataset's edges)."""
        nbytes = math.prod(self.block) * self.record
        where = f"chunk at {list(info.chunk_offset)}"
        if not self.filters:
            if info.size != nbytes:
                raise SourceError(f"{where} holds {info.size} bytes, {nbytes} expected")
            buf = self._buffer(nbytes)
            _read_at(fd, memoryview(buf), self.raw_start + info.byte_offset, self.raw_path)
            return self._view(buf, count, self.block)
        if self.packed is None or self.packed.size < info.size:
            self.packed = np.empty(info.size, np.uint8)
        data = memoryview(self.packed)[:info.size]
        _read_at(fd, data, self.raw_start + info.byte_offset, self.raw_path)
        # Filters were applied in pipeline order when written: undone in reverse, skipping
        # those the chunk's filter mask says were not applied.
        for i in reversed(range(len(self.filters))):
            if info.filter_mask & (1 << i):
                continue
            code, _, cd = self.filters[i]
            if code == FILTER_DEFLATE:
                try:
                    data = zlib.decompress(data, bufsize=nbytes)
                except zlib.error as e:
                    raise SourceError(f"{where}: corrupt deflate data ({e})") from None
            else:
                data = _unshuffle(data, cd[0], self._buffer(len(data)))
        if len(data) != nbytes:
            raise SourceError(f"{where} decodes to {len(data)} bytes, {nbytes} expected")
        return self._view(np.frombuffer(data, np.uint8), count, self.block)

    def _fill(self, start, count):
        """A block whose storage was never allocated: every record is the fill value, read as one
        record through HDF5. A finite value is given once; a NaN or Inf one for every record."""
        if self.no_fill:
            raise SourceError("storage never written and no fill value written there (fill time "
                              "'never' or no fill value): its values are undefined")
        one = self._read(start, (1,) * len(start))
        values = np.array(one)  # a copy: the buffer is reused
        if not count_nonfinite(values):
            return values
        return np.broadcast_to(values.reshape(values.shape[len(start):]),
                               tuple(count) + values.shape[len(start):])
