"""fpclass.check fails closed: everything it is given is classified, reported unchecked with the
reason, or proven to hold no float data — modules, frames, xarray objects and Python numbers
inside containers, a parameter's .grad, pd.NA (missing, never NaN), lazy data (never computed),
text and object arrays, deep and cyclic nesting. Truth: torch's, NumPy's, pandas' and xarray's
own answers on the same values."""

import math

import numpy as np
import pytest

import fpclass
from fpclass.scan import ExitCode

torch = pytest.importorskip("torch")
pd = pytest.importorskip("pandas")


def nan_inf(t) -> tuple:
    """(NaN, +Inf, -Inf) by torch on a tensor, NumPy on anything else."""
    if isinstance(t, torch.Tensor):
        v = t.detach().double()
        return int(torch.isnan(v).sum()), int(torch.isposinf(v).sum()), int(torch.isneginf(v).sum())
    v = np.asarray(t, np.float64)
    return int(np.isnan(v).sum()), int(np.isposinf(v).sum()), int(np.isneginf(v).sum())


def counts(result) -> tuple:
    return result.nan, result.posinf, result.neginf


def poisoned_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    with torch.no_grad():
        model[0].weight[1, 0] = float("nan")
        model[1].running_var[0] = float("inf")
    return model


def state_of(model, prefix=""):
    """Every parameter and buffer of `model` by name, as torch names them."""
    return {prefix + n: t for n, t in [*model.named_parameters(), *model.named_buffers()]}


def test_a_module_inside_a_dict_or_list_is_walked():
    model = poisoned_model()
    report = fpclass.check({"model": model, "extra": [model[0]]})
    expected = {**state_of(model, "model."), **state_of(model[0], "extra.0.")}
    by_name = {t.name: t for t in report.tensors}
    assert set(by_name) == set(expected)
    for name, tensor in expected.items():
        assert counts(by_name[name]) == nan_inf(tensor), name
    assert report.exit_code == ExitCode.FOUND

    model(torch.randn(4, 3)).sum().backward()
    with_grads = fpclass.check([model], grads=True)
    grads = {f"0.{n}.grad": p.grad for n, p in model.named_parameters()}
    by_name = {t.name: t for t in with_grads.tensors}
    assert set(grads) <= set(by_name)
    for name, grad in grads.items():
        assert counts(by_name[name]) == nan_inf(grad), name


def test_the_same_model_twice_is_reported_once_under_its_first_name():
    model = poisoned_model()
    report = fpclass.check([model, model])
    assert [t.name for t in report.tensors] == list(state_of(model, "0."))
    assert report.exit_code == ExitCode.FOUND
    # An array (not a container) is reported under every name: a state dict's tied weights.
    shared = torch.tensor([1.0, float("nan")])
    assert [t.name for t in fpclass.check({"a": shared, "b": shared}).failing] == ["a", "b"]


def test_a_single_parameter_with_its_grad():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([0.0, float("-inf"), float("nan")])
    report = fpclass.check(p, grads=True)
    assert [t.name for t in report.tensors] == ["", "grad"]
    assert counts(report.tensors[1]) == nan_inf(p.grad)
    assert report.exit_code == ExitCode.FOUND
    assert [t.name for t in fpclass.check(p).tensors] == [""]  # without grads: not read


def test_data_frames_and_series_column_by_column():
    df = pd.DataFrame({"x": [1.0, np.nan, np.inf], "y": np.array([1, 2, 3], np.int32),
                       "z": np.array([-np.inf, 0, 1], np.float32)})
    report = fpclass.check(df)
    assert [t.name for t in report.tensors] == ["x", "y", "z"]
    for result in report.tensors:
        column = df[result.name]
        if column.dtype.kind == "f":
            assert counts(result) == nan_inf(column.to_numpy()), result.name
        else:
            assert result.status == "not_applicable"
    assert report.exit_code == ExitCode.FOUND
    assert fpclass.check(df[["y"]].astype(float)).exit_code == ExitCode.CLEAN

    nested = fpclass.check({"frames": [df], "s": df["z"], "w": np.ones(2)})
    assert [t.name for t in nested.tensors] == ["frames.0.x", "frames.0.y", "frames.0.z", "s", "w"]
    assert counts(nested.tensors[3]) == nan_inf(df["z"].to_numpy())


def test_pd_na_is_missing_never_nan_and_a_stored_nan_is_nan():
    # A NaN stored beside pd.NA in a Float64 column: pandas keeps them apart.
    values = pd.arrays.FloatingArray(np.array([np.nan, 1.0, 2.0, np.inf, 5.0]),
                                     np.array([False, True, False, False, True]))
    df = pd.DataFrame({"f": values, "i": pd.array([1, None, 3, 4, 5], dtype="Int64"),
                       "j": pd.array([1, 2, 3, 4, 5], dtype="Int64")})
    report = fpclass.check(df)
    f, i, j = report.tensors
    present = df["f"].to_numpy(dtype="float64", na_value=0.0)  # pd.NA as a finite value
    assert counts(f) == nan_inf(present) == (1, 1, 0)
    assert f.missing == int(df["f"].isna().sum()) == 2
    assert f.values_checked == int(df["f"].notna().sum())
    assert [(loc.index, loc.cls) for loc in f.locations] == [
        ((0,), "nan"), ((1,), "missing"), ((3,), "posinf"), ((4,), "missing")]
    assert (i.status, counts(i), i.missing) == ("checked", (0, 0, 0), int(df["i"].isna().sum()))
    assert j.status == "not_applicable"

    only_na = fpclass.check(pd.Series([1.5, None], dtype="Float64"))
    assert counts(only_na.tensors[0]) == (0, 0, 0) and only_na.tensors[0].missing == 1
    assert only_na.exit_code == ExitCode.CLEAN     # pd.NA is not a finding by default
    assert fpclass.check(pd.Series([1.5, None], dtype="Float64"),
                         fail_on="missing").exit_code == ExitCode.FOUND


def test_text_and_other_pandas_columns_are_reported_not_raised():
    df = pd.DataFrame({"s": ["a", "b"], "o": pd.Series([1.0, "x"], dtype=object),
                       "c": pd.Categorical([1.0, np.nan]), "f": [np.nan, 1.0]})
    by_name = {t.name: t for t in fpclass.check(df).tensors}
    assert by_name["s"].status == "not_applicable"
    assert by_name["o"].status == "unchecked" and "object" in by_name["o"].reason
    assert by_name["c"].status == "unchecked" and "category" in by_name["c"].reason
    assert counts(by_name["f"]) == nan_inf(df["f"].to_numpy())


def test_xarray_objects_and_lazy_ones_never_computed():
    xr = pytest.importorskip("xarray")
    dask_array = pytest.importorskip("dask.array")

    def boom(block):
        raise RuntimeError("computed")

    lazy = dask_array.ones(4, chunks=2).map_blocks(boom, dtype=float)
    ds = xr.Dataset({"a": ("x", np.array([1.0, np.nan, -np.inf, 0.0])), "b": ("x", lazy)})
    report = fpclass.check({"ds": ds, "da": ds["a"], "lazy": xr.DataArray(lazy)})
    by_name = {t.name: t for t in report.tensors}
    assert set(by_name) == {"ds.a", "ds.b", "da", "lazy"}
    truth = (int(ds["a"].isnull().sum()), int(np.isposinf(ds["a"]).sum()),
             int(np.isneginf(ds["a"]).sum()))
    assert counts(by_name["ds.a"]) == counts(by_name["da"]) == truth
    for name in ("ds.b", "lazy"):
        assert by_name[name].status == "unchecked" and "compute()" in by_name[name].reason
    assert report.exit_code == ExitCode.FOUND
    assert fpclass.check(xr.DataArray(lazy)).exit_code == ExitCode.INCONCLUSIVE
    assert counts(fpclass.check(ds["a"]).tensors[0]) == truth


def test_text_and_object_arrays_are_reported_and_the_rest_is_kept():
    report = fpclass.check({"names": np.array(["a", "b"]), "bytes": np.array([b"x"]),
                            "objects": np.array([1.0, None], dtype=object),
                            "records": np.zeros(2, [("a", "f4"), ("b", "i4")]),
                            "w": np.array([np.nan])})
    by_name = {t.name: t for t in report.tensors}
    assert by_name["names"].status == by_name["bytes"].status == "not_applicable"
    assert by_name["objects"].status == by_name["records"].status == "unchecked"
    assert counts(by_name["w"]) == (1, 0, 0)
    assert report.exit_code == ExitCode.FOUND
    assert fpclass.check(np.array(["a"])).exit_code == ExitCode.CLEAN
    assert fpclass.check(np.array([None], dtype=object)).exit_code == ExitCode.INCONCLUSIVE


def test_python_numbers_are_values_and_count_under_fail_on():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=float("inf"))
    state = {"optimizer": optimizer.state_dict(), "best_loss": float("nan"), "step": 7,
             "z": complex(1.0, float("-inf")), "name": "run", "none": None, "flag": True}
    report = fpclass.check(state)
    by_name = {t.name: t for t in report.tensors}
    lr = by_name["optimizer.param_groups.0.lr"]
    assert counts(lr) == (0, int(math.isinf(optimizer.param_groups[0]["lr"])), 0)
    assert counts(by_name["best_loss"]) == (1, 0, 0) and by_name["best_loss"].dtype == "float"
    assert counts(by_name["z"]) == (0, 0, 1)
    betas = optimizer.param_groups[0]["betas"]
    assert [counts(by_name[f"optimizer.param_groups.0.betas.{k}"]) for k in (0, 1)] == \
        [nan_inf(b) for b in betas]
    assert not {"step", "name", "none", "flag"} & set(by_name)  # hold no float
    assert {t.name for t in report.failing} == {"optimizer.param_groups.0.lr", "best_loss", "z"}
    assert fpclass.check({"lr": float("nan")}, fail_on="inf").exit_code == ExitCode.CLEAN
    assert fpclass.check({"lr": float("nan")}).exit_code == ExitCode.FOUND
    assert fpclass.check(float("inf")).tensors[0].posinf == 1


def test_objects_it_cannot_look_into_are_unchecked():
    class Config:
        threshold = float("nan")

    class Broken(dict):
        def items(self):
            raise RuntimeError("no items today")

    report = fpclass.check({"config": Config(), "broken": Broken(a=1.0), "w": np.ones(2)})
    config, broken, w = report.tensors
    assert config.status == "unchecked" and "Config" in config.reason
    assert broken.status == "unchecked" and "no items today" in broken.reason
    assert w.status == "checked"
    assert report.exit_code == ExitCode.INCONCLUSIVE
    with pytest.raises(TypeError, match="fpclass.check takes"):
        fpclass.check(3)


@pytest.mark.parametrize("wrap", [lambda x: [x], lambda x: (x,), lambda x: {"k": x}],
                         ids=["list", "tuple", "dict"])
def test_deep_nesting_needs_no_recursion(wrap):
    depth = 100_000
    deep = [float("nan"), np.array([np.inf])]
    for _ in range(depth):
        deep = wrap(deep)
    report = fpclass.check(deep)
    assert [counts(t) for t in report.tensors] == [(1, 0, 0), (0, 1, 0)]
    assert report.tensors[0].name.count(".") == depth


def test_cycles_end():
    state = {"w": np.array([np.nan])}
    state["self"] = state
    loop = [np.ones(2)]
    loop.append(loop)
    state["loop"] = loop
    report = fpclass.check(state)
    assert [t.name for t in report.tensors] == ["w", "loop.0"]
    assert report.exit_code == ExitCode.FOUND
