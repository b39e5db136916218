"""ONNX models: every initializer, sparse initializer and Constant-style attribute tensor (in
subgraphs, functions and training_info graphs too), wherever its data lives: raw_data, typed
fields (float_data, double_data, int32_data) or external data files.

The model is walked at the protobuf wire level over a memory map, so tensor data is located by
file offset and never loaded; external data files are only stat'ed here. Every tensor's data size
is checked against its shape, integer ones too, before it is called "not applicable".
"""

from __future__ import annotations

import mmap
import os
import stat
import numpy as np

from . import ReaderError
from ..tasks import RAW, VARINT, Task, problem
from .layout import (check_count, elements, float_task, marker, not_applicable, packed_task,
                     unchecked)
from .protobuf import I32, I64, LEN, VARINT as WIRE_VARINT, ProtobufError, fields, open_map, varint

#: ONNX data_type → (element dtype for the core, bits, typed field number); None: not a float.
FLOATS = {
    1: ("<f4", 32, 4), 10: ("<f2", 16, 5), 11: ("<f8", 64, 10), 14: ("<c8", 64, 4),
    15: ("<c16", 128, 10), 16: ("bfloat16", 16, 5), 17: ("float8_e4m3fn", 8, 5),
    18: ("float8_e4m3fnuz", 8, 5), 19: ("float8_e5m2", 8, 5), 20: ("float8_e5m2fnuz", 8, 5),
    23: ("float4_e2m1fn", 4, 5), 24: ("float8_e8m0fnu", 8, 5), 27: ("float6_e2m3fn", 6, 5),
    28: ("float6_e3m2fn", 6, 5),
}
#: ONNX data_type → (bits, typed field number) of the types that cannot hold NaN or Inf.
OTHERS = {2: (8, 5), 3: (8, 5), 4: (16, 5), 5: (16, 5), 6: (32, 5), 7: (64, 7), 9: (8, 5),
          12: (32, 11), 13: (64, 11), 21: (4, 5), 22: (4, 5), 25: (2, 5), 26: (2, 5)}
STRING = 8
NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
         8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
         14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN",
         18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
         23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2", 27: "FLOAT6E2M3",
         28: "FLOAT6E3M2"}
#: TensorProto typed fields by number; the fixed-size ones with their bytes per value (the others
#: are varints).
TYPED = {4: "float_data", 5: "int32_data", 6: "string_data", 7: "int64_data", 10: "double_data",
         11: "uint64_data"}
FIXED_SIZE = {4: 4, 10: 8}
_MAX_DEPTH = 64


def plan(path: str) -> list:
    """Tasks for every tensor stored in the model at `path`."""
    buf = open_map(path)
    try:
        tasks = [marker(path, "onnx")]
        _Walker(path, buf, tasks).model()
        return tasks
    except ProtobufError as e:
        raise ReaderError(f"not a valid ONNX model: {e}") from None
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


class _Tensor:
    """The fields of one TensorProto that say where its data is: value ranges of the file."""

    __slots__ = ("dims", "type", "name", "raw", "typed", "external", "location", "segment")

    def __init__(self):
        self.dims, self.type, self.name, self.raw = [], 0, "", None
        self.typed, self.external, self.location, self.segment = {}, {}, 0, False


class _Walker:
    def __init__(self, path, buf, tasks):
        self.path, self.buf, self.tasks = path, buf, tasks
        self.folder = os.path.dirname(path)
        self.real_folder = os.path.realpath(self.folder or ".")
        self.external_files: dict = {}
        self.shapes: dict = {}
        self.unnamed = 0

    def model(self):
        seen_graph = False
        for number, wire, _, a, b in fields(self.buf, 0, len(self.buf)):
            if wire != LEN:
                continue
            if number == 7:
                seen_graph = True
                self.graph(a, b, 0)
            elif number == 25:
                self.function(a, b, 0)
            elif number == 20:
                self.training_info(a, b)
        if not seen_graph:
            raise ReaderError("not an ONNX model: no graph")

    def training_info(self, start, end):
        # TrainingInfoProto: initialization = 1 and algorithm = 2 are graphs with initializers.
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire == LEN and number in (1, 2):
                self.graph(a, b, 0)

    def graph(self, start, end, depth):
        if depth > _MAX_DEPTH:
            raise ProtobufError("subgraphs nested too deeply")
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 5:
                self.tensor(a, b, "")
            elif number == 15:
                self.sparse(a, b, "")
            elif number == 1:
                self.node(a, b, depth)

    def function(self, start, end, depth):
        label, defaults = "", []
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 7:
                self.node(a, b, depth)
            elif number == 1:
                label = self._text(a, b)
            elif number == 11:  # attribute_proto: the defaults of the function's attributes
                defaults.append((a, b))
        for a, b in defaults:
            self.attribute(a, b, label, depth)

    def node(self, start, end, depth):
        label, attributes = "", []
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 3 or (number == 4 and not label):
                label = self._text(a, b)
            elif number == 2 and not label:
                label = self._text(a, b)
            elif number == 5:
                attributes.append((a, b))
        for a, b in attributes:
            self.attribute(a, b, label, depth)

    def attribute(self, start, end, node, depth):
        name, found = "", []
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 1:
                name = self._text(a, b)
            elif number in (5, 10, 22, 23, 6, 11):
                found.append((number, a, b))
        where = f"{node}:{name}"
        for number, a, b in found:
            if number in (5, 10):
                self.tensor(a, b, where)
            elif number in (22, 23):
                self.sparse(a, b, where)
            else:
                self.graph(a, b, depth + 1)

    def sparse(self, start, end, where):
        for number, wire, _, a, b in fields(self.buf, start, end):
            if number == 1 and wire == LEN:
                self.tensor(a, b, where or "sparse_initializer", suffix=" (sparse values)")

    def _text(self, a, b) -> str:
        return self.buf[a:b].decode("utf-8", "replace")

    def tensor(self, start, end, where, suffix=""):
        check_count(len(self.tasks))
        try:
            t = self._read_tensor(start, end)
        except ProtobufError as e:
            self.tasks.append(problem(self.path, f"malformed tensor in {where or 'graph'}: {e}"))
            return
        name = t.name or where
        if not name:
            self.unnamed += 1
            name = f"<unnamed tensor {self.unnamed}>"
        self.tasks.append(self._task(name + suffix, t))

    def _read_tensor(self, start, end) -> _Tensor:
        buf, t = self.buf, _Tensor()
        for number, wire, value, a, b in fields(buf, start, end):
            if number == 1:
                if wire == WIRE_VARINT:
                    t.dims.append(_signed(value))
                elif wire == LEN:
                    pos = a
                    while pos < b:
                        v, pos = varint(buf, pos, b)
                        t.dims.append(_signed(v))
            elif number == 2 and wire == WIRE_VARINT:
                t.type = value
            elif number == 3:
                t.segment = True
            elif number == 8 and wire == LEN:
                t.name = self._text(a, b)
            elif number == 9 and wire == LEN:
                t.raw = (a, b)
            elif number in (4, 5, 6, 7, 10, 11):
                t.typed.setdefault(number, []).append((wire, a, b))
            elif number == 13 and wire == LEN:
                key = val = ""
                for n2, w2, _, a2, b2 in fields(buf, a, b):
                    if w2 == LEN and n2 == 1:
                        key = self._text(a2, b2)
                    elif w2 == LEN and n2 == 2:
                        val = self._text(a2, b2)
                t.external[key] = val
            elif number == 14 and wire == WIRE_VARINT:
                t.location = value
        return t

    def _task(self, name, t: _Tensor) -> Task:
        path, dtype = self.path, t.type
        label = NAMES.get(dtype, f"data_type {dtype}")
        if any(d < 0 for d in t.dims):
            return unchecked(path, name, label, (), f"negative dimension in {t.dims}")
        shape = tuple(t.dims)
        shape = self.shapes.setdefault(shape, shape)
        if t.segment:
            return unchecked(path, name, label, shape, "segmented tensors are not supported")
        n = elements(shape)
        if dtype == STRING:
            strings = len(t.typed.get(6, ()))
            if strings != n and t.location != 1:
                return unchecked(path, name, label, shape, f"string_data holds {strings} "
                                 f"strings, shape {list(shape)} needs {n}")
            return not_applicable(path, name, label, shape)
        if dtype in FLOATS:
            element, bits, typed_field = FLOATS[dtype]
        elif dtype in OTHERS:
            element, (bits, typed_field) = None, OTHERS[dtype]
        else:
            return unchecked(path, name, label, shape, f"unknown ONNX data_type {dtype}")
        need = (n * bits + 7) // 8
        source, offset, storage = path, 0, RAW
        if t.location == 1:
            found = self._external(t.external, label, shape, need)
            if isinstance(found, str):
                return unchecked(path, name, label, shape, found)
            source, offset = found
        elif t.raw is not None:
            offset, end = t.raw
            if end - offset != need:
                return unchecked(path, name, label, shape, f"raw_data holds {end - offset} bytes, "
                                 f"{label} shape {list(shape)} needs {need}")
        elif t.typed:
            why = self._typed_count_mismatch(t.typed, typed_field, dtype, bits, n, label, shape)
            if why:
                return unchecked(path, name, label, shape, why)
            if element is not None and bits >= 8:
                wire, offset, end = t.typed[typed_field][0]
                if len(t.typed[typed_field]) != 1 or wire != LEN:
                    return unchecked(path, name, label, shape, "typed data is not one packed "
                                     "field (unpacked or split fields are not supported)")
                if typed_field == 5:
                    storage, need = VARINT, end - offset
        elif n:
            return unchecked(path, name, label, shape, "no data for the tensor")
        if element is None:
            return not_applicable(path, name, label, shape)
        if bits < 8:
            return packed_task(path, name, label, shape, element)
        return float_task(path, name, label, shape, element, source=source, offset=offset,
                          nbytes=need, storage=storage)

    def _typed_count_mismatch(self, typed, field, dtype, bits, n, label, shape) -> str:
        """Why the typed data of a tensor does not hold its `n` elements ("" when it does)."""
        wrong = next((f for f in typed if f != field), None)
        if wrong is not None:
            return f"data in {TYPED[wrong]}, which {label} does not use"
        size = FIXED_SIZE.get(field, 0)
        if dtype in (14, 15):        # complex: real and imaginary part
            values = 2 * n
        elif bits in (2, 4):         # packed four or two to an int32_data value
            values = -(-n // (8 // bits))
        else:
            values = n
        count = 0
        for wire, a, b in typed[field]:
            if wire == LEN and size:
                if (b - a) % size:
                    return f"{TYPED[field]} holds {b - a} bytes, not whole {size}-byte values"
                count += (b - a) // size
            elif wire == LEN and b > a:
                run = np.frombuffer(self.buf, np.uint8, b - a, a)
                if run[-1] & 0x80:
                    return f"{TYPED[field]} ends in the middle of a value"
                count += int(np.count_nonzero(run < 0x80))   # the last byte of each varint
            elif wire in (WIRE_VARINT, I32, I64):
                count += 1
        if count != values:
            return (f"{TYPED[field]} holds {count} values, {label} shape {list(shape)} needs "
                    f"{values}")
        return ""

    def _external(self, ext, label, shape, need):
        """(file, offset) of a tensor's external data, or the reason it cannot be read."""
        loc = ext.get("location", "")
        if not loc:
            return "external data without a location"
        if os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            return f"external data location {loc!r} leaves the model's directory"
        try:
            offset = int(ext.get("offset", "0") or 0)
            length = int(ext["length"]) if ext.get("length") else None
        except ValueError:
            return f"external data offset/length not integers: {ext}"
        found = self.external_files.get(loc)
        if found is None:
            found = self.external_files[loc] = self._external_file(loc)
        if isinstance(found, str):
            return found
        full, size = found
        if length is not None and length != need:
            return f"external data length {length}, {label} shape {list(shape)} needs {need} bytes"
        if offset < 0 or offset + need > size:
            return (f"external data [{offset}, {offset + need}) lies outside {loc} ({size} bytes; "
                    "truncated?)")
        return full, offset

    def _external_file(self, loc):
        """(real path, size) of external data file `loc`, or the reason it cannot be read. As
        onnx does, the file must resolve (symbolic links followed) inside the model's folder."""
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
