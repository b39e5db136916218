"""Detection fails closed: every binary file is read, skipped as a kind known to hold no tensors
(named by its magic number), or unchecked (exit 2); HDF5 is found behind a user block (MATLAB
v7.3); FITS header dumps are text."""

import io
import os
import sqlite3
import tarfile
import warnings
import wave
import zipfile

import numpy as np
import pytest

from fpclass.scan import ExitCode, scan
from test_scan_support import safetensors_bytes

CLEAN = safetensors_bytes({"w": ("F32", np.ones(4, np.float32), (4,))})


def reasons(items):
    return {os.path.basename(p.path): p.reason for p in items}


def test_an_unknown_binary_file_makes_a_directory_inconclusive(tmp_path):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    # raw float32 values with a NaN, in no format: the old scan skipped them and said clean
    (tmp_path / "values.raw").write_bytes(np.array([1, np.nan, 3], np.float32).tobytes())
    # NaNs whose bytes hold no control byte (41 41 c1 ff) are not 8-bit text either
    (tmp_path / "nans.raw").write_bytes(np.full(64, 0xFFC14141, np.uint32).tobytes())
    assert np.isnan(np.fromfile(tmp_path / "nans.raw", np.float32)).all()
    report = scan([tmp_path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    for name in ("values.raw", "nans.raw"):
        assert reasons(report.problems)[name].startswith("unrecognized binary file: ")
        assert "not checked" in reasons(report.problems)[name]
    assert not report.skipped


def wav_bytes():
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\1" * 100)
    return buf.getvalue()


def sqlite_bytes(tmp_path):
    path = tmp_path / "db.tmp"
    with sqlite3.connect(path) as db:
        db.execute("create table t (x real)")
        db.execute("insert into t values (1.5)")
    db.close()
    data = path.read_bytes()
    path.unlink()
    return data


#: Files of kinds that hold no tensors, each as its writer (or its specification) starts it.
KNOWN = {
    "sound.wav": (wav_bytes, "audio (WAV)"),
    "image.tif": (lambda: b"II*\0\x08\0\0\0" + os.urandom(64), "image (TIFF)"),
    "image.webp": (lambda: b"RIFF\x24\0\0\0WEBPVP8 " + os.urandom(64), "image (WebP)"),
    "song.flac": (lambda: b"fLaC\0\0\0\x22" + os.urandom(64), "audio (FLAC)"),
    "song.ogg": (lambda: b"OggS\0\x02" + os.urandom(64), "audio/video (Ogg)"),
    "song.mp3": (lambda: b"ID3\x04\0\0\0\0\0\0" + os.urandom(64), "audio (MP3)"),
    "clip.mp4": (lambda: b"\0\0\0\x18ftypisom\0\0\x02\0" + os.urandom(64),
                 "audio/video/image (ISO media: MP4, MOV, HEIC, ...)"),
    "clip.mkv": (lambda: b"\x1a\x45\xdf\xa3" + os.urandom(64), "video (Matroska/WebM)"),
    "font.woff2": (lambda: b"wOF2\0\1\0\0" + os.urandom(64), "font (WOFF2)"),
    "lib.so": (lambda: b"\x7fELF\x02\x01\x01" + os.urandom(64), "compiled code (ELF)"),
    "paper.pdf": (lambda: b"%PDF-1.7\n" + os.urandom(64), "PDF document"),
    "module.pyc": (lambda: b"\xa7\x0d\r\n" + os.urandom(64), "compiled code (Python bytecode)"),
}


def test_known_kinds_are_skipped_with_their_kind(tmp_path):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    for name, (make, _) in KNOWN.items():
        (tmp_path / name).write_bytes(make())
    (tmp_path / "runs.db").write_bytes(sqlite_bytes(tmp_path))
    report = scan([tmp_path])
    assert reasons(report.skipped) == {**{n: what for n, (_, what) in KNOWN.items()},
                                       "runs.db": "SQLite database"}
    assert report.exit_code == ExitCode.CLEAN and not report.problems


@pytest.mark.parametrize("text", ["café crème\n", "naïve résumé\n" * 50])
@pytest.mark.parametrize("encoding", ["latin-1", "utf-16", "utf-8"])
def test_text_in_any_common_encoding_stays_skipped_as_text(tmp_path, text, encoding):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    (tmp_path / "notes.txt").write_bytes(text.encode(encoding))
    report = scan([tmp_path])
    assert reasons(report.skipped) == {"notes.txt": "text file"}
    assert report.exit_code == ExitCode.CLEAN


def test_archives_are_read_by_their_members_names(tmp_path):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    with zipfile.ZipFile(tmp_path / "docs.zip", "w") as z:
        z.writestr("docs/a.txt", "hello")
        z.writestr("docs/logo.png", b"\x89PNG\r\n\x1a\n")
    with zipfile.ZipFile(tmp_path / "weights.zip", "w") as z:
        z.writestr("README.md", "weights")
        z.writestr("model.safetensors", CLEAN)
    with tarfile.open(tmp_path / "arrays.tar", "w") as t:
        info = tarfile.TarInfo("a.npy")
        data = io.BytesIO()
        np.save(data, np.array([np.nan]))
        info.size = len(data.getvalue())
        t.addfile(info, io.BytesIO(data.getvalue()))
    report = scan([tmp_path])
    assert reasons(report.skipped) == {
        "docs.zip": "zip archive holding no tensor files (by its members' names)"}
    unread = reasons(report.problems)
    assert set(unread) == {"weights.zip", "arrays.tar"}
    assert "'model.safetensors'" in unread["weights.zip"]
    assert unread["arrays.tar"].startswith("tar archive")
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_columnar_data_files_are_unchecked(tmp_path):
    """Parquet and Arrow files start (and end) with their magic numbers, per their specs."""
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    (tmp_path / "metrics.parquet").write_bytes(b"PAR1" + os.urandom(64) + b"PAR1")
    (tmp_path / "metrics.feather").write_bytes(b"ARROW1\0\0" + os.urandom(64) + b"ARROW1")
    report = scan([tmp_path])
    unread = reasons(report.problems)
    assert unread["metrics.parquet"].startswith("Parquet file: ")
    assert unread["metrics.feather"].startswith("Apache Arrow file: ")
    assert report.exit_code == ExitCode.INCONCLUSIVE


MATLAB_HEADER = (b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 "
                 b"HDF5 schema 1.00 .").ljust(116) + b"\0" * 8 + b"\x00\x02IM"


@pytest.mark.parametrize("userblock", [512, 1024, 16384])
@pytest.mark.parametrize("name", ["data.mat", "data"])
def test_hdf5_is_found_behind_a_user_block(tmp_path, userblock, name):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / name
    values = np.array([[1, np.nan, np.inf], [-np.inf, np.nan, 2]])
    with h5py.File(path, "w", userblock_size=userblock) as f:
        f["x"] = values
        f.create_group("s")["y"] = np.float32([np.nan, 0])
    with open(path, "r+b") as f:  # a MATLAB v7.3 file's header, in the user block
        f.write(MATLAB_HEADER)
    with h5py.File(path, "r") as f:  # the truth: what h5py reads
        truth = {k: np.isnan(f[k][()]).sum() for k in ("x", "s/y")}
        inf = np.isinf(f["x"][()]).sum()
    for report in (scan([tmp_path]), scan([path])):
        assert report.files == [(str(path), "hdf5")]
        nan = {t.name: t.nan for t in report.tensors}
        assert nan == truth
        assert sum(t.posinf + t.neginf for t in report.tensors) == inf
        assert report.exit_code == ExitCode.FOUND


HEADER_DUMP = "\n".join(card.ljust(80) for card in [
    "SIMPLE  =                    T / conforms to FITS standard",
    "BITPIX  =                  -32 / array data type",
    "NAXIS   =                    2", "NAXIS1  =                  100",
    "NAXIS2  =                  100", "END"]) + "\n"


def test_a_fits_header_dump_is_text_not_fits(tmp_path):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    (tmp_path / "image.hdr").write_text(HEADER_DUMP)
    report = scan([tmp_path])
    assert reasons(report.skipped) == {"image.hdr": "text file"}
    assert report.exit_code == ExitCode.CLEAN and not report.problems
    fits = pytest.importorskip("astropy.io.fits")
    with open(tmp_path / "image.hdr", "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(OSError, match="Empty or corrupt FITS file"):
            fits.open(f)  # astropy agrees: not a FITS file


@pytest.mark.parametrize("magic", [r'b"\x93NUMPY"', 'b"GGUF"', 'b"SIMPLE  ="', r'b"PK\x03\x04"',
                                   "0x1950A86A20F9469CFC6C", r'b"\x1f\x8b"', 'b"BZh"',
                                   r'b"\x89HDF'])
def test_each_magic_number_is_written_once_in_the_scan(magic):
    # detect.py holds detection's magic numbers; a reader that checks its own header again
    # imports the constant, so the two can never disagree
    from pathlib import Path
    import fpclass.scan
    where = [f"{p.name}: {line.strip()}" for p in Path(fpclass.scan.__file__).parent.rglob("*.py")
             for line in p.read_text(encoding="utf-8").splitlines() if magic in line]
    assert len(where) == 1, where
