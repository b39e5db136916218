"""fpclass scan on FITS files written by astropy: counts and locations against astropy's own full
read of each HDU (np.isnan / np.isposinf / np.isneginf on `hdu.data`), for raw float images,
scaled and tile-compressed images, binary-table columns (rows a whole number of elements long,
and not), and for damaged and hostile files."""

import io
import itertools
import math
import sys
import time

import numpy as np
import pytest
from astropy.io import fits

from fpclass.cli import main
from fpclass.scan import ExitCode, scan
from fpclass.scan.engine import plan, run_task
from fpclass.scan.readers import ReaderError
from fpclass.scan.readers.registry import planner
from fpclass.scan.readers import fits as fits_reader
from fpclass.results.build import merge_parts
from fpclass.scan.storage.grids import boxes

CHUNK = 64            # bytes per chunk: many blocks even in small test arrays
SMALL = dict(chunk_bytes=CHUNK, task_bytes=160, max_locations=10_000, threads=2)


def planted(shape, dtype=np.float32, seed=0, spots=9):
    """Finite values with NaN, +Inf and -Inf at the first and last element and at random ones."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 3).astype(dtype)
    flat = a.reshape(-1)
    if not flat.size:
        return a
    picks = {0, flat.size - 1} | set(rng.integers(0, flat.size, spots).tolist())
    for k, i in enumerate(sorted(picks)):
        flat[i] = (np.nan, np.inf, -np.inf)[k % 3]
    return a


def classes_of(values, nan_class="missing"):
    """An object array of class names ("" for finite values) of a real array."""
    out = np.full(values.shape, "", dtype=object)
    out[np.isnan(values)] = nan_class
    out[np.isposinf(values)] = "posinf"
    out[np.isneginf(values)] = "neginf"
    return out


def parts(values):
    """A complex array as its real and imaginary parts (a last axis of 2), as the scan sees it."""
    return np.stack([values.real, values.imag], axis=-1) if values.dtype.kind == "c" else values


def truth(values, nan_class="missing"):
    """(counts dict, [(index, class)] in C order) of astropy's read of a tensor."""
    values = parts(np.asarray(values))
    c = classes_of(values, nan_class)
    counts = {k: int((c == k).sum()) for k in ("nan", "missing", "posinf", "neginf")}
    return counts, [(tuple(int(i) for i in ix), c[tuple(ix)]) for ix in np.argwhere(c != "")]


def tile_order_truth(values, tile):
    """[(index, class)] of a tile-compressed image in tile order (tiles in C order, C order in
    each tile): the order its data is stored in."""
    c = classes_of(values)
    grid = [range(0, n, t) for n, t in zip(values.shape, tile)]
    out = []
    for start in itertools.product(*grid):
        box = tuple(slice(s, s + t) for s, t in zip(start, tile))
        for ix in np.argwhere(c[box] != ""):
            index = tuple(int(s + i) for s, i in zip(start, ix))
            out.append((index, c[index]))
    return out


def result(report, name):
    [t] = [t for t in report.tensors if t.name == name]
    return t


def found(t):
    return [(loc.index, loc.cls) for loc in t.locations]


def assert_matches(t, values, nan_class="missing"):
    counts, locations = truth(values, nan_class)
    assert t.status == "checked", t.reason
    assert (t.nan, t.missing, t.posinf, t.neginf) == (
        counts["nan"], counts["missing"], counts["posinf"], counts["neginf"])
    assert found(t) == locations
    assert t.values_checked == parts(np.asarray(values)).size


def astropy_data(path):
    """{tensor name: astropy's full read} of every image HDU and table column of `path`."""
    out = {}
    with fits.open(path) as hdul:
        for i, hdu in enumerate(hdul):
            name = hdu.name or str(i)
            if isinstance(hdu, fits.BinTableHDU):
                for col in hdu.columns:
                    out[f"{name}/{col.name}"] = np.array(hdu.data[col.name])
            elif hdu.data is not None:
                out[name] = np.array(hdu.data)
    return out


# --- images --------------------------------------------------------------------------------


@pytest.fixture
def images(tmp_path):
    primary = planted((7, 11))
    primary[2, 3], primary[4, 5], primary[6, 0] = np.nan, np.inf, -np.inf  # known pixels
    path = tmp_path / "images.fits"
    fits.HDUList([fits.PrimaryHDU(primary),
                  fits.ImageHDU(planted((3, 4, 5), np.float64, seed=1), name="SCI"),
                  fits.ImageHDU(np.arange(12, dtype=np.int16).reshape(3, 4), name="COUNTS"),
                  fits.ImageHDU(planted((0, 4)), name="EMPTY")]).writeto(path)
    return path


def test_float_images_match_astropy(images):
    report = scan([images], **SMALL)
    data = astropy_data(images)
    assert_matches(result(report, "PRIMARY"), data["PRIMARY"])
    assert ((2, 3), "missing") in found(result(report, "PRIMARY"))
    assert ((4, 5), "posinf") in found(result(report, "PRIMARY"))
    assert ((6, 0), "neginf") in found(result(report, "PRIMARY"))
    assert_matches(result(report, "SCI"), data["SCI"])
    assert_matches(result(report, "EMPTY"), data["EMPTY"])
    counts = result(report, "COUNTS")
    assert (counts.status, counts.dtype, counts.shape) == ("not_applicable", "BITPIX 16", (3, 4))
    assert report.files == [(str(images), "fits")]
    assert not report.problems
    assert report.exit_code == ExitCode.FOUND


def test_float_images_are_read_raw_and_in_parts(images):
    tasks = [t for t in plan([images], task_bytes=160) if t.name == "PRIMARY"]
    assert len(tasks) > 1 and all(t.storage.kind == "raw" and t.element == ">f4" for t in tasks)
    assert all(t.missing for t in tasks)


def test_the_first_locations_are_the_first_in_storage_order(images):
    report = scan([images], chunk_bytes=CHUNK, task_bytes=160, max_locations=3)
    data = astropy_data(images)
    for name in ("PRIMARY", "SCI"):
        assert found(result(report, name)) == truth(data[name])[1][:3]


def test_nan_in_an_image_is_missing_and_fails_only_on_request(tmp_path):
    a = np.ones((4, 4), np.float32)
    a[1, 2] = np.nan
    path = tmp_path / "blank.fits"
    fits.PrimaryHDU(a).writeto(path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["scan", str(path)], stdout=out, stderr=err) == ExitCode.CLEAN
    assert main(["scan", "--fail-on", "missing", str(path)], stdout=out,
                stderr=err) == ExitCode.FOUND
    t = result(scan([path]), "PRIMARY")
    assert (t.nan, t.missing, found(t)) == (0, 1, [((1, 2), "missing")])


def scaled_image(path, raw, bscale, bzero):
    hdu = fits.PrimaryHDU(raw)
    hdu.header["BSCALE"], hdu.header["BZERO"] = bscale, bzero
    hdu.writeto(path)
    with fits.open(path, do_not_scale_image_data=True) as hdul:  # written as given
        np.testing.assert_array_equal(hdul[0].data, raw)
    return path


@pytest.mark.parametrize("bscale, bzero", [(2.0, 1.0), (-3.0, 0.5), (0.5, 0.0)])
def test_scaled_float_images_are_checked_as_astropy_scales_them(tmp_path, bscale, bzero):
    raw = planted((6, 9))
    raw[3, 3] = 3e38      # finite, but x2 or x-3 passes float32's range
    path = scaled_image(tmp_path / "scaled.fits", raw, bscale, bzero)
    report = scan([path], **SMALL)
    t = result(report, "PRIMARY")
    with np.errstate(over="ignore"), fits.open(path) as hdul:
        physical = hdul[0].data
    assert_matches(t, physical)
    assert (t.posinf + t.neginf > (raw == np.inf).sum() + (raw == -np.inf).sum()) == \
        (abs(bscale) > 1)   # the overflow counts where astropy gives Inf


@pytest.mark.parametrize("bitpix_dtype, bscale, bzero, status", [
    (np.int16, 0.01, 0.0, "checked"), (np.uint8, 1e37, 0.0, "checked"),
    (np.int32, 1e30, 0.0, "checked"), (np.int16, 1.0, 0.0, "not_applicable"),
    (np.int16, 1.0, 32768.0, "not_applicable")])   # pseudo-unsigned: uint16
def test_scaled_integer_images(tmp_path, bitpix_dtype, bscale, bzero, status):
    """The physical values, as astropy computes them (tests/test_scan_fits_scaled.py has the
    blanks, non-finite scales and overflow)."""
    path = scaled_image(tmp_path / "ints.fits", np.arange(6, dtype=bitpix_dtype).reshape(2, 3),
                        bscale, bzero)
    t = result(scan([path]), "PRIMARY")
    assert t.status == status
    if status == "checked":
        with np.errstate(over="ignore"), fits.open(path) as hdul:
            assert_matches(t, hdul[0].data)


# --- tile-compressed images ----------------------------------------------------------------


COMPRESSIONS = [
    dict(compression_type="GZIP_1", quantize_level=0.0),
    dict(compression_type="GZIP_2", quantize_level=0.0),
]


@pytest.mark.parametrize("options", COMPRESSIONS, ids=lambda o: o["compression_type"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tile", [None, (3, 5), (2, 13)], ids=["rows", "3x5", "full-width"])
@pytest.mark.parametrize("chunk", [CHUNK, 4096], ids=["tile-by-tile", "tiles-grouped"])
def test_compressed_images_match_astropy(tmp_path, options, dtype, tile, chunk):
    a = planted((10, 13), dtype, spots=15)
    path = tmp_path / "image.fits.fz"
    fits.HDUList([fits.PrimaryHDU(),
                  fits.CompImageHDU(a, name="CMP", tile_shape=tile, **options)]).writeto(path)
    with fits.open(path) as hdul:
        stored, tile_shape = hdul["CMP"].data, tuple(int(t) for t in hdul["CMP"].tile_shape)
    np.testing.assert_array_equal(stored, a)  # lossless: NaN and Inf survive
    report = scan([path], **{**SMALL, "chunk_bytes": chunk})
    t = result(report, "CMP")
    counts, _ = truth(stored)
    assert t.status == "checked", t.reason
    assert (t.missing, t.posinf, t.neginf, t.nan) == (
        counts["missing"], counts["posinf"], counts["neginf"], 0)
    assert found(t) == tile_order_truth(stored, tile_shape)
    assert t.values_checked == a.size
    [task] = [x for x in plan([path]) if x.name == "CMP"]
    assert task.storage.kind == "dataset" and task.missing and task.storage.nblocks == math.prod(
        -(-n // k) for n, k in zip(a.shape, tile_shape))


def test_a_compressed_image_in_parts_is_the_whole(tmp_path):
    """read_blocks honors first/count: any cut of the tiles into parts gives the same result."""
    a = planted((9, 8), spots=20)
    path = tmp_path / "parts.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(a, tile_shape=(2, 3), name="C",
                                                       compression_type="GZIP_1",
                                                       quantize_level=0.0)]).writeto(path)
    [task] = [x for x in plan([path]) if x.name == "C"]
    whole = run_task(task, 1000, chunk_bytes=CHUNK)
    blocks = task.storage.nblocks
    for cut in ([0, 5, blocks], [0, 1, 2, 7, 11, blocks]):
        pieces = [run_task(task.part(a_, b - a_), 1000, chunk_bytes=CHUNK)
                  for a_, b in zip(cut, cut[1:])]
        merged = merge_parts(pieces, 1000)
        assert (merged.missing, merged.posinf, merged.neginf, merged.values_checked) == (
            whole.missing, whole.posinf, whole.neginf, whole.values_checked)
        assert merged.locations == whole.locations


def test_quantized_compressed_floats_with_blanks(tmp_path):
    """RICE_1 quantizes floats (lossy); NaN is kept as the ZBLANK integer and read back as NaN."""
    a = np.random.default_rng(3).standard_normal((20, 30)).astype(np.float32)
    a[[0, 5, 19], [0, 7, 29]] = np.nan
    path = tmp_path / "rice.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(a, compression_type="RICE_1",
                                                       name="R")]).writeto(path)
    report = scan([path], **SMALL)
    with fits.open(path) as hdul:
        stored = hdul["R"].data
    assert np.isnan(stored).sum() == 3
    assert_matches(result(report, "R"), stored)   # row tiles: tile order is C order


def test_compressed_integer_image_is_not_applicable(tmp_path):
    path = tmp_path / "ints.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(np.arange(20, dtype=np.int16)
                                                       .reshape(4, 5), name="I")]).writeto(path)
    t = result(scan([path]), "I")
    assert (t.status, t.shape) == ("not_applicable", (4, 5))


# --- binary tables -------------------------------------------------------------------------


def table_columns(rows, seed, unaligned):
    rng = np.random.default_rng(seed)
    c = np.zeros((rows, 2), np.complex64)
    c.real, c.imag = planted((rows, 2), np.float32, seed), planted((rows, 2), np.float32, seed + 1)
    z = np.zeros(rows, np.complex128)
    z.imag = planted(rows, np.float64, seed + 5)
    cols = [fits.Column("e", "E", array=planted(rows, np.float32, seed)),
            fits.Column("d", "D", array=planted(rows, np.float64, seed + 2)),
            fits.Column("v", "3E", array=planted((rows, 3), np.float32, seed + 3)),
            fits.Column("m", "6D", dim="(3,2)", array=planted((rows, 2, 3), np.float64, seed + 4)),
            fits.Column("c", "2C", array=c),
            fits.Column("z", "M", array=z),
            fits.Column("n", "J", array=rng.integers(0, 9, rows).astype(np.int32)),
            fits.Column("pad", "5J", array=np.zeros((rows, 5), np.int32))]  # 128-byte rows
    if unaligned:  # a 3-byte string makes the row length odd
        cols.insert(2, fits.Column("s", "3A", array=np.array([b"abc"] * rows)))
    return cols


@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
@pytest.mark.parametrize("chunk", [CHUNK, 1000], ids=["row-by-row", "rows-grouped"])
def test_binary_table_float_columns_match_astropy(tmp_path, unaligned, chunk):
    rows = 23
    path = tmp_path / "table.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        table_columns(rows, 0, unaligned), name="CAT")]).writeto(path)
    report = scan([path], **{**SMALL, "chunk_bytes": chunk})
    data = astropy_data(path)
    for col in ("e", "d", "v", "m", "c", "z"):
        t = result(report, f"CAT/{col}")
        assert t.shape == data[f"CAT/{col}"].shape
        assert_matches(t, data[f"CAT/{col}"])
    assert result(report, "CAT/n").status == "not_applicable"
    if unaligned:
        assert result(report, "CAT/s").status == "not_applicable"
    assert report.exit_code == ExitCode.FOUND


@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
def test_table_locations_are_the_first_in_row_order(tmp_path, unaligned):
    path = tmp_path / "table.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        table_columns(40, 7, unaligned), name="CAT")]).writeto(path)
    report = scan([path], chunk_bytes=CHUNK, max_locations=4)
    data = astropy_data(path)
    for col in ("v", "m", "c"):
        assert found(result(report, f"CAT/{col}")) == truth(data[f"CAT/{col}"])[1][:4]


def test_table_columns_not_read(tmp_path):
    path = tmp_path / "odd.fits"
    cols = [fits.Column("vla", "PE()", array=[np.ones(k, np.float32) for k in range(4)]),
            fits.Column("vli", "PJ()", array=[np.ones(k, np.int32) for k in range(4)]),
            fits.Column("scaled", "C", bscale=2.0, bzero=1.0, array=np.ones(4)),
            fits.Column("flags", "8X", array=np.zeros((4, 8), bool)),
            fits.Column("ok", "E", array=np.ones(4, np.float32))]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols, name="T")]).writeto(path)
    report = scan([path])
    assert "variable-length" in result(report, "T/vla").reason
    assert result(report, "T/vli").status == "not_applicable"
    assert "TSCAL" in result(report, "T/scaled").reason
    assert result(report, "T/flags").status == "not_applicable"
    assert result(report, "T/ok").status == "checked"
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_ascii_tables_and_random_groups_are_unchecked(tmp_path):
    groups = fits.GroupsHDU(fits.GroupData(np.ones((4, 1, 2, 3), np.float32), parnames=["u"],
                                           pardata=[np.ones(4)], bitpix=-32))
    ascii_ = fits.TableHDU.from_columns([fits.Column("x", "E15.7", array=[1.0, np.nan]),
                                         fits.Column("i", "I5", array=[1, 2])], name="ASC")
    path = tmp_path / "old.fits"
    fits.HDUList([groups, ascii_]).writeto(path)
    report = scan([path])
    assert "random-groups" in result(report, "PRIMARY").reason
    assert "text" in result(report, "ASC/x").reason
    assert result(report, "ASC/i").status == "not_applicable"
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_hdus_are_named_by_extname_extver_or_index(tmp_path):
    path = tmp_path / "names.fits"
    one = np.ones(2, np.float32)
    fits.HDUList([fits.PrimaryHDU(one), fits.ImageHDU(one, name="SCI", ver=1),
                  fits.ImageHDU(one, name="SCI", ver=2), fits.ImageHDU(one)]).writeto(path)
    assert [t.name for t in scan([path]).tensors] == ["PRIMARY", "SCI,1", "SCI,2", "3"]


# --- damaged and hostile files -------------------------------------------------------------


def test_truncated_image_is_unchecked_and_the_file_a_problem(images, tmp_path):
    data = images.read_bytes()
    with fits.open(images) as hdul:
        sci = hdul["SCI"].fileinfo()["datLoc"]
    path = tmp_path / "cut.fits"
    path.write_bytes(data[:sci + 100])
    assert [t.status for t in plan([path]) if t.name == "SCI"] == ["unchecked"]
    report = scan([path])
    assert result(report, "PRIMARY").status == "checked"
    t = result(report, "SCI")
    assert t.status == "unchecked" and "truncated?" in t.reason
    assert [p.reason for p in report.problems] == [
        f"the file ends at byte {sci + 100}, inside its last HDU (which ends at byte "
        f"{sci + 2880}): truncated? Any HDUs after it are lost"]
    assert report.exit_code == ExitCode.FOUND   # PRIMARY holds Inf


def fits_header(cards) -> bytes:
    text = "".join(f"{c:<80}" for c in cards + ["END"]).encode("ascii")
    return text + b" " * (-len(text) % 2880)


def test_a_header_claiming_more_data_than_the_file_holds(tmp_path):
    path = tmp_path / "huge.fits"
    path.write_bytes(fits_header([
        "SIMPLE  =                    T", "BITPIX  =                  -32",
        "NAXIS   =                    2", "NAXIS1  =              1000000",
        "NAXIS2  =              1000000"]) + b"\0" * 2880)
    [task] = [t for t in plan([path]) if t.name == "PRIMARY"]
    assert task.status == "unchecked"   # decided from the header: no part is read or planned
    report = scan([path])
    t = result(report, "PRIMARY")
    assert (t.status, t.shape) == ("unchecked", (1000000, 1000000))
    assert "truncated?" in t.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def many_hdus(path, n):
    """A primary HDU and `n` one-pixel float IMAGE extensions, the last one NaN."""
    primary = fits_header(["SIMPLE  =                    T", "BITPIX  =                    8",
                           "NAXIS   =                    0", "EXTEND  =                    T"])
    ext = fits_header(["XTENSION= 'IMAGE   '", "BITPIX  =                  -32",
                       "NAXIS   =                    1", "NAXIS1  =                    1",
                       "PCOUNT  =                    0", "GCOUNT  =                    1"])
    one, nan = np.array(1, ">f4"), np.array(np.nan, ">f4")
    pad = b"\0" * 2876
    with open(path, "wb") as f:
        f.write(primary)
        for i in range(n):
            f.write(ext + (nan if i == n - 1 else one).tobytes() + pad)
    return path


def test_thousands_of_hdus_plan_in_bounded_time(tmp_path):
    path = many_hdus(tmp_path / "many.fits", 3000)
    start = time.perf_counter()
    report = scan([path], fail_on="any")
    assert time.perf_counter() - start < 60   # about 0.4 ms per header with astropy
    assert len(report.tensors) == 3000 and report.tensors[-1].missing == 1
    assert report.exit_code == ExitCode.FOUND


def test_hdus_past_the_limit_are_a_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(fits_reader, "MAX_HDUS", 20)
    report = scan([many_hdus(tmp_path / "many.fits", 30)])
    assert len(report.tensors) == 19   # the primary HDU holds no data
    assert [p.reason for p in report.problems] == [
        "more than 20 HDUs: those after the first 20 are not read"]
    assert report.exit_code == ExitCode.INCONCLUSIVE


@pytest.mark.parametrize("tail, problem", [
    (b"\0" * 2880, None),
    (b"junk" * 720, "HDU 4 cannot be read (Header missing END card.): it and the HDUs after "
                    "it are not read"),
    (b"XTENSION= 'IMAGE   '" + b" " * 2860, "HDU 4 cannot be read (Header missing END card.): "
                                              "it and the HDUs after it are not read"),
    (b"SIMPLE", "bytes {0}..{1} after the last HDU are not a readable HDU (a corrupt "
                "header?): not read"),
])
def test_bytes_after_the_last_hdu(images, tmp_path, tail, problem):
    path = tmp_path / "tail.fits"
    data = images.read_bytes()
    path.write_bytes(data + tail)
    problem = problem and problem.format(len(data), len(data) + len(tail))
    report = scan([path])
    assert [p.reason for p in report.problems] == ([problem] if problem else [])
    assert result(report, "SCI").status == "checked"


@pytest.mark.parametrize("content, reason", [
    (b"SIMPLE  =                    T" + b" " * 50, "not a readable FITS file"),
    # a gzip stream is read through (readers/compressed.py): this one is corrupt
    (b"\x1f\x8b\x08\0" + b"\0" * 100, "corrupt gzip stream"),
    (b"NOT FITS" * 400, "not a FITS file"),
    (b"", "not a FITS file"),
])
def test_files_that_are_not_fits(tmp_path, content, reason):
    path = tmp_path / "bad.fits"
    path.write_bytes(content)
    report = scan([path])
    assert [p.path for p in report.problems] == [str(path)]
    assert reason in report.problems[0].reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_without_astropy_the_file_is_a_problem_naming_the_extra(images, monkeypatch):
    for name in ("astropy", "astropy.io", "astropy.io.fits"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ReaderError, match=r"install the extra fpclass\[fits\]"):
        planner("fits")(str(images))
    report = scan([images])
    assert "install the extra fpclass[fits]" in report.problems[0].reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


# --- the box cover of read_blocks ----------------------------------------------------------


@pytest.mark.parametrize("grid", [(7,), (3, 4), (2, 3, 5), (4, 1, 3), (1, 6, 1)])
def test_boxes_cover_a_range_in_c_order(grid):
    n = math.prod(grid)
    for first, stop, limit in itertools.product(range(n + 1), range(n + 1), (1, 2, 5, 64)):
        covered = []
        for start, extent in boxes(grid, first, stop, limit):
            assert math.prod(extent) <= limit
            box = np.zeros(grid, bool)
            box[tuple(slice(s, s + e) for s, e in zip(start, extent))] = True
            where = np.flatnonzero(box)
            assert np.array_equal(where, np.arange(where[0], where[-1] + 1))  # contiguous
            covered += where.tolist()
        assert covered == list(range(first, max(first, stop)))
