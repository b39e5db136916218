"""`fpclass scan --verify`: each file's SHA-256 from the same read, checked against the Hugging
Face cache's blob name, a staged Git LFS pointer and SHA256SUMS-style files. Truth: hashlib over
the file's bytes, and the same scan without --verify for the classification."""

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fpclass.scan import engine, streaming

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def answers(report):
    return [(t.file, t.name, t.status, t.nan, t.posinf, t.neginf, t.elements,
             [(tuple(loc.index), loc.cls) for loc in t.locations], t.reason)
            for t in report.tensors]


def hashes(report):
    return {i.path: i.sha256 for i in report.integrity}


@pytest.fixture
def files(tmp_path):
    """Files of the formats read as raw ranges and stored members (streamed), and of others."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((301, 257)).astype(np.float32)
    w.flat[[0, 1000, 77_000]] = [np.nan, np.inf, -np.inf]
    h = rng.standard_normal(5001).astype(np.float16)
    h[[3, 5000]] = np.nan
    d = rng.standard_normal((7, 9, 11))
    d[6, 8, 10] = -np.inf
    safetensors_numpy.save_file({"w": w, "h": h, "d": d}, str(tmp_path / "m.safetensors"))
    np.save(tmp_path / "f.npy", np.asfortranarray(d))
    np.savez(tmp_path / "stored.npz", w=w, h=h)
    np.savez_compressed(tmp_path / "packed.npz", w=w)
    with gzip.open(tmp_path / "g.npy.gz", "wb") as f:
        np.save(f, h)
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.from_numpy(w), "t": torch.from_numpy(d).permute(2, 0, 1), "n": -torch.ones(3)},
               tmp_path / "m.pt")
    return tmp_path


@pytest.mark.parametrize("block", [1000, 4099, 1 << 16, 4 << 20])
def test_verify_classifies_as_a_plain_scan_and_hashes_as_hashlib(files, monkeypatch, block):
    plain = engine.scan([str(files)])
    monkeypatch.setattr(streaming, "BLOCK_BYTES", block)
    verified = engine.scan([str(files)], verify=True)
    assert answers(verified) == answers(plain)
    names = sorted(os.listdir(files))
    assert sorted(os.path.basename(p) for p in hashes(verified)) == names
    for path, digest in hashes(verified).items():
        assert digest == sha256(path)
    assert plain.integrity is None and "integrity" not in plain.to_dict()


@pytest.mark.parametrize("block", [1, 3, 7])
def test_blocks_smaller_than_an_element(tmp_path, monkeypatch, block):
    d = np.array([1.0, np.nan, -np.inf, 2.0, np.inf])
    safetensors_numpy.save_file({"d": d, "h": d.astype(np.float16)}, str(tmp_path / "s.safetensors"))
    plain = engine.scan([str(tmp_path)])
    monkeypatch.setattr(streaming, "BLOCK_BYTES", block)
    verified = engine.scan([str(tmp_path)], verify=True)
    assert answers(verified) == answers(plain)
    assert [t.nan for t in verified.tensors] == [1, 1]
    assert hashes(verified) == {str(tmp_path / "s.safetensors"): sha256(tmp_path / "s.safetensors")}


def test_streamed_tasks_are_the_raw_and_stored_ones(files):
    from fpclass.scan.planning import plan
    streamed = {(os.path.basename(t.file), type(t.storage).__name__)
                for t in plan([str(files)]) if streaming.streams_with(t, t.file)}
    assert ("m.safetensors", "Range") in streamed and ("stored.npz", "Member") in streamed
    assert not any(f in ("packed.npz", "g.npy.gz") for f, _ in streamed)


def test_stored_member_crc_is_still_checked(tmp_path, monkeypatch):
    np.savez(tmp_path / "s.npz", x=np.arange(1000, dtype=np.float64))
    data = bytearray((tmp_path / "s.npz").read_bytes())
    with zipfile.ZipFile(tmp_path / "s.npz") as z:
        info = z.getinfo("x.npy")
    # flip one byte of the data (not the header): same value class, wrong CRC
    data[info.header_offset + 30 + len(info.filename) + len(info.extra) + 200] ^= 1
    (tmp_path / "s.npz").write_bytes(bytes(data))
    plain = engine.scan([str(tmp_path / "s.npz")])
    assert "CRC-32" in plain.tensors[0].reason
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 333)
    verified = engine.scan([str(tmp_path / "s.npz")], verify=True)
    assert answers(verified) == answers(plain)


def test_sums_files_gnu_bsd_and_single(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    for name in ("a.npy", "b.npy", "sub/c.npy", "d.npy"):
        np.save(tmp_path / name, np.arange(10.0))
    (tmp_path / "SHA256SUMS").write_text(
        f"{sha256(tmp_path / 'a.npy')}  a.npy\n{'ab' * 32} *b.npy\n"
        f"{sha256(tmp_path / 'sub/c.npy')}  ./sub/c.npy\n")
    (sub / "sha256sums.txt").write_text(f"SHA256 (c.npy) = {sha256(tmp_path / 'sub/c.npy')}\n")
    (tmp_path / "d.npy.sha256").write_text(sha256(tmp_path / "d.npy").upper() + "\n")
    report = engine.scan([str(tmp_path)], verify=True)
    by = {os.path.relpath(i.path, tmp_path): i for i in report.integrity}
    assert by["a.npy"].verified and len(by["a.npy"].checks) == 1
    assert by["b.npy"].mismatches[0].expected == "ab" * 32
    assert by["b.npy"].mismatches[0].actual == sha256(tmp_path / "b.npy")
    assert by["sub/c.npy"].verified and len(by["sub/c.npy"].checks) == 2
    assert by["d.npy"].verified
    assert int(report.exit_code) == 1 and report.mismatched == [by["b.npy"]]


def _hf_cache(tmp_path, content_name, blob_name):
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    shutil.move(content_name, repo / "blobs" / blob_name)
    link = repo / "snapshots" / "abc123" / "model.safetensors"
    os.symlink(os.path.join("..", "..", "blobs", blob_name), link)
    return link


@pytest.mark.skipif(sys.platform == "win32", reason="the cache uses symlinks")
def test_hugging_face_cache_blob_names(tmp_path):
    safetensors_numpy.save_file({"w": np.ones(100, np.float32)}, str(tmp_path / "x"))
    good = _hf_cache(tmp_path, tmp_path / "x", sha256(tmp_path / "x"))
    report = engine.scan([str(good)], verify=True)
    assert report.integrity[0].verified and int(report.exit_code) == 0
    assert "Hugging Face" in report.integrity[0].checks[0].source

    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    safetensors_numpy.save_file({"w": np.zeros(100, np.float32)}, str(bad_dir / "y"))
    bad = _hf_cache(bad_dir, bad_dir / "y", "0" * 64)
    report = engine.scan([str(bad)], verify=True)
    assert report.integrity[0].mismatches and int(report.exit_code) == 1
    assert report.integrity[0].mismatches[0].actual == sha256(bad)


@pytest.mark.skipif(sys.platform == "win32", reason="the cache uses symlinks")
def test_hugging_face_git_blob_id_of_a_small_file(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(3))
    data = (tmp_path / "x.npy").read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    link = _hf_cache(tmp_path, tmp_path / "x.npy", blob)
    report = engine.scan([str(link)], verify=True)
    assert report.integrity[0].checks[0].algorithm == "git-sha1"
    assert report.integrity[0].verified


def _git(repo, *args, data=None):
    return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True,
                          check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("honest", [True, False])
def test_git_lfs_pointer_staged_for_the_file(tmp_path, honest):
    _git(tmp_path, "init", "-q")
    safetensors_numpy.save_file({"w": np.ones(50, np.float32)}, str(tmp_path / "m.safetensors"))
    digest = sha256(tmp_path / "m.safetensors") if honest else "1" * 64
    size = (tmp_path / "m.safetensors").stat().st_size
    pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{digest}\n"
               f"size {size}\n").encode()
    blob = _git(tmp_path, "hash-object", "-w", "--stdin", data=pointer).decode().strip()
    _git(tmp_path, "update-index", "--add", "--cacheinfo", f"100644,{blob},m.safetensors")
    # A fsmonitor hook of the scanned repository is never run.
    marker = tmp_path.parent / f"fsmonitor-ran-{tmp_path.name}"
    _git(tmp_path, "config", "core.fsmonitor", f"touch {marker}; false")
    report = engine.scan([str(tmp_path / "m.safetensors")], verify=True)
    check = report.integrity[0].checks[0]
    assert "LFS" in check.source and check.expected == digest
    assert check.matches is honest
    assert not marker.exists()


def test_no_reference_is_said_and_does_not_fail(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(4))
    report = engine.scan([str(tmp_path)], verify=True)
    assert report.to_dict()["integrity"]["summary"] == {
        "files": 1, "verified": 0, "mismatch": 0, "no_reference": 1, "unreadable": 0}
    assert int(report.exit_code) == 0
    assert "1 without a reference" in str(report)


def test_cli_verify_mismatch_names_file_and_both_hashes(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(4))
    (tmp_path / "a.npy.sha256").write_text("f" * 64 + "  a.npy\n")
    run = subprocess.run([sys.executable, "-m", "fpclass", "scan", "--verify",
                          str(tmp_path / "a.npy")], capture_output=True, text=True)
    assert run.returncode == 1
    line = next(x for x in run.stdout.splitlines() if x.startswith("mismatch:"))
    assert "a.npy" in line and "f" * 64 in line and sha256(tmp_path / "a.npy") in line
    run = subprocess.run([sys.executable, "-m", "fpclass", "scan", "--verify", "--json",
                          str(tmp_path / "a.npy")], capture_output=True, text=True)
    doc = json.loads(run.stdout)
    assert doc["integrity"]["files"][0]["status"] == "mismatch"
    assert doc["integrity"]["files"][0]["sha256"] == sha256(tmp_path / "a.npy")


def test_verify_refuses_another_executor(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(4))
    with pytest.raises(ValueError, match="verify"):
        engine.scan([str(tmp_path)], verify=True, execute_on=lambda *a, **k: None)


def test_truncated_file_is_unchecked_not_clean(tmp_path, monkeypatch):
    safetensors_numpy.save_file({"w": np.ones(1000, np.float32)}, str(tmp_path / "t.safetensors"))
    data = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[:-100])
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 512)
    report = engine.scan([str(tmp_path)], verify=True)
    assert int(report.exit_code) != 0
    assert report.integrity[0].sha256 == sha256(tmp_path / "t.safetensors")


def test_ctrl_c_while_hashing_gives_the_report_so_far(files):
    seen = []

    def progress(task, result):
        seen.append(task)
        raise KeyboardInterrupt

    report = engine.scan([str(files)], verify=True, progress=progress)
    assert report.interrupted and int(report.exit_code) == 130
    assert any(t.status == "unchecked" and "interrupted" in t.reason for t in report.tensors)
    assert seen


def test_sarif_carries_mismatches_and_every_hash(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    np.save(tmp_path / "a.npy", np.ones(4))
    np.save(tmp_path / "b.npy", np.zeros(4))
    (tmp_path / "SHA256SUMS").write_text(f"{'e' * 64}  a.npy\n")
    run = subprocess.run([sys.executable, "-m", "fpclass", "scan", "--verify", "--format",
                          "sarif", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    log = json.loads(run.stdout)
    schema = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
    jsonschema.Draft4Validator(json.loads(schema.read_text())).validate(log)
    (result,) = [r for r in log["runs"][0]["results"] if r["ruleId"] == "sha256-mismatch"]
    assert result["level"] == "error" and "e" * 64 in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("a.npy")
    hashes = {a["location"]["uri"].rsplit("/", 1)[-1]: a["hashes"]["sha-256"]
              for a in log["runs"][0]["artifacts"]}
    assert hashes == {"a.npy": sha256(tmp_path / "a.npy"), "b.npy": sha256(tmp_path / "b.npy")}


def test_json_with_verify_and_gates_follows_the_shipped_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from fpclass.results.schema import json_schema
    np.save(tmp_path / "a.npy", np.array([0.0, 0.0]))
    np.save(tmp_path / "b.npy", np.array([1.0, np.nan, 5e5]))
    (tmp_path / "SHA256SUMS").write_text(f"{'e' * 64}  a.npy\n")
    report = engine.scan([str(tmp_path)], verify=True, fail_on="nan,absmax>1e4,all-zero")
    doc = json.loads(report.to_json())
    jsonschema.Draft202012Validator(json_schema(doc["schema"])).validate(doc)
    gates = {g["gate"]: g for g in doc["gate_findings"]}
    assert gates.pop("all-zero")["name"] == ""
    ((text, absmax),) = gates.items()
    assert text.startswith("absmax>") and float(text[7:]) == 1e4 and absmax["value"] == 5e5
    assert doc["integrity"]["summary"]["mismatch"] == 1


def test_files_the_tensors_are_stored_in_are_hashed_once(tmp_path):
    """External data and shards are read, so they are hashed too, once each however they are
    named (a shard named directly and through its index)."""
    root = Path(__file__).resolve().parent.parent / "examples"
    report = engine.scan([str(root / "tiny.onnx")], verify=True)
    by = {os.path.basename(i.path): i.sha256 for i in report.integrity}
    assert by == {n: sha256(root / n) for n in ("tiny.onnx", "tiny.onnx.data")}
    safetensors_numpy.save_file({"a": np.ones(3, np.float32)}, str(tmp_path / "m-1.safetensors"))
    (tmp_path / "m.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "m-1.safetensors"}}))
    report = engine.scan([str(tmp_path / "m.safetensors.index.json"),
                          str(tmp_path / "m-1.safetensors")], verify=True)
    names = sorted(os.path.basename(i.path) for i in report.integrity)
    assert names == ["m-1.safetensors", "m.safetensors.index.json"]
