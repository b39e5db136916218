"""fpclass.onnx: IsNaN-9/13/20 and IsInf-10/20 against onnx.defs, onnxruntime and plain numpy.

Truth comes from outside fpclass: the installed onnx's schemas for what each version admits,
onnxruntime for the outputs, and numpy on the float64 value of each element (ml_dtypes converts
NaN to NaN and Inf to Inf) for what the spec says the outputs are.
"""

import itertools
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")

import fpclass  # noqa: E402
import fpclass.onnx  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

ALL_ELEMENT_TYPES = [v for n, v in TP.DataType.items() if n != "UNDEFINED"]
FLOAT_TYPES = ["FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
               "FLOAT8E5M2", "FLOAT8E5M2FNUZ"]
FLAGS = [(1, 1), (0, 1), (1, 0), (0, 0)]  # (detect_negative, detect_positive)
#: (op, opset) pairs of the differential tests: the opsets that introduced each version.
OP_OPSETS = [("IsNaN", 9), ("IsNaN", 13), ("IsNaN", 20), ("IsInf", 10), ("IsInf", 20)]


# -- independent truth --------------------------------------------------------------------------
def as_float64(x):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x).astype(np.float64)


def spec_isnan(x):
    return np.isnan(as_float64(x))


def spec_isinf(x, detect_negative=1, detect_positive=1):
    v = as_float64(x)
    return (np.isneginf(v) & bool(detect_negative)) | (np.isposinf(v) & bool(detect_positive))


def spec(op, x, flags=(1, 1)):
    return spec_isnan(x) if op == "IsNaN" else spec_isinf(x, *flags)


# -- models -------------------------------------------------------------------------------------
def one_node_model(op, opset, element_type, shape=("N",), attrs=None, name="node0"):
    node = helper.make_node(op, ["x"], ["y"], name=name, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", element_type, shape)],
        [helper.make_tensor_value_info("y", TP.BOOL, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10  # onnxruntime 1.31 reads IR <= 11
    return model


def flag_attrs(op, flags):
    if op == "IsNaN":
        return {}
    return {"detect_negative": flags[0], "detect_positive": flags[1]}


def run_fpclass(model, x):
    return fpclass.onnx.Backend.run_model(model, [x])[0]


def run_ort(model, x, element_type):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if x.dtype.itemsize <= 2 and x.dtype not in (np.float16,):
        # bfloat16 / float8: onnxruntime takes the raw bits with the ONNX element type attached.
        value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}"), element_type)
    else:
        value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))
    return session.run_with_ort_values(["y"], {"x": value})[0].numpy()


# -- inputs -------------------------------------------------------------------------------------
def every_pattern(dtype):
    return np.arange(1 << (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}").view(dtype)


def special_and_random(dtype, n=20000, seed=0):
    """Named special values plus random bit patterns, a third of them with the exponent all ones."""
    rng = np.random.default_rng(seed)
    u = np.dtype(f"u{dtype.itemsize}")
    exp_bits, man_bits = (11, 52) if dtype.itemsize == 8 else (8, 23)
    exp_ones = ((1 << exp_bits) - 1) << man_bits
    sign = 1 << (exp_bits + man_bits)
    quiet = 1 << (man_bits - 1)
    specials = [0, sign, exp_ones, sign | exp_ones, exp_ones | quiet, sign | exp_ones | quiet,
                exp_ones | 1, sign | exp_ones | 1, exp_ones | (quiet - 1), (1 << man_bits) - 1,
                1, exp_ones - 1, sign | (exp_ones - 1), (1 << (8 * dtype.itemsize)) - 1]
    bits = rng.integers(0, np.iinfo(u).max, size=n, dtype=u, endpoint=True)
    bits[: n // 3] |= u.type(exp_ones)
    return np.concatenate([np.array(specials, dtype=u), bits]).view(dtype)


def inputs_for(element_type):
    dtype = fpclass.onnx.dtype_of(element_type)
    return every_pattern(dtype) if dtype.itemsize <= 2 else special_and_random(dtype)


def admitted_by_onnx(op, opset):
    """The element types onnx.defs admits for input X of `op` at `opset` (the test's own reading)."""
    schema = onnx.defs.get_schema(op, opset, "")
    (constraint,) = [c for c in schema.type_constraints if c.type_param_str == schema.inputs[0].type_str]
    return {getattr(TP, t[len("tensor("):-1].upper()) for t in constraint.allowed_type_strs}


# -- the import contract ------------------------------------------------------------------------
def test_import_fpclass_does_not_import_onnx_and_alias_leaves_real_onnx():
    code = ("import sys, fpclass; assert 'onnx' not in sys.modules, 'onnx imported'; "
            "import fpclass.onnx; import onnx; assert onnx.__file__.endswith('onnx/__init__.py'); "
            "assert hasattr(onnx, 'TensorProto'); assert fpclass.onnx.Backend.__module__.startswith('fpclass')")
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_alias_module_reexports_the_dialect():
    import fpclass.dialects.onnx as dialect
    assert set(fpclass.onnx.__all__) == set(dialect.__all__)
    assert fpclass.onnx.Backend is dialect.Backend
    assert issubclass(fpclass.onnx.Backend, onnx.backend.base.Backend)


# -- the issue's version table, read from onnx.defs ----------------------------------------------
@pytest.mark.parametrize(("op", "opset", "expected"), [
    ("IsNaN", 9, {"FLOAT16", "FLOAT", "DOUBLE"}),
    ("IsNaN", 13, {"FLOAT16", "FLOAT", "DOUBLE", "BFLOAT16"}),
    ("IsNaN", 20, set(FLOAT_TYPES)),
    ("IsInf", 10, {"FLOAT", "DOUBLE"}),
    ("IsInf", 20, set(FLOAT_TYPES)),
])
def test_op_version_matches_issue_table(op, opset, expected):
    version = fpclass.onnx.op_version(op, opset)
    assert version.since_version == opset
    assert {TP.DataType.Name(t) for t in version.admitted} == expected


@pytest.mark.parametrize("op", ["IsNaN", "IsInf"])
def test_every_type_at_every_opset_accepted_iff_onnx_defs_admits(op):
    first = min(fpclass.onnx.since_versions(op))
    checked = 0
    for opset in range(1, onnx.defs.onnx_opset_version() + 1):
        node = helper.make_node(op, ["x"], ["y"])
        if opset < first:
            with pytest.raises(fpclass.onnx.NodeVersionError, match=rf"{op} does not exist in opset {opset}"):
                fpclass.onnx.NodeSemantics.from_proto(node, opset)
            continue
        semantics = fpclass.onnx.NodeSemantics.from_proto(node, opset)
        admitted = admitted_by_onnx(op, opset)
        assert semantics.version.since_version == onnx.defs.get_schema(op, opset, "").since_version
        for element_type in ALL_ELEMENT_TYPES:
            if element_type in admitted:
                semantics.check_type(element_type)
            else:
                with pytest.raises(fpclass.onnx.NodeTypeError):
                    semantics.check_type(element_type)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize(("op", "opset"), OP_OPSETS)
def test_every_type_with_a_numpy_dtype_runs_or_is_rejected_per_onnx_defs(op, opset):
    admitted = admitted_by_onnx(op, opset)
    for element_type in ALL_ELEMENT_TYPES:
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(element_type))
        except (KeyError, ValueError):
            continue
        x = np.zeros(3, dtype=dtype)
        model = one_node_model(op, opset, element_type)
        if element_type in admitted:
            assert run_fpclass(model, x).tolist() == [False] * 3
            continue
        # Declared type: rejected when the model is prepared.
        name = TP.DataType.Name(element_type).lower()
        with pytest.raises(fpclass.onnx.NodeTypeError, match=rf"tensor\({name}\)"):
            fpclass.onnx.Backend.prepare(model)
        # Undeclared (onnx's checker refuses such a model; onnx's evaluator and run_node take it):
        # rejected when the value arrives.
        untyped = one_node_model(op, opset, TP.UNDEFINED)
        session = ReferenceEvaluator(untyped, new_ops=fpclass.onnx.NEW_OPS)
        label = f"{op}-{fpclass.onnx.op_version(op, opset).since_version}"
        with pytest.raises(fpclass.onnx.NodeTypeError, match=rf"{label}.*tensor\({name}\)"):
            session.run(None, {"x": x})
        with pytest.raises(fpclass.onnx.NodeTypeError, match=rf"{label}.*tensor\({name}\)"):
            fpclass.onnx.Backend.run_node(model.graph.node[0], [x], opset_version=opset)


def test_type_error_names_node_op_version_type_and_admitted():
    model = one_node_model("IsInf", 10, TP.FLOAT16, name="check_overflow")
    with pytest.raises(fpclass.onnx.NodeTypeError) as info:
        fpclass.onnx.Backend.prepare(model)
    message = str(info.value)
    for part in ["'check_overflow'", "IsInf-10", "opset 10", "tensor(float16)", "tensor(double), tensor(float)"]:
        assert part in message


# -- attributes ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("attrs", "pattern"), [
    ({"detect_negative": 2}, r"'detect_negative' must be the INT 0 or 1, got 2"),
    ({"detect_positive": -1}, r"'detect_positive' must be the INT 0 or 1, got -1"),
    ({"detect_negative": 1.0}, r"'detect_negative' must be INT, got FLOAT"),
    ({"detect_positive": "yes"}, r"'detect_positive' must be INT, got STRING"),
    ({"detect_negative": [1]}, r"'detect_negative' must be INT, got INTS"),
    ({"detect_nan": 1}, r"unknown attribute 'detect_nan'; accepted attributes: detect_negative, detect_positive"),
])
@pytest.mark.parametrize("opset", [10, 20])
def test_malformed_isinf_attribute_rejected_with_node_and_version(attrs, pattern, opset):
    model = one_node_model("IsInf", opset, TP.FLOAT, attrs=attrs, name="inf_check")
    with pytest.raises(fpclass.onnx.NodeAttributeError, match=pattern) as info:
        fpclass.onnx.Backend.prepare(model)
    assert "'inf_check'" in str(info.value) and f"IsInf-{opset}" in str(info.value)


def test_isnan_takes_no_attributes():
    node = helper.make_node("IsNaN", ["x"], ["y"], detect_negative=0)
    with pytest.raises(fpclass.onnx.NodeAttributeError, match="accepted attributes: none"):
        fpclass.onnx.NodeSemantics.from_proto(node, 13)


def test_missing_attributes_take_schema_defaults():
    node = helper.make_node("IsInf", ["x"], ["y"])
    semantics = fpclass.onnx.NodeSemantics.from_proto(node, 20)
    x = np.array([-np.inf, np.inf, np.nan, 1.0], np.float32)
    assert semantics(x).tolist() == np.isinf(x).tolist()


def test_wrong_arity_and_unknown_op_rejected():
    with pytest.raises(fpclass.onnx.NodeAttributeError, match="exactly one input and one output"):
        fpclass.onnx.NodeSemantics.from_proto(helper.make_node("IsNaN", ["a", "b"], ["y"]), 13)
    with pytest.raises(fpclass.onnx.NodeVersionError, match="not 'Relu'"):
        fpclass.onnx.NodeSemantics.from_proto(helper.make_node("Relu", ["a"], ["y"]), 13)


# -- differential against onnxruntime -----------------------------------------------------------
def ort_cases():
    for op, opset in OP_OPSETS:
        for name in FLOAT_TYPES:
            element_type = getattr(TP, name)
            if element_type not in admitted_by_onnx(op, opset):
                continue
            # onnxruntime 1.31 registers no CPU kernel for IsNaN-13 on bfloat16 (NOT_IMPLEMENTED);
            # there only the spec's answer is checked.
            ort_cannot_run = (op, opset, name) == ("IsNaN", 13, "BFLOAT16")
            for flags in ([(1, 1)] if op == "IsNaN" else FLAGS):
                yield pytest.param(op, opset, name, flags, ort_cannot_run, id=f"{op}{opset}-{name}-{flags}")


@pytest.mark.parametrize(("op", "opset", "type_name", "flags", "ort_cannot_run"), list(ort_cases()))
def test_identical_to_onnxruntime_and_to_the_spec(op, opset, type_name, flags, ort_cannot_run):
    element_type = getattr(TP, type_name)
    x = inputs_for(element_type)
    model = one_node_model(op, opset, element_type, attrs=flag_attrs(op, flags))
    got = run_fpclass(model, x)
    assert got.dtype == np.bool_ and got.shape == x.shape
    np.testing.assert_array_equal(got, spec(op, x, flags))
    if ort_cannot_run:
        with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
            run_ort(model, x, element_type)
        return
    np.testing.assert_array_equal(got, run_ort(model, x, element_type))
    if type_name.startswith("FLOAT8") and type_name.endswith(("FN", "FNUZ")) and op == "IsInf":
        assert not got.any()  # no Inf in the finite-only float8 formats, whatever the flags


def test_both_flags_zero_is_all_false_even_on_infinities():
    x = np.array([-np.inf, np.inf, np.nan, 0.0], np.float32)
    model = one_node_model("IsInf", 20, TP.FLOAT, attrs={"detect_negative": 0, "detect_positive": 0})
    assert run_fpclass(model, x).tolist() == [False] * 4


# -- shapes and layouts ---------------------------------------------------------------------------
# onnx's checker requires a rank on graph inputs; dims may be symbolic, unknown (None) or fixed.
@pytest.mark.parametrize(("shape", "value_shape"), [
    ((), ()), (("N",), (0,)), (("N",), (7,)), ((None,), (0,)), ((None,), (5,)), (("batch", 3), (2, 3)),
    (("batch", 3), (0, 3)), (("a", "b", "c"), (2, 0, 3)), (("a", "b", "c"), (4, 3, 2)),
    (("batch", None), (3, 4)),
])
def test_dynamic_symbolic_zero_d_and_empty(shape, value_shape):
    rng = np.random.default_rng(1)
    x = rng.choice(np.array([np.nan, np.inf, -np.inf, 1.0, -0.0], np.float16), size=value_shape)
    for op, opset in OP_OPSETS:
        if TP.FLOAT16 not in admitted_by_onnx(op, opset):
            continue
        got = run_fpclass(one_node_model(op, opset, TP.FLOAT16, shape=shape), x)
        assert isinstance(got, np.ndarray) and got.shape == x.shape and got.dtype == np.bool_
        np.testing.assert_array_equal(got, spec(op, x))


@pytest.mark.parametrize("layout", ["strided", "negative", "transposed", "byteswapped", "readonly"])
def test_input_layouts(layout):
    rng = np.random.default_rng(2)
    base = rng.choice(np.array([np.nan, np.inf, -np.inf, 2.5, 0.0], np.float32), size=(6, 8))
    x = {"strided": base[::2, ::3], "negative": base[::-1, ::-2], "transposed": base.T,
         "byteswapped": base.astype(">f4"), "readonly": base.copy()}[layout]
    if layout == "readonly":
        x.flags.writeable = False
    for op, opset, flags in [("IsNaN", 13, (1, 1)), ("IsInf", 10, (0, 1)), ("IsInf", 20, (1, 0))]:
        model = one_node_model(op, opset, TP.FLOAT, shape=("rows", "cols"), attrs=flag_attrs(op, flags))
        np.testing.assert_array_equal(run_fpclass(model, x), spec(op, x, flags))


# -- tensors: TensorProto <-> numpy -------------------------------------------------------------
@pytest.mark.parametrize("type_name", ["FLOAT16", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                       "FLOAT8E5M2", "FLOAT8E5M2FNUZ"])
def test_raw_data_and_int32_data_round_trip_every_bit_pattern(type_name):
    element_type = getattr(TP, type_name)
    x = inputs_for(element_type)
    bits = x.view(f"u{x.dtype.itemsize}")
    raw = fpclass.onnx.from_array(x, "x")
    assert raw.data_type == element_type and raw.HasField("raw_data")
    back = fpclass.onnx.to_array(raw)
    assert back.dtype == x.dtype
    np.testing.assert_array_equal(back.view(bits.dtype), bits)
    typed = TP(name="x", data_type=element_type, dims=[x.size])
    typed.int32_data.extend(bits.astype(np.int32).tolist())  # the spec's int32_data encoding
    np.testing.assert_array_equal(fpclass.onnx.to_array(typed).view(bits.dtype), bits)


def test_byteswapped_array_round_trips_by_value():
    x = np.array([1.5, np.nan, -np.inf], ">f8")
    back = fpclass.onnx.to_array(fpclass.onnx.from_array(x))
    assert back.dtype == np.float64
    np.testing.assert_array_equal(back.view(np.uint64), x.astype("<f8").view(np.uint64))


def test_float_data_keeps_nan_a_nan():
    signalling = np.array([0x7F800001, 0xFFA00000, 0x7F800000, 0x3F800000], np.uint32).view(np.float32)
    tensor = TP(name="x", data_type=TP.FLOAT, dims=[4])
    tensor.float_data.extend(signalling.tolist())
    np.testing.assert_array_equal(fpclass.isnan(fpclass.onnx.to_array(tensor)), spec_isnan(signalling))


def test_initializer_in_external_data_file(tmp_path):
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e5m2).reshape(16, 16)
    init = fpclass.onnx.from_array(x, "x")
    node = helper.make_node("IsInf", ["x"], ["y"], detect_negative=0)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TP.BOOL, [16, 16])],
                              initializer=[init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    path = tmp_path / "model.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    expected = spec_isinf(x, 0, 1)
    assert expected.sum() == 1
    # From the path: onnx loads the external file next to it.
    np.testing.assert_array_equal(fpclass.onnx.Backend.run_model(str(path), [])[0], expected)
    # From a ModelProto whose data stays outside: base_dir says where.
    shallow = onnx.load_model(path, load_external_data=False)
    with pytest.raises(ValueError, match="base_dir"):
        fpclass.onnx.Backend.prepare(shallow)
    np.testing.assert_array_equal(
        fpclass.onnx.Backend.prepare(shallow, base_dir=tmp_path).run([])[0], expected)
    tensor = shallow.graph.initializer[0]
    np.testing.assert_array_equal(fpclass.onnx.to_array(tensor, str(tmp_path)).view(np.uint8), x.view(np.uint8))


# -- the default domain spelled "ai.onnx" ----------------------------------------------------------
def domain_model(op, opset_domain, node_domain, element_type, attrs=None):
    """one_node_model with the default domain imported as `opset_domain` and named by the node as
    `node_domain`."""
    model = one_node_model(op, 20, element_type, attrs=attrs)
    model.opset_import[0].domain = opset_domain
    model.graph.node[0].domain = node_domain
    return model


@pytest.mark.parametrize("opset_domain, node_domain", [("ai.onnx", "ai.onnx"), ("ai.onnx", ""),
                                                       ("", "ai.onnx")])
@pytest.mark.parametrize("op, flags", [("IsNaN", (1, 1)), ("IsInf", (1, 1)), ("IsInf", (0, 1))])
@pytest.mark.parametrize("type_name", ["FLOAT", "FLOAT16"])
def test_default_domain_named_ai_onnx_runs_as_in_onnxruntime(opset_domain, node_domain, op, flags,
                                                             type_name):
    element_type = getattr(TP, type_name)
    x = inputs_for(element_type)
    model = domain_model(op, opset_domain, node_domain, element_type, flag_attrs(op, flags))
    before = model.SerializeToString()
    got = run_fpclass(model, x)
    assert model.SerializeToString() == before  # the caller's model is not rewritten
    np.testing.assert_array_equal(got, run_ort(model, x, element_type))
    np.testing.assert_array_equal(got, spec(op, x, flags))
    (evaluated,) = fpclass.onnx.Evaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(evaluated, got)
    node = model.graph.node[0]
    np.testing.assert_array_equal(fpclass.onnx.Backend.run_node(node, [x], opset_version=20)[0], got)


def if_and_function_model(subgraph_node, function_node, function_import, if_node):
    """If(cond) then IsNaN(x) else a model-local function's IsInf(x), with the default domain
    imported by the model as "ai.onnx" and spelled by each part as given."""
    then_branch = helper.make_graph([helper.make_node("IsNaN", ["x"], ["b"], domain=subgraph_node)],
                                    "then", [], [helper.make_tensor_value_info("b", TP.BOOL, None)])
    else_branch = helper.make_graph([helper.make_node("Inf", ["x"], ["b"], domain="local")], "else",
                                    [], [helper.make_tensor_value_info("b", TP.BOOL, None)])
    function = helper.make_function("local", "Inf", ["X"], ["Y"],
                                    [helper.make_node("IsInf", ["X"], ["Y"], domain=function_node)],
                                    [helper.make_opsetid(function_import, 20)])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], domain=if_node, then_branch=then_branch,
                          else_branch=else_branch)], "g",
        [helper.make_tensor_value_info("cond", TP.BOOL, []),
         helper.make_tensor_value_info("x", TP.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TP.BOOL, ["N"])])
    model = helper.make_model(graph, functions=[function], opset_imports=[
        helper.make_opsetid("ai.onnx", 20), helper.make_opsetid("local", 1)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("spelling", list(itertools.product(["", "ai.onnx"], repeat=4)), ids=str)
def test_default_domain_named_ai_onnx_in_subgraphs_and_functions(spelling, calls):
    # onnxruntime 1.32 runs this model only with "" inside the subgraph and the function (the
    # model's own import and the If node may say "ai.onnx"): fpclass gives every spelling the
    # answer onnxruntime gives that one.
    x = np.array([-np.inf, np.inf, np.nan, 1.0], np.float32)
    session = ort.InferenceSession(if_and_function_model("", "", "", spelling[3]).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    rep = fpclass.onnx.Backend.prepare(if_and_function_model(*spelling))
    for cond in (True, False):
        feeds = {"cond": np.array(cond), "x": x}
        np.testing.assert_array_equal(rep.run(feeds)[0], session.run(None, feeds)[0])
    assert calls == ["isnan", "isinf"]


def test_default_domain_imported_twice_with_different_versions_is_refused():
    model = one_node_model("IsNaN", 9, TP.BFLOAT16)
    model.opset_import.append(helper.make_opsetid("ai.onnx", 13))
    with pytest.raises(fpclass.onnx.NodeVersionError, match=r"imported twice.*'' \(opset 9\) and "
                                                             r"'ai.onnx' \(opset 13\)"):
        fpclass.onnx.Backend.prepare(model)
    model.opset_import[1].version = 9   # the same version twice is one import
    with pytest.raises(fpclass.onnx.NodeTypeError, match="IsNaN-9"):
        fpclass.onnx.Backend.prepare(model)


# -- the backend and the ReferenceEvaluator ops ---------------------------------------------------
@pytest.fixture
def calls(monkeypatch):
    """Counts the fpclass core calls made by the dialect."""
    seen = []
    for name in ("isnan", "isinf"):
        real = getattr(fpclass, name)
        monkeypatch.setattr(fpclass, name, lambda *a, _real=real, _name=name, **k: seen.append(_name) or _real(*a, **k))
    return seen


def test_backend_runs_isnan_on_fpclass_and_other_ops_on_the_reference_evaluator(calls):
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("IsInf", ["sq"], ["inf"]),
             helper.make_node("IsNaN", ["x"], ["nan"]), helper.make_node("Or", ["inf", "nan"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, ["N"])],
                              [helper.make_tensor_value_info("y", TP.BOOL, ["N"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    x = np.array([1e30, np.nan, 2.0, -np.inf], np.float32)
    with np.errstate(over="ignore"):
        expected = ~np.isfinite(x * x)
        got = fpclass.onnx.Backend.run_model(model, {"x": x})
    np.testing.assert_array_equal(got["y"], expected)
    assert sorted(calls) == ["isinf", "isnan"]


def test_reference_evaluator_new_ops(calls):
    x = np.array([-np.inf, np.inf, np.nan], ml_dtypes.bfloat16)
    model = one_node_model("IsInf", 20, TP.BFLOAT16, attrs={"detect_positive": 0})
    (got,) = ReferenceEvaluator(model, new_ops=fpclass.onnx.NEW_OPS).run(None, {"x": x})
    assert got.tolist() == spec_isinf(x, 1, 0).tolist() and calls == ["isinf"]
    # The version is the evaluator's opset: IsNaN-9 refuses bfloat16, IsNaN-13 takes it.
    with pytest.raises(fpclass.onnx.NodeTypeError, match="IsNaN-9"):
        ReferenceEvaluator(one_node_model("IsNaN", 12, TP.BFLOAT16), new_ops=fpclass.onnx.NEW_OPS).run(None, {"x": x})
    (got,) = ReferenceEvaluator(one_node_model("IsNaN", 13, TP.BFLOAT16), new_ops=fpclass.onnx.NEW_OPS).run(None, {"x": x})
    assert got.tolist() == spec_isnan(x).tolist()


def test_subgraphs_and_functions_with_linked_attributes_run_on_fpclass(calls):
    # A model-local function IsInfLike(X) with attribute 'neg' forwarded to IsInf's detect_negative.
    inner = helper.make_node("IsInf", ["X"], ["Y"], detect_positive=1)
    inner.attribute.append(onnx.AttributeProto(name="detect_negative", ref_attr_name="neg", type=onnx.AttributeProto.INT))
    function = helper.make_function("local", "IsInfLike", ["X"], ["Y"], [inner],
                                    [helper.make_opsetid("", 20)], attributes=["neg"])
    then_branch = helper.make_graph([helper.make_node("IsNaN", ["x"], ["b"])], "then", [],
                                    [helper.make_tensor_value_info("b", TP.BOOL, None)])
    else_branch = helper.make_graph([helper.make_node("IsInfLike", ["x"], ["b"], domain="local", neg=0)], "else", [],
                                    [helper.make_tensor_value_info("b", TP.BOOL, None)])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch)], "g",
        [helper.make_tensor_value_info("cond", TP.BOOL, []), helper.make_tensor_value_info("x", TP.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TP.BOOL, ["N"])])
    model = helper.make_model(graph, functions=[function],
                              opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("local", 1)])
    x = np.array([-np.inf, np.inf, np.nan], np.float32)
    rep = fpclass.onnx.Backend.prepare(model)
    np.testing.assert_array_equal(rep.run({"cond": np.array(True), "x": x})[0], spec_isnan(x))
    np.testing.assert_array_equal(rep.run({"cond": np.array(False), "x": x})[0], spec_isinf(x, 0, 1))
    assert calls == ["isnan", "isinf"]


@pytest.mark.parametrize(("op", "opset", "flags"), [("IsNaN", 9, (1, 1)), ("IsInf", 10, (0, 1)), ("IsInf", 20, (0, 0))])
def test_run_node_at_an_opset(op, opset, flags):
    x = np.array([[np.nan, -np.inf], [np.inf, 1.0]], np.float32)
    node = helper.make_node(op, ["x"], ["y"], **flag_attrs(op, flags))
    got = fpclass.onnx.Backend.run_node(node, [x], opset_version=opset)
    np.testing.assert_array_equal(got["y"], spec(op, x, flags))


def test_run_node_other_op_uses_the_reference_evaluator():
    x = np.array([1.0, -2.0], np.float32)
    (got,) = fpclass.onnx.Backend.run_node(helper.make_node("Abs", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(got, np.abs(x))


def test_devices_and_bad_inputs():
    assert fpclass.onnx.Backend.supports_device("CPU")
    assert not fpclass.onnx.Backend.supports_device("CUDA")
    assert not fpclass.onnx.Backend.supports_device("TPU")
    model = one_node_model("IsNaN", 13, TP.FLOAT)
    with pytest.raises(ValueError, match="'CPU' only, got 'CUDA'"):
        fpclass.onnx.Backend.prepare(model, "CUDA")
    rep = fpclass.onnx.Backend.prepare(model)
    with pytest.raises(ValueError, match=r"takes 1 input\(s\) \['x'\], got 2"):
        rep.run([np.zeros(1, np.float32)] * 2)
    with pytest.raises(TypeError, match=r"input 'x' is declared tensor\(float\), got tensor\(double\)"):
        rep.run([np.zeros(1, np.float64)])
    with pytest.raises(ValueError, match=r"missing inputs \['x'\]"):
        rep.run({})
    with pytest.raises(TypeError, match="model must be an onnx.ModelProto"):
        fpclass.onnx.Backend.prepare(42)
    tensor_input = fpclass.onnx.from_array(np.array([np.nan, 1.0], np.float32))
    assert rep.run([tensor_input])[0].tolist() == [True, False]


@pytest.mark.parametrize("op, attrs", [("IsNaN", {}), ("IsInf", {}), ("IsInf", {"detect_positive": 0}),
                                       ("IsInf", {"detect_negative": 0, "detect_positive": 0})])
def test_outputs_are_c_order_whatever_the_input_layout(op, attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [None, None])],
                              [helper.make_tensor_value_info("y", TP.BOOL, [None, None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    x = np.asfortranarray(np.array([[1, np.nan, -np.inf], [np.inf, 5, np.nan]], np.float32))
    y = fpclass.onnx.Backend.prepare(model).run([x])[0]
    assert y.flags.c_contiguous and y.shape == x.shape
    neg, pos = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    want = np.isnan(x) if op == "IsNaN" else (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))
    np.testing.assert_array_equal(y, want)
