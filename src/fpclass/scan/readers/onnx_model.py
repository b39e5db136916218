"""ONNX models: every initializer, sparse initializer and Constant-style attribute tensor (in
subgraphs and functions too), wherever its data lives: raw_data, typed fields (float_data,
double_data, int32_data) or external data files.

The model is walked at the protobuf wire level over a memory map, so tensor data is located by
file offset and never loaded; external data files are only stat'ed here.
"""

from __future__ import annotations

import mmap
import os

from . import ReaderError
from ..tasks import RAW, VARINT, Task, problem
from .layout import elements, float_task, marker, not_applicable, packed_task, unchecked
from .protobuf import LEN, VARINT as WIRE_VARINT, ProtobufError, fields, open_map

#: ONNX data_type → (element dtype for the core, bits, typed field number); None: not a float.
FLOATS = {
    1: ("<f4", 32, 4), 10: ("<f2", 16, 5), 11: ("<f8", 64, 10), 14: ("<c8", 64, 4),
    15: ("<c16", 128, 10), 16: ("bfloat16", 16, 5), 17: ("float8_e4m3fn", 8, 5),
    18: ("float8_e4m3fnuz", 8, 5), 19: ("float8_e5m2", 8, 5), 20: ("float8_e5m2fnuz", 8, 5),
    23: ("float4_e2m1fn", 4, 5), 24: ("float8_e8m0fnu", 8, 5), 27: ("float6_e2m3fn", 6, 5),
    28: ("float6_e3m2fn", 6, 5),
}
NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
         8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
         14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN",
         18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
         23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2", 27: "FLOAT6E2M3",
         28: "FLOAT6E3M2"}
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


class _Walker:
    def __init__(self, path, buf, tasks):
        self.path, self.buf, self.tasks = path, buf, tasks
        self.unnamed = 0

    def model(self):
        seen_graph = False
        for number, wire, _, a, b in fields(self.buf, 0, len(self.buf)):
            if number == 7 and wire == LEN:
                seen_graph = True
                self.graph(a, b, 0)
            elif number == 25 and wire == LEN:
                self.function(a, b, 0)
        if not seen_graph:
            raise ReaderError("not an ONNX model: no graph")

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
        for number, wire, _, a, b in fields(self.buf, start, end):
            if number == 7 and wire == LEN:
                self.node(a, b, depth)

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
        return bytes(self.buf[a:b]).decode("utf-8", "replace")

    def tensor(self, start, end, where, suffix=""):
        t = {"dims": [], "type": 0, "name": "", "raw": None, "typed": {}, "external": {},
             "location": 0, "segment": False}
        try:
            self._read_tensor(start, end, t)
        except ProtobufError as e:
            self.tasks.append(problem(self.path, f"malformed tensor in {where or 'graph'}: {e}"))
            return
        name = t["name"] or where
        if not name:
            self.unnamed += 1
            name = f"<unnamed tensor {self.unnamed}>"
        self.tasks.append(self._task(name + suffix, t))

    def _read_tensor(self, start, end, t):
        buf = self.buf
        for number, wire, value, a, b in fields(buf, start, end):
            if number == 1:
                if wire == WIRE_VARINT:
                    t["dims"].append(_signed(value))
                elif wire == LEN:
                    pos = a
                    while pos < b:
                        v, pos = _varint(buf, pos, b)
                        t["dims"].append(_signed(v))
            elif number == 2 and wire == WIRE_VARINT:
                t["type"] = value
            elif number == 3:
                t["segment"] = True
            elif number == 8 and wire == LEN:
                t["name"] = self._text(a, b)
            elif number == 9 and wire == LEN:
                t["raw"] = (a, b)
            elif number in (4, 5, 6, 7, 10, 11):
                t["typed"].setdefault(number, []).append((wire, a, b))
            elif number == 13 and wire == LEN:
                key = val = ""
                for n2, w2, _, a2, b2 in fields(buf, a, b):
                    if w2 == LEN and n2 == 1:
                        key = self._text(a2, b2)
                    elif w2 == LEN and n2 == 2:
                        val = self._text(a2, b2)
                t["external"][key] = val
            elif number == 14 and wire == WIRE_VARINT:
                t["location"] = value

    def _task(self, name, t) -> Task:
        path, dtype = self.path, t["type"]
        label = NAMES.get(dtype, f"data_type {dtype}")
        dims = t["dims"]
        if any(d < 0 for d in dims):
            return unchecked(path, name, label, (), f"negative dimension in {dims}")
        shape = tuple(dims)
        if t["segment"]:
            return unchecked(path, name, label, shape, "segmented tensors are not supported")
        if dtype not in FLOATS:
            if dtype in NAMES:
                return not_applicable(path, name, label, shape)
            return unchecked(path, name, label, shape, f"unknown ONNX data_type {dtype}")
        element, bits, typed_field = FLOATS[dtype]
        n = elements(shape)
        need = (n * bits + 7) // 8
        if t["location"] == 1:
            return self._external(name, label, shape, element, bits, need, t["external"])
        if t["raw"] is not None:
            a, b = t["raw"]
            if bits < 8:
                return packed_task(path, name, label, shape, element)
            if b - a != need:
                return unchecked(path, name, label, shape, f"raw_data holds {b - a} bytes, "
                                 f"{label} shape {list(shape)} needs {need}")
            return float_task(path, name, label, shape, element, source=path, offset=a, nbytes=need)
        typed = t["typed"]
        if n == 0 and not typed:
            return float_task(path, name, label, shape, element, source=path, offset=0, nbytes=0)
        if bits < 8:
            return packed_task(path, name, label, shape, element)
        wrong = [f for f in typed if f != typed_field]
        if wrong or typed_field not in typed:
            return unchecked(path, name, label, shape, "no data for the tensor (or data in a typed "
                             f"field that {label} does not use)")
        pieces = typed[typed_field]
        if len(pieces) != 1 or pieces[0][0] != LEN:
            return unchecked(path, name, label, shape, "typed data is not one packed field "
                             "(unpacked or split fields are not supported)")
        _, a, b = pieces[0]
        if typed_field == 5:
            task = float_task(path, name, label, shape, element, source=path, offset=a, nbytes=b - a)
            from dataclasses import replace
            return replace(task, storage=VARINT)
        if b - a != need:
            return unchecked(path, name, label, shape, f"typed field holds {b - a} bytes, "
                             f"{label} shape {list(shape)} needs {need}")
        return float_task(path, name, label, shape, element, source=path, offset=a, nbytes=need)

    def _external(self, name, label, shape, element, bits, need, ext):
        path = self.path
        loc = ext.get("location", "")
        if not loc:
            return unchecked(path, name, label, shape, "external data without a location")
        if os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            return unchecked(path, name, label, shape,
                             f"external data location {loc!r} leaves the model's directory")
        try:
            offset = int(ext.get("offset", "0") or 0)
            length = int(ext["length"]) if ext.get("length") else None
        except ValueError:
            return unchecked(path, name, label, shape, f"external data offset/length not integers: {ext}")
        full = os.path.join(os.path.dirname(path), loc)
        try:
            size = os.stat(full).st_size
        except OSError as e:
            return unchecked(path, name, label, shape, f"external data file {loc}: {e.strerror}")
        if length is not None and length != need and bits >= 8:
            return unchecked(path, name, label, shape, f"external data length {length}, "
                             f"{label} shape {list(shape)} needs {need} bytes")
        if offset < 0 or offset + need > size:
            return unchecked(path, name, label, shape, f"external data [{offset}, {offset + need}) "
                             f"lies outside {loc} ({size} bytes; truncated?)")
        if bits < 8:
            return packed_task(path, name, label, shape, element)
        return float_task(path, name, label, shape, element, source=full, offset=offset,
                          nbytes=need, storage=RAW)


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _varint(buf, pos, end):
    from .protobuf import varint
    return varint(buf, pos, end)
