"""fpclass scan on broken input: every case gives exit 2 and a one-line reason, and the other
files are still scanned."""

import io
import json
import os
import struct
import zipfile

import numpy as np
import pytest

from fpclass.cli import main
from fpclass.scan import ExitCode, scan
from test_scan_support import gguf_bytes, safetensors_bytes

GOOD = safetensors_bytes({"w": ("F32", np.array([1.0, np.nan], np.float32), (2,))})


def _header(doc) -> bytes:
    text = json.dumps(doc).encode()
    return struct.pack("<Q", len(text)) + text


def _st(doc, data=b"\0" * 8):
    return _header(doc) + data


F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}

CASES = {
    "truncated.safetensors": (GOOD[:-3], "truncated"),
    "header_past_end.safetensors": (struct.pack("<Q", 1000) + b"{}", "past the end"),
    "tiny.safetensors": (b"\x01\x02", "too short"),
    "offsets_outside.safetensors": (_st({"w": {**F32_2, "data_offsets": [0, 16]}, }, b"\0" * 16)[:-8],
                                    "past the end of the data section"),
    "overlap.safetensors": (_st({"a": F32_2, "b": {**F32_2, "data_offsets": [4, 12]}}, b"\0" * 12),
                            "overlaps"),
    "reversed.safetensors": (_st({"a": {**F32_2, "data_offsets": [8, 0]}}), "out of order"),
    "mismatch.safetensors": (_st({"a": {**F32_2, "shape": [3]}}), "needs 12 bytes"),
    "badshape.safetensors": (_st({"a": {**F32_2, "shape": [-2]}}), "non-negative"),
    "baddtype.safetensors": (_st({"a": {**F32_2, "dtype": "F12"}}), "unknown safetensors dtype"),
    "invalid_json.safetensors": (struct.pack("<Q", 5) + b"{nope", "not valid JSON"),
    "duplicate.safetensors": (struct.pack("<Q", 31) + b'{"a": {}, "a": {}}             ', "duplicate"),
    "gap.safetensors": (_st({"a": {**F32_2, "data_offsets": [8, 16]}}, b"\0" * 16), "belong to no tensor"),
    "bad_magic.gguf": (b"GGUX" + b"\0" * 40, "magic"),
    "v1.gguf": (gguf_bytes([], version=1), "unsupported GGUF version 1"),
    "truncated.gguf": (gguf_bytes([("t", 0, [64], b"\0" * 256)])[:-100], "truncated"),
    "header_cut.gguf": (gguf_bytes([("t", 0, [4], b"\0" * 16)])[:30], "truncated"),
    "badtype.gguf": (gguf_bytes([("t", 77, [4], b"\0" * 16)]), "unknown GGML type 77"),
    "badblock.gguf": (gguf_bytes([("t", 8, [33], b"\0" * 34)]), "not a multiple"),
    "bad.npy": (b"\x93NUMPY\x01\x00\x10\x00{'descr': 7}    \n", "bad .npy header"),
    "short.npy": (None, "truncated"),
    "notzip.npz": (b"PK\x03\x04garbage", "not a valid zip"),
    "garbage.onnx": (b"\x08\x07\x3a\xff\xff\xff", "not a valid ONNX model"),
    "unknown.dat": (b"hello world", "not a tensor file (text file)"),
    "weights.bin": (b"hello world", "its content is not one fpclass reads"),
}


def _write(tmp_path, name, data):
    path = tmp_path / name
    if name == "short.npy":
        buf = io.BytesIO()
        np.save(buf, np.ones(10))
        data = buf.getvalue()[:-16]
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_bad_file_gives_exit_2_and_reason(tmp_path, name):
    data, reason = CASES[name]
    bad = _write(tmp_path, name, data)
    out, err = io.StringIO(), io.StringIO()
    assert main(["scan", str(bad)], stdout=out, stderr=err) == ExitCode.INCONCLUSIVE
    lines = [line for line in out.getvalue().splitlines() if not line.startswith("summary:")]
    assert lines and all(len(line.splitlines()) == 1 for line in lines)
    assert any(reason in line for line in lines), lines
    assert err.getvalue() == ""


def test_bad_files_do_not_stop_the_others(tmp_path):
    for name, (data, _) in CASES.items():
        _write(tmp_path, name, data)
    (tmp_path / "good.safetensors").write_bytes(GOOD)
    report = scan([tmp_path])
    assert [t.nan for t in report.tensors if t.file.endswith("good.safetensors")] == [1]
    named = {os.path.basename(p.path) for p in report.problems} | {
        os.path.basename(t.file) for t in report.unchecked}
    # In a directory, files that hold no tensors are skipped, and listed as such.
    assert named == set(CASES) - {"unknown.dat"}
    assert [(os.path.basename(p.path), p.reason) for p in report.skipped] == [
        ("unknown.dat", "text file")]
    assert report.exit_code == ExitCode.FOUND


def test_missing_path_symlink_loop_and_broken_link(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "ok.safetensors").write_bytes(safetensors_bytes(
        {"w": ("F32", np.ones(2, np.float32), (2,))}))
    os.symlink(tmp_path / "d", tmp_path / "d" / "loop")
    os.symlink(tmp_path / "nowhere", tmp_path / "d" / "broken")
    report = scan([tmp_path / "d", tmp_path / "missing.safetensors"])
    reasons = sorted(p.reason for p in report.problems)
    assert any("symbolic link loop" in r for r in reasons)
    assert any("broken symbolic link" in r for r in reasons)
    assert any("no such file" in r for r in reasons)
    assert len(report.checked) == 1
    assert report.exit_code == ExitCode.INCONCLUSIVE


def _npz_of_zeros(path, n):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        buf = io.BytesIO()
        np.save(buf, np.zeros(n))
        z.writestr("a.npy", buf.getvalue())


def test_zip_bomb_guards(tmp_path, monkeypatch):
    from fpclass.scan.readers import npy
    _npz_of_zeros(tmp_path / "z.npz", 200_000)
    assert scan([tmp_path / "z.npz"]).exit_code == ExitCode.CLEAN
    monkeypatch.setattr(npy, "MAX_RATIO", 10)
    report = scan([tmp_path / "z.npz"])
    assert report.exit_code == ExitCode.INCONCLUSIVE and "zip bomb" in report.unchecked[0].reason
    monkeypatch.setattr(npy, "MAX_RATIO", 1100)
    monkeypatch.setattr(npy, "MAX_MEMBER_BYTES", 1000)
    report = scan([tmp_path / "z.npz"])
    assert report.exit_code == ExitCode.INCONCLUSIVE and "limit" in report.unchecked[0].reason


def test_overlapping_zip_members(tmp_path):
    """Two central-directory entries pointing at one local file (the overlap zip-bomb trick)."""
    buf = io.BytesIO()
    np.save(buf, np.ones(4))
    with zipfile.ZipFile(tmp_path / "o.npz", "w") as z:
        z.writestr("a.npy", buf.getvalue())
    data = bytearray((tmp_path / "o.npz").read_bytes())
    cd = data.index(b"PK\x01\x02")
    end = data.index(b"PK\x05\x06")
    entry = bytes(data[cd:end]).replace(b"a.npy", b"b.npy")
    eocd = bytearray(data[end:])
    struct.pack_into("<HHI", eocd, 8, 2, 2, 2 * (end - cd))
    (tmp_path / "o.npz").write_bytes(bytes(data[:end]) + entry + bytes(eocd))
    report = scan([tmp_path / "o.npz"])
    assert any("overlap" in p.reason for p in report.problems)
    assert not report.tensors  # neither member is read
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_corrupt_deflate_stream(tmp_path):
    _npz_of_zeros(tmp_path / "c.npz", 5000)
    data = bytearray((tmp_path / "c.npz").read_bytes())
    data[200:210] = b"\xff" * 10
    (tmp_path / "c.npz").write_bytes(bytes(data))
    report = scan([tmp_path / "c.npz"])
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_onnx_external_data_outside(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    t = numpy_helper.from_array(np.ones(4, np.float32), "W")
    graph = helper.make_graph([], "g", [], [], initializer=[t])
    model = helper.make_model(graph)
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    location="m.data", size_threshold=0)
    os.truncate(tmp_path / "m.data", 8)
    report = scan([tmp_path / "m.onnx"])
    assert "outside m.data" in report.unchecked[0].reason
    assert report.exit_code == ExitCode.INCONCLUSIVE
