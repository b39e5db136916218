"""`fpclass scan` over HTTP: nginx on 127.0.0.1 serving real files (range requests, ETags,
autoindex), and a fault-injecting proxy in front of it. Truth comes from numpy on the arrays
written and from the same scan of the local copy."""

from __future__ import annotations

import io
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from remote_servers import FaultProxy, found_by_file, nginx, nginx_missing  # noqa: E402
from sieve_spy import spy_sieve  # noqa: E402

pytest.importorskip("aiohttp", reason="the remote extra (aiohttp) is not installed")
pytest.importorskip("fsspec", reason="the remote extra (fsspec) is not installed")
if nginx_missing():
    pytest.skip(nginx_missing(), allow_module_level=True)

from fpclass.cli import main  # noqa: E402
from fpclass.scan import scan  # noqa: E402
from fpclass.scan.storage import remote  # noqa: E402
from fpclass.scan.storage.reads import REMOTE_BLOCK  # noqa: E402

SECRET = "s3cr3t-token-never-shown-9f8e7d"


def _arrays():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(3000).astype(np.float32)
    a[[5, 2999]] = np.nan
    b = rng.standard_normal((40, 50)).astype(np.float16)
    b[3, 4] = np.inf
    b[39, 0] = -np.inf
    c = rng.standard_normal(700).astype(np.float64)
    return {"a": a, "b": b, "c": c}


def _truth(x) -> tuple:
    return int(np.isnan(x).sum()), int(np.isposinf(x).sum()), int(np.isneginf(x).sum())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, local root, {relative path: {tensor name: (nan, posinf, neginf)}})."""
    from safetensors.numpy import save_file
    root = tmp_path_factory.mktemp("www")
    arrays = _arrays()
    truth = {}
    save_file(arrays, str(root / "model.safetensors"))
    truth["model.safetensors"] = {k: _truth(v) for k, v in arrays.items()}
    (root / "sub" / "deeper").mkdir(parents=True)
    np.save(root / "sub" / "deeper" / "x.npy", arrays["b"])
    truth["sub/deeper/x.npy"] = {"": _truth(arrays["b"])}
    (root / "shards").mkdir()
    save_file({"a": arrays["a"]}, str(root / "shards" / "m-1.safetensors"))
    save_file({"c": arrays["c"]}, str(root / "shards" / "m-2.safetensors"))
    (root / "shards" / "m.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "m-1.safetensors", "c": "m-2.safetensors"}}))
    truth["shards/m-1.safetensors"] = {"a": _truth(arrays["a"])}
    truth["shards/m-2.safetensors"] = {"c": _truth(arrays["c"])}
    h5py = pytest.importorskip("h5py")
    with h5py.File(root / "sub" / "w.h5", "w") as f:
        f.create_dataset("g/d", data=arrays["a"], chunks=(500,))
    truth["sub/w.h5"] = {"g/d": _truth(arrays["a"])}
    try:
        import zarr
    except ImportError:
        zarr = None
    if zarr is not None:  # a store over HTTP: metadata through zarr, raw chunks by ranges
        store = zarr.create_array(str(root / "sub" / "s.zarr"), shape=arrays["b"].shape,
                                  chunks=(16, 16), dtype="f2", compressors=None)
        store[:] = arrays["b"]
        truth["sub/s.zarr"] = {"": _truth(arrays["b"])}
    big = np.ones(1 << 19, np.float32)  # 2 MiB of clean values: the fault target
    save_file({"big": big}, str(root / "clean.safetensors"))
    with nginx(str(root)) as url:
        yield url, root, truth


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    monkeypatch.setattr(remote, "READ_TIMEOUT", 0.5)


def test_a_served_folder_scans_as_its_local_copy_and_as_numpy_counts(served):
    url, root, truth = served
    report = scan([url + "/"], include=["*.safetensors", "*.npy", "*.h5", "*.json"])
    assert not report.problems, report.problems
    found = found_by_file(report, url + "/")
    expected = {k: v for k, v in truth.items()}
    expected["clean.safetensors"] = {"big": (0, 0, 0)}
    assert found == expected
    assert all(t.status == "checked" for t in report.tensors)
    local = scan([str(root)], include=["*.safetensors", "*.npy", "*.h5", "*.json"])
    assert found_by_file(local, str(root) + "/") == found
    assert [t.locations for t in report.tensors] == [t.locations for t in local.tensors]
    assert int(report.exit_code) == 1


def test_verify_hashes_served_files_in_the_same_read_as_hashlib(served):
    import hashlib
    url, root, _ = served
    names = ["model.safetensors", "sub/deeper/x.npy", "sub/w.h5"]
    report = scan([f"{url}/{n}" for n in names], verify=True)
    plain = scan([f"{url}/{n}" for n in names])
    assert [(t.name, t.nan, t.posinf, t.neginf) for t in report.tensors] == \
        [(t.name, t.nan, t.posinf, t.neginf) for t in plain.tensors]
    assert {i.path: i.sha256 for i in report.integrity} == {
        f"{url}/{n}": hashlib.sha256((root / n).read_bytes()).hexdigest() for n in names}
    assert all(not i.checks for i in report.integrity)  # no reference for a URL


def test_json_names_files_by_url(served):
    url, _, _ = served
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--json", f"{url}/sub/deeper/x.npy"], stdout=out, stderr=err)
    doc = json.loads(out.getvalue())
    assert code == 1
    assert doc["files"] == [{"path": f"{url}/sub/deeper/x.npy", "format": "npy"}]
    assert doc["tensors"][0]["file"] == f"{url}/sub/deeper/x.npy"


def test_a_missing_url_is_a_problem_naming_it(served):
    url, _, _ = served
    report = scan([f"{url}/nope.safetensors"])
    assert [(p.path, p.reason) for p in report.problems] == [
        (f"{url}/nope.safetensors", "no such file or directory")]
    assert int(report.exit_code) == 2


def test_an_onnx_file_over_the_in_memory_limit_is_unchecked_not_clean(monkeypatch):
    from fpclass.scan.readers import protobuf
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    monkeypatch.setattr(protobuf, "REMOTE_LIMIT", 100)
    with nginx(root) as url:
        report = scan([f"{url}/tiny.onnx"])
    assert int(report.exit_code) == 2
    assert [p.path for p in report.problems] == [f"{url}/tiny.onnx"]
    assert "over the 100-byte limit" in report.problems[0].reason


def test_without_fsspec_a_url_asks_for_the_remote_extra(monkeypatch, tmp_path):
    from test_extras import hide, install_message
    hide(monkeypatch, "fsspec")
    with pytest.raises(ImportError, match=install_message("remote")):
        scan(["s3://bucket/model.safetensors"])
    assert scan([str(tmp_path)]).files == []  # local paths never import it


FAULTS = {
    "reset": "ConnectionReset|ServerDisconnected|ClientOSError|Connection reset",
    "stall": "timed out",
    "short": "ClientPayloadError|ContentLength|short read|Response payload",
    "shrunk": "short read",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_injected_fault_ends_in_exit_2_naming_the_file_and_the_fault(served, fault,
                                                                          fast_retries):
    import re
    url, _, _ = served
    with FaultProxy(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as proxy:
        # the header is read in blocks of REMOTE_BLOCK bytes, the data in one larger range
        proxy.fault, proxy.longer_than, proxy.stall = fault, REMOTE_BLOCK, 3.0
        target = f"{proxy.url}/clean.safetensors"
        out, err = io.StringIO(), io.StringIO()
        code = main(["scan", "--json", target], stdout=out, stderr=err)
        assert proxy.hits >= remote.ATTEMPTS  # retried before giving up
    doc = json.loads(out.getvalue())
    assert code == 2, doc
    (tensor,) = doc["tensors"]
    assert tensor["status"] == "unchecked"
    assert tensor["file"] == target
    assert target in tensor["reason"] and re.search(FAULTS[fault], tensor["reason"]), tensor


def test_a_transient_reset_is_retried_and_the_scan_is_complete(served, fast_retries):
    url, _, truth = served
    with FaultProxy(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as proxy:
        proxy.fault, proxy.from_byte, proxy.times = "reset", 0, 2
        report = scan([f"{proxy.url}/model.safetensors"])
        assert proxy.hits == 2
    assert not report.problems
    assert found_by_file(report, proxy.url + "/") == {"model.safetensors": truth["model.safetensors"]}
    assert all(t.status == "checked" for t in report.tensors)


def test_a_file_replaced_during_the_scan_is_unchecked_never_clean(served, tmp_path,
                                                                  fast_retries):
    from safetensors.numpy import save_file
    url, root, _ = served
    target = root / "replaced.safetensors"
    save_file({"big": np.ones(1 << 18, np.float32)}, str(target))
    newer = tmp_path / "newer.safetensors"
    save_file({"big": np.full(1 << 18, np.nan, np.float32)}, str(newer))

    def replace():  # same size, new bytes and a new mtime: nginx gives a new ETag
        os.replace(newer, target)
        st = os.stat(target)
        os.utime(target, (st.st_atime + 10, st.st_mtime + 10))

    try:
        with FaultProxy(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as proxy:
            proxy.fault, proxy.from_byte, proxy.on_replace = "replace", 300_000, replace
            report = scan([f"{proxy.url}/replaced.safetensors"], chunk_bytes=64 << 10)
    finally:
        target.unlink()
    (tensor,) = report.tensors
    assert tensor.status == "unchecked"
    assert f"{proxy.url}/replaced.safetensors changed during the scan" in tensor.reason
    assert "precondition failed" in tensor.reason
    assert int(report.exit_code) == 2


def test_a_secret_in_storage_options_or_the_environment_is_never_printed(served, monkeypatch,
                                                                         fast_retries):
    url, _, _ = served
    monkeypatch.setenv("FPCLASS_TEST_TOKEN", SECRET)
    with FaultProxy(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as proxy:
        proxy.fault, proxy.longer_than = "reset", REMOTE_BLOCK
        out, err = io.StringIO(), io.StringIO()
        code = main(["scan", "--json", "--storage-option",
                     json.dumps({"Authorization": f"Bearer {SECRET}"}).join(
                         ["headers=", ""]),
                     f"{proxy.url}/clean.safetensors", f"{proxy.url}/missing.npy"],
                    stdout=out, stderr=err)
        plain = io.StringIO()
        main(["scan", "--storage-option", f'headers={{"Authorization": "Bearer {SECRET}"}}',
              f"{proxy.url}/clean.safetensors"], stdout=plain, stderr=plain)
    assert code == 2
    for text in (out.getvalue(), err.getvalue(), plain.getvalue()):
        assert SECRET not in text
    assert f"{proxy.url}/clean.safetensors" in out.getvalue()


def test_the_examples_folder_scans_over_http_as_on_disk(monkeypatch):
    from fpclass.scan.readers import gguf
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    with nginx(root) as url:
        remote_report = scan([url + "/"])
        monkeypatch.setattr(gguf, "REMOTE_HEAD", 40)  # the header read in growing heads
        small_heads = scan([url + "/tiny.gguf"])
    local = scan([root])

    def tensors(report, base):
        return sorted((t.file[len(base):], t.name, t.status, t.nan, t.posinf, t.neginf,
                       t.locations) for t in report.tensors)

    # ONNX with its external data beside it, GGUF, npz, PyTorch, HDF5, safetensors
    assert tensors(remote_report, url) == tensors(local, root)
    assert [(p.path[len(url):], p.reason) for p in remote_report.problems] == \
        [(p.path[len(root):], p.reason) for p in local.problems]
    assert tensors(small_heads, url) == [t for t in tensors(local, root)
                                         if t[0] == "/tiny.gguf"]
    assert int(remote_report.exit_code) == int(local.exit_code) == 1


def test_a_password_in_a_url_is_refused_and_never_printed(served):
    url, _, _ = served
    with_password = url.replace("http://", f"http://user:{SECRET}@") + "/model.safetensors"
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--json", with_password], stdout=out, stderr=err)
    assert code == 2
    assert SECRET not in out.getvalue() + err.getvalue()
    (problem,) = json.loads(out.getvalue())["problems"]
    assert problem["path"] == url.replace("http://", "http://user:***@") + "/model.safetensors"


def test_a_compressed_file_is_not_stored_from_a_url(served):
    import gzip
    url, root, _ = served
    (root / "x.npy.gz").write_bytes(gzip.compress(b"\x93NUMPY" + b"\0" * 100))
    try:
        report = scan([f"{url}/x.npy.gz"])
    finally:
        (root / "x.npy.gz").unlink()
    assert [p.path for p in report.problems] == [f"{url}/x.npy.gz"]
    assert "not read from URLs" in report.problems[0].reason


def test_a_storage_option_without_a_key_is_a_usage_error_that_does_not_echo_it(served):
    url, _, _ = served
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--storage-option", SECRET, f"{url}/model.safetensors"],
                stdout=out, stderr=err)
    assert code not in (0, 1)
    assert "--storage-option takes KEY=VALUE" in err.getvalue()
    assert SECRET not in out.getvalue() + err.getvalue()


def test_a_server_that_ignores_ranges_is_named_not_trusted(tmp_path):
    import http.server
    import threading
    from safetensors.numpy import save
    body = save({"x": np.ones(1 << 18, np.float32)})

    class Whole(http.server.BaseHTTPRequestHandler):  # 200 and the whole file, whatever asked
        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()

        def do_GET(self):
            self.do_HEAD()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Whole)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/m.safetensors"
    try:
        report = scan([url])
    finally:
        server.shutdown()
        server.server_close()
    assert int(report.exit_code) == 2
    reasons = [p.reason for p in report.problems] + [t.reason for t in report.tensors]
    assert any("does not serve byte ranges" in (r or "") for r in reasons), reasons


def test_a_local_scan_imports_no_remote_library(tmp_path):
    import subprocess
    np.save(tmp_path / "x.npy", np.ones(4, np.float32))
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    code = ("import sys; from fpclass.scan import scan; r = scan([sys.argv[1]]); "
            "print(int(r.exit_code), sorted(m for m in ('fsspec', 'aiohttp', 's3fs', "
            "'huggingface_hub') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": src})
    assert done.stdout.split() == ["0", "[]"], done.stderr


def test_an_empty_folder_is_an_empty_directory_not_a_file(served):
    url, root, _ = served
    (root / "empty").mkdir()
    try:
        report = scan([f"{url}/empty/"])
        local = scan([str(root / "empty")])
    finally:
        (root / "empty").rmdir()
    assert report.problems == local.problems == []
    assert report.files == local.files == []
    assert int(report.exit_code) == int(local.exit_code)


def test_a_matlab_file_is_unchecked_from_a_url_not_clean(served):
    sio = pytest.importorskip("scipy.io")
    url, root, _ = served
    sio.savemat(root / "a.mat", {"a": np.array([1.0, 2.0])})
    try:
        report = scan([f"{url}/a.mat"])
    finally:
        (root / "a.mat").unlink()
    assert [p.path for p in report.problems] == [f"{url}/a.mat"]
    assert "not read from URLs" in report.problems[0].reason
    assert int(report.exit_code) == 2


def test_runs_of_small_hdf5_chunks_over_http_as_their_local_copy(tmp_path, monkeypatch):
    """A dataset of many small unfiltered chunks back to back (hdf5_runs): over HTTP its runs are
    read by ranges, as the usual way reads them (the read sieve takes local files only), and
    found as in the local copy, where the sieve reads them (every run taken)."""
    h5py = pytest.importorskip("h5py")
    kept = spy_sieve(monkeypatch)
    a = np.random.default_rng(3).standard_normal((300, 64)).astype(np.float32)
    a[[7, 250], [3, 60]] = [np.nan, -np.inf]
    with h5py.File(tmp_path / "rec.h5", "w") as f:
        f.create_dataset("v", data=a, chunks=(1, 64), maxshape=(None, 64))
    local = scan([str(tmp_path / "rec.h5")])
    assert kept, "the local scan did not read through the sieve"
    del kept[:]
    with nginx(str(tmp_path)) as url:
        remote_report = scan([url + "/rec.h5"])
    assert not kept
    assert not remote_report.problems, remote_report.problems
    (t,), (u,) = remote_report.tensors, local.tensors
    assert t.status == u.status == "checked"
    assert (t.nan, t.neginf, t.values_checked) == (1, 1, a.size)
    assert [x.index for x in t.locations] == [x.index for x in u.locations] == [(7, 3), (250, 60)]
    assert tuple(t.stats) == tuple(u.stats)
