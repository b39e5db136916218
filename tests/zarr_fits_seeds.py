"""Seed files of tests/zarr_fits_fuzz.py, written by zarr and astropy with planted NaN/±Inf:
zarr v2 and v3 stores (NaN fill values, float attributes, arrays below folders without group
metadata) and FITS files (scaled data, blanks, tile-compressed images, table columns), each as
{relative path: bytes}; the main path of a case is MAIN[fmt]."""

from __future__ import annotations

import io
import os
import tempfile

import numpy as np

MAIN = {"zarr": "case.zarr", "fits": "case.fits"}
NAN, INF = float("nan"), float("inf")


def _arr(shape, dtype, plants=(), seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    flat = a.reshape(-1)
    for i, v in dict(plants).items():
        flat[i % flat.size] = v
    return a


# ---------------------------------------------------------------------------------------------
# Seeds: {relative path: bytes} of each seed store or file.

def _files_of(root: str) -> dict:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, os.path.dirname(root)).replace(os.sep, "/")] = f.read()
    return out


def _zarr_seed(fmt: int, variant: str) -> dict:
    import zarr
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, MAIN["zarr"])
        g = zarr.open_group(root, mode="w", zarr_format=fmt)
        clean = variant == "clean"
        plants = {} if clean else {1: NAN, 7: INF, 12: -INF}
        kw = {} if variant != "raw" else {"compressors": None}
        a = g.create_array("a", shape=(6, 5), chunks=(4, 3), dtype="<f4", **kw)
        a[...] = _arr((6, 5), "<f4", plants)
        a.attrs.update({"units": "m", "scale": 1.5 if clean else NAN,
                        "nested": {"v": [1.0, 2.0 if clean else INF]}})
        b = g.create_array("sub/b", shape=(9,), chunks=(4,), dtype="<f8", fill_value=NAN,
                           **kw)
        b[:4] = _arr((4,), "<f8", {} if clean else {2: -INF})
        c = zarr.create_array(os.path.join(root, "loose", "deep", "c"), shape=(7,),
                              chunks=(3,), dtype=">f8" if fmt == 2 else "float64",
                              zarr_format=fmt, **kw)
        c[...] = _arr((7,), "<f8", {} if clean else {6: NAN})
        g.create_array("i", shape=(4,), chunks=(4,), dtype="<i2")[...] = np.arange(4)
        g.create_array("z", shape=(3,), chunks=(2,), dtype="<c8", **kw)[...] = \
            _arr((3,), "<c8", {} if clean else {0: complex(1, NAN)})
        if not clean:
            g.attrs["g"] = -INF
        return _files_of(root)


def _fits_seed(variant: str) -> dict:
    from astropy.io import fits
    clean = variant == "clean"
    p = {} if clean else {0: NAN, 5: INF, 9: -INF}
    primary = fits.PrimaryHDU(_arr((5, 7), ">f4", p))
    scaled = fits.ImageHDU(np.arange(-20, 20, dtype=np.int16).reshape(5, 8), name="SCALED")
    scaled.header["BSCALE"], scaled.header["BZERO"], scaled.header["BLANK"] = 2.0, 1.0, 3
    ints = fits.ImageHDU(np.arange(12, dtype=np.int32).reshape(3, 4), name="INTS")
    cols = [fits.Column("e", "E", array=_arr(6, "f4", p)),
            fits.Column("d", "2D", array=_arr((6, 2), "f8", {} if clean else {3: INF})),
            fits.Column("i", "I", array=np.arange(6, dtype=np.int16), null=2),
            fits.Column("j", "J", array=np.arange(6, dtype=np.int32)),
            fits.Column("s", "3A", array=np.array([b"abc"] * 6))]
    table = fits.BinTableHDU.from_columns(cols, name="TAB")
    table.header["TSCAL3"], table.header["TZERO3"] = 0.5, 1.0
    table.header["TSCAL1"] = 1.0
    hdus = [primary, scaled, ints, table]
    if variant == "compressed":
        hdus.append(fits.CompImageHDU(_arr((6, 6), "f4", p), name="CMP",
                                      compression_type="GZIP_1", quantize_level=0.0))
    buf = io.BytesIO()
    fits.HDUList(hdus).writeto(buf)
    return {MAIN["fits"]: buf.getvalue()}


_SEEDS: dict = {}


def seeds(fmt: str) -> dict:
    if fmt not in _SEEDS:
        if fmt == "zarr":
            _SEEDS[fmt] = {f"v{v}-{k}": _zarr_seed(v, k) for v in (2, 3)
                           for k in ("planted", "raw", "clean")}
        else:
            _SEEDS[fmt] = {k: _fits_seed(k) for k in ("planted", "compressed", "clean")}
    return _SEEDS[fmt]
