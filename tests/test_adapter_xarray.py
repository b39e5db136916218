"""xarray in, xarray out: element-wise answers keep dims, coords and name (a Dataset per
variable), per-axis queries drop the reduced dims, and dask-backed data stays lazy (a counting
scheduler proves that building every result computes nothing)."""

import ml_dtypes
import numpy as np
import pytest

import fpclass

xr = pytest.importorskip("xarray")


def field(dtype=np.float32):
    values = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    values[0, 1, 2] = np.nan
    values[1, 0, 3] = np.inf
    values[1, 2, 0] = -np.inf
    return xr.DataArray(values.astype(dtype), dims=("time", "y", "x"), name="t2m",
                        coords={"time": [10, 20], "y": [0.5, 1.5, 2.5], "x": list("abcd"),
                                "label": ("y", ["p", "q", "r"])},
                        attrs={"units": "K"})


def test_elementwise_keeps_dims_coords_and_name():
    da = field()
    for op, theirs in (("isnan", da.isnull()), ("isinf", np.isinf(da)), ("isfinite", np.isfinite(da)),
                       ("isposinf", np.isposinf(da)), ("isneginf", np.isneginf(da))):
        got = getattr(fpclass, op)(da)
        assert isinstance(got, xr.DataArray) and got.dtype == bool
        assert got.name == "t2m" and got.dims == da.dims
        xr.testing.assert_identical(got.drop_attrs(), theirs.drop_attrs())


def test_bfloat16_data_arrays():
    da = field(ml_dtypes.bfloat16)
    got = fpclass.isnan(da)
    np.testing.assert_array_equal(got.values, np.isnan(da.values.astype(np.float32)))
    assert got.coords.to_dataset().identical(da.coords.to_dataset())


def test_queries_drop_the_reduced_dims():
    da = field()
    assert type(fpclass.count_nonfinite(da)) is int and fpclass.count_nonfinite(da) == 3
    assert fpclass.first_nan(da) == (0, 1, 2)
    per_y = fpclass.count_nonfinite(da, axis=(0, 2))
    xr.testing.assert_identical(per_y, (~np.isfinite(da)).sum(("time", "x")).drop_attrs())
    by_name = fpclass.any_nan(da, axis="time")
    xr.testing.assert_identical(by_name, da.isnull().any("time").drop_attrs())
    kept = fpclass.any_inf(da, axis=1, keepdims=True)
    assert kept.dims == da.dims and kept.shape == (2, 1, 4) and "y" not in kept.coords
    assert fpclass.class_counts(da).nan == 1


def test_datasets_per_variable():
    da = field()
    ds = xr.Dataset({"t2m": da, "count": (da.dims, np.ones(da.shape, np.int32)),
                     "half": da.astype(np.float16)})
    mask = fpclass.isnan(ds)
    assert isinstance(mask, xr.Dataset) and set(mask.data_vars) == {"t2m", "count", "half"}
    xr.testing.assert_identical(mask["t2m"], fpclass.isnan(da))
    assert not mask["count"].any()
    counts = fpclass.count_nan(ds)
    assert counts == {"t2m": 1, "count": 0, "half": 1}
    per_time = fpclass.count_inf(ds, axis="time")
    xr.testing.assert_identical(per_time["t2m"], np.isinf(da).sum("time").drop_attrs())


def test_a_dataset_variable_fpclass_cannot_classify_is_named():
    ds = xr.Dataset({"station": ("n", np.array(["a", "b"], object)), "v": ("n", [1.0, np.nan])})
    with pytest.raises(TypeError, match="station"):
        fpclass.isnan(ds)


def test_dask_backed_data_stays_lazy():
    dask = pytest.importorskip("dask")
    calls = {"scheduler": 0}

    def counting_get(dsk, keys, **kwargs):
        calls["scheduler"] += 1
        return dask.get(dsk, keys, **kwargs)

    lazy_da = field().chunk({"time": 1})
    ds = xr.Dataset({"t2m": lazy_da, "other": lazy_da * 2})
    with dask.config.set(scheduler=counting_get):
        built = [fpclass.isnan(lazy_da), fpclass.isfinite(ds), fpclass.count_nan(lazy_da),
                 fpclass.any_inf(lazy_da, axis="x"), fpclass.count_nonfinite(ds),
                 fpclass.first_nonfinite(lazy_da), fpclass.class_counts(lazy_da)]
        assert calls["scheduler"] == 0
        assert built[0].chunks == lazy_da.chunks
        per_x = built[3].compute()
    assert calls["scheduler"] == 1
    xr.testing.assert_identical(per_x, np.isinf(field()).any("x").drop_attrs())
    assert built[2].compute() == 1 and built[5].compute() == (0, 1, 2)
