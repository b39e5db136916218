"""The Python API's answers and refusals (issue 23): counts JSON can write, one spelling of the
infinities, clear errors for bad axis / input / fail_on= / out=, pandas' axis names, torch's and
xarray's own conventions, and JAX and torch objects that hold nothing to read. Each is compared
with what the peer itself (numpy, pandas, torch, xarray, jax) does."""

import json
import warnings

import numpy as np
import pytest

import fpclass

X = np.array([[1.0, np.nan, np.inf], [2.0, -np.inf, np.nan]])


# -- counts are Python ints ------------------------------------------------------------------------

@pytest.mark.parametrize("x", [X, X[:1, :2], np.zeros(0), np.float32(np.nan), [1.0, np.nan],
                               np.ones(1 << 16), X.astype(np.longdouble)], ids=repr)
@pytest.mark.parametrize("name", ["count_nan", "count_inf", "count_nonfinite"])
def test_whole_array_counts_are_python_ints(name, x):
    got = getattr(fpclass, name)(x)
    want = int(np.count_nonzero({"count_nan": np.isnan, "count_inf": np.isinf,
                                 "count_nonfinite": lambda a: ~np.isfinite(a)}[name](x)))
    assert type(got) is int and got == want
    assert json.dumps({"n": got}) == json.dumps({"n": want})
    one_row = getattr(fpclass, name)(np.atleast_1d(x).reshape(-1), axis=0)
    assert type(one_row) is int and one_row == want


def test_per_axis_counts_stay_int64_arrays():
    got = fpclass.count_nan(X, axis=1)
    assert got.dtype == np.int64 and got.tolist() == np.isnan(X).sum(axis=1).tolist()


def test_class_counts_are_ints_and_json_writes_them():
    for x in (X, X.astype(np.longdouble), X.astype(np.float16)):
        counts = fpclass.class_counts(x)
        assert all(type(n) is int for n in counts)
        doc = json.loads(json.dumps(counts._asdict()))
        assert doc["posinf"] == int(np.isposinf(x).sum())
        assert doc["neginf"] == int(np.isneginf(x).sum())


def test_the_infinities_are_spelled_as_in_the_scan_json():
    counts = fpclass.class_counts(X)
    report = fpclass.check({"x": X})
    assert {"posinf", "neginf"} <= set(counts._fields) & set(report.to_dict()["summary"])
    with pytest.warns(DeprecationWarning, match=r"pos_inf is deprecated; use \.posinf"):
        assert counts.pos_inf == counts.posinf == 1
    with pytest.warns(DeprecationWarning, match=r"neg_inf is deprecated; use \.neginf"):
        assert counts.neg_inf == counts.neginf == 1


# -- clear refusals --------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [1.0, "0", [0], True, (0, 1.5)], ids=repr)
def test_a_bad_axis_names_the_accepted_types(axis):
    with pytest.raises(TypeError, match=r"axis must be None, an int or a tuple of ints, got"):
        fpclass.count_nan(X, axis=axis)


@pytest.mark.parametrize("x", [None, "text", b"bytes", object(), {"a": 1.0}],
                         ids=lambda x: "object()" if type(x) is object else repr(x))
def test_input_that_is_not_numbers_names_what_is_accepted(x):
    with pytest.raises(TypeError, match=r"fpclass takes numeric arrays: a NumPy array, a number.*"
                                        r"torch, JAX, CuPy, dask, xarray or pandas object; got "):
        fpclass.isnan(x)
    with pytest.raises(TypeError, match="got None" if x is None else "got "):
        fpclass.count_nan(x)


@pytest.mark.parametrize("fail_on, error, match", [
    (None, TypeError, r"fail_on= must be a str of comma-separated class names .* got None"),
    (3, TypeError, r"fail_on= must be .* got 3"),
    (["nan", 1], TypeError, r"fail_on= must be"),
    ("nope", ValueError, r"fail_on= names an unknown class 'nope'; accepted: nan, inf"),
    (["nan", "infs"], ValueError, r"fail_on= names an unknown class 'infs'"),
])
def test_fail_on_errors_speak_of_the_python_parameter(fail_on, error, match, tmp_path):
    with pytest.raises(error, match=match) as caught:
        fpclass.check({"x": X}, fail_on=fail_on)
    assert "--fail-on" not in str(caught.value)
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(error, match=match) as caught:
        fpclass.scan.scan([tmp_path / "x.npy"], fail_on=fail_on)
    assert "--fail-on" not in str(caught.value)


def test_check_fail_on_takes_a_str_or_a_list():
    assert fpclass.check({"x": X}, fail_on=["posinf"]).failing
    assert not fpclass.check({"x": X[:, :1]}, fail_on="nan, inf").failing


def _overlapping(n):
    return np.lib.stride_tricks.as_strided(np.zeros(1, bool), (n,), (0,))


@pytest.mark.parametrize("make", [
    lambda: _overlapping(3),                                                  # stride 0
    lambda: np.lib.stride_tricks.as_strided(np.zeros(8, bool), (2, 3), (2, 1)),  # rows overlap
], ids=["stride0", "internal"])
def test_out_with_overlapping_elements_is_refused(make):
    out = make()
    x = np.full(out.shape, np.nan)
    assert np.unique(_offsets(out)).size < out.size
    with pytest.raises(ValueError, match=r"out has elements that share memory"):
        fpclass.isnan(x, out=out)


def _offsets(a):
    return [sum(i * s for i, s in zip(index, a.strides)) for index in np.ndindex(a.shape)]


def test_out_with_distinct_elements_in_any_layout_is_taken():
    base = np.zeros((4, 6), bool)
    gaps = np.lib.stride_tricks.as_strided(base, (2, 2), (3, 2))   # distinct, but interleaved
    for out in (base.T[::2], base[::2, ::-3], gaps):
        x = np.full(out.shape, np.nan)
        assert np.unique(_offsets(out)).size == out.size
        assert fpclass.isnan(x, out=out) is out and out.all()


def test_torch_out_with_overlapping_elements_is_refused_as_torch_refuses():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, float("nan"), 2.0])
    out = torch.zeros(1, dtype=torch.bool).expand(3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.isnan(x, out=out) if hasattr(torch.isnan, "out") else torch.ne(x, x, out=out)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        fpclass.isnan(x, out=out)


# -- pandas ----------------------------------------------------------------------------------------

def test_pandas_axis_names_are_pandas_own():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    for axis in ("index", "rows", "columns", 0, 1, -1):
        got = fpclass.count_nan(df, axis=axis)
        want = df.isna().sum(axis=axis if axis != -1 else 1)
        pd.testing.assert_series_equal(got, want, check_names=False)
    s = df["b"]
    assert fpclass.count_nan(s, axis="index") == s.isna().sum(axis="index")
    with pytest.raises(ValueError, match="No axis named columns"):   # pandas refuses it too
        s.isna().sum(axis="columns")
    with pytest.raises(ValueError, match="no axis named 'columns' for a Series"):
        fpclass.count_nan(s, axis="columns")


@pytest.mark.parametrize("axis", [2, -3, (0, 2)])
def test_pandas_axis_out_of_range_is_numpys_axis_error(axis):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X)
    with pytest.raises(np.exceptions.AxisError) as ours:
        fpclass.any_nan(df, axis=axis)
    with pytest.raises(np.exceptions.AxisError) as numpys:
        np.isnan(X).any(axis=axis)
    assert str(ours.value) == str(numpys.value)


# -- torch -----------------------------------------------------------------------------------------

def test_torch_full_reductions_are_0d_tensors_as_torch_gives():
    torch = pytest.importorskip("torch")
    t = torch.tensor(X)
    for got, want in ((fpclass.count_nan(t), torch.isnan(t).sum()),
                      (fpclass.count_inf(t, axis=(0, 1)), torch.isinf(t).sum(dim=(0, 1))),
                      (fpclass.any_nonfinite(t), (~torch.isfinite(t)).any()),
                      (fpclass.all_finite(t, axis=(1, -2)), torch.isfinite(t).all())):
        assert isinstance(got, torch.Tensor) and got.shape == want.shape == ()
        assert got.dtype == want.dtype and got.item() == want.item()
    per_row = fpclass.count_nan(t, axis=1)
    assert torch.equal(per_row, torch.isnan(t).sum(dim=1))


def test_torch_nested_tensors_get_a_clear_message():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch warns that nested tensors are a prototype
        nested = torch.nested.nested_tensor([torch.zeros(2), torch.tensor([float("nan")] * 3)])
    for call in (fpclass.isnan, fpclass.count_nan, fpclass.first_nan):
        with pytest.raises(TypeError, match=r"nested tensor .*\(t\.unbind\(\)\)") as caught:
            call(nested)
        assert "Internal error" not in str(caught.value)
    assert [fpclass.count_nan(c) == torch.isnan(c).sum() for c in nested.unbind()] == [True, True]


# -- xarray ----------------------------------------------------------------------------------------

def _field():
    xr = pytest.importorskip("xarray")
    return xr.DataArray(X, dims=("time", "x"), name="t2m", attrs={"units": "K"})


@pytest.mark.parametrize("name, own", [("isnan", "isnull"), ("isfinite", None)])
def test_xarray_elementwise_keeps_attrs_as_isnull_does(name, own):
    xr = pytest.importorskip("xarray")
    da = _field()
    got = getattr(fpclass, name)(da)
    assert got.attrs == da.isnull().attrs == {"units": "K"}
    if own:
        xr.testing.assert_identical(got, getattr(da, own)())
    ds = xr.Dataset({"t2m": da}, attrs={"title": "run 1"})
    assert getattr(fpclass, name)(ds).attrs == ds.isnull().attrs == {"title": "run 1"}


def _dataset():
    xr = pytest.importorskip("xarray")
    return xr.Dataset({"t2m": _field(), "station": ("time", np.array([np.nan, 1.0])),
                       "label": ("x", np.array(["a", "b", "c"])),
                       "code": ("x", np.array([b"p", b"q", b"r"])),
                       "steps": ("time", np.array([1, 2]))})


@pytest.mark.parametrize("axis", ["x", "time", ("time", "x")], ids=str)
def test_a_dataset_query_over_a_dim_some_variables_lack_is_xarrays(axis):
    ds = _dataset()
    dims = axis if isinstance(axis, tuple) else (axis,)
    for name, own in (("any_nan", lambda d: d.isnull().any(dims)),
                      ("count_nan", lambda d: d.isnull().sum(dims))):
        got, want = getattr(fpclass, name)(ds, axis=axis), own(ds)
        assert set(got) == set(want.data_vars)
        for key, answer in got.items():
            assert answer.dims == want[key].dims, (name, key)
            np.testing.assert_array_equal(answer.values, want[key].values.astype(answer.dtype))


def test_a_dataset_with_string_variables_is_answered_as_xarray_answers():
    ds = _dataset()
    got, want = fpclass.isnan(ds), ds.isnull()
    for key in want.data_vars:
        np.testing.assert_array_equal(got[key].values, want[key].values)
    assert fpclass.count_nan(ds) == {k: int(v) for k, v in ds.isnull().sum().items()}
    assert fpclass.all_finite(ds)["label"] and not fpclass.all_finite(ds)["t2m"]
    assert set(fpclass.class_counts(ds.drop_vars("steps"))) == {"t2m", "station"}


def test_a_dataset_query_over_a_dim_no_variable_has_is_refused_as_xarray_refuses():
    ds = _dataset()
    with pytest.raises(ValueError):
        ds.isnull().any("depth")
    with pytest.raises(ValueError, match=r"axis 'depth' is not a dimension of this Dataset"):
        fpclass.any_nan(ds, axis="depth")


# -- JAX -------------------------------------------------------------------------------------------

def test_a_deleted_jax_array_is_named_as_deleted():
    jnp = pytest.importorskip("jax.numpy")
    a = jnp.array([1.0, 2.0])
    a.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        jnp.isnan(a)   # JAX refuses it too
    with pytest.raises(TypeError, match=r"this JAX array has been deleted"):
        fpclass.isnan(a)


def test_a_jax_key_array_is_named_as_a_key_not_device_memory():
    jax = pytest.importorskip("jax")
    key = jax.random.key(0)
    with pytest.raises(TypeError, match=r"JAX PRNG key array \(dtype key<.*>\).*key_data") as e:
        fpclass.any_nan(key)
    assert "CUDA" not in str(e.value)


def test_jax_int4_is_answered_as_jax_answers():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.array([[1, -2, 7], [0, 3, -8]], dtype=jnp.int4)
    for ours, theirs in ((fpclass.isnan(x), jnp.isnan(x)), (fpclass.isfinite(x), jnp.isfinite(x)),
                         (fpclass.count_nan(x, axis=0), jnp.isnan(x).sum(axis=0))):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert fpclass.first_nonfinite(x) is None and fpclass.all_finite(x)


def test_check_reports_what_holds_nothing_to_read_and_never_raises():
    torch, jax = pytest.importorskip("torch"), pytest.importorskip("jax")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    gone = jax.numpy.ones(2)
    gone.delete()
    report = fpclass.check({"nested": nested, "key": jax.random.key(0), "gone": gone,
                            "small": jax.numpy.array([1, -2], dtype=jax.numpy.int4)})
    by_name = {t.name: t for t in report.tensors}
    assert by_name["nested"].status == "unchecked" and "nested tensor" in by_name["nested"].reason
    assert by_name["key"].status == "unchecked" and "PRNG key" in by_name["key"].reason
    assert by_name["gone"].status == "unchecked" and "deleted" in by_name["gone"].reason
    assert (by_name["small"].status, by_name["small"].dtype) == ("not_applicable", "int4")
