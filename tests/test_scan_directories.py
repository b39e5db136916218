"""The directory policy of `fpclass scan`: every file is read, reported as unreadable (exit 2) or
listed as skipped with a reason; a scan that read no tensor is never clean."""

import io
import json
import os
import re
import socket
import struct
import zipfile

import numpy as np
import pytest

from fpclass.cli import main
from fpclass.scan import ExitCode, scan
from test_scan_support import safetensors_bytes

CLEAN = safetensors_bytes({"w": ("F32", np.ones(4, np.float32), (4,))})
WITH_NAN = safetensors_bytes({"w": ("F32", np.array([1, np.nan], np.float32), (2,))})

#: Names that announce tensors in formats fpclass does not read (the issue's list).
CLAIMING_NAMES = ["model.pt", "model.pth", "pytorch_model.bin", "last.ckpt", "state.pkl",
                  "state.pickle", "model.joblib", "weights.h5", "weights.hdf5", "model.keras",
                  "data.nc", "image.fits", "image.fit", "store.zarr", "flax_model.msgpack",
                  "model.tflite", "saved_model.pb", "model.pdparams"]


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def torch_zip_bytes() -> bytes:
    """The layout torch.save writes (a zip whose first member is <prefix>/data.pkl)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("archive/byteorder", b"little")
        z.writestr("archive/data/0", np.full(4, np.nan, np.float32).tobytes())
        z.writestr("archive/version", b"3\n")
    return buf.getvalue()


def test_empty_directory_is_inconclusive(tmp_path):
    code, out, _ = run(tmp_path)
    assert code == ExitCode.INCONCLUSIVE
    assert "no tensor was checked" in out.splitlines()[-1]
    assert scan([tmp_path]).exit_code == ExitCode.INCONCLUSIVE


def test_directory_of_text_files_is_inconclusive_and_lists_them(tmp_path):
    (tmp_path / "README.md").write_text("# a model\n")
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    report = scan([tmp_path])
    assert report.exit_code == ExitCode.INCONCLUSIVE and not report.tensors
    assert sorted((os.path.basename(p.path), p.reason) for p in report.skipped) == [
        ("README.md", "text file"), ("config.json", "text file (JSON)")]


def test_unreadable_tensor_files_make_the_scan_inconclusive_and_are_named(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(CLEAN)
    (tmp_path / "state.pkl").write_bytes(b"\x80\x04\x95\x05\0\0\0\0\0\0\0K\x01.")
    (tmp_path / "weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    (tmp_path / "image.fits").write_bytes(b"SIMPLE  =                    T" + b" " * 50)
    (tmp_path / "flax_model.msgpack").write_bytes(b"\x82\xa1a\x01")
    (tmp_path / "model.pt").write_bytes(os.urandom(256))
    store = tmp_path / "fields.zarr"
    store.mkdir()
    (store / ".zarray").write_text('{"zarr_format": 2}')
    (store / "0.0").write_bytes(os.urandom(64))
    report = scan([tmp_path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    unread = {os.path.basename(p.path): p.reason for p in report.problems}
    assert set(unread) == {"state.pkl", "weights.h5", "image.fits", "flax_model.msgpack",
                           "model.pt", "fields.zarr"}
    assert "Python pickle" in unread["state.pkl"]
    assert "not a readable HDF5 file" in unread.pop("weights.h5")  # its reader's own reason
    assert unread.pop("image.fits").startswith("not a readable FITS file: ")  # its reader's
    # a zarr store is read by its reader: this one's metadata lacks a dtype, and zarr says so
    assert unread["fields.zarr"].startswith("zarr cannot open the store: ")
    assert "dtype" in unread.pop("fields.zarr")
    assert all("not checked" in r for r in unread.values())
    assert not report.skipped  # the zarr chunk is part of its store, not a file of its own
    assert len(report.checked) == 1


@pytest.mark.parametrize("name", CLAIMING_NAMES)
def test_each_claiming_name_is_unchecked_not_skipped(tmp_path, name):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    (tmp_path / name).write_bytes(os.urandom(64))
    code, out, _ = run(tmp_path)
    assert code == ExitCode.INCONCLUSIVE
    assert any(line.startswith(f"problem: {tmp_path / name}: ") for line in out.splitlines())


@pytest.mark.parametrize("name", ["x.safetensors", "x.pt"])
def test_fifo_and_socket_named_as_tensor_files_are_problems(tmp_path, name):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    os.mkfifo(tmp_path / ("fifo-" + name))
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / ("sock-" + name)))
        report = scan([tmp_path])   # must not block on the FIFO
    finally:
        sock.close()
    reasons = {os.path.basename(p.path): p.reason for p in report.problems}
    assert "not a regular file (FIFO)" in reasons["fifo-" + name]
    assert "not a regular file (socket)" in reasons["sock-" + name]
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_other_special_files_are_listed_as_skipped(tmp_path):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    os.mkfifo(tmp_path / "pipe")
    report = scan([tmp_path])
    assert [(os.path.basename(p.path), p.reason) for p in report.skipped] == [
        ("pipe", "not a regular file (FIFO)")]
    assert report.exit_code == ExitCode.CLEAN


def hugging_face_model(directory, weights=CLEAN):
    """A model directory as the Hub serves it: weights plus config, tokenizer and docs."""
    directory.mkdir(exist_ok=True)
    (directory / "model.safetensors").write_bytes(weights)
    for name in ("config.json", "generation_config.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        (directory / name).write_text(json.dumps({"model_type": "llama", "eos_token_id": 2}))
    (directory / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0}}}))
    (directory / "tokenizer.model").write_bytes(b"\x0a\x0b\x0a\x05<unk>\x15\0\0\0\0\x18\x02")
    (directory / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    (directory / "merges.txt").write_text("#version: 0.2\nh e\n")
    (directory / "README.md").write_text("---\nlicense: mit\n---\n# model\n")
    (directory / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs\n")
    (directory / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(64))
    return directory


def test_hugging_face_model_directory_scans_clean(tmp_path):
    model = hugging_face_model(tmp_path / "model")
    report = scan([model])
    assert report.exit_code == ExitCode.CLEAN
    assert len(report.checked) == 1 and not report.problems
    skipped = {os.path.basename(p.path): p.reason for p in report.skipped}
    assert len(skipped) == 11
    assert skipped["tokenizer.model"] == "tokenizer model (sentencepiece)"
    assert skipped["chart.png"] == "image (PNG)"
    assert skipped["tokenizer.json"] == "text file (JSON)"
    (model / "model.safetensors").write_bytes(WITH_NAN)
    assert scan([model]).exit_code == ExitCode.FOUND


def test_skipped_files_are_in_the_json_and_plain_output(tmp_path):
    model = hugging_face_model(tmp_path / "model")
    code, out, _ = run(model, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["skipped"] == len(doc["skipped"]) == 11
    assert {"path": str(model / "README.md"), "reason": "text file"} in doc["skipped"]
    code, out, _ = run(model, "--show-skipped")
    lines = out.splitlines()
    assert f"skipped: {model / 'vocab.txt'}: text file" in lines
    assert "11 files skipped -> clean (exit 0)" in lines[-1]


def test_include_and_exclude(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(WITH_NAN)
    (tmp_path / "b.safetensors").write_bytes(CLEAN)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "c.safetensors").write_bytes(WITH_NAN)
    assert scan([tmp_path]).exit_code == ExitCode.FOUND
    report = scan([tmp_path], exclude=["a.*", "runs"])
    assert report.exit_code == ExitCode.CLEAN
    assert sorted((os.path.basename(p.path), p.reason) for p in report.skipped) == [
        ("a.safetensors", "excluded by --exclude a.*"), ("runs", "excluded by --exclude runs")]
    report = scan([tmp_path], include=["b*"])
    assert report.exit_code == ExitCode.CLEAN and len(report.checked) == 1
    assert sorted(os.path.basename(p.path) for p in report.skipped) == [
        "a.safetensors", "c.safetensors"]
    assert scan([tmp_path], include=["runs/*"]).exit_code == ExitCode.FOUND  # path below the root
    code, out, _ = run(tmp_path, "--exclude", "runs/*", "--exclude", "a.safetensors",
                       "--show-skipped")
    assert code == ExitCode.CLEAN and out.count("skipped: ") == 2
    code, _, _ = run(tmp_path, "--include", "*.safetensors", "--exclude", "b.*")
    assert code == ExitCode.FOUND
    with pytest.raises(ValueError, match="glob patterns"):
        scan([tmp_path], include=[""])


def test_files_named_directly_ignore_the_patterns(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(WITH_NAN)
    assert scan([tmp_path / "a.safetensors"], exclude=["*"]).exit_code == ExitCode.FOUND


def test_a_file_named_directly_must_hold_tensors(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    code, out, _ = run(tmp_path / "config.json")
    assert code == ExitCode.INCONCLUSIVE
    assert "problem: " in out and "not a tensor file (text file (JSON))" in out


def test_external_data_and_shards_are_read_not_listed(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    graph = helper.make_graph([], "g", [], [], initializer=[
        numpy_helper.from_array(np.ones(8, np.float32), "W")])
    onnx.save_model(helper.make_model(graph), str(tmp_path / "m.onnx"), save_as_external_data=True,
                    location="weights.bin", size_threshold=0)
    report = scan([tmp_path])
    assert report.exit_code == ExitCode.CLEAN, (report.problems, report.skipped)
    assert not report.skipped and not report.problems


def test_sharded_checkpoint_through_symlinks_like_the_hub_cache(tmp_path):
    blobs = tmp_path / "blobs"
    snapshot = tmp_path / "snapshots" / "abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    (blobs / "1").write_bytes(safetensors_bytes({"a": ("F32", np.ones(2, np.float32), (2,))}))
    (blobs / "2").write_bytes(safetensors_bytes({"b": ("F32", np.array([np.inf], np.float32), (1,))}))
    (blobs / "3").write_text(json.dumps({"weight_map": {"a": "model-1.safetensors",
                                                        "b": "model-2.safetensors"}}))
    for blob, name in (("1", "model-1.safetensors"), ("2", "model-2.safetensors"),
                       ("3", "model.safetensors.index.json")):
        os.symlink(blobs / blob, snapshot / name)
    report = scan([snapshot])
    assert report.exit_code == ExitCode.FOUND
    assert sorted((t.name, t.posinf) for t in report.tensors) == [("a", 0), ("b", 1)]
    assert not report.problems and not report.skipped


def test_version_control_directories_are_skipped_whole(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(CLEAN)
    lfs = tmp_path / ".git" / "lfs" / "objects"
    lfs.mkdir(parents=True)
    (lfs / "a1b2").write_bytes(WITH_NAN)   # git-lfs's copy of an older version
    report = scan([tmp_path])
    assert report.exit_code == ExitCode.CLEAN
    assert [(os.path.basename(p.path), p.reason) for p in report.skipped] == [
        (".git", "version-control metadata directory")]


def test_zip_and_pickle_detection_by_content(tmp_path):
    (tmp_path / "ok.safetensors").write_bytes(CLEAN)
    (tmp_path / "checkpoint").write_bytes(torch_zip_bytes())           # no extension
    (tmp_path / "other").write_bytes(b"\x80\x02\x8a\x0alB\x8d\xa0...")  # some other pickle
    with zipfile.ZipFile(tmp_path / "docs.zip", "w") as z:
        z.writestr("a.txt", "hello")
    report = scan([tmp_path])
    unread = {os.path.basename(p.path): p.reason for p in report.problems}
    assert set(unread) == {"other"} and "pickle" in unread["other"]
    assert sorted((os.path.basename(p), f) for p, f in report.files) == [
        ("checkpoint", "pytorch"), ("ok.safetensors", "safetensors")]
    assert [os.path.basename(p.path) for p in report.skipped] == ["docs.zip"]


def test_a_newline_in_a_file_name_cannot_forge_a_line(tmp_path):
    forged = tmp_path / "x\nfound: evil.safetensors: w: F32[1]: nan=9"
    forged.mkdir()
    (forged / "m.safetensors").write_bytes(WITH_NAN)
    (tmp_path / "ok\x1b[2J.safetensors").write_bytes(b"\x05\0\0\0\0\0\0\0{")
    code, out, _ = run(tmp_path)
    lines = out.splitlines()
    assert len(lines) == 3, lines   # the finding, the problem, the summary
    assert lines[0].startswith(f"found: {tmp_path}/x\\x0afound: evil")
    assert "\x1b" not in out and "ok\\x1b[2J.safetensors" in lines[1]


def test_rich_table_escapes_markup_and_control_characters(tmp_path):
    class Terminal(io.StringIO):
        def isatty(self):
            return True
    (tmp_path / "[red]x\n.safetensors").write_bytes(WITH_NAN)
    out = Terminal()
    assert main(["scan", str(tmp_path)], stdout=out, stderr=io.StringIO()) == ExitCode.FOUND
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())   # rich's own colours
    text = re.sub(r"[\s│┃]", "", plain)   # the table may fold a long cell over lines
    assert "[red]x\\x0a.safetensors" in text


def test_ctrl_c_while_planning_prints_the_report_so_far(tmp_path, monkeypatch):
    from fpclass.scan.readers import registry
    (tmp_path / "a.safetensors").write_bytes(WITH_NAN)
    (tmp_path / "b.safetensors").write_bytes(CLEAN)
    real = registry.planner

    def planner(kind):
        plan = real(kind)

        def interrupted_on_b(path):
            if path.endswith("b.safetensors"):
                raise KeyboardInterrupt
            return plan(path)
        return interrupted_on_b
    monkeypatch.setattr("fpclass.scan.planning.planner", planner)
    code, out, err = run(tmp_path, "--json")
    doc = json.loads(out)
    assert code == doc["exit_code"] == ExitCode.INTERRUPTED and doc["interrupted"]
    assert [(t["name"], t["status"]) for t in doc["tensors"]] == [("w", "unchecked")]
    assert "interrupted" in doc["tensors"][0]["reason"]
    assert scan([tmp_path]).interrupted


def test_a_file_truncated_while_it_is_read_is_unchecked(tmp_path, monkeypatch):
    from fpclass.scan.storage import ranges
    a = np.ones(1 << 16, np.float32)
    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors_bytes({"w": ("F32", a, a.shape)}))
    real = ranges.Range.chunks

    def shrink_after_first_chunk(self, *args, **kwargs):
        # whichever way the chunks are read (the read sieve or one read each)
        for k, item in enumerate(real(self, *args, **kwargs)):
            if k == 0:
                os.truncate(path, self.offset + (1 << 14) + 10)
            yield item
    monkeypatch.setattr(ranges.Range, "chunks", shrink_after_first_chunk)
    report = scan([path], chunk_bytes=1 << 14, threads=1)
    (t,) = report.tensors
    assert t.status == "unchecked" and "truncated during the scan" in t.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_header_with_no_tensors_in_a_directory_is_not_clean(tmp_path):
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    nan_data = np.full(16, np.nan, np.float32).tobytes()
    (tmp_path / "m.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + nan_data)
    assert scan([tmp_path]).exit_code == ExitCode.INCONCLUSIVE
