"""fpclass scan on scaled FITS data (BSCALE/BZERO images, TSCALn/TZEROn table columns), header
keywords astropy reads as Inf or refuses, and SIMPLE = F: files written by astropy (a card
patched where astropy refuses to write the value), counts against astropy's read of the same
file. Blanks (BLANK, TNULLn, a stored NaN) are FITS's undefined values: missing, whatever the
scaling makes of them (astropy gives an image's BLANK as NaN and a table's TNULL scaled)."""

import numpy as np
import pytest
from astropy.io import fits

from fpclass.scan import ExitCode, scan
from fpclass.scan.engine import plan, run_task
from fpclass.results.build import merge_parts

SMALL = dict(chunk_bytes=64, task_bytes=96, max_locations=10_000, threads=2)


def patch_card(path, key, text):
    """Replace the value of header card `key` (the first one) by `text`, as written bytes."""
    data = bytearray(path.read_bytes())
    at = data.index(f"{key:<8}= ".encode())
    data[at:at + 80] = f"{key:<8}= {text:>20}".ljust(80).encode()
    path.write_bytes(bytes(data))


def astropy_read(path, hdu, column=None):
    with np.errstate(all="ignore"), fits.open(path) as hdul:
        data = hdul[hdu].data
        return np.array(data[column] if column else data)


def expected(physical, blank_mask):
    """(nan, +inf, -inf, missing, [(index, class)]) of astropy's values, blanks as missing."""
    cls = np.full(physical.shape, "", dtype=object)
    cls[np.isnan(physical)] = "nan"
    cls[np.isposinf(physical)] = "posinf"
    cls[np.isneginf(physical)] = "neginf"
    cls[blank_mask] = "missing"
    counts = tuple(int((cls == k).sum()) for k in ("nan", "posinf", "neginf", "missing"))
    return counts, [(tuple(int(i) for i in ix), cls[tuple(ix)]) for ix in np.argwhere(cls != "")]


def check(t, physical, blank_mask):
    counts, locations = expected(physical, blank_mask)
    assert t.status == "checked", t.reason
    assert (t.nan, t.posinf, t.neginf, t.missing) == counts
    assert [(loc.index, loc.cls) for loc in t.locations] == locations
    assert t.values_checked == physical.size


def result(report, name):
    [t] = [t for t in report.tensors if t.name == name]
    return t


RAW16 = np.array([[0, 1, -5, 7, 99], [32767, -32768, 3, 0, 99], [5, 99, -1, 2, 4]], np.int16)


@pytest.mark.parametrize("bscale, bzero", [
    ("2.0", "1.0"),                  # finite values
    ("1E35", "0.0"),                 # +-32767 * 1e35 passes float32's range: Inf
    ("1E39", "0.0"),                 # the scale itself is Inf in float32: 0 * Inf is NaN
    ("1E999", "0.0"),                # Inf to astropy (FITS has no NaN/Inf value)
    ("1.0", "-1E999"),               # every value -Inf
    ("1E999", "-1E999"),             # Inf - Inf: NaN
])
def test_scaled_integer_image_with_blanks(tmp_path, bscale, bzero):
    path = tmp_path / "scaled.fits"
    hdu = fits.PrimaryHDU(RAW16)
    hdu.header["BSCALE"], hdu.header["BZERO"], hdu.header["BLANK"] = 3.0, 5.0, 99
    hdu.writeto(path)
    patch_card(path, "BSCALE", bscale)
    patch_card(path, "BZERO", bzero)
    physical = astropy_read(path, 0)
    assert physical.dtype == np.float32 and physical.shape == RAW16.shape
    report = scan([path], **SMALL)
    t = result(report, "PRIMARY")
    assert "int16 scaled to float32" in t.dtype
    check(t, physical, RAW16 == 99)
    assert report.exit_code == (ExitCode.CLEAN if bscale == "2.0" else ExitCode.FOUND)


@pytest.mark.parametrize("dtype, bscale", [(np.int32, "1E300"), (np.uint8, "1E38"),
                                           (np.int64, "1E999")])
def test_scaled_integer_images_in_their_physical_type(tmp_path, dtype, bscale):
    raw = np.arange(24, dtype=dtype).reshape(2, 3, 4) * 5
    path = tmp_path / "ints.fits"
    hdu = fits.PrimaryHDU(raw)
    hdu.header["BSCALE"] = 2.0
    hdu.writeto(path)
    patch_card(path, "BSCALE", bscale)
    physical = astropy_read(path, 0)
    t = result(scan([path], **SMALL), "PRIMARY")
    check(t, physical, np.zeros(raw.shape, bool))


def test_scaled_float_image_nan_is_missing_and_a_nan_scale_is_not(tmp_path):
    raw = np.array([[1.0, np.nan, 3e38], [-2.0, np.inf, 0.0]], np.float32)
    path = tmp_path / "f.fits"
    hdu = fits.PrimaryHDU(raw)
    hdu.header["BSCALE"] = 2.0
    hdu.writeto(path)
    for bscale in ("2.0", "1E999"):
        patch_card(path, "BSCALE", bscale)
        check(result(scan([path], **SMALL), "PRIMARY"), astropy_read(path, 0), np.isnan(raw))


def test_a_scaled_image_in_parts_is_the_whole(tmp_path):
    raw = (np.arange(7 * 9 * 5, dtype=np.int16).reshape(7, 9, 5) % 300) - 150
    path = tmp_path / "big.fits"
    hdu = fits.PrimaryHDU(raw)
    hdu.header["BSCALE"], hdu.header["BLANK"] = 2.0, 7
    hdu.writeto(path)
    patch_card(path, "BSCALE", "1E38")
    [task] = [x for x in plan([path]) if x.name == "PRIMARY"]
    whole = run_task(task, 1000, chunk_bytes=1 << 20)
    check(whole, astropy_read(path, 0), raw == 7)
    blocks = task.storage.nblocks
    for cut in ([0, 100, blocks], [0, 1, 2, 45, 46, 200, blocks]):
        pieces = [run_task(task.part(a, b - a), 1000, chunk_bytes=16)
                  for a, b in zip(cut, cut[1:])]
        merged = merge_parts(pieces, 1000)
        assert (merged.nan, merged.posinf, merged.neginf, merged.missing,
                merged.values_checked, merged.locations) == (
            whole.nan, whole.posinf, whole.neginf, whole.missing, whole.values_checked,
            whole.locations)


COLUMNS = [("i", "I", np.int16, 7), ("j", "2J", np.int32, 7), ("b", "B", np.uint8, 7),
           ("k", "K", np.int64, None), ("e", "E", np.float32, None),
           ("d", "3D", np.float64, None)]


def scaled_table(path, rows=13):
    rng = np.random.default_rng(4)
    cols, raw = [], {}
    for name, fmt, dtype, null in COLUMNS:
        shape = (rows,) + ((int(fmt[0]),) if fmt[0].isdigit() else ())
        values = rng.integers(0, 100, shape).astype(dtype)
        if dtype in (np.float32, np.float64):
            values.reshape(-1)[[1, 5]] = np.nan, np.inf
        else:
            values.reshape(-1)[[0, 3]] = 7 if null is not None else 0
        raw[name] = values
        cols.append(fits.Column(name, fmt, array=values, null=null))
    table = fits.BinTableHDU.from_columns(cols, name="T")
    for n, (name, *_) in enumerate(COLUMNS, 1):
        # astropy 8 cannot read a K column with a TZERO (UnboundLocalError in fitsrec)
        table.header[f"TSCAL{n}"], table.header[f"TZERO{n}"] = 2.0, 0.0 if name == "k" else 1.0
    fits.HDUList([fits.PrimaryHDU(), table]).writeto(path)
    return raw


@pytest.mark.parametrize("tscal, tzero", [("2.0", "1.0"), ("1E307", "0.0"), ("1E999", "1.0"),
                                          ("0.0", "-1E999"), ("1E999", "-1E999")])
def test_scaled_table_columns(tmp_path, tscal, tzero):
    path = tmp_path / "t.fits"
    raw = scaled_table(path)
    for n, (name, *_) in enumerate(COLUMNS, 1):
        patch_card(path, f"TSCAL{n}", tscal)
        if name != "k":
            patch_card(path, f"TZERO{n}", tzero)
    report = scan([path], **SMALL)
    for name, fmt, dtype, null in COLUMNS:
        physical = astropy_read(path, "T", name)
        assert physical.dtype == np.float64
        blank = raw[name] == null if null is not None else np.isnan(raw[name]) \
            if raw[name].dtype.kind == "f" else np.zeros(raw[name].shape, bool)
        t = result(report, f"T/{name}")
        assert f"{np.dtype(dtype).name} scaled to float64" in t.dtype
        check(t, physical, blank)


def test_pseudo_unsigned_columns_are_integers(tmp_path):
    path = tmp_path / "u.fits"
    col = fits.Column("u", "I", bzero=32768, array=np.arange(5, dtype=np.uint16) + 40000)
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([col], name="T")]).writeto(path)
    assert astropy_read(path, "T", "u").dtype == np.uint16
    assert result(scan([path]), "T/u").status == "not_applicable"


def test_simple_false_is_a_clear_problem(tmp_path):
    path = tmp_path / "nonstandard.fits"
    fits.PrimaryHDU(np.full((4, 4), np.nan, np.float32)).writeto(path)
    patch_card(path, "SIMPLE", "F")
    with fits.open(path) as hdul:  # astropy reads it as bytes of no known layout
        assert type(hdul[0]).__name__ == "_NonstandardHDU"
    report = scan([path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    [p] = report.problems
    assert "SIMPLE = F" in p.reason and "internal error" not in p.reason


def test_header_keywords_astropy_reads_as_inf_or_refuses(tmp_path):
    path = tmp_path / "h.fits"
    hdu = fits.PrimaryHDU(np.ones((2, 2), np.float32))
    hdu.header["EXPTIME"], hdu.header["GAIN"], hdu.header["RDNOISE"] = 1.5, 2.5, 3.0
    hdu.header["COMMENT"] = "NAN and INF in a comment are text"
    hdu.writeto(path)
    patch_card(path, "EXPTIME", "-1E999")
    patch_card(path, "GAIN", "NAN")
    with fits.open(path) as hdul:
        assert hdul[0].header["EXPTIME"] == -np.inf
        with pytest.raises(fits.VerifyError):
            hdul[0].header["GAIN"]
    report = scan([path])
    assert (result(report, "PRIMARY@EXPTIME").neginf, result(report, "PRIMARY@EXPTIME").status) \
        == (1, "checked")
    assert result(report, "PRIMARY@GAIN").status == "unchecked"
    assert [t.name for t in report.tensors] == ["PRIMARY", "PRIMARY@EXPTIME", "PRIMARY@GAIN"]
    assert report.exit_code == ExitCode.FOUND


def test_an_hdu_that_does_not_advance_is_a_problem_not_a_hang(tmp_path):
    """Found by the fuzz (case fits#82 of seed 0: PCOUNT = 8 on an image, GCOUNT = -64 on the
    table): a negative data size takes astropy back to an earlier HDU, again and again."""
    from zarr_fits_fuzz import make_case, write_case
    path = write_case(make_case("fits", 82, 0), str(tmp_path))
    with fits.open(path, lazy_load_hdus=True) as hdul:
        assert hdul[4].fileinfo()["hdrLoc"] == hdul[2].fileinfo()["hdrLoc"]  # astropy loops
    report = scan([path])
    assert any("not after HDU" in p.reason for p in report.problems)
    assert report.exit_code == ExitCode.INCONCLUSIVE and report.seconds < 5


def test_table_whose_columns_disagree_with_naxis1_is_unchecked(tmp_path):
    """Found by the fuzz: astropy reads rows as wide as the columns, not NAXIS1."""
    path = tmp_path / "t.fits"
    cols = [fits.Column("e", "E", array=np.array([np.inf, 1, 2], np.float32)),
            fits.Column("j", "J", array=np.arange(3, dtype=np.int32))]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols, name="T")]).writeto(path)
    patch_card(path, "TFORM2", "'D'")
    with fits.open(path) as hdul:
        assert hdul["T"].data.dtype.itemsize == 12 != hdul["T"].header["NAXIS1"]
    t = result(scan([path]), "T")
    assert t.status == "unchecked" and "NAXIS1" in t.reason


def test_a_keyword_describing_the_data_given_twice_is_unchecked(tmp_path):
    """Found by the fuzz: with two BLANK cards astropy takes one for the header and the other
    for the data."""
    path = tmp_path / "twice.fits"
    hdu = fits.PrimaryHDU(RAW16)
    hdu.header["BSCALE"], hdu.header["BLANK"], hdu.header["EXPTIME"] = 2.0, 99, 1.0
    hdu.writeto(path)
    patch_card(path, "EXPTIME", "-1")
    data = bytearray(path.read_bytes())
    at = data.index(b"EXPTIME = ")
    data[at:at + 8] = b"BLANK   "
    path.write_bytes(bytes(data))
    t = result(scan([path]), "PRIMARY")
    assert t.status == "unchecked" and "BLANK appears more than once" in t.reason


def test_a_header_declaring_billions_of_axes_is_a_problem_not_a_hang(tmp_path):
    """Found by the fuzz: astropy builds a list of NAXIS axes before anything else (2^31:
    minutes); FITS allows at most 999."""
    path = tmp_path / "axes.fits"
    fits.HDUList([fits.PrimaryHDU(np.full(4, np.inf, np.float32)),
                  fits.ImageHDU(np.ones(3, np.float32), name="A")]).writeto(path)
    data = bytearray(path.read_bytes())
    at = data.index(b"NAXIS   = ", data.index(b"XTENSION"))
    data[at:at + 80] = f"{'NAXIS':<8}= {2 ** 31:>20}".ljust(80).encode()
    path.write_bytes(bytes(data))
    report = scan([path])
    assert [p.reason for p in report.problems] == [
        "HDU 1 declares NAXIS = 2147483648 (FITS allows at most 999 axes): it and the HDUs "
        "after it are not read"]
    assert result(report, "PRIMARY").posinf == 4
    assert report.seconds < 5
    fits.PrimaryHDU(np.ones(3, np.float32)).writeto(path, overwrite=True)
    patch_card(path, "NAXIS", str(2 ** 31))
    [p] = scan([path]).problems
    assert "declares NAXIS = 2147483648" in p.reason
