"""pandas in, pandas out: a Series gives a Series, a DataFrame is read column by column (no
upcast, no copy of the frame), integer columns count zero, and pd.NA is missing (never NaN):
element-wise answers are NA there, as pandas' own numpy ufuncs answer, and queries skip it."""

import tracemalloc

import numpy as np
import pytest

import fpclass

pd = pytest.importorskip("pandas")
OPS = ["isnan", "isinf", "isfinite", "isposinf", "isneginf"]
UFUNC = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "isposinf": np.isposinf,
         "isneginf": np.isneginf}


def nullable():
    """A Float64 Series holding a value, a real NaN, pd.NA, +Inf and -Inf."""
    data = np.array([1.0, np.nan, 7.0, np.inf, -np.inf])
    return pd.Series(pd.arrays.FloatingArray(data, np.array([False, False, True, False, False])),
                     index=list("vwxyz"), name="nullable")


def frame():
    n = 1000
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"f32": rng.standard_normal(n).astype(np.float32),
                       "f64": rng.standard_normal(n), "i64": np.arange(n),
                       "f16": rng.standard_normal(n).astype(np.float16),
                       "flag": np.zeros(n, bool)}, index=pd.RangeIndex(100, 100 + n))
    df.loc[107, "f64"] = np.nan
    df.loc[103, "f32"] = np.inf
    df.loc[900, "f16"] = -np.inf
    df.loc[103, "f64"] = -np.inf
    return df


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_series_give_series(dtype):
    s = pd.Series(np.array([1, np.nan, np.inf, -np.inf, 0], dtype), index=list("abcde"), name="v")
    for op in OPS:
        got = getattr(fpclass, op)(s)
        assert isinstance(got, pd.Series) and got.dtype == bool
        pd.testing.assert_series_equal(got, UFUNC[op](s))
    assert fpclass.count_nonfinite(s) == 3 and fpclass.first_inf(s) == (2,)


def test_na_is_missing_not_nan_the_same_way_everywhere():
    s = nullable()
    for op in OPS:
        got = getattr(fpclass, op)(s)
        pd.testing.assert_series_equal(got, UFUNC[op](s))  # boolean, <NA> where s is NA
        assert got.isna().tolist() == [False, False, True, False, False]
    assert fpclass.count_nan(s) == np.isnan(s).sum() == 1
    assert fpclass.any_nan(s) and fpclass.first_nan(s) == (1,)
    assert fpclass.all_finite(s) == np.isfinite(s).all() == False  # noqa: E712
    assert fpclass.all_finite(s.iloc[[0, 2]]) == np.isfinite(s.iloc[[0, 2]]).all() == True  # noqa: E712
    assert fpclass.count_nonfinite(s) == 3
    np.testing.assert_array_equal(fpclass.locate_nonfinite(s), [[1], [3], [4]])
    counts = fpclass.class_counts(s)
    assert counts.total == 4 and (counts.nan, counts.posinf, counts.neginf) == (1, 1, 1)
    assert fpclass.count_nan(pd.Series([1, None, 3], dtype="Int64")) == 0


def test_dataframes_column_by_column():
    df = frame()
    got = fpclass.isinf(df)
    assert isinstance(got, pd.DataFrame)
    pd.testing.assert_frame_equal(got, np.isinf(df))
    assert list(got.dtypes) == [np.dtype(bool)] * 5
    truth = {c: int(np.isfinite(df[c]).__invert__().sum()) for c in df.columns}
    assert fpclass.count_nonfinite(df) == sum(truth.values()) == 4
    pd.testing.assert_series_equal(fpclass.count_nonfinite(df, axis=0), pd.Series(truth),
                                   check_names=False)
    per_row = fpclass.any_nonfinite(df, axis=1)
    pd.testing.assert_series_equal(per_row, (~np.isfinite(df)).any(axis=1))
    assert fpclass.count_inf(df, axis=1).loc[103] == 2
    wide = df.to_numpy(np.float64)  # the test's own upcast copy, as the truth in C order
    assert fpclass.first_nonfinite(df) == tuple(np.argwhere(~np.isfinite(wide))[0])
    np.testing.assert_array_equal(fpclass.locate_nonfinite(df, limit=3),
                                  np.argwhere(~np.isfinite(wide))[:3])
    assert fpclass.locate_nan(df).tolist() == [[7, 1]]
    assert not fpclass.all_finite(df)


def test_nullable_columns_in_a_frame():
    df = pd.DataFrame({"n": nullable().to_numpy(dtype="float64", na_value=0.0)})
    df["m"] = nullable().array
    got = fpclass.isnan(df)
    assert str(got["m"].dtype) == "boolean" and got["m"].isna().sum() == 1
    assert fpclass.count_nan(df) == 2


def test_columns_fpclass_cannot_classify_are_named():
    df = pd.DataFrame({"x": [1.0, 2.0], "who": ["a", "b"]})
    with pytest.raises(TypeError, match="'who'"):
        fpclass.count_nan(df)


def test_a_mixed_frame_is_neither_upcast_nor_copied():
    n = 4 << 20
    df = pd.DataFrame({"a": np.ones(n, np.float32), "b": np.ones(n), "c": np.ones(n, np.float32)})
    df.iloc[-1, 1] = np.nan
    for traced in (False, True):  # the first round loads the kernels, untraced: numba's
        if traced:                  # compiler is slow under tracemalloc
            tracemalloc.start()
        try:
            found = fpclass.any_nan(df)
            count = fpclass.count_nan(df)
            _, query_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            mask = fpclass.isnan(df)
            _, mask_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert found and count == 1 and mask.iloc[-1, 1]
    assert query_peak < 1 << 20, query_peak           # an upcast copy would be 96 MiB
    assert mask_peak < 2 * mask.size + (1 << 20), mask_peak   # the answer, assembled once
