"""Per-tensor statistics (value_stats, the scan's and check's `stats`) and the --fail-on gates,
against NumPy: every 8- and 16-bit pattern, the plain-NumPy twin's class counts, and NumPy's min
and max of the same values widened to float64 (ml_dtypes decodes its formats)."""

import json

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import twin
from fpclass.operators.statistics import value_stats
from fpclass.results.report import parse_fail_on
from fpclass.scan import ExitCode, scan
from test_scan_support import safetensors_bytes

EIGHT_BIT = [n for n in fpclass.formats.ML_DTYPES_NAMES
             if fpclass.formats.FORMATS[n].itemsize == 1 and "complex" not in n]
#: Copies of the 256 patterns: above numpy_bits.SMALL_BYTES, so the numba kernel answers.
KERNEL_COPIES = 129


def truth(a: np.ndarray):
    """(values, nonfinite, zero, subnormal, normal, min, max, absmax) of `a` from NumPy alone:
    the twin's class counts and the finite values widened to float64."""
    c = twin.class_counts(a)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        v = twin.values(a).astype(np.float64).reshape(-1)
    finite = v[np.isfinite(v)]
    ends = (finite.min(), finite.max(), np.abs(finite).max()) if finite.size else (None,) * 3
    return (a.size, a.size - c.finite, c.zero, c.subnormal, c.normal,
            *(None if e is None else float(e) for e in ends))


def same(got, expected):
    assert tuple(got) == expected, (tuple(got), expected)


@pytest.mark.parametrize("name", EIGHT_BIT)
@pytest.mark.parametrize("copies", [1, KERNEL_COPIES])
def test_every_8_bit_pattern(name, copies):
    dtype = np.dtype(getattr(ml_dtypes, name))
    a = np.tile(np.arange(256, dtype=np.uint8), copies).view(dtype)
    same(value_stats(a), truth(a))
    rng = np.random.default_rng(len(name))
    for part in (a[:7], a[rng.permutation(a.size)[:300]], a[5::3], a[::-1]):
        same(value_stats(part), truth(part))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_every_16_bit_pattern_both_byte_orders(name):
    dtype = np.dtype(getattr(ml_dtypes, name) if name == "bfloat16" else name)
    words = np.arange(1 << 16, dtype=np.uint16)
    a = words.view(dtype)
    same(value_stats(a), truth(a))
    same(value_stats(a[::7]), truth(a[::7]))
    # Foreign byte order: the same values stored swapped (float16 as '>f2'; bfloat16, which has
    # no swapped dtype, through the kernel's swap on the raw words, compared on the values).
    if name == "float16":
        b = a.astype(">f2")
        same(value_stats(b), truth(a))
        same(value_stats(b[1::5]), truth(a[1::5]))


@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", ">f8"])
def test_wide_floats_any_layout(dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((64, 300)) * 1e3).astype(dtype)
    a[3, 4], a[5, 6], a[7, 8], a[9, 10] = np.nan, np.inf, -np.inf, 0.0
    a[11, 12] = np.finfo(dtype).smallest_subnormal * -3
    a[13, 14] = -np.finfo(dtype).max  # the extreme finite values still win
    for v in (a, a.T, a[::-3, 1::7], a[:, ::-1], a[:0], a[0, 0], np.asarray(a[3, 4])):
        same(value_stats(v), truth(v))
    ro = a.copy()
    ro.flags.writeable = False
    same(value_stats(ro), truth(a))


def test_all_non_finite_and_empty_have_no_extremes():
    assert value_stats(np.array([np.nan, np.inf], np.float32)).min is None
    s = value_stats(np.zeros((2, 0), np.float64))
    assert (s.values, s.min, s.max, s.absmax) == (0, None, None, None)
    with pytest.raises(TypeError, match="real floating-point"):
        value_stats(np.arange(3))


def test_many_threads_merge():
    a = np.random.default_rng(3).standard_normal(1 << 23).astype(np.float32)
    a[12345] = 77.0
    a[-5] = -99.0
    a[1 << 22] = np.nan
    same(value_stats(a), truth(a))


# -- fpclass.check -----------------------------------------------------------------------------

def test_check_statistics_match_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    base = rng.standard_normal((6, 10)).astype(np.float32)
    items = {"strided": base[::2, 1::3], "empty": np.zeros((0, 4), np.float32),
             "scalar": np.float64(-2.5), "zero_d": np.array(4.0, np.float16),
             "bf16": base.astype(ml_dtypes.bfloat16), "nan": np.array([1.0, np.nan, -3.0]),
             "torch": torch.from_numpy(base.copy()), "complex": np.array([1 + 2j, -5j], np.complex64)}
    assert all(t.stats is None for t in fpclass.check(items).tensors)  # asked for only
    report = fpclass.check(items, stats=True)
    got = {t.name: t.stats for t in report.tensors}
    for name, x in items.items():
        a = x.numpy() if name == "torch" else np.asarray(x)
        if name == "complex":
            a = np.stack([a.real, a.imag], axis=-1)
        expected = truth(a)
        assert tuple(got[name][:5]) == expected[:5], name
        assert got[name][5:] == expected[5:], name
    doc = json.loads(report.to_json())
    entry = next(t for t in doc["tensors"] if t["name"] == "nan")
    assert entry["stats"] == {"zero": 0, "subnormal": 0, "normal": 2, "min": -3.0, "max": 1.0,
                              "absmax": 3.0}


def test_negated_torch_tensor_statistics_are_of_the_values():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, -4.0, float("nan")])
    report = fpclass.check({"neg": torch.neg(t), "lazy": t._neg_view()}, stats=True)
    for r in report.tensors:
        assert (r.stats.min, r.stats.max, r.stats.absmax) == (-1.0, 4.0, 4.0), r.name


# -- the scan ----------------------------------------------------------------------------------

def _file(tmp_path, tensors):
    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors_bytes(tensors))
    return path


def test_scan_statistics_per_format_and_across_parts(tmp_path):
    rng = np.random.default_rng(5)
    f32 = (rng.standard_normal((40, 50)) * 300).astype(np.float32)
    f32[1, 2] = np.nan
    arrays = {"f32": ("F32", f32), "bf16": ("BF16", f32.astype(ml_dtypes.bfloat16)),
              "f16": ("F16", f32.astype(np.float16)),
              "e4m3": ("F8_E4M3", np.clip(f32, -448, 448).astype(ml_dtypes.float8_e4m3fn)),
              "e5m2": ("F8_E5M2", f32.astype(ml_dtypes.float8_e5m2)),
              "zeros": ("F32", np.zeros(9, np.float32))}
    path = _file(tmp_path, {k: (d, a, a.shape) for k, (d, a) in arrays.items()})
    assert all(t.stats is None for t in scan([path], stats=False).tensors)
    for kw in ({}, {"task_bytes": 512, "chunk_bytes": 256}):  # whole, and in many parts
        report = scan([path], **kw)
        got = {t.name: t.stats for t in report.tensors}
        for name, (_, a) in arrays.items():
            same(got[name], truth(a))
    doc = json.loads(report.to_json())
    assert doc["schema"] == "fpclass.scan/3"
    z = next(t for t in doc["tensors"] if t["name"] == "zeros")
    assert z["stats"] == {"zero": 9, "subnormal": 0, "normal": 0, "min": 0.0, "max": 0.0,
                          "absmax": 0.0}


def test_gates_fire_on_the_tensors_numpy_names(tmp_path):
    rng = np.random.default_rng(9)
    arrays = {"big": rng.standard_normal(50).astype(np.float32) * 1e5,
              "small": rng.standard_normal(50).astype(np.float32),
              "edge": np.array([-10.0, 3.0], np.float32), "zero": np.zeros(4, np.float32),
              "neg_zero": np.array([-0.0, 0.0], np.float32),
              "sub": np.array([1.0, np.finfo(np.float32).smallest_subnormal], np.float32),
              "nan_only": np.array([np.nan, 0.0], np.float32)}
    path = _file(tmp_path, {k: ("F32", a, a.shape) for k, a in arrays.items()})

    def fired(spec):
        report = scan([path], fail_on=spec)
        return report, {(t.name, str(g)): v for t, g, v in report.gate_findings}

    def finite(a):
        return a[np.isfinite(a)]
    report, found = fired("absmax>10")
    assert {n for n, _ in found} == {n for n, a in arrays.items()
                                     if finite(a).size and np.abs(finite(a)).max() > 10}
    assert found[("big", "absmax>10")] == float(np.abs(arrays["big"]).max())
    assert report.exit_code == ExitCode.FOUND and "gate" in str(report)
    _, found = fired("absmax>=10")
    assert ("edge", "absmax>=10") in found
    _, found = fired("all-zero")
    assert {n for n, _ in found} == {n for n, a in arrays.items() if np.all(a == 0)}
    _, found = fired("subnormal")
    assert set(found) == {("sub", "subnormal")}
    gated = scan([path], fail_on="subnormal", stats=False)  # a gate needs the statistics
    assert [(t.name, v) for t, _, v in gated.gate_findings] == [("sub", 1)]
    report = scan([path], fail_on="")
    assert report.exit_code == ExitCode.CLEAN and not report.gate_findings
    doc = json.loads(scan([path], fail_on="nan,subnormal").to_json())
    assert doc["gate_findings"] == [{"file": str(path), "name": "sub", "gate": "subnormal",
                                     "value": 1}]
    assert "subnormal" in doc["fail_on"]


@pytest.mark.parametrize("bad", ["absmax>", "absmax>lots", "absmax>nan", "absmax<3", "al-zero"])
def test_bad_gate_text_names_what_is_accepted(bad):
    with pytest.raises(ValueError, match="absmax>X") as e:
        parse_fail_on(f"nan,{bad}")
    assert repr(bad) in str(e.value)


def test_check_takes_gates():
    report = fpclass.check({"w": np.zeros(3, np.float32), "b": np.ones(2)}, fail_on="all-zero")
    assert [t.name for t in report.failing] == ["w"] and report.exit_code == ExitCode.FOUND


def test_gates_from_the_command_line(tmp_path):
    """The command line hands its parsed gates to the scan (they used to be refused there)."""
    import io
    from fpclass.cli import main
    w = np.array([0.5, -2.5, 1.0], np.float32)
    np.save(tmp_path / "w.npy", w)
    out = io.StringIO()
    code = main(["scan", str(tmp_path / "w.npy"), "--fail-on", "absmax>2"], stdout=out,
                stderr=io.StringIO())
    assert code == 1
    (gate,) = [line for line in out.getvalue().splitlines() if line.startswith("gate:")]
    assert f"({float(np.abs(w).max()):g})" in gate
    code = main(["scan", str(tmp_path / "w.npy"), "--fail-on", "absmax>3"],
                stdout=io.StringIO(), stderr=io.StringIO())
    assert code == 0


def test_a_nan_fill_value_attribute_is_no_zero(tmp_path):
    """A NaN _FillValue attribute declares the blank: it is not counted, and it is no zero for
    the all-zero gate (its statistics are left out)."""
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(tmp_path / "a.nc", "w") as d:
        d.createDimension("x", 3)
        v = d.createVariable("t", "f4", ("x",), fill_value=np.float32("nan"))
        v[:] = np.array([1.0, 2.0, 3.0], np.float32)
    report = scan([tmp_path / "a.nc"], fail_on="all-zero")
    assert not report.gate_findings and int(report.exit_code) == 0
    (attr,) = [t for t in report.tensors if t.name == "t@_FillValue"]
    assert attr.stats is None and attr.nan == 0


def test_sarif_carries_gates_and_out_of_range_values(tmp_path):
    """Gate findings and CF out-of-range values are SARIF results (the log stays valid SARIF)."""
    import io
    import pathlib
    jsonschema = pytest.importorskip("jsonschema")
    netCDF4 = pytest.importorskip("netCDF4")
    from fpclass.cli import main
    with netCDF4.Dataset(tmp_path / "a.nc", "w") as d:
        d.createDimension("x", 4)
        v = d.createVariable("t", "f4", ("x",))
        v.valid_max = np.float32(10)
        v[:] = np.array([1.0, 50.0, 3.0, 70.0], np.float32)
    out = io.StringIO()
    code = main(["scan", str(tmp_path / "a.nc"), "--format", "sarif", "--fail-on",
                 "out-of-range,absmax>2"], stdout=out, stderr=io.StringIO())
    log = json.loads(out.getvalue())
    schema = pathlib.Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
    jsonschema.Draft4Validator(json.loads(schema.read_text())).validate(log)
    results = {(r["ruleId"], r["message"]["text"].split(":")[0]): r
               for r in log["runs"][0]["results"]}
    # the data's in-range values (out-of-range ones have no statistics) and the attribute
    assert code == 1 and set(results) == {("out_of_range", "t"), ("gate", "t"),
                                          ("gate", "t@valid_max")}
    truth = v_truth()
    assert results["out_of_range", "t"]["properties"]["count"] == int(np.sum(truth > 10)) == 2
    gate = results["gate", "t"]
    assert gate["level"] == "error" and f"({truth[truth <= 10].max():g})" in gate["message"]["text"]


def v_truth():
    return np.array([1.0, 50.0, 3.0, 70.0], np.float32)
