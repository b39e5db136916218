"""Statistics of big-endian data in the scan (FITS images, NetCDF classic variables: stored
big-endian, classified by the swapped vector loop) against NumPy on the values each format's own
library reads (astropy, netCDF4): class counts, zero / subnormal / normal counts and the finite
extremes, with NaN, ±Inf, zeros, subnormals and the extremes at known places, long runs and short
ones, in one task and in parts, on one thread and two."""

import numpy as np
import pytest

from fpclass.scan import scan

fits = pytest.importorskip("astropy.io.fits")
netCDF4 = pytest.importorskip("netCDF4")


def planted(shape, dtype, seed):
    """Random values spanning many binades, with every class at known places: NaN, ±Inf, ±0,
    subnormals of both signs and the largest finite magnitudes (which must win min / max)."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)).astype(dtype)
    flat = a.reshape(-1)
    tiny = np.finfo(dtype).smallest_subnormal
    big = np.finfo(dtype).max
    places = {3: np.nan, 70: np.inf, 71: -np.inf, 200: 0.0, 201: -0.0, 300: tiny * 5,
              301: -tiny * 3, 500: big, 501: -big, flat.size - 1: np.nan, flat.size - 70: np.inf}
    for i, v in places.items():
        flat[i] = v
    return a


def expected(values, nan_missing):
    """((nan, posinf, neginf, missing), ValueStats fields) from NumPy on the library's values;
    a NaN that is the format's undefined value counts as missing (and among the non-finite
    values of the statistics)."""
    v = np.asarray(values, np.float64).reshape(-1)
    nan = int(np.isnan(v).sum())
    kept = v
    finite = kept[np.isfinite(kept)]
    tiny = np.finfo(values.dtype).tiny
    stats = dict(values=kept.size, nonfinite=int((~np.isfinite(kept)).sum()),
                 zero=int((finite == 0).sum()),
                 subnormal=int(((finite != 0) & (np.abs(finite) < tiny)).sum()),
                 normal=int((np.abs(finite) >= tiny).sum()),
                 min=float(finite.min()), max=float(finite.max()),
                 absmax=float(np.abs(finite).max()))
    counts = (0 if nan_missing else nan, int(np.isposinf(v).sum()), int(np.isneginf(v).sum()),
              nan if nan_missing else 0)
    return counts, stats


def check(t, values, nan_missing):
    counts, stats = expected(values, nan_missing)
    assert (t.nan, t.posinf, t.neginf, t.missing) == counts
    assert t.stats._asdict() == stats


SIZES = [dict(), dict(task_bytes=4096, chunk_bytes=1000)]  # one task; parts of odd chunks


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_fits_images_statistics_match_astropy(tmp_path, dtype, threads):
    path = tmp_path / "big.fits"
    fits.HDUList([fits.PrimaryHDU(planted((96, 130), dtype, 1)),
                  fits.ImageHDU(planted((5, 1000), dtype, 2), name="LONG"),
                  fits.ImageHDU(planted((40, 13), dtype, 3), name="SHORT")]).writeto(path)
    with fits.open(path, memmap=False) as hdul:
        data = {h.name: np.array(h.data) for h in hdul}
    assert all(v.dtype.byteorder == ">" for v in data.values())  # stored big-endian
    for sizes in SIZES:
        report = scan([path], threads=threads, **sizes)
        got = {t.name: t for t in report.tensors}
        for name, values in data.items():
            check(got[name], values, nan_missing=True)  # NaN is FITS's undefined value


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_netcdf_classic_statistics_match_netcdf4(tmp_path, dtype, threads):
    path = tmp_path / "big.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as d:
        d.createDimension("row", 96)
        d.createDimension("col", 130)
        d.createDimension("n", 13)
        d.createDimension("m", 41)
        d.createVariable("grid", dtype, ("row", "col"), fill_value=False)[...] = \
            planted((96, 130), dtype, 4)
        d.createVariable("short", dtype, ("n", "m"), fill_value=False)[...] = \
            planted((13, 41), dtype, 5)
    with netCDF4.Dataset(path) as d:
        d.set_auto_mask(False)
        data = {n: np.asarray(v[...]) for n, v in d.variables.items()}
    for sizes in SIZES:
        report = scan([path], threads=threads, **sizes)
        got = {t.name: t for t in report.tensors}
        for name, values in data.items():
            check(got[name], values, nan_missing=False)
