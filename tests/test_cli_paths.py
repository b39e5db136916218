"""Paths as `fpclass scan` takes them: --force-exclude for globs and pre-commit, pointers left by
Git LFS and git-annex, a name a reader takes only by content (`.bin`), `-`, and a missing path."""

import io
import os

import numpy as np
import pytest

from fpclass.cli import main
from fpclass.scan import ExitCode, scan
from test_scan_support import safetensors_bytes

#: A pointer as `git lfs` writes it (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
LFS = (b"version https://git-lfs.github.com/spec/v1\n"
       b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
       b"size 12345\n")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *map(str, argv)], stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def hf(tmp_path):
    """A Hugging Face model folder: clean weights beside configs and a README."""
    a = np.ones(4, np.float32)
    (tmp_path / "model.safetensors").write_bytes(safetensors_bytes({"w": ("F32", a, a.shape)}))
    (tmp_path / "config.json").write_text('{"hidden_size": 4}')
    (tmp_path / "README.md").write_text("# model\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return tmp_path


def test_named_non_tensor_files_are_problems_without_force_exclude(hf):
    named = sorted(hf.iterdir())   # what a shell makes of hf/*
    report = scan(named)
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert sorted(os.path.basename(p.path) for p in report.problems) == [
        "README.md", "config.json", "logo.png"]
    assert all("not a tensor file" in p.reason for p in report.problems)


def test_force_exclude_skips_named_files_holding_no_tensors(hf):
    named = sorted(hf.iterdir())
    code, out, _ = run(*named, "--force-exclude", "--show-skipped")
    assert code == ExitCode.CLEAN, out
    assert f"skipped: {hf / 'config.json'}: text file (JSON)" in out.splitlines()
    assert f"skipped: {hf / 'logo.png'}: image (PNG)" in out.splitlines()
    report = scan(named, force_exclude=True)
    assert len(report.checked) == 1 and len(report.skipped) == 3 and not report.problems


def test_force_exclude_applies_the_patterns_to_named_paths(hf, tmp_path, monkeypatch):
    monkeypatch.chdir(hf)
    nan = np.array([np.nan], np.float32)
    os.mkdir("runs")
    with open(os.path.join("runs", "bad.safetensors"), "wb") as f:
        f.write(safetensors_bytes({"w": ("F32", nan, nan.shape)}))
    named = ["model.safetensors", "runs/bad.safetensors", "config.json"]
    assert run(*named, "--exclude", "runs")[0] == ExitCode.FOUND   # a named file is read
    for pattern in ("runs", "runs/*", "bad.*", "*/bad.safetensors"):
        report = scan(named, exclude=[pattern], force_exclude=True)
        assert report.exit_code == ExitCode.CLEAN, pattern
        assert (os.path.join("runs", "bad.safetensors"), f"excluded by --exclude {pattern}") in \
            [(p.path, p.reason) for p in report.skipped]
    report = scan(named, include=["model.*"], force_exclude=True)
    assert report.exit_code == ExitCode.CLEAN and len(report.checked) == 1
    assert ("config.json", "not matched by --include") in [(p.path, p.reason)
                                                           for p in report.skipped]
    report = scan(["runs"], exclude=["runs"], force_exclude=True)   # a named directory too
    assert [p.reason for p in report.skipped] == ["excluded by --exclude runs"]
    assert report.exit_code == ExitCode.INCONCLUSIVE   # nothing checked is never clean


def test_force_exclude_still_reports_what_it_cannot_check(hf):
    (hf / "opt.pkl").write_bytes(b"\x80\x04\x95" + bytes(20))
    (hf / "blob.dat").write_bytes(bytes(range(256)) * 4)
    report = scan([hf / "opt.pkl", hf / "blob.dat", hf / "gone.safetensors"], force_exclude=True)
    assert sorted(os.path.basename(p.path) for p in report.problems) == [
        "blob.dat", "gone.safetensors", "opt.pkl"]


@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin", "w.npy", "x.h5",
                                  "m.onnx", "w.gguf", "data.nc", "weights.pt", "a.fits.gz"])
def test_git_lfs_pointer_named_as_a_tensor_file(tmp_path, name):
    (tmp_path / name).write_bytes(LFS)
    for target in (tmp_path / name, tmp_path):   # named, or found in a directory
        report = scan([target])
        assert report.exit_code == ExitCode.INCONCLUSIVE and not report.checked
        [problem] = report.problems
        assert problem.reason.startswith("Git LFS pointer, not the ") and \
            "run `git lfs pull`" in problem.reason, problem.reason
        assert "header" not in problem.reason and "limit" not in problem.reason


def test_git_lfs_pointer_of_a_text_file_is_skipped_saying_what_it_is(tmp_path, hf):
    (hf / "tokenizer.json").write_bytes(LFS)
    report = scan([hf])
    assert report.exit_code == ExitCode.CLEAN
    assert ("text file (Git LFS pointer: run `git lfs pull` to fetch the file)") in \
        [p.reason for p in report.skipped if p.path.endswith("tokenizer.json")]


def test_a_large_file_starting_like_a_pointer_is_not_one(tmp_path):
    (tmp_path / "notes.safetensors").write_bytes(LFS + b"x" * 2000)
    [problem] = scan([tmp_path]).problems
    assert "Git LFS" not in problem.reason


def test_git_annex_pointers(tmp_path):
    (tmp_path / "unlocked.safetensors").write_bytes(
        b"/annex/objects/SHA256E-s1234--" + b"ab" * 32 + b".safetensors\n")
    os.symlink(".git/annex/objects/Xx/Yy/SHA256E-s1--aa/SHA256E-s1--aa", tmp_path / "locked.h5")
    report = scan([tmp_path])
    reasons = {os.path.basename(p.path): p.reason for p in report.problems}
    assert "git-annex pointer, not the" in reasons["unlocked.safetensors"]
    assert "git-annex link" in reasons["locked.h5"]
    assert all("run `git annex get`" in r for r in reasons.values())
    os.symlink("nowhere", tmp_path / "plain.h5")
    assert {p.reason for p in scan([tmp_path / "plain.h5"]).problems} == {"broken symbolic link"}


def test_a_bin_that_is_not_a_checkpoint_says_what_a_bin_is_read_as(tmp_path):
    from fpclass.scan.readers.registry import BY_KIND
    (tmp_path / "openvino_model.bin").write_bytes(np.arange(64, dtype=np.float32).tobytes())
    [problem] = scan([tmp_path]).problems
    assert "does not read" not in problem.reason, problem.reason   # .bin is a name fpclass reads
    assert "its content is not one fpclass reads" in problem.reason
    assert f"PyTorch checkpoint ({BY_KIND['pytorch'].detected})" in problem.reason


def test_a_pickle_named_pkl_holds_tensors_fpclass_does_not_read(tmp_path):
    (tmp_path / "w.pkl").write_bytes(bytes(range(256)))
    [problem] = scan([tmp_path]).problems
    assert "holds tensors in a format fpclass does not read" in problem.reason


def test_stdin_is_a_usage_error(tmp_path):
    code, out, err = run("-")
    assert code == ExitCode.USAGE == 4 and out == "" and "standard input" in err
    assert err.count("\n") == 1


def test_a_missing_path_is_inconclusive_not_a_usage_error(tmp_path):
    code, out, _ = run(tmp_path / "nothere.safetensors")
    assert code == ExitCode.INCONCLUSIVE and "no such file or directory" in out
