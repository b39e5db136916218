"""fpclass.check: the arrays a program holds (a model, a state dict, a list), reported as fpclass
scan reports files. Counts and first locations against torch's own answers, for every dtype and
layout; names, statuses and exit codes; the scan's JSON schema and rendering."""

import io
import json
import warnings

import numpy as np
import pytest

import fpclass
from fpclass.scan import SCHEMA, ExitCode, ScanReport
from fpclass.results.render import plain_lines

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")

FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e5m2,
          torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu]
COMPLEX = [torch.complex128, torch.complex64, torch.complex32]


def truth(t, limit=5):
    """(nan, +inf, -inf, first locations) from torch's own functions on torch's own exact
    widening of the values; complex tensors as their parts (a trailing index 0 / 1), as the scan
    reports them."""
    v = t.detach()
    negated = v.is_neg()
    if negated:  # torch cannot negate float8 values: widen the stored ones, then negate
        v = torch._neg_view(v)
    v = v.resolve_conj()
    v = torch.view_as_real(v.to(torch.complex128)) if v.is_complex() else v.double()
    if negated:
        v = -v
    nan, pinf, ninf = torch.isnan(v), torch.isposinf(v), torch.isneginf(v)
    rows = torch.nonzero(nan | pinf | ninf)[:limit].tolist()
    classes = ["nan" if nan[tuple(r)] else "posinf" if pinf[tuple(r)] else "neginf" for r in rows]
    return (int(nan.sum()), int(pinf.sum()), int(ninf.sum()),
            [(tuple(r), c) for r, c in zip(rows, classes)])


def found(result):
    return (result.nan, result.posinf, result.neginf,
            [(loc.index, loc.cls) for loc in result.locations])


def planted(dtype, shape=(6, 5)):
    t = torch.randn(shape).to(dtype) if dtype != torch.float8_e8m0fnu else \
        torch.rand(shape).add(0.5).to(dtype)
    flat = t.view(-1)
    flat[7] = float("nan")
    if dtype not in (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
                     torch.float8_e8m0fnu):  # formats with Inf
        flat[3] = float("inf")
        flat[-1] = -float("inf")
    return t


def planted_complex(dtype):
    t = torch.randn(6, 5, dtype=torch.complex64).to(dtype)
    flat = t.view(-1)
    flat[4] = complex(float("nan"), 1)
    flat[9] = complex(2, float("inf"))
    flat[20] = complex(-float("inf"), -float("inf"))
    return t


def layouts(t):
    yield "contiguous", t
    yield "transposed", t.t()
    yield "strided", t[::2, 1:]
    if not t.is_complex():
        yield "negated", torch._neg_view(t)
    else:
        yield "conjugated", t.conj()
        yield "imag of conjugate", t.conj().imag
    if t.dtype.is_floating_point:
        yield "parameter", torch.nn.Parameter(t.clone(), requires_grad=t.dtype in (
            torch.float64, torch.float32, torch.float16, torch.bfloat16))


@pytest.mark.parametrize("dtype", FLOATS + COMPLEX, ids=str)
def test_counts_and_locations_against_torch(dtype):
    base = planted_complex(dtype) if dtype in COMPLEX else planted(dtype)
    cases = dict(layouts(base))
    report = fpclass.check(cases)
    assert isinstance(report, ScanReport)
    assert [t.name for t in report.tensors] == list(cases)
    for result in report.tensors:
        tensor = cases[result.name]
        assert result.status == "checked", result.reason
        assert found(result) == truth(tensor), result.name
        assert result.dtype == str(tensor.dtype).removeprefix("torch.")
        assert result.shape == tuple(tensor.shape)


def test_numpy_and_jax_arrays_too():
    import ml_dtypes
    a = np.ones((3, 4), ml_dtypes.bfloat16)
    a[2, 1] = np.nan
    b = np.ones(5, ">f4")
    b[4] = -np.inf
    items = {"a": a, "b": b, "a.T": a.T}
    jnp = pytest.importorskip("jax.numpy")
    items["jax"] = jnp.asarray(a)
    report = fpclass.check(items)
    got = {t.name: found(t) for t in report.tensors}
    assert got == {"a": (1, 0, 0, [((2, 1), "nan")]), "b": (0, 0, 1, [((4,), "neginf")]),
                   "a.T": (1, 0, 0, [((1, 2), "nan")]), "jax": (1, 0, 0, [((2, 1), "nan")])}
    assert {t.dtype for t in report.tensors} == {"bfloat16", ">f4"}


def test_a_module_its_buffers_and_gradients():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    with torch.no_grad():
        model[0].weight[1, 2] = float("nan")
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    report = fpclass.check(model)
    assert [t.name for t in report.tensors] == names
    assert [t.name for t in report.failing] == ["0.weight"]
    assert report.failing[0].locations[0].index == (1, 2)
    assert report.exit_code == ExitCode.FOUND
    by_name = {t.name: t for t in report.tensors}
    assert by_name["1.num_batches_tracked"].status == "not_applicable"

    with torch.no_grad():
        model[0].weight[1, 2] = 0.0
    model(torch.randn(8, 4)).sum().backward()
    with torch.no_grad():
        model[1].bias.grad[0] = float("inf")
    clean = fpclass.check(model)
    assert clean.exit_code == ExitCode.CLEAN and not clean.failing
    with_grads = fpclass.check(model, grads=True)
    assert "0.weight.grad" in [t.name for t in with_grads.tensors]
    assert [t.name for t in with_grads.failing] == ["1.bias.grad"]


def test_fail_on_and_exit_codes():
    items = [np.array([1.0, np.inf]), np.array([np.nan], np.float32)]
    assert [t.name for t in fpclass.check(items).tensors] == ["0", "1"]
    assert fpclass.check(items, fail_on="posinf").failing[0].name == "0"
    assert fpclass.check(items[1:], fail_on="inf").exit_code == ExitCode.CLEAN
    assert fpclass.check([np.ones(3)]).exit_code == ExitCode.CLEAN
    assert fpclass.check([]).exit_code == ExitCode.INCONCLUSIVE  # nothing checked is never clean
    with pytest.raises(ValueError, match="fail_on= names an unknown class 'nans'"):
        fpclass.check(items, fail_on="nans")


def test_nested_state_dicts_and_what_cannot_be_read():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sparse = torch.tensor([[0.0, float("nan")]]).to_sparse()
    state = {"model": {"w": torch.ones(2)}, "optimizer": {"state": {0: {"exp_avg": torch.ones(3)}},
                                                          "param_groups": [{"lr": 0.1}]},
             "meta": torch.empty(2, device="meta"), "sparse": sparse, "steps": torch.tensor(3),
             "fp4": torch.zeros(2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)}
    report = fpclass.check(state)
    by_name = {t.name: t for t in report.tensors}
    assert set(by_name) == {"model.w", "optimizer.state.0.exp_avg", "optimizer.param_groups.0.lr",
                            "meta", "sparse", "steps", "fp4"}
    assert by_name["optimizer.param_groups.0.lr"].status == "checked"  # a Python float: a value
    assert by_name["meta"].status == "unchecked" and ".cpu()" in by_name["meta"].reason
    assert by_name["sparse"].status == "unchecked" and "values()" in by_name["sparse"].reason
    assert by_name["steps"].status == "not_applicable"
    assert by_name["fp4"].status == "checked" and by_name["fp4"].bytes_checked == 0
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_many_tensors_and_large_ones():
    small = {f"t{i}": torch.ones(1 + i % 37, dtype=torch.bfloat16) for i in range(3000)}
    small["t1234"][-1] = float("nan")
    small["t2999"][0] = -float("inf")
    large = {f"big{i}": torch.ones(1 << 20, dtype=torch.float16) for i in range(6)}
    large["big4"][(1 << 20) - 1] = float("inf")  # the last element of a piece boundary's tensor
    report = fpclass.check({**small, **large})
    assert [(t.name, found(t)) for t in report.failing] == [
        ("t1234", (1, 0, 0, [((small["t1234"].numel() - 1,), "nan")])),
        ("t2999", (0, 0, 1, [((0,), "neginf")])),
        ("big4", (0, 1, 0, [(((1 << 20) - 1,), "posinf")]))]
    every = {**small, **large}.values()
    assert sum(t.values_checked for t in report.tensors) == sum(t.numel() for t in every)


def test_the_report_follows_the_scan_schema_and_renders_the_same_way():
    report = fpclass.check({"layer.weight": np.array([[1.0, np.nan]], np.float32)})
    doc = report.to_dict()
    assert doc["schema"] == SCHEMA and doc["exit_code"] == 1 and doc["status"] == "found"
    entry = doc["tensors"][0]
    assert entry["name"] == "layer.weight" and entry["nan"] == 1 and entry["shape"] == [1, 2]
    assert entry["locations"] == [{"index": [0, 1], "class": "nan"}]
    stream = io.StringIO()
    report.write_json(stream)
    assert json.loads(stream.getvalue()) == doc
    lines = list(plain_lines(report))
    assert lines[0] == "found: layer.weight: float32[1, 2]: nan=1 posinf=0 neginf=0 of 2: at [0, 1] nan"
    assert lines[-1].startswith("summary: ") and lines[-1].endswith("-> found (exit 1)")
    assert str(report) == "\n".join(lines)


def test_lazy_dask_arrays_are_not_computed_behind_the_callers_back():
    da = pytest.importorskip("dask.array")
    report = fpclass.check({"lazy": da.ones(4, chunks=2)})
    assert report.tensors[0].status == "unchecked" and "compute()" in report.tensors[0].reason
