"""ONNX models: every initializer, sparse initializer and Constant-style attribute tensor (in
subgraphs, functions and training_info graphs too), wherever its data lives: raw_data, typed
fields (float_data, double_data, int32_data) or external data files.

The model is walked at the protobuf wire level over a memory map, so tensor data is located by
file offset and never loaded; external data files are only stat'ed here. Every tensor's data size
is checked against its shape, integer ones too, before it is called "not applicable". The same
pass checks the rest of the message tree as protobuf's parser does (SCHEMA), so a model that
onnx.load refuses is never called clean.
"""

from __future__ import annotations

import mmap
import os
import stat

from . import ReaderError
from ..tasks import RAW, VARINT, Task, problem
from .layout import (check_count, elements, float_task, marker, not_applicable, packed_task,
                     unchecked)
from .protobuf import (I32, I64, LEN, MAX_DEPTH, PACKED_FIXED32 as F32, PACKED_FIXED64 as F64,
                       PACKED_VARINT as INTS, VARINT as WIRE_VARINT, ProtobufError, check_field,
                       fields, open_map, packed_varints, varint)

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
#: The wire type of one value of each typed field; one of another wire type is an unknown field.
TYPED_WIRE = {4: I32, 5: WIRE_VARINT, 6: LEN, 7: WIRE_VARINT, 10: I64, 11: WIRE_VARINT}

#: The ONNX schema at the wire level, from onnx 1.23's onnx-ml.proto (a test compares it with
#: the installed onnx): each message's sub-message fields (by message name) and repeated scalar
#: fields (by how a packed run of them is encoded). protobuf rejects a model where any of these
#: fails to parse, so the walker checks them all, also where no tensor can be (value_info,
#: metadata, shardings).
SCHEMA = {
    "ModelProto": {7: "GraphProto", 8: "OperatorSetIdProto", 14: "StringStringEntryProto",
                   20: "TrainingInfoProto", 25: "FunctionProto", 26: "DeviceConfigurationProto"},
    "GraphProto": {1: "NodeProto", 5: "TensorProto", 15: "SparseTensorProto",
                   11: "ValueInfoProto", 12: "ValueInfoProto", 13: "ValueInfoProto",
                   14: "TensorAnnotation", 16: "StringStringEntryProto"},
    "NodeProto": {5: "AttributeProto", 9: "StringStringEntryProto",
                  10: "NodeDeviceConfigurationProto"},
    "AttributeProto": {5: "TensorProto", 6: "GraphProto", 22: "SparseTensorProto",
                       14: "TypeProto", 10: "TensorProto", 11: "GraphProto",
                       23: "SparseTensorProto", 15: "TypeProto", 7: F32, 8: INTS},
    "ValueInfoProto": {2: "TypeProto", 4: "StringStringEntryProto"},
    "IntIntListEntryProto": {2: INTS},
    "NodeDeviceConfigurationProto": {2: "ShardingSpecProto"},
    "ShardingSpecProto": {2: INTS, 3: "IntIntListEntryProto", 4: "ShardedDimProto"},
    "ShardedDimProto": {2: "SimpleShardedDimProto"},
    "SimpleShardedDimProto": {},
    "TrainingInfoProto": {1: "GraphProto", 2: "GraphProto", 3: "StringStringEntryProto",
                          4: "StringStringEntryProto"},
    "DeviceConfigurationProto": {},
    "StringStringEntryProto": {},
    "TensorAnnotation": {2: "StringStringEntryProto"},
    "TensorProto": {1: INTS, 3: "TensorProto.Segment", 4: F32, 5: INTS, 7: INTS, 10: F64,
                    11: INTS, 13: "StringStringEntryProto", 16: "StringStringEntryProto"},
    "TensorProto.Segment": {},
    "SparseTensorProto": {1: "TensorProto", 2: "TensorProto", 3: INTS},
    "TensorShapeProto": {1: "TensorShapeProto.Dimension"},
    "TensorShapeProto.Dimension": {},
    "TypeProto": {1: "TypeProto.Tensor", 4: "TypeProto.Sequence", 5: "TypeProto.Map",
                  9: "TypeProto.Optional", 8: "TypeProto.SparseTensor", 7: "TypeProto.Opaque"},
    "TypeProto.Tensor": {2: "TensorShapeProto"},
    "TypeProto.Sequence": {1: "TypeProto"},
    "TypeProto.Map": {2: "TypeProto"},
    "TypeProto.Optional": {1: "TypeProto"},
    "TypeProto.SparseTensor": {2: "TensorShapeProto"},
    "TypeProto.Opaque": {},
    "OperatorSetIdProto": {},
    "FunctionProto": {11: "AttributeProto", 7: "NodeProto", 9: "OperatorSetIdProto",
                      12: "ValueInfoProto", 14: "StringStringEntryProto"},
}


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
    """One pass over the model: every tensor becomes a task, and every other sub-message and
    packed field is checked as protobuf would parse it (`depth`: a message's nesting level)."""

    def __init__(self, path, buf, tasks):
        self.path, self.buf, self.tasks = path, buf, tasks
        self.folder = os.path.dirname(path)
        self.real_folder = os.path.realpath(self.folder or ".")
        self.external_files: dict = {}
        self.shapes: dict = {}
        self.unnamed = 0

    def _check(self, message, number, a, b, depth):
        """ProtobufError unless field `number` of `message`, buf[a:b], is well-formed."""
        kind = SCHEMA[message].get(number)
        if kind is not None:
            check_field(self.buf, a, b, SCHEMA, kind, depth)

    def model(self):
        seen_graph = False
        for number, wire, _, a, b in fields(self.buf, 0, len(self.buf)):
            if wire != LEN:
                continue
            if number == 7:
                seen_graph = True
                self.graph(a, b, 1)
            elif number == 25:
                self.function(a, b, 1)
            elif number == 20:
                self.training_info(a, b, 1)
            else:
                self._check("ModelProto", number, a, b, 1)
        if not seen_graph:
            raise ReaderError("not an ONNX model: no graph")

    def training_info(self, start, end, depth):
        # TrainingInfoProto: initialization = 1 and algorithm = 2 are graphs with initializers.
        _nest(depth, start)
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number in (1, 2):
                self.graph(a, b, depth + 1)
            else:
                self._check("TrainingInfoProto", number, a, b, depth + 1)

    def graph(self, start, end, depth):
        _nest(depth, start)
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 5:
                self.tensor(a, b, "", depth + 1)
            elif number == 15:
                self.sparse(a, b, "", depth + 1)
            elif number == 1:
                self.node(a, b, depth + 1)
            else:
                self._check("GraphProto", number, a, b, depth + 1)

    def function(self, start, end, depth):
        _nest(depth, start)
        label, defaults = "", []
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 7:
                self.node(a, b, depth + 1)
            elif number == 1:
                label = self._text(a, b)
            elif number == 11:  # attribute_proto: the defaults of the function's attributes
                defaults.append((a, b))
            else:
                self._check("FunctionProto", number, a, b, depth + 1)
        for a, b in defaults:
            self.attribute(a, b, label, depth + 1)

    def node(self, start, end, depth):
        _nest(depth, start)
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
            else:
                self._check("NodeProto", number, a, b, depth + 1)
        for a, b in attributes:
            self.attribute(a, b, label, depth + 1)

    def attribute(self, start, end, node, depth):
        _nest(depth, start)
        name, found = "", []
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 1:
                name = self._text(a, b)
            elif number in (5, 10, 22, 23, 6, 11):
                found.append((number, a, b))
            else:
                self._check("AttributeProto", number, a, b, depth + 1)
        where = f"{node}:{name}"
        for number, a, b in found:
            if number in (5, 10):
                self.tensor(a, b, where, depth + 1)
            elif number in (22, 23):
                self.sparse(a, b, where, depth + 1)
            else:
                self.graph(a, b, depth + 1)

    def sparse(self, start, end, where, depth):
        _nest(depth, start)
        for number, wire, _, a, b in fields(self.buf, start, end):
            if wire != LEN:
                continue
            if number == 1:
                self.tensor(a, b, where or "sparse_initializer", depth + 1,
                            suffix=" (sparse values)")
            else:
                self._check("SparseTensorProto", number, a, b, depth + 1)

    def _text(self, a, b) -> str:
        return self.buf[a:b].decode("utf-8", "replace")

    def tensor(self, start, end, where, depth, suffix=""):
        check_count(len(self.tasks))
        try:
            t = self._read_tensor(start, end, depth)
        except ProtobufError as e:
            self.tasks.append(problem(self.path, f"malformed tensor in {where or 'graph'}: {e}"))
            return
        name = t.name or where
        if not name:
            self.unnamed += 1
            name = f"<unnamed tensor {self.unnamed}>"
        self.tasks.append(self._task(name + suffix, t))

    def _read_tensor(self, start, end, depth) -> _Tensor:
        _nest(depth, start)
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
            elif number == 3 and wire == LEN:
                t.segment = True
                check_field(buf, a, b, SCHEMA, "TensorProto.Segment", depth + 1)
            elif number == 8 and wire == LEN:
                t.name = self._text(a, b)
            elif number == 9 and wire == LEN:
                t.raw = (a, b)
            elif number in TYPED_WIRE:
                if wire == LEN and number != 6:   # a packed run of values
                    size = FIXED_SIZE.get(number)
                    if size and (b - a) % size:
                        raise ProtobufError(f"{TYPED[number]} holds {b - a} bytes, not whole "
                                            f"{size}-byte values")
                    count = (b - a) // size if size else packed_varints(buf, a, b)
                    t.typed.setdefault(number, []).append((wire, a, b, count))
                elif wire == TYPED_WIRE[number]:  # one value (else an unknown field)
                    t.typed.setdefault(number, []).append((wire, a, b, 1))
            elif number == 13 and wire == LEN:
                _nest(depth + 1, a)
                key = val = ""
                for n2, w2, _, a2, b2 in fields(buf, a, b):
                    if w2 == LEN and n2 == 1:
                        key = self._text(a2, b2)
                    elif w2 == LEN and n2 == 2:
                        val = self._text(a2, b2)
                t.external[key] = val
            elif number == 14 and wire == WIRE_VARINT:
                t.location = value
            elif wire == LEN:
                self._check("TensorProto", number, a, b, depth + 1)
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
                wire, offset, end, _ = t.typed[typed_field][0]
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
        if dtype in (14, 15):        # complex: real and imaginary part
            values = 2 * n
        elif bits in (2, 4):         # packed four or two to an int32_data value
            values = -(-n // (8 // bits))
        else:
            values = n
        count = sum(c for _, _, _, c in typed[field])
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


def _nest(depth: int, at: int) -> None:
    """ProtobufError for a message at nesting level `depth`, over protobuf's limit."""
    if depth > MAX_DEPTH:
        raise ProtobufError(f"messages nested over {MAX_DEPTH} deep at byte {at}")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v
