"""`fpclass scan s3://...` against moto's S3 server on 127.0.0.1 through s3fs: nested prefixes, a
sharded safetensors index, zarr stores in a bucket, consistency, credentials, and a dask cluster
whose workers read their ranges from the bucket themselves. Truth comes from numpy on the arrays
written and from the scan of the same files on local disk."""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from remote_servers import found_by_file, moto_s3  # noqa: E402

pytest.importorskip("s3fs", reason="the remote extra (s3fs) is not installed")
pytest.importorskip("moto.server", reason="moto[server] is not installed")

from fpclass.cli import main  # noqa: E402
from fpclass.scan import scan  # noqa: E402

SECRET = "wJalrXUtnFEMI-K7MDENG-never-printed"


def _arrays():
    rng = np.random.default_rng(11)
    a = rng.standard_normal(5000).astype(np.float32)
    a[[0, 4321]] = np.nan
    b = rng.standard_normal((30, 20)).astype(np.float16)
    b[29, 19] = np.inf
    z = rng.standard_normal((12, 10)).astype(np.float32)
    z[3, 4], z[11, 9] = -np.inf, np.nan
    return a, b, z


def _truth(x) -> tuple:
    return int(np.isnan(x).sum()), int(np.isposinf(x).sum()), int(np.isneginf(x).sum())


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    """(s3fs filesystem, storage_options, local copy, truth {key below bkt/: {name: counts}})."""
    import s3fs
    import zarr
    from safetensors.numpy import save_file
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    local = tmp_path_factory.mktemp("bucket")
    a, b, z = _arrays()
    (local / "models" / "llm").mkdir(parents=True)
    save_file({"a": a}, str(local / "models" / "llm" / "m-1.safetensors"))
    save_file({"b": b}, str(local / "models" / "llm" / "m-2.safetensors"))
    (local / "models" / "llm" / "m.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}}))
    (local / "arrays" / "deep" / "er").mkdir(parents=True)
    np.save(local / "arrays" / "deep" / "er" / "x.npy", z)
    (local / "arrays" / "notes.txt").write_text("not a tensor\n")
    raw = zarr.create_array(str(local / "stores" / "raw.zarr"), shape=z.shape, chunks=(5, 4),
                            dtype="f4", compressors=None)
    raw[:] = z
    packed = zarr.create_array(str(local / "stores" / "packed.zarr"), shape=b.shape,
                               chunks=(7, 7), dtype="f2")
    packed[:] = b
    truth = {"models/llm/m-1.safetensors": {"a": _truth(a)},
             "models/llm/m-2.safetensors": {"b": _truth(b)},
             "arrays/deep/er/x.npy": {"": _truth(z)},
             "stores/raw.zarr": {"": _truth(z)},
             "stores/packed.zarr": {"": _truth(b)}}
    with moto_s3() as (_, options):
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("bkt")
        fs.put(str(local) + "/", "bkt/", recursive=True)
        fs.invalidate_cache()
        yield fs, options, local, truth


def test_a_bucket_prefix_scans_as_its_local_copy_and_as_numpy_counts(bucket):
    _, options, local, truth = bucket
    report = scan(["s3://bkt/"], storage_options=options)
    assert not report.problems, report.problems
    assert found_by_file(report, "s3://bkt/") == truth
    assert all(t.status == "checked" for t in report.tensors)
    assert [(s.path, s.reason) for s in report.skipped] == [
        ("s3://bkt/arrays/notes.txt", "text file")]
    here = scan([str(local)])
    assert found_by_file(here, str(local) + "/") == truth
    assert sorted((t.file[len(str(local)):], t.name, t.locations) for t in here.tensors) == \
        sorted((t.file[len("s3://bkt"):], t.name, t.locations) for t in report.tensors)


def test_include_and_exclude_filter_a_prefix_as_a_directory(bucket):
    _, options, _, truth = bucket
    report = scan(["s3://bkt/models"], storage_options=options, exclude=["m-2.*", "*.json"])
    assert found_by_file(report, "s3://bkt/") == {"models/llm/m-1.safetensors": truth[
        "models/llm/m-1.safetensors"]}
    assert ("s3://bkt/models/llm/m-2.safetensors", "excluded by --exclude m-2.*") in [
        (s.path, s.reason) for s in report.skipped]


def test_options_keyed_by_protocol_reach_their_filesystem(bucket):
    _, options, _, truth = bucket
    report = scan(["s3://bkt/arrays/deep/er/x.npy"],
                  storage_options={"s3": options, "https": {"headers": {"X-Other": "1"}}})
    assert found_by_file(report, "s3://bkt/") == {"arrays/deep/er/x.npy": truth["arrays/deep/er/x.npy"]}


def test_a_missing_key_is_a_problem_naming_its_url(bucket):
    _, options, _, _ = bucket
    report = scan(["s3://bkt/nothing/here.safetensors"], storage_options=options)
    assert [(p.path, p.reason) for p in report.problems] == [
        ("s3://bkt/nothing/here.safetensors", "no such file or directory")]
    assert int(report.exit_code) == 2


def test_an_object_replaced_during_the_scan_is_unchecked_never_clean(bucket):
    from safetensors.numpy import save
    fs, options, _, _ = bucket
    key = "bkt/changing/m.safetensors"
    tensors = {"first": np.ones(1000, np.float32), "second": np.ones(1000, np.float32)}
    fs.pipe(key, save(tensors))
    swapped = save({"first": np.ones(1000, np.float32),
                    "second": np.full(1000, np.nan, np.float32)})
    done = []

    def progress(task, result):  # after the first tensor, the object is overwritten
        if not done:
            done.append(task.name)
            fs.pipe(key, swapped)

    report = scan([f"s3://{key}"], storage_options=options, threads=1, progress=progress)
    by_name = {t.name: t for t in report.tensors}
    assert by_name[done[0]].status == "checked"
    other = by_name[({"first", "second"} - set(done)).pop()]
    assert other.status == "unchecked"
    assert f"s3://{key} changed during the scan" in other.reason
    assert int(report.exit_code) == 2


def test_credentials_in_options_and_the_environment_are_never_printed(bucket, monkeypatch):
    _, options, _, _ = bucket
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key-id")
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--json", "--storage-option", f"endpoint_url={options['endpoint_url']}",
                 "s3://bkt/models/", "s3://bkt/missing.npy", "s3://no-such-bucket/x.npy"],
                stdout=out, stderr=err)
    assert code == 1  # the NaN found in m-1 wins over the missing files (exit code rules)
    doc = json.loads(out.getvalue())
    assert {p["path"] for p in doc["problems"]} == {"s3://bkt/missing.npy",
                                                    "s3://no-such-bucket/x.npy"}
    out2, err2 = io.StringIO(), io.StringIO()
    main(["scan", "--storage-option", f"secret={SECRET}", "--storage-option", "key=k",
          "--storage-option", f"endpoint_url={options['endpoint_url']}",
          "s3://no-such-bucket/x.npy"], stdout=out2, stderr=err2)
    for text in (out.getvalue(), err.getvalue(), out2.getvalue(), err2.getvalue()):
        assert SECRET not in text


def test_cluster_workers_read_the_bucket_themselves(bucket):
    distributed = pytest.importorskip("distributed")
    from fpclass.dask.distributed import scan as cluster_scan
    _, options, _, truth = bucket
    with distributed.LocalCluster(processes=True, n_workers=1, threads_per_worker=2,
                                  host="127.0.0.1", dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) \
            as cluster, distributed.Client(cluster) as client:
        sent = []
        real_map = client.map

        def spying_map(func, tasks, **kw):
            sent.extend(tasks)
            return real_map(func, tasks, **kw)

        client.map = spying_map
        report = cluster_scan(["s3://bkt/models/", "s3://bkt/stores/"], client,
                              storage_options=options, no_workers_timeout=60)
    assert not report.problems
    assert found_by_file(report, "s3://bkt/") == {k: v for k, v in truth.items()
                                           if k.startswith(("models/", "stores/"))}
    assert sent and all(t.source.startswith("s3://") for t in sent)
    # the tasks name byte ranges; no tensor bytes travel from the client
    assert max(len(pickle.dumps(t)) for t in sent) < 2000
