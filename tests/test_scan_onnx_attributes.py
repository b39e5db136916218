"""ONNX float-valued attributes (FLOAT, FLOATS, TENSOR, TENSORS, SPARSE_TENSOR, SPARSE_TENSORS)
are checked wherever they are (graph nodes, If/Loop/Scan subgraphs, model-local functions and
their attribute defaults), named NODE@ATTRIBUTE; judged against onnx.load +
onnx.helper.get_attribute_value + numpy. The walk does not recurse per level of nesting."""

import inspect
import sys

import numpy as np
import pytest

from fpclass.scan import ExitCode, scan
from protobuf_writer import field as pb_field

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto as A, TensorProto, helper, numpy_helper  # noqa: E402

NAN, INF = float("nan"), float("inf")


def _counts(values) -> tuple:
    a = np.asarray(values, np.float64)
    return int(np.isnan(a).sum()), int(np.isposinf(a).sum()), int(np.isneginf(a).sum())


def _attribute_truth(path) -> dict:
    """{NODE@ATTRIBUTE[i]: counts} of every float value onnx reads from the model's attributes,
    through get_attribute_value (NODE: name, else first output, else op_type; FUNCTION/ before
    it inside a function)."""
    model = onnx.load(str(path))
    out = {}

    def values(where, a):
        v = helper.get_attribute_value(a)
        if a.type == A.FLOAT:
            out[where] = _counts([v])
        elif a.type == A.FLOATS:
            out[where] = _counts(v)
        elif a.type in (A.TENSOR, A.SPARSE_TENSOR):
            t = v.values if a.type == A.SPARSE_TENSOR else v
            suffix = " (sparse values)" if a.type == A.SPARSE_TENSOR else ""
            if t.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16):
                out[where + suffix] = _counts(numpy_helper.to_array(t))
        elif a.type in (A.TENSORS, A.SPARSE_TENSORS):
            for i, t in enumerate(v):
                t = t.values if a.type == A.SPARSE_TENSORS else t
                suffix = " (sparse values)" if a.type == A.SPARSE_TENSORS else ""
                if t.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16):
                    out[f"{where}[{i}]{suffix}"] = _counts(numpy_helper.to_array(t))
        elif a.type == A.GRAPH:
            graph(v, prefix)
        elif a.type == A.GRAPHS:
            for g in v:
                graph(g, prefix)

    def graph(g, scope):
        nonlocal prefix
        for n in g.node:
            prefix = scope
            label = n.name or next((o for o in n.output if o), "") or n.op_type
            for a in n.attribute:
                values(f"{scope}{label}@{a.name}", a)

    prefix = ""
    graph(model.graph, "")
    for f in model.functions:
        graph(f, f.name + "/")
        for a in f.attribute_proto:
            prefix = f.name + "/"
            values(f"{f.name}@{a.name}", a)
    return out


def _found(report) -> dict:
    return {t.name: (t.nan, t.posinf, t.neginf) for t in report.tensors if t.status == "checked"}


def _classifier_model():
    """A classifier that keeps its coefficients only in attributes, a Constant of every value
    kind, an If whose branches and a Loop whose body hold float attributes, and a function."""
    f32 = lambda *v: numpy_helper.from_array(np.array(v, np.float32))  # noqa: E731
    sparse = helper.make_sparse_tensor(f32(1.0, NAN), numpy_helper.from_array(
        np.array([0, 3], np.int64)), [4])
    then_g = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["t"], alpha=INF)],
                               "then", [], [helper.make_tensor_value_info("t", 1, [1])])
    else_g = helper.make_graph([helper.make_node("Constant", [], ["e"], value=f32(-INF, NAN))],
                               "else", [], [helper.make_tensor_value_info("e", 1, [2])])
    body = helper.make_graph([helper.make_node("Constant", [], ["b"], value_floats=[NAN, 1])],
                             "body", [], [])
    nodes = [
        helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain="ai.onnx.ml", name="lc",
                         coefficients=[1.0, NAN, -INF, 2.0], intercepts=[INF, 0.5],
                         classlabels_ints=[0, 1]),
        helper.make_node("TreeEnsembleRegressor", ["X"], ["R"], domain="ai.onnx.ml",
                         nodes_values=[0.5, NAN], target_weights=[1.0, -INF],
                         base_values=[NAN]),
        helper.make_node("Constant", [], ["cf"], value_float=NAN),
        helper.make_node("Constant", [], ["ct"], value=f32(INF, 1)),
        helper.make_node("Constant", [], ["cs"], sparse_value=sparse),
        helper.make_node("Custom", [], ["cl"], domain="custom",
                         many=[f32(NAN), numpy_helper.from_array(np.array([1], np.int64))],
                         sparse_many=[sparse]),
        helper.make_node("If", ["cond"], ["o"], name="branch", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Loop", ["", "cond"], ["l"], body=body),
        helper.make_node("Fn", ["X"], ["fo"], domain="local"),
    ]
    fn = helper.make_function("local", "Fn", ["x"], ["y"], [
        helper.make_node("Elu", ["x"], ["y"], alpha=-INF)], [helper.make_opsetid("", 18)])
    fn.attribute_proto.append(helper.make_attribute("beta", NAN))
    graph = helper.make_graph(nodes, "g", [], [])
    return helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3),
        helper.make_opsetid("custom", 1), helper.make_opsetid("local", 1)])


def test_float_attributes_everywhere_match_onnx(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_classifier_model(), str(path))
    truth = _attribute_truth(path)
    report = scan([path])
    found = _found(report)
    assert {k: found.get(k) for k in truth} == truth
    assert set(truth) >= {"lc@coefficients", "lc@intercepts", "R@nodes_values", "cf@value_float",
                          "ct@value", "cs@sparse_value (sparse values)", "cl@many[0]",
                          "cl@sparse_many[0] (sparse values)", "t@alpha", "e@value",
                          "b@value_floats",
                          "Fn/y@alpha", "Fn@beta"}
    assert report.exit_code == ExitCode.FOUND
    assert not report.problems and all(t.status != "unchecked" for t in report.tensors)


def test_a_classifier_whose_only_nan_is_a_coefficient_is_found(tmp_path):
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain="ai.onnx.ml",
                            coefficients=[0.5, 1.5, NAN], intercepts=[0.0])
    model = helper.make_model(helper.make_graph([node], "g", [], []),
                              opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    onnx.save(model, str(tmp_path / "r.onnx"))
    report = scan([tmp_path / "r.onnx"])
    assert _found(report) == {"Y@coefficients": (1, 0, 0), "Y@intercepts": (0, 0, 0)}
    assert report.exit_code == ExitCode.FOUND


def _model_with_attribute(attribute: bytes) -> bytes:
    """A model of one node "n" with the AttributeProto bytes `attribute`."""
    node = pb_field(3, 2, b"n") + pb_field(4, 2, b"Op") + pb_field(5, 2, attribute)
    return (pb_field(1, 0, 8) + pb_field(8, 2, pb_field(2, 0, 18))
            + pb_field(7, 2, pb_field(1, 2, node) + pb_field(2, 2, b"g")))


_F32 = lambda *v: np.array(v, np.float32).tobytes()  # noqa: E731


@pytest.mark.parametrize("attribute", [
    # FLOATS one value per field (not packed), then a packed run: onnx reads all five
    pb_field(1, 2, b"a") + pb_field(20, 0, A.FLOATS) + b"".join(
        pb_field(7, 5, _F32(v)) for v in (NAN, 1, INF)) + pb_field(7, 2, _F32(-INF, NAN)),
    # two packed runs
    pb_field(1, 2, b"a") + pb_field(20, 0, A.FLOATS) + pb_field(7, 2, _F32(NAN))
    + pb_field(7, 2, _F32(INF, 2)),
    # FLOAT given twice: the last one counts
    pb_field(1, 2, b"a") + pb_field(20, 0, A.FLOAT) + pb_field(2, 5, _F32(NAN))
    + pb_field(2, 5, _F32(INF)),
    # a TENSOR given in two pieces: protobuf merges them (the second raw_data wins)
    pb_field(1, 2, b"a") + pb_field(20, 0, A.TENSOR)
    + pb_field(5, 2, pb_field(1, 0, 2) + pb_field(2, 0, 1) + pb_field(9, 2, _F32(1, 2)))
    + pb_field(5, 2, pb_field(9, 2, _F32(NAN, -INF))),
], ids=["floats unpacked", "floats in two runs", "float twice", "tensor in pieces"])
def test_attribute_values_in_pieces_are_read_as_protobuf_merges_them(tmp_path, attribute):
    path = tmp_path / "m.onnx"
    path.write_bytes(_model_with_attribute(attribute))
    truth = _attribute_truth(path)
    assert list(truth) == ["n@a"]
    assert _found(scan([path])) == truth


def _nested_ifs(levels: int) -> bytes:
    """A model whose graph holds an If node whose then_branch holds an If node ... `levels`
    deep, the innermost branch a Constant of value_float NaN (3 messages per level)."""
    inner = pb_field(1, 2, pb_field(3, 2, b"c") + pb_field(5, 2, pb_field(1, 2, b"value_float")
                     + pb_field(2, 5, _F32(NAN)) + pb_field(20, 0, A.FLOAT)))
    for _ in range(levels):
        attr = pb_field(1, 2, b"then_branch") + pb_field(20, 0, A.GRAPH) + pb_field(6, 2, inner)
        inner = pb_field(1, 2, pb_field(4, 2, b"If") + pb_field(5, 2, attr))
    return pb_field(1, 0, 8) + pb_field(8, 2, pb_field(2, 0, 18)) + pb_field(7, 2, inner)


def test_nested_subgraphs_are_walked_without_recursion(tmp_path):
    path = tmp_path / "deep.onnx"
    path.write_bytes(_nested_ifs(30))   # 92 messages deep: onnx reads it
    assert _attribute_truth(path) == {"c@value_float": (1, 0, 0)}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 60)   # fewer frames than levels of nesting
    try:
        report = scan([path])
    finally:
        sys.setrecursionlimit(limit)
    assert _found(report) == {"c@value_float": (1, 0, 0)}


def test_subgraphs_nested_past_protobufs_limit_are_refused_clearly(tmp_path):
    path = tmp_path / "deep.onnx"
    path.write_bytes(_nested_ifs(40))   # 122 messages deep
    with pytest.raises(Exception):
        onnx.load(str(path))
    report = scan([path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "nested over 100 deep" in str(report.problems)


def test_a_model_with_too_many_float_attributes_is_refused(tmp_path, monkeypatch):
    from fpclass.scan.readers import bounds
    monkeypatch.setattr(bounds, "MAX_TENSORS", 1000)
    attrs = [helper.make_attribute(f"a{i}", 1.0) for i in range(1500)]
    node = helper.make_node("Op", [], ["y"], domain="custom")
    node.attribute.extend(attrs)
    model = helper.make_model(helper.make_graph([node], "g", [], []))
    onnx.save(model, str(tmp_path / "m.onnx"))
    report = scan([tmp_path / "m.onnx"])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "over the limit of 1000" in str(report.problems)
