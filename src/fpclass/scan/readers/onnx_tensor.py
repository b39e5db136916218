"""ONNX TensorProtos: where a tensor's data lies (raw_data, a packed typed field, an external data
file) and whether it holds what its shape needs; and the TensorProto files of ONNX's test data
(`test_data_set_0/input_0.pb`), one serialized tensor per file.

A tensor may be given in pieces (a singular message field repeated): protobuf merges them as if
their bytes were one message, so a tensor is read from a list of byte ranges, in order.
"""

from __future__ import annotations

import mmap
import os
import stat

import numpy as np

from . import ReaderError
from ..storage.ranges import Range, Varints
from ..storage.reads import SourceError, is_url, path_size
from ..tasks import Task
from .bounds import check_count, elements
from .reporting import float_task, marker, not_applicable, packed_task, unchecked, values_task
from .onnx_schema import (FIXED_SIZE, FLOATS, NAMES, OTHERS, SCHEMA, STRING, TENSOR_WIRES,
                          TYPED, TYPED_WIRE)
from .protobuf import (LEN, MAX_DEPTH, Budget, VARINT as WIRE_VARINT, ProtobufError, check_field,
                       fields, open_map, packed_varints, varint)

#: Messages one TensorProto file may hold (its tensors, their external data entries).
_FILE_MESSAGES = 100_000
#: Most fields a TensorProto file may have at its top level, runs of unpacked floats counted as
#: one (onnx writes a tensor in a handful: its typed data packed).
_FILE_FIELDS = 1_000_000
#: Most dimensions a tensor may have: numpy's limit, so onnx's to_array reads no more.
MAX_RANK = 64


class Tensor:
    """The fields of one TensorProto that say where its data is: value ranges of the file.
    `typed`: the packed runs of each typed field, as [start, end of the first, runs, values in
    all]; `single`: how many values of each typed field were given one per field (unpacked)."""

    __slots__ = ("dims", "rank", "type", "name", "raw", "typed", "single", "external",
                 "location", "segment", "ranges")

    def __init__(self):
        self.dims, self.rank, self.type, self.name, self.raw = [], 0, 0, "", None
        self.typed, self.single, self.external = {}, {}, {}
        self.location, self.segment, self.ranges = 0, False, ()


class TensorReader:
    """Reads the TensorProtos of the file at `path` (mapped as `buf`) into tasks; external data
    files are looked for beside it. Every message read is taken from `budget` (a Budget)."""

    def __init__(self, path, buf, budget):
        self.path, self.buf, self.budget = path, buf, budget
        self.folder = os.path.dirname(path)
        self.real_folder = os.path.realpath(self.folder or ".")
        self.external_files: dict = {}
        self.shapes: dict = {}

    def text(self, a, b) -> str:
        return self.buf[a:b].decode("utf-8", "replace")

    def read(self, ranges, depth) -> Tensor:
        """The TensorProto merged from the byte ranges `ranges` (an iterable of (start, end)),
        at nesting level `depth`; ProtobufError where protobuf would refuse it."""
        if depth > MAX_DEPTH:
            raise ProtobufError(f"messages nested over {MAX_DEPTH} deep")
        t = Tensor()
        t.ranges = ranges   # a tuple, list or other iterable that can be gone over again
        for start, end in ranges:
            self.budget.spend()
            self._read(t, start, end, depth)
        return t

    def _read(self, t, start, end, depth):
        buf, budget = self.buf, self.budget
        for number, wire, value, a, b in fields(buf, start, end, runs=True):
            if wire < 0:   # a run of unpacked float_data (double_data) values
                if TYPED_WIRE.get(number) == -wire:
                    budget.spend()
                    t.single[number] = t.single.get(number, 0) + value
            elif number == 1:   # dims: past MAX_RANK only counted (and taken from the budget)
                if wire == WIRE_VARINT:
                    t.rank += 1
                    if t.rank <= MAX_RANK:
                        t.dims.append(_signed(value))
                    else:
                        budget.spend()
                elif wire == LEN:
                    t.rank += packed_varints(buf, a, b)
                    if t.rank > MAX_RANK:
                        budget.spend()
                    pos = a
                    while pos < b and t.rank <= MAX_RANK:
                        v, pos = varint(buf, pos, b)
                        t.dims.append(_signed(v))
            elif number == 2 and wire == WIRE_VARINT:
                t.type = value
            elif number == 3 and wire == LEN:
                t.segment = True
                check_field(buf, a, b, SCHEMA, "TensorProto.Segment", depth + 1, budget)
            elif number == 8 and wire == LEN:
                t.name = self.text(a, b)
            elif number == 9 and wire == LEN:
                t.raw = (a, b)
            elif number in TYPED_WIRE:
                if wire == LEN and number != 6:   # a packed run of values
                    size = FIXED_SIZE.get(number)
                    if size and (b - a) % size:
                        raise ProtobufError(f"{TYPED[number]} holds {b - a} bytes, not whole "
                                            f"{size}-byte values")
                    count = (b - a) // size if size else packed_varints(buf, a, b)
                    run = t.typed.get(number)
                    if run is None:
                        t.typed[number] = [a, b, 1, count]
                    else:   # data in pieces: each taken from the budget
                        budget.spend()
                        run[2] += 1
                        run[3] += count
                elif wire == TYPED_WIRE[number]:  # one value (else an unknown field)
                    if number != 6:   # one string per field is how strings are stored
                        budget.spend()
                    t.single[number] = t.single.get(number, 0) + 1
            elif number == 13 and wire == LEN:
                if depth + 1 > MAX_DEPTH:
                    raise ProtobufError(f"messages nested over {MAX_DEPTH} deep at byte {a}")
                budget.spend()
                key = val = ""
                for n2, w2, _, a2, b2 in fields(buf, a, b):
                    if w2 == LEN and n2 == 1:
                        key = self.text(a2, b2)
                    elif w2 == LEN and n2 == 2:
                        val = self.text(a2, b2)
                t.external[key] = val
            elif number == 14 and wire == WIRE_VARINT:
                t.location = value
            elif wire == LEN:
                kind = SCHEMA["TensorProto"].get(number)
                if kind is not None:
                    check_field(buf, a, b, SCHEMA, kind, depth + 1, budget)

    def shape(self, t: Tensor):
        """(the type's name, the shape (None if a dimension is negative or the rank over
        MAX_RANK), elements)."""
        label = NAMES.get(t.type, f"data_type {t.type}")
        if t.rank > MAX_RANK or any(d < 0 for d in t.dims):
            return label, None, 0
        shape = tuple(t.dims)
        return label, self.shapes.setdefault(shape, shape), elements(shape)

    def mismatch(self, t: Tensor, described=None) -> str:
        """Why tensor `t` does not hold the data its type and shape need ("" when it does, or
        when its data is external: that is looked at by `task`); `described`: its `shape`."""
        label, shape, n = described or self.shape(t)
        if shape is None and t.rank > MAX_RANK:
            return f"{t.rank} dimensions, over the {MAX_RANK} numpy (and onnx's to_array) holds"
        if shape is None:
            return f"negative dimension in {t.dims}"
        if t.type == STRING:
            strings = t.single.get(6, 0)
            if strings != n and t.location != 1:
                return f"string_data holds {strings} strings, shape {list(shape)} needs {n}"
            return ""
        if t.type in FLOATS:
            _, bits, typed_field = FLOATS[t.type]
        elif t.type in OTHERS:
            bits, typed_field = OTHERS[t.type]
        else:
            return f"unknown ONNX data_type {t.type}"
        if t.location == 1:
            return ""
        if t.raw is not None:
            need = (n * bits + 7) // 8
            if t.raw[1] - t.raw[0] != need:
                return (f"raw_data holds {t.raw[1] - t.raw[0]} bytes, {label} shape "
                        f"{list(shape)} needs {need}")
        elif t.typed or t.single:
            return self._typed_count_mismatch(t, typed_field, bits, n, label, shape)
        elif n:
            return "no data for the tensor"
        return ""

    def task(self, name, t: Tensor) -> Task:
        """The task for tensor `t`, named `name`."""
        path = self.path
        described = label, shape, n = self.shape(t)
        if t.segment and shape is not None:
            return unchecked(path, name, label, shape, "segmented tensors are not supported")
        why = self.mismatch(t, described)
        if why:
            return unchecked(path, name, label, shape or (), why)
        if t.type == STRING:
            return not_applicable(path, name, label, shape)
        if t.type in FLOATS:
            element, bits, typed_field = FLOATS[t.type]
        else:
            element, (bits, typed_field) = None, OTHERS[t.type]
        need = (n * bits + 7) // 8
        source, offset, storage = path, 0, Range
        if t.location == 1:
            found = self._external(t.external, label, shape, need)
            if isinstance(found, str):
                return unchecked(path, name, label, shape, found)
            source, offset = found
        elif t.raw is not None:
            offset = t.raw[0]
        elif (t.typed or t.single) and element is not None and bits >= 8:
            run = t.typed.get(typed_field)
            if run is None or run[2] != 1 or t.single:
                if typed_field in FIXED_SIZE:   # float_data, double_data: gathered
                    values = np.frombuffer(self._gather(t, typed_field), element)
                    return values_task(path, name, values.reshape(shape), label)
                return unchecked(path, name, label, shape, "int32_data is not one packed "
                                 "field (unpacked or split fields are not supported)")
            offset, end = run[0], run[1]
            if typed_field == 5:
                storage, need = Varints, end - offset
        if element is None:
            return not_applicable(path, name, label, shape)
        if bits < 8:
            return packed_task(path, name, label, shape, element)
        return float_task(path, name, label, shape, element, storage(source, offset, need))

    def _gather(self, t: Tensor, number: int) -> bytes:
        """The values of fixed-size typed field `number` of `t`, in order, from all its packed
        runs and single values (runs of single values gathered at once)."""
        buf, size, out = self.buf, FIXED_SIZE[number], bytearray()
        one = TYPED_WIRE[number]   # another wire type: an unknown field to protobuf
        for start, end in t.ranges:
            for n, wire, count, a, b in fields(buf, start, end, runs=True):
                if n != number or wire not in (LEN, one, -one):
                    continue
                if wire != -one:   # a packed run, or one value
                    out += buf[a:b]
                    continue
                step = (b - a) // count
                rows = np.frombuffer(buf, np.uint8, b - a, a).reshape(count, step)
                out += rows[:, step - size:].tobytes()
                del rows   # no view of the memory map may outlive the read
        return bytes(out)

    def _typed_count_mismatch(self, t, field, bits, n, label, shape) -> str:
        """Why the typed data of a tensor does not hold its `n` elements ("" when it does)."""
        wrong = next((f for f in (*t.typed, *t.single) if f != field), None)
        if wrong is not None:
            return f"data in {TYPED[wrong]}, which {label} does not use"
        if t.type in (14, 15):       # complex: real and imaginary part
            values = 2 * n
        elif bits in (2, 4):         # packed four or two to an int32_data value
            values = -(-n // (8 // bits))
        else:
            values = n
        count = t.typed.get(field, (0, 0, 0, 0))[3] + t.single.get(field, 0)
        if count != values:
            return (f"{TYPED[field]} holds {count} values, {label} shape {list(shape)} needs "
                    f"{values}")
        return ""

    def _external(self, ext, label, shape, need):
        """(file, offset) of a tensor's external data, or the reason it cannot be read."""
        loc = ext.get("location", "")
        if not loc:
            return "external data without a location"
        if "\0" in loc:
            return f"external data location {loc!r} holds a NUL byte"
        if os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            return f"external data location {loc!r} leaves the model's directory"
        try:   # as onnx reads them: a key given with an empty value is not 0
            offset = int(ext["offset"]) if "offset" in ext else 0
            length = int(ext["length"]) if "length" in ext else None
        except ValueError:
            return f"external data offset/length not integers: {ext}"
        if offset < 0 or (length or 0) < 0:
            return f"external data offset {offset} or length {length} is negative"
        found = self.external_files.get(loc)
        if found is None:
            found = self.external_files[loc] = self._external_file(loc)
        if isinstance(found, str):
            return found
        full, size = found
        if length is not None and length != need:
            return f"external data length {length}, {label} shape {list(shape)} needs {need} bytes"
        if offset + need > size:
            return (f"external data [{offset}, {offset + need}) lies outside {loc} ({size} bytes; "
                    "truncated?)")
        if length is None and offset + need != size:
            return (f"external data without a length runs from byte {offset} to the end of "
                    f"{loc}: {size - offset} bytes, {label} shape {list(shape)} needs {need}")
        return full, offset

    def _external_file(self, loc):
        """(real path, size) of external data file `loc`, or the reason it cannot be read. As
        onnx does, the file must resolve (symbolic links followed) inside the model's folder;
        beside a URL, it is the URL of `loc` in the model's folder."""
        if is_url(self.path):
            url = f"{self.folder}/{loc}"
            try:
                return url, path_size(url)
            except FileNotFoundError:
                return f"external data file {loc}: No such file or directory"
            except (OSError, SourceError) as e:
                return f"external data file {loc}: {e}"
        real = os.path.realpath(os.path.join(self.folder, loc))
        if os.path.commonpath([self.real_folder, real]) != self.real_folder:
            return f"external data location {loc!r} resolves outside the model's directory"
        try:
            st = os.stat(real)
        except OSError as e:
            return f"external data file {loc}: {e.strerror}"
        if not stat.S_ISREG(st.st_mode):
            return f"external data location {loc!r} is not a regular file"
        return real, st.st_size


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# ---------------------------------------------------------------------------------------------
# TensorProto files (.pb): ONNX's backend test data, one tensor per file, or one SequenceProto
# or OptionalProto of tensors (their layouts agree: name = 1, elem_type = 2, tensors = 3).

#: SequenceProto / OptionalProto elem_type of tensors. (A MapProto has key_type = 2 where they
#: have elem_type, never FLOAT = 1, so a map is never taken for one of them.)
_TENSOR_ELEMENTS = 1
_CONTAINER_WIRES = {1: (LEN,), 2: (WIRE_VARINT,), 3: (LEN,)}


def is_tensor_file(path: str) -> bool:
    """Whether the file at `path` is, strictly, an ONNX TensorProto (only TensorProto fields,
    each of a wire type protobuf accepts, well-formed, no segment, a known data type, data that
    fits the shape or external data), or a SequenceProto / OptionalProto of such tensors.
    Decides for detect (.pb files) and `plan`."""
    try:
        buf = open_map(path)
    except OSError:
        return False
    try:
        return _strict(TensorReader(path, buf, Budget(_FILE_MESSAGES))) is not None
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _strict(reader: TensorReader):
    """[(name, Tensor)] of `reader`'s whole file when it strictly is a TensorProto (one) or a
    SequenceProto / OptionalProto of TensorProtos (NAME[i]), else None (also for a file of
    over _FILE_FIELDS fields or _FILE_MESSAGES tensors: no test data is such)."""
    buf = reader.buf
    try:
        t = _strict_tensor(reader, 0, len(buf), 0)
        if t is not None:
            return [(t.name, t)]
        name, elements = "", None
        for i, (number, wire, value, a, b) in enumerate(fields(buf, 0, len(buf), runs=True)):
            if abs(wire) not in _CONTAINER_WIRES.get(number, ()) or i > _FILE_MESSAGES:
                return None
            if number == 1:
                name = reader.text(a, b)
            elif number == 2:
                elements = value
        if elements != _TENSOR_ELEMENTS:
            return None
        found = []
        for number, _, _, a, b in fields(buf, 0, len(buf)):
            if number == 3:
                t = _strict_tensor(reader, a, b, 1)
                if t is None:
                    return None
                found.append((f"{name}[{len(found)}]", t))
        return found
    except ProtobufError:
        return None


def _strict_tensor(reader: TensorReader, start, end, depth):
    """The Tensor in buf[start:end] when it strictly is a TensorProto, else None."""
    try:
        for i, (number, wire, *_) in enumerate(fields(reader.buf, start, end, runs=True)):
            if number == 3 or abs(wire) not in TENSOR_WIRES.get(number, ()):   # 3: segment
                return None
            if i > _FILE_FIELDS:
                return None
        t = reader.read([(start, end)], depth)
    except ProtobufError:
        return None
    if t.type not in NAMES or t.segment or reader.mismatch(t):
        return None
    if t.location == 1 and (t.raw is not None or t.typed or t.single or not t.external):
        return None
    return t


def plan(path: str) -> list:
    """The tasks of the tensor(s) of an ONNX TensorProto (SequenceProto, OptionalProto) file:
    a tensor named by its `name` field; the i-th of a sequence NAME[i]."""
    buf = open_map(path)
    try:
        reader = TensorReader(path, buf, Budget(_FILE_MESSAGES))
        found = _strict(reader)
        if found is None:
            raise ReaderError("not a valid ONNX TensorProto")
        check_count(len(found))
        return [marker(path, "onnx")] + [reader.task(name, t) for name, t in found]
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
