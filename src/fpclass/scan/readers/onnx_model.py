"""ONNX models: every initializer, sparse initializer and float-valued attribute (FLOAT, FLOATS,
TENSOR, TENSORS, SPARSE_TENSOR, SPARSE_TENSORS), in subgraphs, functions and training_info
graphs too, wherever its data lives: raw_data, typed fields (float_data, double_data, int32_data)
or external data files. A `.pb` file that is strictly a TensorProto, or a sequence of them
(ONNX's test data), is read by `onnx_tensor` instead.

The model is walked at the protobuf wire level over a memory map, so tensor data is located by
file offset and never loaded; external data files are only stat'ed here. Every tensor's data size
is checked against its shape, integer ones too, before it is called "not applicable". The same
pass checks the rest of the message tree as protobuf's parser does (SCHEMA), so a model that
onnx.load refuses is never called clean. Messages wait on an explicit stack (no recursion per
level of nesting), in the order of the file, and nesting past protobuf's limit is refused.

Attribute values are named NODE@ATTRIBUTE (TENSORS and SPARSE_TENSORS: NODE@ATTRIBUTE[i]),
NODE being the node's name, else its first output, else its op_type; inside a model-local
function FUNCTION/NODE@ATTRIBUTE, and a function's attribute defaults FUNCTION@ATTRIBUTE.
"""

from __future__ import annotations

import mmap

import numpy as np

from . import ReaderError
from ..storage.ranges import Range
from ..tasks import problem
from .bounds import check_count
from .reporting import float_task, marker, values_task
from .onnx_schema import SCHEMA
from .onnx_tensor import TensorReader, is_tensor_file, plan as plan_tensor
from .protobuf import (I32, LEN, MAX_DEPTH, RUN32, Budget, ProtobufError, TooManyMessages,
                       check_field, fields, open_map)

#: Characters of a node or function name kept in the names of its attributes' values (a value's
#: name repeats it, and a node may have many attributes).
NAME_CHARS = 200
#: Most messages (graphs, nodes, attributes, tensors, types, ...) and pieces of tensor data one
#: model may hold: each costs the walk 1 to 2 us, so a model of at most 64 MB is walked within
#: 10 s (real models hold a few hundred thousand; one of millions of tiny messages is refused).
MAX_MESSAGES = 2_000_000
#: Attributes of a node held while its name is looked for (the walk's memory stays as its depth).
ATTRIBUTES_HELD = 64


def plan(path: str) -> list:
    """Tasks for every tensor and float attribute stored in the model at `path` (or the
    tensors of a TensorProto `.pb` file)."""
    if path.lower().endswith(".pb") and is_tensor_file(path):
        return plan_tensor(path)
    buf = open_map(path)
    try:
        tasks = [marker(path, "onnx")]
        _Walker(path, buf, tasks).run()
        return tasks
    except TooManyMessages as e:
        raise ReaderError(f"the model holds {e}") from None
    except ProtobufError as e:
        raise ReaderError(f"not a valid ONNX model: {e}") from None
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS] + "…"


class _Walker:
    """One pass over the model: every tensor and float attribute becomes a task, and every
    other sub-message and packed field is checked as protobuf would parse it. Each message
    being read is a generator on an explicit stack: it reads its fields and yields the
    sub-messages to visit, (handler, byte ranges, nesting depth, context), in file order (the
    handlers of leaves, tensors, return None). Byte ranges are an iterable: a singular field
    given many times is merged by protobuf, so read as the pieces found by going over its
    parent's fields again (never held in a list)."""

    def __init__(self, path, buf, tasks):
        self.path, self.buf, self.tasks = path, buf, tasks
        self.budget = Budget(MAX_MESSAGES)
        self.tensors = TensorReader(path, buf, self.budget)
        self.text = self.tensors.text
        self.unnamed = 0

    def run(self):
        stack = [self.model(((0, len(self.buf)),), 0, None)]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                continue
            handler, ranges, depth, context = child
            if depth > MAX_DEPTH:
                raise ProtobufError(f"messages nested over {MAX_DEPTH} deep")
            self.budget.spend()
            children = handler(ranges, depth, context)
            if children is not None:   # None: a leaf (a tensor)
                stack.append(children)

    def _check(self, message, number, a, b, depth):
        """ProtobufError unless field `number` of `message`, buf[a:b], is well-formed."""
        kind = SCHEMA[message].get(number)
        if kind is not None:
            self.budget.spend()
            check_field(self.buf, a, b, SCHEMA, kind, depth, self.budget)

    def _fields(self, ranges):
        """The fields of the message in `ranges`; runs of unpacked floats as one (RUN32)."""
        if type(ranges) is tuple and len(ranges) == 1:
            start, end = ranges[0]
            return fields(self.buf, start, end, runs=True)
        return (f for start, end in ranges for f in fields(self.buf, start, end, runs=True))

    def _pieces(self, ranges, number):
        """The byte ranges of every length-delimited field `number` of the message `ranges`,
        found anew each time they are iterated."""
        return _Field(self, ranges, number)

    def model(self, ranges, depth, _):
        seen_graph = False
        handlers = {7: self.graph, 25: self.function, 20: self.training_info}
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            handler = handlers.get(number)
            if handler is not None:
                seen_graph = seen_graph or number == 7
                yield handler, ((a, b),), depth + 1, ""
            else:
                self._check("ModelProto", number, a, b, depth + 1)
        if not seen_graph:
            raise ReaderError("not an ONNX model: no graph")

    def training_info(self, ranges, depth, _):
        # TrainingInfoProto: initialization = 1 and algorithm = 2 are graphs with initializers.
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            if number in (1, 2):
                yield self.graph, ((a, b),), depth + 1, ""
            else:
                self._check("TrainingInfoProto", number, a, b, depth + 1)

    def graph(self, ranges, depth, prefix):
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            if number == 5:
                yield self.tensor, ((a, b),), depth + 1, None
            elif number == 15:
                yield self.sparse, ((a, b),), depth + 1, None
            elif number == 1:
                yield self.node, ((a, b),), depth + 1, prefix
            else:
                self._check("GraphProto", number, a, b, depth + 1)

    def function(self, ranges, depth, _):
        label = ""
        for number, wire, _, a, b in self._fields(ranges):   # first its name
            if number == 1 and wire == LEN:
                label = _short(self.text(a, b))
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            if number == 7:
                yield self.node, ((a, b),), depth + 1, label + "/"
            elif number == 11:  # attribute_proto: the defaults of the function's attributes
                yield self.attribute, ((a, b),), depth + 1, (label + "/", label)
            elif number != 1:
                self._check("FunctionProto", number, a, b, depth + 1)

    def node(self, ranges, depth, prefix):
        """Its attributes, named after the node: its name is read first, holding the first
        ATTRIBUTES_HELD attributes (a node with more has its fields read a second time)."""
        name = output = op_type = ""
        held, many = [], False
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            if number == 3:
                name = self.text(a, b)
            elif number == 2 and not output:
                output = self.text(a, b)
            elif number == 4:
                op_type = self.text(a, b)
            elif number == 5:
                many = many or len(held) == ATTRIBUTES_HELD
                if not many:
                    held.append((a, b))
            else:
                self._check("NodeProto", number, a, b, depth + 1)
        context = (prefix, prefix + _short(name or output or op_type or "<unnamed node>"))
        if many:
            held = self._pieces(ranges, 5)
        for r in held:
            yield self.attribute, (r,), depth + 1, context

    def attribute(self, ranges, depth, context):
        """The values of one AttributeProto, whatever its `type` says (a value stored in a field
        its type does not select is checked too). A singular field given twice is merged, as
        protobuf merges it: the last FLOAT wins, the pieces of a TENSOR make one tensor.
        `context`: (the prefix of names in its scope, the name of its node or function)."""
        prefix, label = context
        name, f, floats = "", None, None
        t = sparse = None     # the range of the first piece, or its count past the first
        subs = False          # any TENSORS, SPARSE_TENSORS, GRAPH, GRAPHS
        for number, wire, value, a, b in self._fields(ranges):
            if number == 2 and wire in (I32, RUN32):   # the last one counts
                f = b - 4
            elif number == 7 and wire in (I32, LEN, RUN32):
                floats = floats or _Pieces()
                if wire == RUN32:
                    floats.add_run(self.buf, a, b, value)
                    continue
                if (b - a) % 4:
                    raise ProtobufError(f"packed field of {b - a} bytes at byte {a} is not "
                                        "whole 4-byte values")
                floats.add(self.buf, a, b)
            elif wire != LEN:
                continue
            elif number == 1:
                name = self.text(a, b)
            elif number == 5:
                t = ((a, b),) if t is None else 2
            elif number == 22:
                sparse = ((a, b),) if sparse is None else 2
            elif number in (6, 10, 11, 23):
                subs = True
            else:
                self._check("AttributeProto", number, a, b, depth + 1)
        where = f"{label}@{name}"
        if f is not None:
            check_count(len(self.tasks))
            self.tasks.append(float_task(self.path, where, "FLOAT", (), "<f4",
                                         Range(self.path, f, 4)))
        if floats is not None:
            check_count(len(self.tasks))
            self.tasks.append(floats.task(self.path, where))
        if t is not None:   # pieces of one tensor, merged
            yield self.tensor, t if t != 2 else self._pieces(ranges, 5), depth + 1, where
        if sparse is not None:
            yield (self.sparse, sparse if sparse != 2 else self._pieces(ranges, 22), depth + 1,
                   where)
        if not subs:
            return
        tensors = sparse_list = 0
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            if number == 10:
                yield self.tensor, ((a, b),), depth + 1, f"{where}[{tensors}]"
                tensors += 1
            elif number == 23:
                yield self.sparse, ((a, b),), depth + 1, f"{where}[{sparse_list}]"
                sparse_list += 1
            elif number in (6, 11):
                yield self.graph, ((a, b),), depth + 1, prefix

    def sparse(self, ranges, depth, where):
        values = False
        for number, wire, _, a, b in self._fields(ranges):
            if wire != LEN:
                continue
            if number == 1:
                values = True
            else:
                self._check("SparseTensorProto", number, a, b, depth + 1)
        if values:
            self._tensor(self._pieces(ranges, 1), depth + 1, where, "sparse_initializer",
                         " (sparse values)")

    def tensor(self, ranges, depth, where):
        self._tensor(ranges, depth, where, "", "")

    def _tensor(self, ranges, depth, where, fallback, suffix):
        """A task for the tensor in `ranges`: named `where` (an attribute's value), else by its
        own name, else `fallback`, else "<unnamed tensor N>"; `suffix` added."""
        check_count(len(self.tasks))
        try:
            t = self.tensors.read(ranges, depth)
        except TooManyMessages:
            raise
        except ProtobufError as e:
            self.tasks.append(problem(self.path, f"malformed tensor in {where or 'graph'}: {e}"))
            return
        name = where or t.name or fallback
        if not name:
            self.unnamed += 1
            name = f"<unnamed tensor {self.unnamed}>"
        self.tasks.append(self.tensors.task(name + suffix, t))


class _Field:
    """The byte ranges of field `number` of a message (`ranges`): an iterable that can be gone
    over more than once, each time reading the message's fields again."""

    __slots__ = ("walker", "ranges", "number")

    def __init__(self, walker, ranges, number):
        self.walker, self.ranges, self.number = walker, ranges, number

    def __iter__(self):
        for n, wire, _, a, b in self.walker._fields(self.ranges):
            if n == self.number and wire == LEN:
                yield a, b


class _Pieces:
    """The float32 values of a FLOATS attribute, given in pieces (packed runs, or one value per
    field as onnx writes them): the byte range of the first piece while it is the only packed
    one; the bytes of all once there are more, or values one per field."""

    def __init__(self):
        self.first, self.data = None, None

    def add(self, buf, a, b):
        if self.first is None and self.data is None:
            self.first = (a, b)
            return
        self._copy(buf)
        self.data += buf[a:b]

    def add_run(self, buf, a, b, count):
        """`count` fields of one value each in buf[a:b], evenly spaced, each value last."""
        self._copy(buf)
        step = (b - a) // count
        rows = np.frombuffer(buf, np.uint8, b - a, a).reshape(count, step)
        self.data += rows[:, step - 4:].tobytes()
        del rows   # no view of the memory map may outlive the walk

    def _copy(self, buf):
        if self.data is None:
            self.data = bytearray(buf[self.first[0]:self.first[1]] if self.first else b"")

    def task(self, path, name):
        """Values in one contiguous little-endian run are read in the file; the others are
        checked from their copy."""
        if self.data is None:
            a, b = self.first
            return float_task(path, name, "FLOAT", ((b - a) // 4,), "<f4",
                              Range(path, a, b - a))
        return values_task(path, name, np.frombuffer(bytes(self.data), "<f4"), "FLOAT")
