"""The thread policy holds for the scan's decode pool (issue 22): called with no thread count, a
scan runs its readers and decoders on one thread per core from the main thread (at most the
user's cap), and on the calling thread alone inside a foreign worker (a thread, a
concurrent.futures pool, a dask worker), as a kernel call does; blosc never adds threads of its
own. Every answer against the format's own library (zarr, h5py) + numpy."""

import concurrent.futures
import os
import threading

import numpy as np
import pytest

from fpclass.kernels import threads as policy
from fpclass.scan import executing, scan

FEW = 300  # task_bytes: many parts, so a pool would have work for every thread


def planted(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype("<f4")
    a.reshape(-1)[[0, 5, -1]] = [np.nan, np.inf, -np.inf]
    return a


@pytest.fixture
def files(tmp_path):
    """(paths, the values each holds by the library's own read, the decoders' callers)."""
    zarr = pytest.importorskip("zarr")
    h5py = pytest.importorskip("h5py")
    a = planted((40, 30))
    z = zarr.create_array(tmp_path / "a.zarr", shape=a.shape, chunks=(8, 30), dtype=a.dtype,
                          compressors=zarr.codecs.BloscCodec())
    z[...] = a
    with h5py.File(tmp_path / "b.h5", "w") as f:
        f.create_dataset("x", data=a, chunks=(8, 30), compression="gzip", shuffle=True)
    truth = {"": np.asarray(zarr.open_array(tmp_path / "a.zarr", mode="r")[...])}
    with h5py.File(tmp_path / "b.h5", "r") as f:
        truth["x"] = f["x"][...]
    return [tmp_path / "a.zarr", tmp_path / "b.h5"], truth


@pytest.fixture
def decoders(monkeypatch):
    """The threads that decoded a chunk, and blosc's own-thread setting as each one saw it."""
    from fpclass.scan.readers import hdf5_blocks, zarr_chunks
    import numcodecs.blosc as blosc
    seen = []
    real_decode, real_chunk = zarr_chunks.decode, hdf5_blocks._Blocks._chunk_at

    def decode(*args):
        seen.append((threading.current_thread(), blosc._get_use_threads()))
        return real_decode(*args)

    def chunk_at(self, *args):
        seen.append((threading.current_thread(), False))
        return real_chunk(self, *args)

    monkeypatch.setattr(zarr_chunks, "decode", decode)
    monkeypatch.setattr(hdf5_blocks._Blocks, "_chunk_at", chunk_at)
    return seen


@pytest.fixture
def pools(monkeypatch):
    """The thread count of each pool the scan started."""
    sizes = []
    real = executing._run_reads
    monkeypatch.setattr(executing, "_run_reads",
                        lambda tasks, reads, results, threads, *r:
                        sizes.append(threads) or real(tasks, reads, results, threads, *r))
    return sizes


def exact(report, truth):
    for t in report.tensors:
        a = truth[t.name].astype(np.float64)
        assert t.status == "checked", t.reason
        assert (t.nan, t.posinf, t.neginf) == (int(np.isnan(a).sum()),
                                               int(np.isposinf(a).sum()),
                                               int(np.isneginf(a).sum()))
        assert t.values_checked == a.size
    assert sorted(t.name for t in report.tensors) == sorted(truth)


def run_in_dask(job):
    dask = pytest.importorskip("dask")
    return dask.delayed(job)().compute(scheduler="threads")


@pytest.mark.parametrize("where", ["thread", "futures", "dask"])
def test_a_scan_in_a_foreign_worker_decodes_on_that_worker_alone(files, decoders, pools,
                                                                  monkeypatch, where):
    paths, truth = files
    monkeypatch.setattr(os, "cpu_count", lambda: 4)

    def job():
        return scan(paths, task_bytes=FEW), threading.current_thread()

    if where == "thread":
        out = []
        t = threading.Thread(target=lambda: out.append(job()))
        t.start()
        t.join()
        [(report, worker)] = out
    elif where == "futures":
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            report, worker = pool.submit(job).result()
    else:
        report, worker = run_in_dask(job)
    exact(report, truth)
    assert worker is not threading.main_thread()
    assert len(decoders) == 10 and {t for t, _ in decoders} == {worker}  # no pool of its own
    assert not any(own for _, own in decoders)  # blosc on the calling thread
    assert pools == [1]


def test_the_main_thread_decodes_on_one_thread_per_core_at_most_the_cap(files, decoders, pools,
                                                                        monkeypatch):
    paths, truth = files
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.delenv(policy.ENV, raising=False)
    exact(scan(paths, task_bytes=FEW), truth)
    assert pools == [4]
    assert all(t.name.startswith("fpclass-scan-") for t, _ in decoders)
    assert not any(own for _, own in decoders)  # blosc: one thread per scan thread
    monkeypatch.setenv(policy.ENV, "2")
    exact(scan(paths, task_bytes=FEW), truth)
    policy.set_num_threads(3)
    try:
        exact(scan(paths, task_bytes=FEW), truth)
    finally:
        policy.set_num_threads(None)
    exact(scan(paths, task_bytes=FEW, threads=5), truth)  # a count named is taken as it is
    assert pools == [4, 2, 3, 5]
