"""Structural mutations of ONNX models: semantic edits through the onnx protobuf classes (valid
wire format, odd content), and wire-level edits on a field tree (lengths, duplicates, packing,
wire types)."""

from __future__ import annotations

import math
import struct

import numpy as np

from fuzz_seeds_core import INF, MAIN, NAN, ONNX_DATA


def onnx_tensor_protos(model):
    """Every TensorProto in the model (graphs, subgraphs, attributes, sparse, functions,
    training info), as (owner description, TensorProto)."""
    out = []

    def graph(g, where):
        for n in g.node:
            node(n, where)
        out.extend((f"{where}initializer", t) for t in g.initializer)
        out.extend((f"{where}sparse", s.values) for s in g.sparse_initializer)

    def node(n, where):
        for a in n.attribute:
            if a.HasField("t"):
                out.append((f"{where}attr", a.t))
            out.extend((f"{where}attr", t) for t in a.tensors)
            if a.HasField("sparse_tensor"):
                out.append((f"{where}attr sparse", a.sparse_tensor.values))
            if a.HasField("g"):
                graph(a.g, where + "sub ")
            for g in a.graphs:
                graph(g, where + "sub ")

    graph(model.graph, "")
    for f in model.functions:
        for n in f.node:
            node(n, "function ")
    for ti in model.training_info:
        graph(ti.initialization, "training ")
        graph(ti.algorithm, "training ")
    return out


def m_onnx_tensor(rng, files, fmt):
    import onnx
    from onnx import TensorProto
    model = onnx.ModelProto.FromString(files[MAIN[fmt]])
    tensors = onnx_tensor_protos(model)
    if not tensors:
        return "onnx_tensor: no tensors"
    where, t = rng.choice(tensors)
    kind = rng.choice(["dims", "dims", "type", "type", "raw", "typed", "external", "external",
                       "location", "segment", "name"])
    what = f"{where} {t.name!r} {kind}"
    if kind == "dims":
        dims = list(t.dims)
        n = math.prod(dims)
        new = rng.choice([[], [0], dims + [1], dims[:-1], [n + 1], [-1], [-n], [2 ** 62],
                          [2 ** 31, 2 ** 31], dims[::-1], [0, 2 ** 62], [1] + dims])
        del t.dims[:]
        t.dims.extend(new)
        what += f" -> {new}"
    elif kind == "type":
        t.data_type = rng.choice([0, 1, 2, 7, 8, 9, 10, 11, 14, 15, 16, 17, 19, 21, 23, 24, 27,
                                  28, 40, 99])
        what += f" -> {t.data_type}"
    elif kind == "raw":
        raw = t.raw_data
        t.raw_data = rng.choice([raw[:-1], raw + b"\0", b"", raw + raw, struct.pack("<f", NAN) * 2,
                                 raw[:len(raw) // 2]])
        what += f" -> {len(t.raw_data)} bytes"
    elif kind == "typed":
        choice = rng.randrange(5)
        if choice == 0:
            t.float_data.append(NAN)
        elif choice == 1 and len(t.float_data):
            t.float_data.pop()
        elif choice == 2:
            t.int32_data.extend([0x7E00, 70000])
        elif choice == 3:
            t.double_data.append(-INF)
        else:
            t.float_data.extend([1.0, 2.0])
            t.ClearField("raw_data")
        what += f" #{choice}"
    elif kind == "external":
        if not t.external_data:
            t.data_location = TensorProto.EXTERNAL
        entries = {e.key: e for e in t.external_data}
        key = rng.choice(["location", "offset", "length", "checksum"])
        value = {"location": rng.choice(["../x.data", "/etc/hostname", "missing.data", "",
                                          ONNX_DATA, "./" + ONNX_DATA, "sub/../" + ONNX_DATA,
                                          MAIN["onnx"]]),
                 "offset": rng.choice(["-4", "abc", "4", "1", str(2 ** 40), "0", " 8", "1e3"]),
                 "length": rng.choice(["0", "1", "-1", "abc", str(2 ** 40), "64", "4"]),
                 "checksum": "0"}[key]
        if key in entries:
            entries[key].value = value
        else:
            t.external_data.add(key=key, value=value)
        what += f" {key}={value!r}"
    elif kind == "location":
        t.data_location = rng.choice([0, 1, 2])
        what += f" -> {t.data_location}"
    elif kind == "segment":
        t.segment.begin, t.segment.end = 0, 1
    else:
        t.name = rng.choice(["", "W", "B", t.name + "_", "\u00e9"])
        what += f" -> {t.name!r}"
    files[MAIN[fmt]] = model.SerializeToString()
    return f"onnx_tensor: {what}"


def m_onnx_model(rng, files, fmt):
    """Tensors added or moved: duplicate initializers, training info, attributes, functions."""
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.ModelProto.FromString(files[MAIN[fmt]])
    g = model.graph
    kind = rng.choice(["training", "training", "dup_init", "tensors_attr", "sparse_attr",
                       "function", "deep", "clear_inits"])
    bad = numpy_helper.from_array(np.array([1.0, NAN, -INF], np.float32), "T")
    if kind == "training":
        ti = model.training_info.add()
        if len(g.initializer) and rng.random() < 0.5:
            t = g.initializer.pop(rng.randrange(len(g.initializer)))
            ti.initialization.initializer.append(t)
        else:
            ti.initialization.initializer.append(bad)
        ti.initialization.name = "init"
    elif kind == "dup_init":
        if len(g.initializer):
            t = onnx.TensorProto()
            t.CopyFrom(rng.choice(list(g.initializer)))
            if t.raw_data:
                t.raw_data = bytes(len(t.raw_data))
            g.initializer.append(t)
        else:
            g.initializer.extend([bad, bad])
    elif kind == "tensors_attr":
        g.node.add().CopyFrom(helper.make_node("Custom", [], ["z"], domain="fuzz", ts=[bad, bad]))
    elif kind == "sparse_attr":
        sp = helper.make_sparse_tensor(bad, numpy_helper.from_array(np.array([0, 1, 2], np.int64)),
                                       [8])
        g.node.add().CopyFrom(helper.make_node("Constant", [], ["s"], sparse_value=sp))
    elif kind == "function":
        f = model.functions.add()
        f.name, f.domain = "fn", "fuzz"
        f.node.add().CopyFrom(helper.make_node("Constant", [], ["o"], value=bad))
    elif kind == "deep":
        inner = helper.make_graph([helper.make_node("Constant", [], ["d"], value=bad)], "d", [], [])
        for _ in range(rng.choice([2, 10, 70])):
            inner = helper.make_graph([helper.make_node("Loop", [], [], body=inner)], "d", [], [])
        g.node.add().CopyFrom(helper.make_node("Loop", [], [], body=inner))
    else:
        g.ClearField("initializer")
    files[MAIN[fmt]] = model.SerializeToString()
    return f"onnx_model: {kind}"


#: Field numbers that hold sub-messages, per message kind (a subset of onnx.proto).
PB_SCHEMA = {
    "model": {7: "graph", 25: "function", 20: "training", 14: "entry", 8: "opset"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "tensor": {13: "entry", 3: "segment"},
    "sparse": {1: "tensor", 2: "tensor"},
    "function": {7: "node"},
    "training": {1: "graph", 2: "graph"},
    "entry": {}, "opset": {}, "segment": {},
}


def _uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(b, pos):
    v = shift = 0
    while True:
        if pos >= len(b) or shift > 63:
            raise ValueError("bad varint")
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, pos
        shift += 7


def pb_parse(b, kind="model"):
    """A field tree: [[number, wire, value]]: value an int (varint/fixed), bytes, or a subtree
    (list) for known sub-message fields that parse."""
    out, pos = [], 0
    while pos < len(b):
        key, pos = _read_varint(b, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = _read_varint(b, pos)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            if pos + n > len(b):
                raise ValueError("short fixed")
            v, pos = int.from_bytes(b[pos:pos + n], "little"), pos + n
        elif wire == 2:
            n, pos = _read_varint(b, pos)
            if pos + n > len(b):
                raise ValueError("short LEN")
            v, pos = b[pos:pos + n], pos + n
            sub = PB_SCHEMA.get(kind, {}).get(number)
            if sub:
                try:
                    v = [sub, pb_parse(v, sub)]
                except ValueError:
                    pass
        else:
            raise ValueError(f"wire type {wire}")
        out.append([number, wire, v])
    return out


def pb_emit(tree, bad=None):
    """Bytes of a field tree. `bad` = (field object, how) emits that one field wrongly: its length
    off by a delta, its length as a longer (valid) varint, or its key with another wire type."""
    out = bytearray()
    for f in tree:
        number, wire, v = f
        how = bad[1] if bad is not None and bad[0] is f else None
        key_wire = how[1] if how and how[0] == "wire" else wire
        out += _uvarint(number << 3 | key_wire)
        if wire == 0:
            out += _uvarint(v)
        elif wire in (1, 5):
            out += v.to_bytes(8 if wire == 1 else 4, "little")
        else:
            body = pb_emit(v[1], bad) if isinstance(v, list) else v
            n = len(body)
            if how and how[0] == "len":
                n = max(0, n + how[1])
            enc = _uvarint(n)
            if how and how[0] == "long":
                enc = bytes(c | 0x80 for c in enc) + b"\x00"
            out += enc + body
    return bytes(out)


def _pb_fields(tree, acc=None):
    acc = [] if acc is None else acc
    for f in tree:
        acc.append((tree, f))
        if isinstance(f[2], list):
            _pb_fields(f[2][1], acc)
    return acc


def m_onnx_wire(rng, files, fmt):
    tree = pb_parse(files[MAIN[fmt]])
    fields = _pb_fields(tree)
    if not fields:
        return "onnx_wire: empty"
    kind = rng.choice(["len", "len", "long", "dup", "delete", "swap", "wire", "split", "unpack",
                       "unknown"])
    parent, f = rng.choice(fields)
    lens = [(p, x) for p, x in fields if x[1] == 2]
    bad = None
    if kind in ("len", "long") and lens:
        parent, f = rng.choice(lens)
        bad = (f, ("len", rng.choice([-1, 1, -2, 5, 1000, 2 ** 31])) if kind == "len" else ("long",))
    elif kind == "wire":
        bad = (f, ("wire", rng.choice([w for w in (0, 1, 2, 5) if w != f[1]])))
    elif kind == "dup":
        parent.insert(parent.index(f) + 1, _pb_copy(f))
    elif kind == "delete":
        parent.remove(f)
    elif kind == "swap" and len(parent) > 1:
        i, j = rng.sample(range(len(parent)), 2)
        parent[i], parent[j] = parent[j], parent[i]
    elif kind in ("split", "unpack"):
        packed = [(p, x) for p, x in fields if x[1] == 2 and isinstance(x[2], bytes)
                  and x[0] in (4, 5, 7, 10, 11) and len(x[2]) >= 8]
        if not packed:
            return "onnx_wire: no packed field"
        parent, f = rng.choice(packed)
        i = parent.index(f)
        data = f[2]
        if kind == "split":
            cut = len(data) // 2 // 4 * 4
            parent[i:i + 1] = [[f[0], 2, data[:cut]], [f[0], 2, data[cut:]]]
        elif f[0] == 4:  # float_data as unpacked fixed32 fields
            parent[i:i + 1] = [[4, 5, int.from_bytes(data[k:k + 4], "little")]
                               for k in range(0, len(data) - 3, 4)]
        else:
            return "onnx_wire: unpack of a non-float field skipped"
    else:
        parent.append([rng.choice([99, 1000, 536870911]), 2, b"\x01\x02"])
        kind = "unknown"
    files[MAIN[fmt]] = pb_emit(tree, bad)
    return f"onnx_wire: {kind} field {f[0]} (wire {f[1]})"


def _pb_copy(f):
    number, wire, v = f
    if isinstance(v, list):
        return [number, wire, [v[0], [_pb_copy(x) for x in v[1]]]]
    return [number, wire, v]


ONNX = [(m_onnx_tensor, 5), (m_onnx_model, 2), (m_onnx_wire, 4)]
