"""Files inside gzip, bzip2, xz and compress (.Z) streams are read (a directory of them used to be
clean with no value read): written by the formats' own writers, compressed by the stdlib (or
astropy), and judged against the formats' libraries reading the decompressed bytes. Corrupt
streams and bombs are problems; the decompressed copies are gone when the scan ends."""

import bz2
import gzip
import io
import lzma
import os
import subprocess
import tempfile

import numpy as np
import pytest

from fpclass.scan import ExitCode, scan
from lzw_writer import compress as lzw_compress
from test_scan_support import safetensors_bytes

VALUES = np.array([[1.0, np.nan, np.inf], [-np.inf, np.nan, 0.5]], np.float32)
COMPRESSORS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "Z": lzw_compress}


def decompress(data: bytes) -> bytes:
    """The stream's bytes through the stdlib (gzip's own decoder for .Z)."""
    for magic, module in ((b"\x1f\x8b", gzip), (b"BZh", bz2), (b"\xfd7zXZ", lzma)):
        if data.startswith(magic):
            return module.decompress(data)
    done = subprocess.run(["gzip", "-dc"], input=data, capture_output=True, check=True)
    return done.stdout


def truth_counts(values):
    values = np.asarray(values)
    return int(np.isnan(values).sum()), int(np.isposinf(values).sum()), \
        int(np.isneginf(values).sum())


def counts(report):
    return (sum(t.nan + t.missing for t in report.tensors),
            sum(t.posinf for t in report.tensors), sum(t.neginf for t in report.tensors))


@pytest.fixture(autouse=True)
def own_tempdir(tmp_path, monkeypatch):
    """Scratch copies go under tmp_path/scratch, so the test can see them removed."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield scratch
    assert not os.listdir(scratch), "a decompressed copy outlived its scan"


def npy_bytes(values):
    buf = io.BytesIO()
    np.save(buf, values)
    return buf.getvalue()


def fits_bytes(values):
    fits = pytest.importorskip("astropy.io.fits")
    buf = io.BytesIO()
    fits.HDUList([fits.PrimaryHDU(values)]).writeto(buf)
    return buf.getvalue()


def fits_truth(data):
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(io.BytesIO(data)) as hdus:
        return truth_counts(hdus[0].data)


def netcdf_bytes(values, tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    path = tmp_path / "made.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("y", values.shape[0])
        ds.createDimension("x", values.shape[1])
        ds.createVariable("v", "f4", ("y", "x"))[:] = values
    data = path.read_bytes()
    path.unlink()
    return data


def netcdf_truth(data):
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset("inmemory.nc", memory=data) as ds:
        ds.set_auto_mask(False)
        return truth_counts(ds["v"][:])


def formats(tmp_path):
    """name -> (bytes, truth of the decompressed bytes)."""
    st = safetensors_bytes({"w": ("F32", VALUES, VALUES.shape)})
    return {
        "a.npy": (npy_bytes(VALUES), lambda d: truth_counts(np.load(io.BytesIO(d)))),
        "b.fits": (fits_bytes(VALUES), fits_truth),
        "c.nc": (netcdf_bytes(VALUES, tmp_path), netcdf_truth),
        "d.safetensors": (st, lambda d: truth_counts(VALUES)),
    }


@pytest.mark.parametrize("ext", list(COMPRESSORS))
def test_a_directory_of_compressed_files_is_read(tmp_path, ext):
    directory = tmp_path / "data"
    directory.mkdir()
    want = [0, 0, 0]
    for name, (data, truth) in formats(tmp_path).items():
        packed = COMPRESSORS[ext](data)
        (directory / f"{name}.{ext}").write_bytes(packed)
        assert decompress(packed) == data
        want = [a + b for a, b in zip(want, truth(decompress(packed)))]
    report = scan([directory])
    assert not report.problems and not report.skipped and not report.unchecked
    assert len(report.files) == 4
    assert all(fmt.endswith("-compressed)") for _, fmt in report.files)
    assert counts(report) == tuple(want) == (8, 4, 4)
    assert report.exit_code == ExitCode.FOUND
    assert {os.path.dirname(t.file) for t in report.tensors} == {str(directory)}


def test_named_directly_and_written_by_astropy(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "image.fits.gz"
    fits.PrimaryHDU(VALUES).writeto(path)  # astropy gzips by the name
    with fits.open(path) as hdus:
        want = truth_counts(hdus[0].data)
    report = scan([path])
    assert report.files == [(str(path), "fits (gzip-compressed)")]
    assert counts(report) == want and report.exit_code == ExitCode.FOUND


def test_astropys_own_lzw_fits_file():
    fits = pytest.importorskip("astropy.io.fits")
    path = os.path.join(os.path.dirname(fits.__file__), "tests", "data", "lzw.fits.Z")
    if not os.path.exists(path):
        pytest.skip("astropy's test data is not installed")
    with open(path, "rb") as f:
        data = decompress(f.read())
    report = scan([path])
    assert report.files == [(path, "fits (compress-compressed)")]
    assert not report.problems and not report.unchecked
    with fits.open(io.BytesIO(data)) as hdus:  # one integer image: no NaN or Inf possible
        assert [(h.data.shape, h.data.dtype.kind) for h in hdus] == [((101, 101), "i")]
    assert [(t.shape, t.status) for t in report.tensors] == [((101, 101), "not_applicable")]
    assert report.exit_code == ExitCode.CLEAN


def test_compressed_text_is_skipped_and_unknown_binary_is_unchecked(tmp_path):
    (tmp_path / "ok.npy").write_bytes(npy_bytes(np.ones(2)))
    # text from its first MiB on: skipped there (the rest, 40 MiB of it, is not decompressed)
    (tmp_path / "log.txt.gz").write_bytes(gzip.compress(b"step 1 loss nan\n" * (40 << 16)))
    (tmp_path / "blob.raw.xz").write_bytes(lzma.compress(np.float32([np.nan]).tobytes()))
    report = scan([tmp_path])
    assert [(os.path.basename(p.path), p.reason) for p in report.skipped] == [
        ("log.txt.gz", "gzip-compressed text file")]
    (problem,) = report.problems
    assert problem.path.endswith("blob.raw.xz") and "unrecognized binary file" in problem.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


@pytest.mark.parametrize("ext", list(COMPRESSORS))
def test_a_corrupt_stream_is_a_problem(tmp_path, ext):
    data = COMPRESSORS[ext](npy_bytes(VALUES))
    path = tmp_path / f"a.npy.{ext}"
    path.write_bytes(data[:len(data) // 2] + bytes(64))
    report = scan([tmp_path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert report.problems or report.unchecked


def test_bombs_and_limits_are_problems(tmp_path, monkeypatch):
    from fpclass.scan.readers import compressed
    zeros = npy_bytes(np.zeros(1 << 20, np.float32))   # 4 MiB of zeros
    (tmp_path / "bomb.npy.bz2").write_bytes(bz2.compress(zeros))  # about 50 bytes
    report = scan([tmp_path])
    (problem,) = report.problems
    assert "decompression bomb" in problem.reason and report.exit_code == ExitCode.INCONCLUSIVE
    monkeypatch.setattr(compressed, "MAX_BYTES", 1 << 20)
    (tmp_path / "bomb.npy.bz2").unlink()
    (tmp_path / "big.npy.gz").write_bytes(gzip.compress(npy_bytes(np.arange(1 << 19, dtype=float)),
                                                         compresslevel=1))
    report = scan([tmp_path])
    assert "over 1048576 bytes" in report.problems[0].reason


def test_one_layer_only(tmp_path):
    (tmp_path / "a.npy.gz.gz").write_bytes(gzip.compress(gzip.compress(npy_bytes(VALUES))))
    report = scan([tmp_path])
    assert "only one layer" in report.problems[0].reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_tasks_planned_outside_a_scan_keep_their_copy_until_exit(tmp_path, own_tempdir):
    """fpclass.scan.plan alone (its tasks run later, by execute): the copy lives until exit."""
    import sys
    (tmp_path / "a.npy.gz").write_bytes(gzip.compress(npy_bytes(VALUES)))
    code = ("import os, sys\nfrom fpclass.scan import plan, execute, assemble\n"
            "tasks = plan([sys.argv[1]])\nresults, _ = execute(tasks)\n"
            "print(assemble(tasks, results).exit_code, len(os.listdir(sys.argv[2])))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.npy.gz"), own_tempdir],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, TMPDIR=str(own_tempdir),
                                   PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.stdout.split() == ["1", "1"]  # found, from a copy that existed then
    assert not os.listdir(own_tempdir)  # and is gone at exit
