"""fpclass.openvino against the real OpenVINO runtime (CPU) and against plain-numpy truth.

OpenVINO compilations are few and grouped: each compiled model carries every operator and attribute
combination for several formats at once.
"""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import fpclass.openvino as fov
import samples
from fpclass import twin

OV_FORMATS = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
              "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
PRECISION = {"f16": "FP16", "bf16": "BF16", "f32": "FP32", "f64": "FP64", "f8e4m3": "F8E4M3",
             "f8e5m2": "F8E5M2", "f8e8m0": "F8E8M0", "f4e2m1": "F4E2M1", "i32": "I32",
             "boolean": "BOOL"}
# Format -> the ml_dtypes dtype holding OpenVINO's values (OCP FP8/FP4/MX definitions).
FPCLASS_ONLY = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
                "f8e8m0": ml_dtypes.float8_e8m0fnu, "f4e2m1": ml_dtypes.float4_e2m1fn}
FLAGS = [(True, True), (True, False), (False, True), (False, False)]
# Operator name in the tests -> (layer type, <data> attributes, numpy truth on float values).
OPS = {"nan": ("IsNaN", "", lambda v: np.isnan(v)),
       "finite": ("IsFinite", "", lambda v: np.isfinite(v))}
for _n, _p in FLAGS:
    OPS[f"inf{_n:d}{_p:d}"] = (
        "IsInf", f'<data detect_negative="{str(_n).lower()}" detect_positive="{str(_p).lower()}"/>',
        lambda v, n=_n, p=_p: (np.isneginf(v) & n) | (np.isposinf(v) & p))

# Measured with openvino 2026.4.1 (CPU plugin); each entry: (format, operators, where in the input,
# what OpenVINO answers there, description). fpclass gives the correct answer in every case.
F64_INF_READ_AS_FINITE = "OpenVINO CPU: f64 +-Inf read as finite by IsInf/IsFinite"
F32_SUBNORMAL_NOT_FINITE = ("OpenVINO CPU: IsFinite answers false on values that are subnormal in f32 "
                            "(bf16 and f32 subnormals, f64 values of magnitude 1.4e-45..1.2e-38)")


def f32_subnormal(v):
    with np.errstate(all="ignore"):
        w = np.abs(v.astype(np.float32))
    return (w > 0) & (w < np.finfo(np.float32).smallest_normal)


OPENVINO_DISAGREEMENTS = [
    ("f64", {"finite"}, np.isinf, True, F64_INF_READ_AS_FINITE),
    ("f64", {"inf11", "inf10", "inf01"}, np.isinf, False, F64_INF_READ_AS_FINITE),
    *((fmt, {"finite"}, f32_subnormal, False, F32_SUBNORMAL_NOT_FINITE)
      for fmt in ("bf16", "f32", "f64")),
]


# -- hand-written IR (independent of fpclass's writer) -------------------------------------------

def dims_xml(dims):
    return "".join(f"<dim>{d}</dim>" for d in dims)


def parameter_xml(lid, name, etype, shape="?", dims=(-1,), precision=None):
    precision = precision or PRECISION[etype]
    return (f'<layer id="{lid}" name="{name}" type="Parameter" version="opset1">'
            f'<data shape="{shape}" element_type="{etype}"/><output>'
            f'<port id="0" precision="{precision}" names="{name}">{dims_xml(dims)}</port>'
            f'</output></layer>')


def op_xml(lid, name, layer_type, data, precision, dims=(-1,), out_names=None, version="opset10",
           out_precision="BOOL", out_dims=None):
    names = f' names="{out_names}"' if out_names else ""
    out_dims = dims if out_dims is None else out_dims
    return (f'<layer id="{lid}" name="{name}" type="{layer_type}" version="{version}">{data}'
            f'<input><port id="0" precision="{precision}">{dims_xml(dims)}</port></input>'
            f'<output><port id="1" precision="{out_precision}"{names}>{dims_xml(out_dims)}</port>'
            f'</output></layer>')


def result_xml(lid, name, precision="BOOL", dims=(-1,)):
    return (f'<layer id="{lid}" name="{name}" type="Result" version="opset1"><input>'
            f'<port id="0" precision="{precision}">{dims_xml(dims)}</port></input></layer>')


def edge_xml(a, b, c, d):
    return f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>'


def net_xml(layers, edges, version=11, name="net"):
    return (f'<?xml version="1.0"?>\n<net name="{name}" version="{version}"><layers>'
            + "".join(layers) + "</layers><edges>" + "".join(edges) + "</edges></net>")


def all_ops_ir(formats, ops=OPS, version=11):
    """One Parameter per format, each feeding every operator; results named `<op>_<format>`."""
    layers, edges, lid = [], [], 0
    for fmt in formats:
        pid = lid
        layers.append(parameter_xml(pid, f"x_{fmt}", fmt))
        lid += 1
        for op, (layer_type, data, _) in ops.items():
            name = f"{op}_{fmt}"
            layers.append(op_xml(lid, f"layer_{name}", layer_type, data, PRECISION[fmt],
                                 out_names=name))
            layers.append(result_xml(lid + 1, name))
            edges += [edge_xml(pid, 0, lid, 0), edge_xml(lid, 1, lid + 1, 0)]
            lid += 2
    return net_xml(layers, edges, version)


def inputs_for(fmt):
    dtype = OV_FORMATS[fmt]
    if dtype.itemsize == 2:
        return samples.all_patterns(dtype)
    return np.concatenate([samples.specials(dtype), samples.random_bits(dtype, 4096, seed=5)])


def truth(op, x):
    """The exact answer from values: every element widened by ml_dtypes/numpy to float64."""
    with np.errstate(all="ignore"):
        return OPS[op][2](twin.values(x))


# -- the OpenVINO side ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ov():
    return pytest.importorskip("openvino")


@pytest.fixture(scope="module")
def core(ov):
    return ov.Core()


def ov_tensor(ov, x):
    x = np.asarray(x)
    x = x if x.flags.c_contiguous else x.copy()   # np.ascontiguousarray would make 0-d 1-d
    if x.dtype == OV_FORMATS["bf16"]:  # OpenVINO's Python API takes bf16 as raw 16-bit words
        return ov.Tensor(x.view(np.uint16), list(x.shape), ov.Type.bf16)
    return x


def ov_read(ov, core, xml):
    return core.read_model(xml.encode(), ov.Tensor(np.empty(0, np.uint8)))


def ov_infer(ov, core, xml, inputs):
    """OpenVINO's outputs by result tensor name, as bool arrays."""
    compiled = core.compile_model(ov_read(ov, core, xml), "CPU")
    answers = compiled({k: ov_tensor(ov, v) for k, v in inputs.items()})
    return {name: np.asarray(answers[o]).astype(bool)
            for o in compiled.outputs for name in o.get_names()}


def assert_matches_openvino(fmt, op, x, ours, theirs):
    """fpclass must equal the truth; OpenVINO must equal fpclass except where one of its
    documented disagreements applies, and there it must answer exactly as documented."""
    np.testing.assert_array_equal(ours, truth(op, x), err_msg=f"fpclass {op} on {fmt}")
    allowed = np.zeros(ours.shape, bool)
    for dis_fmt, ops, where, answer, description in OPENVINO_DISAGREEMENTS:
        if dis_fmt == fmt and op in ops:
            mask = where(twin.values(x))
            differs = mask & (theirs != ours)
            assert (theirs[differs] == answer).all(), description
            allowed |= mask
    np.testing.assert_array_equal(theirs[~allowed], ours[~allowed],
                                  err_msg=f"OpenVINO vs fpclass {op} on {fmt}: undocumented")


# -- differential tests --------------------------------------------------------------------------

def test_same_ir_every_format_every_attribute_matches_openvino(ov, core):
    xml = all_ops_ir(OV_FORMATS)
    inputs = {f"x_{fmt}": inputs_for(fmt) for fmt in OV_FORMATS}
    theirs = ov_infer(ov, core, xml, inputs)
    ours = fov.read_model(xml).infer(inputs)
    assert len(ours) == len(OV_FORMATS) * len(OPS)
    for fmt in OV_FORMATS:
        for op in OPS:
            name = f"{op}_{fmt}"
            assert ours[name].dtype == bool and ours[name].shape == inputs[f"x_{fmt}"].shape
            assert_matches_openvino(fmt, op, inputs[f"x_{fmt}"], ours[name], theirs[name])


def test_openvino_f64_infinity_disagreement_is_named(ov, core):
    x = np.array([np.inf, -np.inf, 1.0, np.nan])
    xml = all_ops_ir(["f64"], {k: OPS[k] for k in ("finite", "inf11")})
    theirs = ov_infer(ov, core, xml, {"x_f64": x})
    ours = fov.read_model(xml).infer({"x_f64": x})
    np.testing.assert_array_equal(ours["finite_f64"], [False, False, True, False])
    np.testing.assert_array_equal(ours["inf11_f64"], [True, True, False, False])
    if theirs["finite_f64"][0]:  # still present in this OpenVINO: state it, do not follow it
        np.testing.assert_array_equal(theirs["finite_f64"], [True, True, True, False],
                                      err_msg=F64_INF_READ_AS_FINITE)
        np.testing.assert_array_equal(theirs["inf11_f64"], [False] * 4,
                                      err_msg=F64_INF_READ_AS_FINITE)


def test_openvino_subnormal_disagreement_is_named(ov, core):
    tiny = {"f16": 1e-6, "bf16": 1e-39, "f32": 1e-39, "f64": 1e-39}
    inputs = {f"x_{f}": np.array([t, -t, 1.0, 0.0]).astype(OV_FORMATS[f]) for f, t in tiny.items()}
    xml = all_ops_ir(OV_FORMATS, {"finite": OPS["finite"]})
    theirs = ov_infer(ov, core, xml, inputs)
    ours = fov.read_model(xml).infer(inputs)
    for fmt in OV_FORMATS:
        assert ours[f"finite_{fmt}"].tolist() == [True] * 4
        assert theirs[f"finite_{fmt}"][2:].all()
    assert theirs["finite_f16"].all()   # f16 subnormals are f32 normals: OpenVINO is right
    for fmt in ("bf16", "f32", "f64"):
        if not theirs[f"finite_{fmt}"][0]:   # still present in this OpenVINO
            assert not theirs[f"finite_{fmt}"][1], F32_SUBNORMAL_NOT_FINITE


def test_ir_written_by_fpclass_runs_in_openvino(ov, core, tmp_path):
    # fan-out (one output into two Results), a Parameter straight into a Result, 0-d, dynamic
    # dims, intervals (dynamic rank: the CPU plugin refuses it; see the narrow-format test), and every operator on every format both runtimes evaluate.
    b = fov.Builder("written")
    inputs = {}
    for fmt, shape, data in [("f16", "?", inputs_for("f16")),
                             ("bf16", [(2, 4), -1], inputs_for("bf16").reshape(4, -1)),
                             ("f32", [-1, (1, 3), -1], inputs_for("f32").reshape(2, 1, -1)),
                             ("f64", [], np.float64(-np.inf))]:
        x = b.parameter(f"x_{fmt}", fmt, shape)
        inputs[f"x_{fmt}"] = np.asarray(data, OV_FORMATS[fmt])
        b.result(b.is_nan(x), f"nan_{fmt}")
        finite = b.is_finite(x)
        b.result(finite, f"finite_{fmt}")
        b.result(finite, f"finite_again_{fmt}")
        for n, p in FLAGS:
            b.result(b.is_inf(x, detect_negative=n, detect_positive=p), f"inf{n:d}{p:d}_{fmt}")
    b.result(x, "passthrough")
    model = b.build()
    xml_path, bin_path = fov.write_model(model, tmp_path / "written.xml")
    assert (tmp_path / "written.bin").read_bytes() == b""
    compiled = core.compile_model(core.read_model(xml_path), "CPU")
    answers = compiled({k: ov_tensor(ov, v) for k, v in inputs.items()})
    theirs = {n: np.asarray(answers[o]) for o in compiled.outputs for n in o.get_names()}
    ours = model.infer(inputs)
    assert list(ours) == [o.get_node().get_friendly_name() for o in compiled.outputs]
    for fmt in OV_FORMATS:
        x = inputs[f"x_{fmt}"]
        for op in OPS:
            assert_matches_openvino(fmt, op, x, ours[f"{op}_{fmt}"], theirs[f"{op}_{fmt}"])
        np.testing.assert_array_equal(ours[f"finite_again_{fmt}"], ours[f"finite_{fmt}"])
        assert ours[f"finite_again_{fmt}"] is not ours[f"finite_{fmt}"]
    assert ours["passthrough"] == theirs["passthrough"] and ours["passthrough"] is not inputs["x_f64"]
    # and the written IR reads back into the same model
    assert fov.read_model(xml_path, bin_path).to_xml() == model.to_xml()


def test_attribute_spellings_compatible_mode_reads_like_openvino(ov, core):
    spellings = [None, "true", "false", "TRUE", "False", "1", "0", "no", "off", "", " false", "00",
                 "yes", "nope"]
    layers, edges = [parameter_xml(0, "x", "f32")], []
    lid = 1
    for neg in spellings:
        for pos in (None, "0", "no"):
            attrs = " ".join(f'{k}="{v}"' for k, v in (("detect_negative", neg),
                                                        ("detect_positive", pos)) if v is not None)
            name = f"r{lid}"
            layers += [op_xml(lid, f"l{lid}", "IsInf", f"<data {attrs}/>" if attrs else "", "FP32",
                              out_names=name), result_xml(lid + 1, name)]
            edges += [edge_xml(0, 0, lid, 0), edge_xml(lid, 1, lid + 1, 0)]
            lid += 2
    xml = net_xml(layers, edges)
    x = np.array([-np.inf, np.inf, 0.0, np.nan], np.float32)
    theirs = ov_infer(ov, core, xml, {"x": x})
    ours = fov.read_model(xml, openvino_compatible=True).infer({"x": x})
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    # OpenVINO's documented reading: only "false"/"0" (any case) are false
    assert theirs["r19"].tolist() == [True, True, False, False]      # detect_negative="no"
    with pytest.raises(fov.IRError, match=r"IsInf layer 'l\d+' \(id \d+\): attribute detect_\w+='no'"):
        fov.read_model(xml)


def test_ir_v10_reads_like_openvino(ov, core):
    xml = all_ops_ir(["f32"], version=10)
    x = inputs_for("f32")
    theirs = ov_infer(ov, core, xml, {"x_f32": x})  # v10 legacy: OpenVINO hands back f32 0/1
    ours = fov.read_model(xml).infer({"x_f32": x})
    for op in OPS:
        assert_matches_openvino("f32", op, x, ours[f"{op}_f32"], theirs[f"{op}_f32"])
        assert ours[f"layer_{op}_f32"] is ours[f"{op}_f32"]   # v10: the layer name names it too


SPEC_ISINF = """<?xml version="1.0"?>
<net name="spec_isinf" version="11"><layers>
<layer id="0" name="data" type="Parameter" version="opset1">
    <data shape="256,128" element_type="f32"/>
    <output><port id="0" precision="FP32"><dim>256</dim><dim>128</dim></port></output>
</layer>
<layer id="1" name="isinf" type="IsInf" version="opset10">
    <data detect_negative="true" detect_positive="true"/>
    <input><port id="0" precision="FP32"><dim>256</dim><dim>128</dim></port></input>
    <output><port id="0" precision="BOOL"><dim>256</dim><dim>128</dim></port></output>
</layer>
<layer id="2" name="out" type="Result" version="opset1">
    <input><port id="0" precision="BOOL"><dim>256</dim><dim>128</dim></port></input>
</layer>
</layers><edges>
<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
<edge from-layer="1" from-port="0" to-layer="2" to-port="0"/>
</edges></net>"""


def spec_isfinite(dims):
    d = "".join(f"<dim>{n}</dim>" for n in dims)
    return f"""<?xml version="1.0"?>
<net name="spec_isfinite" version="11"><layers>
<layer id="0" name="data" type="Parameter" version="opset1">
    <data shape="{','.join(map(str, dims))}" element_type="f32"/>
    <output><port id="0" precision="FP32">{d}</port></output>
</layer>
<layer id="1" name="isfinite" type="IsFinite" version="opset10">
    <input><port id="0" precision="FP32">{d} <!-- Input value is: [NaN, 2.1, 3.7, Inf] --></port>
    </input>
    <output><port id="1" precision="BOOL">{d}</port></output>
</layer>
<layer id="2" name="out" type="Result" version="opset1">
    <input><port id="0" precision="BOOL">{d}</port></input>
</layer>
</layers><edges>
<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
<edge from-layer="1" from-port="1" to-layer="2" to-port="0"/>
</edges></net>"""


@pytest.mark.parametrize("xml, shape, op", [
    (SPEC_ISINF, (256, 128), "inf11"),
    (spec_isfinite([256, 56]), (256, 56), "finite"),
    (spec_isfinite([4]), (4,), "finite"),
])
def test_spec_examples_completed_into_ir(ov, core, xml, shape, op):
    if shape == (4,):
        x = np.array([np.nan, 2.1, 3.7, np.inf], np.float32)
    else:
        x = samples.random_bits(np.float32, int(np.prod(shape)), seed=1).reshape(shape)
        x.flat[::7] = np.inf
        x.flat[3::11] = -np.inf
    ours = fov.read_model(xml).infer({"data": x})["out"]
    compiled = core.compile_model(ov_read(ov, core, xml), "CPU")
    theirs = np.asarray(compiled({0: x})[0])
    assert_matches_openvino("f32", op, x, ours, theirs)
    if shape == (4,):
        assert ours.tolist() == [False, True, True, False]   # the spec's own answer


# -- formats OpenVINO validates but cannot evaluate ------------------------------------------------

def test_narrow_formats_exhaustively_against_float32_values(ov, core):
    b = fov.Builder("narrow")
    for fmt in FPCLASS_ONLY:
        x = b.parameter(f"x_{fmt}", fmt, None)   # dynamic rank
        b.result(b.is_nan(x), f"nan_{fmt}")
        b.result(b.is_finite(x), f"finite_{fmt}")
        for n, p in FLAGS:
            b.result(b.is_inf(x, detect_negative=n, detect_positive=p), f"inf{n:d}{p:d}_{fmt}")
    model = b.build()
    bits = {fmt: 16 if fmt == "f4e2m1" else 256 for fmt in FPCLASS_ONLY}
    inputs = {f"x_{fmt}": np.arange(bits[fmt], dtype=np.uint8).view(dt)
              for fmt, dt in FPCLASS_ONLY.items()}
    ours = model.infer(inputs)
    for fmt in FPCLASS_ONLY:
        v = inputs[f"x_{fmt}"].astype(np.float32)   # ml_dtypes' own conversion
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(ours[f"nan_{fmt}"], np.isnan(v))
            np.testing.assert_array_equal(ours[f"finite_{fmt}"], np.isfinite(v))
            for n, p in FLAGS:
                np.testing.assert_array_equal(ours[f"inf{n:d}{p:d}_{fmt}"],
                                              (np.isneginf(v) & n) | (np.isposinf(v) & p))
    # OpenVINO validates the same IR (its CPU plugin cannot compile it)
    ov_model = ov_read(ov, core, model.to_xml())
    assert [str(p.get_element_type()) for p in ov_model.get_parameters()] == \
        [str(getattr(ov.Type, fmt)) for fmt in FPCLASS_ONLY]
    assert all(p.get_partial_shape().rank.is_dynamic for p in ov_model.get_parameters())


# -- inputs in any layout --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def all_ops_f64():
    return fov.read_model(all_ops_ir(["f64"]).replace('shape="?"', 'shape="..."')
                          .replace("<dim>-1</dim>", ""))


def layouts():
    base = np.concatenate([samples.specials(np.float64), samples.random_bits(np.float64, 64)])
    grid = base[:84].reshape(7, 12)
    ro = grid.copy()
    ro.flags.writeable = False
    return {"strided": grid[:, ::3], "negative_stride": grid[::-1, ::-2], "transposed": grid.T,
            "byteswapped": grid.astype(">f8"), "read_only": ro, "empty": np.empty((0, 3)),
            "zero_d": np.array(-np.inf), "3d": base[:60].reshape(3, 4, 5)}


@pytest.mark.parametrize("name, x", list(layouts().items()))
def test_any_input_layout(all_ops_f64, name, x):
    before = x.copy()
    ours = all_ops_f64.infer([x])
    for op in OPS:
        got = ours[f"{op}_f64"]
        assert got.shape == x.shape and got.dtype == bool
        np.testing.assert_array_equal(got, truth(op, x), err_msg=f"{op} {name}")
    np.testing.assert_array_equal(x, before)


# -- input checking --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shaped():
    b = fov.Builder("shaped")
    b.result(b.is_nan(b.parameter("a", "f32", [2, -1, (2, 4)])), "a_nan")
    b.result(b.is_nan(b.parameter("b", "f16", [])), "b_nan")
    return b.build()


@pytest.mark.parametrize("inputs, match", [
    ({"a": np.zeros((2, 5, 3), np.int32), "b": np.float16(0)}, "int32.*floating point number"),
    ({"a": np.zeros((2, 5, 3), np.float64), "b": np.float16(0)}, "float64; expected float32"),
    ({"a": np.zeros((3, 5, 3), np.float32), "b": np.float16(0)}, r"shape \[3, 5, 3\].*'2,\?,2..4'"),
    ({"a": np.zeros((2, 5, 5), np.float32), "b": np.float16(0)}, "does not allow"),
    ({"a": np.zeros((2, 5), np.float32), "b": np.float16(0)}, "does not allow"),
    ({"a": np.zeros((2, 5, 3), np.float32), "b": np.zeros(1, np.float16)}, "does not allow"),
    ({"a": np.zeros((2, 5, 3), np.float32)}, r"missing value for input\(s\) \['b'\]"),
    ({"a": np.zeros((2, 5, 3), np.float32), "b": np.float16(0), "c": 1.0}, "no model input 'c'"),
    ({0: np.zeros((2, 5, 3), np.float32), "a": np.zeros((2, 5, 3), np.float32)}, "given twice"),
])
def test_bad_inputs_are_named(shaped, inputs, match):
    with pytest.raises(fov.InputError, match=match):
        shaped.infer(inputs)


def test_inputs_by_index_name_and_plain_lists(shaped):
    out = shaped.infer({0: [[[np.inf, 1.0]] * 3] * 2, "b": np.float16(np.nan)})
    assert out["a_nan"].shape == (2, 3, 2) and not out[0].any()
    assert out[1].shape == () and out["b_nan"][()]
    assert out[-1] is out["b_nan"] and len(out) == 2 and list(out) == ["a_nan", "b_nan"]
    with pytest.raises(KeyError, match="no output 'zzz'"):
        out["zzz"]
    with pytest.raises(KeyError, match="out of range"):
        out[2]


# -- malformed IR ----------------------------------------------------------------------------------

def small_ir(op_type="IsNaN", data="", precision="FP32", etype="f32", extra_layers=(),
             edges=None, in_dims=(4,), out_dims=(4,), version=11, out_precision="BOOL",
             op_version="opset10", shape="4"):
    layers = [parameter_xml(0, "x", etype, shape, (4,), precision),
              op_xml(1, "op", op_type, data, precision, in_dims, version=op_version,
                     out_precision=out_precision, out_dims=out_dims),
              result_xml(2, "r", out_precision, out_dims), *extra_layers]
    if edges is None:
        edges = [edge_xml(0, 0, 1, 0), edge_xml(1, 1, 2, 0)]
    return net_xml(layers, edges, version)


BILLION_LAUGHS = ('<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaaaaaaaa">'
                  '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><net version="11">&b;</net>')
EXTERNAL = ('<?xml version="1.0"?><!DOCTYPE net SYSTEM "file:///etc/passwd">'
            '<net version="11"/>')

MALFORMED = {
    "not xml": (b"this is not <xml>", "not well-formed XML"),
    "truncated": (small_ir()[:-20], "not well-formed XML.*line"),
    "entities": (BILLION_LAUGHS, "DOCTYPE"),
    "external entity": (EXTERNAL, "DOCTYPE"),
    "wrong root": ("<graph/>", "root element is <graph>"),
    "ir version": (small_ir(version=7), "IR version 7 is not supported; accepted: 10, 11"),
    "missing edge": (small_ir(edges=[edge_xml(1, 1, 2, 0)]),
                     r"IsNaN layer 'op' \(id 1\): input port 0 has no incoming edge"),
    "dangling port": (small_ir(edges=[edge_xml(0, 0, 1, 3), edge_xml(1, 1, 2, 0)]),
                      r"has no input port 3 \(dangling edge\)"),
    "edge to nowhere": (small_ir(edges=[edge_xml(0, 0, 1, 0), edge_xml(1, 1, 9, 0)]),
                        "there is no layer with id 9"),
    "two edges into a port": (small_ir(edges=[edge_xml(0, 0, 1, 0), edge_xml(1, 1, 2, 0),
                                              edge_xml(0, 0, 1, 0)]), "already has an incoming"),
    "cycle": (net_xml([op_xml(1, "a", "IsNaN", "", "FP32"), op_xml(2, "b", "IsNaN", "", "FP32"),
                       result_xml(3, "r")],
                      [edge_xml(1, 1, 2, 0), edge_xml(2, 1, 1, 0), edge_xml(2, 1, 3, 0)]),
              "cycle through.*'a'.*'b'|cycle through.*'b'.*'a'"),
    "dims disagree": (small_ir(in_dims=(5,), out_dims=(5,)),
                      r"dims \[5\] disagree with \[4\] on output port 0 of Parameter layer 'x'"),
    "output dims": (small_ir(out_dims=(2, 2)), r"output port dims \[2, 2\] differ"),
    "precision disagrees": (small_ir().replace('<input><port id="0" precision="FP32">',
                                               '<input><port id="0" precision="FP16">'),
                            "precision FP16 disagrees with FP32"),
    "shape vs dims": (small_ir(shape="5"), r"dims \[4\] disagree with shape '5'"),
    "unknown precision": (small_ir(precision="FP33"), "unknown element type 'FP33'"),
    "unknown layer type": (small_ir(op_type="IsNumber"),
                           r"layer 'op' \(id 1\): unsupported layer type 'IsNumber'; supported: "
                           "Parameter, Result, IsInf, IsFinite, IsNaN"),
    "opset too old": (small_ir(op_version="opset1"), "version 'opset1' does not define IsNaN"),
    "attribute value": (small_ir("IsInf", '<data detect_positive="off"/>'),
                        r"IsInf layer 'op' \(id 1\): attribute detect_positive='off'"),
    "unknown attribute": (small_ir("IsInf", '<data detect_negtive="false"/>'),
                          "unknown attribute.*detect_negtive; accepted: detect_negative"),
    "absent element_type": (small_ir().replace(' element_type="f32"', ""),
                            "required attribute 'element_type' is absent"),
    "absent shape": (small_ir().replace(' shape="4"', ""), "required attribute 'shape' is absent"),
    "absent layer id": (small_ir().replace('<layer id="1"', "<layer"),
                        "layer #1: required attribute 'id' is absent"),
    "bad dim": (small_ir().replace("<dim>4</dim>", "<dim>four</dim>", 1), "<dim>four</dim> is not"),
    "bad shape": (small_ir(shape="4x"), "'4x' is not a dimension size"),
    "integer input": (small_ir(etype="i32", precision="I32"),
                      "input element type i32 must be a floating point number"),
    "output not bool": (small_ir(out_precision="FP32"), "precision FP32 must be BOOL"),
    "duplicate id": (small_ir(extra_layers=[result_xml(2, "again")]), "layer id 2 is used by both"),
    "no result": (net_xml([parameter_xml(0, "x", "f32")], []), "no Result layer"),
    "precision as element_type": (small_ir(etype="FP32"), "is a port precision"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_ir_gives_a_clear_error(case):
    xml, match = MALFORMED[case]
    with pytest.raises(fov.IRError, match=match) as info:
        fov.read_model(xml)
    assert info.value.__cause__ is None   # never a chained traceback from deep inside


def test_files_and_weights(tmp_path):
    path = tmp_path / "m.xml"
    path.write_text(small_ir("IsInf"))
    model = fov.read_model(path)
    assert model.infer([np.array([np.inf, 1, np.nan, -np.inf], np.float32)])[0].tolist() == \
        [True, False, False, True]
    with pytest.raises(fov.IRError, match="weights file .* does not exist"):
        fov.read_model(path, tmp_path / "m.bin")
    with pytest.raises(fov.IRError, match="cannot read IR file"):
        fov.read_model(tmp_path / "absent.xml")
    with pytest.raises(TypeError, match="xml must be a path"):
        fov.read_model(3)


def test_builder_refuses_bad_arguments():
    b = fov.Builder()
    x = b.parameter("x", "f32", [4])
    with pytest.raises(TypeError, match="detect_negative must be a bool"):
        b.is_inf(x, detect_negative="no")
    with pytest.raises(fov.IRError, match="not an output of a layer of this builder"):
        fov.Builder().is_nan(x)
    with pytest.raises(fov.IRError, match="already exists"):
        b.parameter("x", "f16", [4])
    with pytest.raises(fov.IRError, match="no OpenVINO real element type"):
        b.parameter("y", np.complex64, [4])
    with pytest.raises(fov.IRError, match="input element type i32 must be a floating point"):
        b.result(b.is_nan(b.parameter("i", "i32", [4])))
        b.build()


def test_import_needs_no_openvino():
    code = ("import sys, fpclass.openvino, fpclass.dialects.openvino as d; "
            "assert fpclass.openvino.read_model is d.read_model; "
            "assert 'openvino' not in sys.modules, 'openvino was imported'")
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True)
