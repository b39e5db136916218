"""PyTorch checkpoints (torch.save): the zip format (torch >= 1.6) and the legacy format, without
torch and without running the pickle (see torch_pickle).

Zip: `<prefix>/data.pkl` describes the object, `<prefix>/data/<key>` holds each storage's bytes
(stored, not compressed), `<prefix>/byteorder` says "little" or "big". Legacy: five pickles in a
row (magic number, protocol version, system info, the object, the storage keys), then each storage
as an int64 element count and its bytes, in key order.

Each tensor is checked as the view it is of its storage (offset, sizes, strides): a contiguous view
as one byte range, any other view in blocks of the bytes it spans (see scan.views). Storages are
read as torch reads them, without verifying the zip CRC-32 (torch.load does not either; checking
it would cut the scan's speed to that of zlib.crc32, a third of reading the file).
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
from dataclasses import replace

import numpy as np

from . import ReaderError
from .layout import check_count, marker, not_applicable, unchecked, values_task
from .pickle_vm import PickleError, PickleTruncated
from .torch_pickle import ELEMENTS, INTEGERS, InlineArray, NoData, TensorView, Unsupported, \
    Values, describe, plain_value
from .zipmembers import data_offset, declared_members, duplicate_names
from ..detect import is_torch_legacy
from ..tasks import INLINE, RAW, STRIDED, Task

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
#: Inline NumPy arrays larger than this are not copied into a task.
INLINE_LIMIT = 64 << 20
#: Bytes of a legacy file read to find its pickles (they precede the storages).
LEGACY_PICKLE_LIMIT = 256 << 20


def plan(path: str, allow_globals=()) -> list:
    """Tasks for every tensor, inline array and float value of the PyTorch checkpoint at `path`;
    `allow_globals` ("module.Name") are walked like dicts as the companions are (torch_rules)."""
    with open(path, "rb") as f:
        head = f.read(16)
    if is_torch_legacy(head):
        return _plan_legacy(path, allow_globals)
    declared = declared_members(path)
    if declared is not None:
        check_count(declared, "zip members")
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise ReaderError(f"not a PyTorch checkpoint (zip or legacy): {e}") from None
    with z, open(path, "rb") as raw:
        return _plan_zip(path, z, raw, allow_globals)


def _plan_zip(path, z, raw, allow_globals=()) -> list:
    infos = z.infolist()
    pickles = [i for i in infos if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise ReaderError(f"a PyTorch zip checkpoint holds one data.pkl, this one {len(pickles)}")
    dup = duplicate_names(infos)
    if dup:
        raise ReaderError(f"zip member {dup!r} appears twice (which one torch reads is undefined)")
    prefix = pickles[0].filename[: -len("data.pkl")]
    members = {i.filename: i for i in infos}
    order = "<"
    if prefix + "byteorder" in members:
        text = z.read(prefix + "byteorder").decode("ascii", "replace").strip()
        if text not in ("little", "big"):
            raise ReaderError(f"byteorder record says {text!r}; 'little' or 'big' expected")
        order = "<" if text == "little" else ">"
    if pickles[0].file_size > INLINE_LIMIT * 4:
        raise ReaderError(f"data.pkl of {pickles[0].file_size} bytes is over the limit")
    try:
        desc, _ = describe(z.read(pickles[0]), allow_globals=allow_globals)
    except PickleError as e:
        raise ReaderError(f"data.pkl: {e}") from None
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        raise ReaderError(f"data.pkl cannot be read: {e}") from None

    def locate(storage):
        info = members.get(f"{prefix}data/{storage.key}")
        if info is None:
            return None, f"its storage data/{storage.key} is missing from the archive"
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            return None, f"its storage data/{storage.key} is compressed or encrypted"
        if info.compress_size != info.file_size:
            return None, f"storage data/{storage.key}: stored member sizes disagree"
        return (data_offset(raw, info), info.file_size), ""

    return [marker(path, "pytorch")] + _tasks(path, desc, locate, order)


def _plan_legacy(path, allow_globals=()) -> list:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        data = f.read(min(size, LEGACY_PICKLE_LIMIT))
    try:
        pos = 0
        for expected in (LEGACY_MAGIC, LEGACY_PROTOCOL):
            value, pos = plain_value(data, pos)
            if value != expected:
                raise ReaderError(f"legacy PyTorch header holds {value!r}, expected {expected}")
        info, pos = plain_value(data, pos)
        if isinstance(info, dict) and info.get("little_endian") is False:
            order = ">"
        else:
            order = "<"
        desc, pos = describe(data, pos, allow_globals)
        keys, pos = plain_value(data, pos)
    except PickleTruncated:
        raise ReaderError("legacy PyTorch checkpoint: its pickles do not end within the first "
                          f"{LEGACY_PICKLE_LIMIT} bytes (truncated?)") from None
    except PickleError as e:
        raise ReaderError(f"legacy PyTorch checkpoint: {e}") from None
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise ReaderError("legacy PyTorch checkpoint: the storage key list is malformed")
    # Storage element sizes come from the views that use them; each storage is an int64 count
    # and its bytes, in key order.
    element = {}
    for _, item in desc.items:
        if isinstance(item, TensorView):
            element[item.storage.key] = _storage_item_bytes(item)
    places = {}
    with open(path, "rb") as f:
        for key in keys:
            head = _pread(f, pos, 8)
            if len(head) < 8:
                raise ReaderError(f"legacy PyTorch checkpoint: storage {key} lies past the end "
                                  f"of the file ({size} bytes; truncated?)")
            (numel,) = struct.unpack("<q", head)
            item = element.get(key)
            if numel < 0 or item is None:
                raise ReaderError(f"legacy PyTorch checkpoint: storage {key} has count {numel} "
                                  "or no tensor that says its element size")
            places[key] = (pos + 8, numel * item)
            pos += 8 + numel * item
    if pos > size:
        raise ReaderError(f"legacy PyTorch checkpoint: storages end at byte {pos}, the file has "
                          f"{size} bytes (truncated?)")

    def locate(storage):
        if storage.key not in places:
            return None, f"its storage {storage.key} is not in the file's storage list"
        return places[storage.key], ""

    return [marker(path, "pytorch-legacy")] + _tasks(path, desc, locate, order)


def _pread(f, pos, n) -> bytes:
    f.seek(pos)
    return f.read(n)


def _storage_item_bytes(view: TensorView) -> int:
    dtype = view.storage.dtype or "uint8"
    return ELEMENTS[dtype][1] if dtype in ELEMENTS else INTEGERS.get(dtype, 1)


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
    label, shape = v.dtype, v.size
    if v.dtype in INTEGERS:
        element, item = None, INTEGERS[v.dtype]
    elif v.dtype in ELEMENTS:
        element, item = ELEMENTS[v.dtype]
    else:
        return unchecked(path, name, label, shape, f"unknown torch dtype {v.dtype!r}")
    place, why = locate(v.storage)
    if place is None:
        return unchecked(path, name, label, shape, why)
    start, nbytes = place
    if v.storage.dtype and v.storage.numel * _storage_item_bytes(v) != nbytes:
        return unchecked(path, name, label, shape, f"storage {v.storage.key} holds {nbytes} bytes, "
                         f"{v.storage.numel} elements of {v.storage.dtype} need "
                         f"{v.storage.numel * _storage_item_bytes(v)}")
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
    if order == ">" and element == "bfloat16":
        return unchecked(path, name, label, shape, "big-endian bfloat16 storages are not read")
    grid = tuple(shape)
    if element in ("c16", "c8", "c4"):  # checked as real and imaginary parts
        element = f"{order}f{item // 2}"
        grid += (2,)
    elif element in ("f8", "f4", "f2"):
        element = order + element
    base = Task(path, name, label, tuple(shape), source=path, element=element, grid=grid,
                flip=v.flip)
    offset = start + v.offset * item
    if numel == 0:
        return replace(base, storage=RAW, offset=offset, nbytes=0)
    if _contiguous(shape, v.stride):
        return replace(base, storage=RAW, offset=offset, nbytes=numel * item)
    return replace(base, storage=STRIDED, offset=offset, nbytes=numel * item,
                    strides=tuple(v.stride))


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
    return Task(path, name, a.dtype, tuple(a.shape), source=path, storage=INLINE, nbytes=need,
                element=element, grid=grid, order="F" if a.fortran else "C", data=a.data)
