"""PyTorch checkpoints (torch.save) and TorchScript archives (torch.jit.save): the zip format
(torch >= 1.6) and the legacy format, without torch and without running the pickle (see
torch_pickle).

Zip: `<prefix>/data.pkl` describes the object, `<prefix>/data/<key>` holds each storage's bytes
(stored, not compressed), `<prefix>/byteorder` says "little" or "big"; a TorchScript archive adds
`constants.pkl` (storages in `constants/`) and others. Records are found as torch finds them (see
torch_archive): in the first member's folder, whatever their case; every top-level pickle is
read, and a storage no tensor refers to is reported. Legacy: five pickles in a row (magic number,
protocol version, system info, the object, the storage keys), then each storage as an int64
element count and its bytes, in key order, little-endian.

Each tensor is checked as the view it is of its storage (offset, sizes, strides): a contiguous view
as one byte range, any other view in blocks of the bytes it spans (see scan.storage.strided);
stride-0 dimensions once, counted by their sizes, and large overlapping views from the values they
span (scan.overlap). Storages are read as torch reads them, without verifying the zip CRC-32
(torch.load does not either; checking it would cut the scan's speed to that of zlib.crc32, a
third of reading the file).
"""
from __future__ import annotations

import math
import reprlib
import zipfile
import zlib
from dataclasses import replace

import numpy as np

from . import ReaderError
from .bounds import check_count
from .reporting import marker, not_applicable, unchecked, values_task
from .pickle_vm import PickleError, PickleTruncated
from .torch_archive import ZipRecords, byte_order, element_bytes, legacy_places
from .torch_pickle import ELEMENTS, INTEGERS, InlineArray, NoData, TensorView, Unsupported, \
    Values, describe, plain_value
from .zipmembers import data_offset, declared_members, duplicate_names
from ..signatures import TORCH_LEGACY_MAGIC, is_torch_legacy
from ..storage.inline import Inline
from ..storage.ranges import Range
from ..storage.strided import Strided
from ..tasks import Task
from ..storage.reads import open_binary, path_size, zip_file

LEGACY_PROTOCOL = 1001
#: Inline NumPy arrays larger than this are not copied into a task.
INLINE_LIMIT = 64 << 20
#: Views whose dimensions overlap (a sliding window) are read element by element up to this many
#: elements; larger ones are counted from the stored values they span, up to SPAN_LIMIT of them
#: (about 32 bytes of working memory each: 128 MiB).
OVERLAP_LIMIT = 1 << 24
SPAN_LIMIT = 1 << 22
#: The example inputs of torch.jit.trace: torch.jit.save keeps their shapes with empty storages,
#: and torch.jit.load does not return them.
SAVED_EMPTY = ("a traced input saved without its values (an empty storage; torch.jit.load does "
               "not return traced inputs)")
#: Bytes of a legacy file read to find its pickles (they precede the storages).
LEGACY_PICKLE_LIMIT = 256 << 20


def plan(path: str, allow_globals=()) -> list:
    """Tasks for every tensor, inline array and float value of the PyTorch checkpoint at `path`;
    `allow_globals` ("module.Name") are walked like dicts as the companions are (torch_rules)."""
    with open_binary(path) as f:
        head = f.read(16)
    if is_torch_legacy(head):
        return _plan_legacy(path, allow_globals)
    declared = declared_members(path)
    if declared is not None:
        check_count(declared, "zip members")
    try:
        z = zip_file(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise ReaderError(f"not a PyTorch checkpoint (zip or legacy): {e}") from None
    with z, open_binary(path) as raw:
        return _plan_zip(path, z, raw, allow_globals)


def _plan_zip(path, z, raw, allow_globals=()) -> list:
    infos = z.infolist()
    dup = duplicate_names(infos)
    if dup:
        raise ReaderError(f"zip member {dup!r} appears twice (which one torch reads is undefined)")
    records = ZipRecords(infos)
    pickles = records.pickles()
    if not any(p.lower() == "data.pkl" for p in pickles):
        raise ReaderError(f"a PyTorch zip checkpoint holds {records.prefix}data.pkl, this one "
                          "does not")
    order = byte_order(z, records)
    tasks = [marker(path, "pytorch")]
    if not records.torchscript():  # torch.load reads data.pkl alone
        tasks += [unchecked(path, p, "pickle", (), "a pickle beside data.pkl in an archive that "
                            "is no TorchScript one (no constants.pkl): torch.load does not read "
                            "it") for p in pickles if p.lower() != "data.pkl"]
        pickles = [p for p in pickles if p.lower() == "data.pkl"]
    used: set = set()
    for name in pickles:
        stem = name[:-len(".pkl")]
        desc = _describe_member(z, records, name, allow_globals)
        # A storage the pickle loads is accounted for even where torch drops what was built on
        # it (an OrderedDict made by NEWOBJ from a list returns empty): torch returns none of it.
        for key in desc.storages:
            info, _ = records.find(f"{stem}/{key}")
            used.add(info.filename if info is not None else None)

        def locate(storage, stem=stem):
            info, why = records.find(f"{stem}/{storage.key}")
            if info is None:
                return None, f"its storage {stem}/{storage.key}: {why}"
            if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
                return None, f"its storage {info.filename} is compressed or encrypted"
            if info.compress_size != info.file_size:
                return None, f"storage {info.filename}: stored member sizes disagree"
            need = storage.numel * element_bytes(storage.dtype)
            if info.file_size == 0 and need and stem.lower() == "traced_inputs":
                return None, SAVED_EMPTY
            if need != info.file_size:
                return None, (f"storage {info.filename} holds {info.file_size} bytes, "
                              f"{storage.numel} elements of {storage.dtype or 'bytes'} need "
                              f"{need} (torch refuses it)")
            # torch swaps a big-endian storage in units of its own element size.
            swap = order == ">" and element_bytes(storage.dtype) > 1
            return (data_offset(raw, info), info.file_size, ">" if swap else "<"), ""

        found = _tasks(path, desc, locate, "<")
        if stem.lower() != "data":
            found = [replace(t, name=f"{name}:{t.name}" if t.name else name) for t in found]
        tasks += found
    tasks += _unread(path, records, pickles, used)
    return tasks


def _describe_member(z, records, name, allow_globals=()):
    info, why = records.find(name)
    if info is None:
        raise ReaderError(why)
    if info.file_size > INLINE_LIMIT * 4:
        raise ReaderError(f"{name} of {info.file_size} bytes is over the limit")
    try:
        return describe(z.read(info), allow_globals=allow_globals,
                        torchscript=records.torchscript())[0]
    except PickleError as e:
        raise ReaderError(f"{name}: {e}") from None
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, zlib.error) as e:
        raise ReaderError(f"{name} cannot be read: {e}") from None


def _unread(path, records, pickles, used) -> list:
    """Unchecked tasks for the storages no tensor refers to and the pickles torch does not
    read as such (a storage's bytes are only ever left out where a view leaves them out)."""
    folders = tuple(p[:-len(".pkl")].lower() + "/" for p in pickles)
    out = []
    for rel, info in records.members():
        low = rel.lower()
        if low.startswith(folders) and info.filename not in used:
            out.append(unchecked(path, rel, "storage", (), "no tensor in the archive's pickles "
                                 "refers to this storage (torch.load returns no tensor of it)"))
        elif low.endswith(".pkl") and "/" in low:
            out.append(unchecked(path, rel, "pickle", (), "a pickle inside a folder of the "
                                 "archive, which torch.load and torch.jit.load do not read"))
    return out


def _plan_legacy(path, allow_globals=()) -> list:
    size = path_size(path)
    with open_binary(path) as f:
        data = f.read(min(size, LEGACY_PICKLE_LIMIT))
    try:
        pos = 0
        for expected in (TORCH_LEGACY_MAGIC, LEGACY_PROTOCOL):
            value, pos = plain_value(data, pos)
            if value != expected:
                raise ReaderError(f"legacy PyTorch header holds {reprlib.repr(value)}, "
                                  f"expected {expected}")
        _, pos = plain_value(data, pos)  # system info: torch reads storages little-endian anyway
        desc, pos = describe(data, pos, allow_globals)
        keys, pos = plain_value(data, pos)
    except PickleTruncated:
        raise ReaderError("legacy PyTorch checkpoint: its pickles do not end within the first "
                          f"{LEGACY_PICKLE_LIMIT} bytes (truncated?)") from None
    except PickleError as e:
        raise ReaderError(f"legacy PyTorch checkpoint: {e}") from None
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise ReaderError("legacy PyTorch checkpoint: the storage key list is malformed")
    # A storage's element size and count are those of the first reference to it (torch's).
    element = {k: (element_bytes(st.dtype), st.numel) for k, st in desc.storages.items()}
    with open_binary(path) as f:
        places = legacy_places(f, pos, size, keys, element)

    def locate(storage):
        if storage.key not in places:
            return None, f"its storage {storage.key} is not in the file's storage list"
        start, nbytes = places[storage.key]
        return (start, nbytes, "<"), ""  # a storage view's start is in its tensors' offsets

    referred = {item.storage.key for _, item in desc.items if isinstance(item, TensorView)}
    orphans = [unchecked(path, f"storage {key}", "storage", (), "no tensor in the pickle refers "
                         "to this storage (torch.load returns no tensor of it)")
               for key in dict.fromkeys(keys) if key not in referred]
    return [marker(path, "pytorch-legacy")] + _tasks(path, desc, locate, "<") + orphans


def _tasks(path, desc, locate, order) -> list:
    """One task per item of `desc`; `locate(storage)` gives ((byte offset, bytes), "") or
    (None, why not). A global outside the allow-list makes everything unchecked: what the pickle
    describes depends on what that global would have done."""
    items = desc.items
    check_count(len(items), "tensors and values")
    if desc.disallowed:
        names = ", ".join(desc.disallowed[:3]) + (", ..." if len(desc.disallowed) > 3 else "")
        why = (f"the pickle names {names}, outside what torch.load(weights_only=True) allows and "
               "fpclass's companions (nothing was imported or called; --allow-global walks a "
               "trusted one like a dict): what it holds is not checked")
        return [unchecked(path, "", "pickle", (), why)] + [
            unchecked(path, name, _label(item), _shape(item),
                      f"the pickle names {desc.disallowed[0]}, outside the allow-list")
            for name, item in items]
    if not items:
        return [not_applicable(path, "", "pickle", (), "holds no tensor, array or float value")]
    tasks = []
    for name, item in items:
        if isinstance(item, Unsupported):
            tasks.append(unchecked(path, name, item.what, (), item.reason))
        elif isinstance(item, NoData):
            tasks.append(not_applicable(path, name, item.what, (), item.reason))
        elif isinstance(item, Values):
            tasks.append(values_task(path, name, item.array, item.label))
        elif isinstance(item, InlineArray):
            tasks.append(_inline(path, name, item))
        else:
            tasks.append(_view(path, name, item, locate, order))
    return tasks


def _label(item) -> str:
    if isinstance(item, (TensorView, InlineArray)):
        return item.dtype
    if isinstance(item, Values):
        return item.label
    return item.what


def _shape(item) -> tuple:
    return getattr(item, "size", getattr(item, "shape", ()))


def _view(path, name, v: TensorView, locate, order) -> Task:
    """The task of tensor `v`: `locate(storage)` gives ((byte offset, bytes, byte order), "")
    or (None, why not); `order` is unused (each storage has its own)."""
    label, shape = v.dtype, v.size
    if v.dtype in INTEGERS:
        element, item = None, INTEGERS[v.dtype]
    elif v.dtype in ELEMENTS:
        element, item = ELEMENTS[v.dtype]
    else:
        return unchecked(path, name, label, shape, f"unknown torch dtype {v.dtype!r}")
    place, why = locate(v.storage)
    if place is None:
        return (not_applicable if why == SAVED_EMPTY else unchecked)(path, name, label, shape, why)
    start, nbytes, order = place
    numel = math.prod(shape)
    if numel:
        last = v.offset + sum((s - 1) * st for s, st in zip(shape, v.stride))
        if (last + 1) * item > nbytes:
            return unchecked(path, name, label, shape, f"the view reaches element {last} of a "
                             f"storage of {nbytes // item} {v.dtype} elements")
    if element is None:
        return not_applicable(path, name, label, shape)
    if v.dtype == "float4_e2m1fn_x2":
        return not_applicable(path, name, label, shape, "float4 values cannot be NaN or Inf")
    if order == ">" and element_bytes(v.storage.dtype) != item:
        return unchecked(path, name, label, shape, f"big-endian storage {v.storage.key} is "
                         f"swapped in {element_bytes(v.storage.dtype)}-byte units, its "
                         f"{v.dtype} view reads {item}-byte elements: not read")
    if order == ">" and element == "bfloat16":
        return unchecked(path, name, label, shape, "big-endian bfloat16 storages are not read")
    return strided_task(path, name, label, shape, v.stride, start + v.offset * item, element,
                        item, order, v.flip)


def strided_task(path, name, label, shape, stride, offset, element, item, order, flip) -> Task:
    """The task of a view of `shape` and element `stride` whose first element is at byte
    `offset`: one byte range when contiguous, else read in blocks of the bytes it spans; a
    dimension of stride 0 (a broadcast) is read once and its count multiplied by its size, so a
    view repeating a few stored values 2^40 times costs what those values cost."""
    grid = tuple(shape)
    if element in ("c16", "c8", "c4"):  # checked as real and imaginary parts
        element = f"{order}f{item // 2}"
        grid += (2,)
    elif element in ("f8", "f4", "f2"):
        element = order + element
    base = Task(path, name, label, tuple(shape), element=element, grid=grid, flip=flip)
    numel = math.prod(shape)
    if numel == 0:
        return replace(base, storage=Range(path, offset, 0))
    if _contiguous(shape, stride):
        return replace(base, storage=Range(path, offset, numel * item))
    broadcast = tuple(d for d, (n, st) in enumerate(zip(shape, stride)) if st == 0 and n > 1)
    distinct = numel // math.prod(shape[d] for d in broadcast)
    if distinct > OVERLAP_LIMIT and _overlaps(shape, stride):
        # Read the span once; each value counts as often as the view reaches it (scan.overlap).
        span = 1 + sum((n - 1) * st for n, st in zip(shape, stride))
        if span > SPAN_LIMIT or distinct >= 1 << 62:
            return unchecked(path, name, label, shape, f"a view of {distinct} elements whose "
                             f"dimensions overlap over {span} stored values: not read")
        return replace(base, storage=Strided(path, offset, span * item, tuple(stride),
                                             broadcast, overlap=True))
    return replace(base, storage=Strided(path, offset, distinct * item, tuple(stride), broadcast))


def _overlaps(shape, stride) -> bool:
    """Whether two indices of the view (stride-0 dimensions left out) reach one element."""
    reach = 0
    for st, n in sorted((st, n) for n, st in zip(shape, stride) if n > 1 and st > 0):
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def _contiguous(shape, stride) -> bool:
    expected = 1
    for s, st in zip(reversed(shape), reversed(stride)):
        if s != 1 and st != expected:
            return False
        expected *= s
    return True


def _inline(path, name, a: InlineArray) -> Task:
    try:
        dtype = np.dtype(a.dtype)
    except (TypeError, ValueError, OverflowError):
        return unchecked(path, name, a.dtype[:40], a.shape, f"unknown NumPy dtype {a.dtype[:40]!r}")
    if dtype.kind in "SU" and math.prod(a.shape) * dtype.itemsize == len(a.data):
        return not_applicable(path, name, a.dtype, a.shape, "text, not a floating-point type")
    if dtype.kind not in "fcbiu" or dtype.names is not None:
        return unchecked(path, name, a.dtype, a.shape, f"NumPy {dtype} arrays are not read")
    need = math.prod(a.shape) * dtype.itemsize
    if len(a.data) != need:
        return unchecked(path, name, a.dtype, a.shape, f"inline array holds {len(a.data)} bytes, "
                         f"shape {list(a.shape)} of {dtype} needs {need}")
    if dtype.kind in "biu":
        return not_applicable(path, name, a.dtype, a.shape)
    if need > INLINE_LIMIT:
        return unchecked(path, name, a.dtype, a.shape, "inline array over the size limit")
    grid = tuple(a.shape)
    element = dtype.str
    if dtype.kind == "c":
        element = np.dtype(f"{dtype.byteorder if dtype.byteorder in '<>' else '='}"
                           f"f{dtype.itemsize // 2}").str
        grid += (2,)
    return Task(path, name, a.dtype, tuple(a.shape), storage=Inline(a.data, need),
                element=element, grid=grid, order="F" if a.fortran else "C")
