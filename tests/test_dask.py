"""fpclass.dask against the NumPy twin (fpclass.twin) and the numpy path, on random
chunkings; laziness; the single-thread rule inside dask; a real 2-process LocalCluster."""

import os
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fpclass
import samples
from fpclass import twin

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
import fpclass.dask as fd  # noqa: E402
from dask.delayed import Delayed  # noqa: E402

DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(">f4"), np.dtype(np.float16),
          *samples.ML_FLOATS[:2], np.dtype("float8_e4m3fn"), np.dtype(np.complex64)]
SPECIAL = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf}


def _split(n, draw):
    """A random chunking of length n: sizes that add up to n, with zero-length and one-element
    chunks likely."""
    sizes = []
    left = n
    while left:
        size = draw(st.integers(0, min(left, 4)))
        sizes.append(size)
        left -= size
    if draw(st.booleans()):
        sizes.insert(draw(st.integers(0, len(sizes))), 0)
    return tuple(sizes) or (0,)


@st.composite
def chunked(draw):
    """(numpy array, dask array of it on a random chunking, the block that holds planted values)."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 7), min_size=0, max_size=3)))
    size = int(np.prod(shape))
    seed = draw(st.integers(0, 2**32 - 1))
    a = samples.random_bits(dtype, size, seed).reshape(shape)
    if dtype.kind == "f" and dtype.itemsize >= 4 and size:  # random bits rarely hit a special
        a = np.where(np.random.default_rng(seed).random(shape) < 0.6, np.float32(1.5), a)
        a = a.astype(dtype)
        for value in draw(st.lists(st.sampled_from(list(SPECIAL.values())), max_size=3)):
            a[np.unravel_index(draw(st.integers(0, size - 1)), shape)] = value
    chunks = tuple(_split(n, draw) for n in shape)
    return a, da.from_array(a, chunks=chunks)


def _compute(lazy: dict, **kwargs) -> dict:
    """Compute the dask arrays together and the Delayed results together: dask 2026.8's
    dask.compute returns mixed Array / Delayed results out of order (see docs/dask.md)."""
    out = {}
    for kind in (Delayed, da.Array):
        names = [n for n, v in lazy.items() if isinstance(v, kind)]
        out.update(zip(names, dask.compute(*(lazy[n] for n in names), **kwargs)))
    assert len(out) == len(lazy)
    return out


def _twin_masks(a):
    real = a.dtype.kind != "c"
    masks = {"nan": twin.isnan(a), "inf": twin.isinf(a), "nonfinite": ~twin.isfinite(a)}
    if real:
        masks["posinf"] = twin.isposinf(a)
        masks["neginf"] = twin.isneginf(a)
    return masks


def _first(mask):
    hits = np.argwhere(mask)
    return tuple(int(i) for i in hits[0]) if len(hits) else None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunked(), st.data())
def test_queries_match_the_twin_on_random_chunkings(case, data):
    a, x = case
    masks = _twin_masks(a)
    axis = data.draw(st.sampled_from([None, *range(a.ndim), tuple(range(a.ndim))]))
    keepdims = data.draw(st.booleans())
    limit = data.draw(st.sampled_from([None, 0, 1, 3]))
    split_every = data.draw(st.sampled_from([None, 2, 3]))
    lazy = {
        "isnan": fd.isnan(x), "isinf": fd.isinf(x), "isfinite": fd.isfinite(x),
        "any_nan": fd.any_nan(x, axis, keepdims, split_every=split_every),
        "any_nonfinite": fd.any_nonfinite(x, axis, keepdims, split_every=split_every),
        "all_finite": fd.all_finite(x, axis, keepdims, split_every=split_every),
        "count_inf": fd.count_inf(x, axis, keepdims, split_every=split_every),
        "count_nonfinite": fd.count_nonfinite(x, axis, keepdims, split_every=split_every),
        "first_nan": fd.first_nan(x, split_every=split_every),
        "first_nonfinite": fd.first_nonfinite(x, split_every=split_every),
        "locate_inf": fd.locate_inf(x, limit, split_every=split_every),
        "locate_nonfinite": fd.locate_nonfinite(x, limit, split_every=split_every),
    }
    if a.dtype.kind != "c":
        lazy["isposinf"] = fd.isposinf(x)
        lazy["count_neginf"] = fd.count_inf(x, axis, keepdims, detect_positive=False)
        lazy["first_posinf"] = fd.first_inf(x, detect_negative=False)
        lazy["class_counts"] = fd.class_counts(x, split_every=split_every)
    assert lazy["isnan"].chunks == x.chunks
    got = _compute(lazy)

    expected = {
        "isnan": masks["nan"], "isinf": masks["inf"], "isfinite": ~masks["nonfinite"],
        "any_nan": masks["nan"].any(axis, keepdims=keepdims),
        "any_nonfinite": masks["nonfinite"].any(axis, keepdims=keepdims),
        "all_finite": (~masks["nonfinite"]).all(axis, keepdims=keepdims),
        "count_inf": np.count_nonzero(masks["inf"], axis, keepdims=keepdims),
        "count_nonfinite": np.count_nonzero(masks["nonfinite"], axis, keepdims=keepdims),
        "first_nan": _first(masks["nan"]), "first_nonfinite": _first(masks["nonfinite"]),
        "locate_inf": np.argwhere(masks["inf"])[:limit],
        "locate_nonfinite": np.argwhere(masks["nonfinite"])[:limit],
    }
    if a.dtype.kind != "c":
        expected["isposinf"] = masks["posinf"]
        expected["count_neginf"] = np.count_nonzero(masks["neginf"], axis, keepdims=keepdims)
        expected["first_posinf"] = _first(masks["posinf"])
        expected["class_counts"] = twin.class_counts(a)
    for name, want in expected.items():
        have = got[name]
        if name.startswith("first") or name == "class_counts":
            assert have == want, (name, have, want)
        else:
            have, want = np.asarray(have), np.asarray(want)
            assert (have.shape, have.dtype) == (want.shape, want.dtype), name
            assert np.array_equal(have, want), (name, have, want)
    # and the numpy path of fpclass agrees with its dask path
    assert got["any_nan"].dtype == np.asarray(fpclass.any_nan(a, axis, keepdims)).dtype
    assert np.array_equal(got["count_inf"], fpclass.count_inf(a, axis, keepdims))


def test_planted_values_are_found_in_their_chunk_with_global_indices():
    a = np.ones((6, 9, 5), np.float32)
    x = da.from_array(a, chunks=(2, 4, 3))
    # block (2, 1, 1) starts at (4, 4, 3): plant there and in block (2, 2, 0)
    a = a.copy()
    a[5, 6, 4] = -np.inf
    a[4, 4, 3] = np.nan
    a[4, 8, 0] = np.nan
    x = da.from_array(a, chunks=(2, 4, 3))
    assert fd.first_nan(x).compute() == (4, 4, 3) == _first(twin.isnan(a))
    assert fd.first_inf(x).compute() == (5, 6, 4)
    assert np.array_equal(fd.locate_nonfinite(x).compute(), np.argwhere(~twin.isfinite(a)))
    assert np.array_equal(fd.locate_nan(x, 1).compute(), [[4, 4, 3]])
    assert fd.class_counts(x).compute() == twin.class_counts(a)


def test_strided_transposed_and_byteswapped_sources():
    base = samples.specials(np.float64)
    a = np.concatenate([base, base[::-1], base]).reshape(6, 11)
    for view in (a[:, ::-2], a.T, a.astype(">f8"), a[::-1]):
        x = da.from_array(view, chunks=(3, 2))
        assert np.array_equal(fd.isnan(x).compute(), twin.isnan(view))
        assert np.array_equal(fd.locate_inf(x).compute(), np.argwhere(twin.isinf(view)))
        assert fd.class_counts(x).compute() == twin.class_counts(view)


def test_zero_dimensional_and_empty():
    z = da.from_array(np.array(np.inf, np.float32))
    assert fd.any_inf(z).compute() and fd.isinf(z).compute().shape == ()
    assert fd.first_inf(z).compute() == () and fd.locate_inf(z).compute().shape == (1, 0)
    e = da.zeros((3, 0), np.float32, chunks=2)
    assert fd.any_nan(e).compute() == np.False_ and fd.all_finite(e).compute() == np.True_
    assert fd.count_nan(e, axis=0).compute().shape == (0,)
    assert fd.first_nan(e).compute() is None and fd.locate_nan(e).compute().shape == (0, 2)
    assert fd.class_counts(e).compute().total == 0


def test_errors_surface_at_graph_construction():
    x = da.ones(4, chunks=2)
    with pytest.raises(TypeError, match="complex"):
        fd.isposinf(da.ones(4, dtype=np.complex64, chunks=2))
    with pytest.raises(TypeError, match="real floating-point"):
        fd.class_counts(da.ones(4, dtype=np.int32, chunks=2))
    with pytest.raises(TypeError, match="detect_negative"):
        fd.any_inf(x, detect_negative="yes")
    with pytest.raises(ValueError, match="limit"):
        fd.locate_nan(x, limit=-1)
    with pytest.raises(np.exceptions.AxisError):
        fd.count_nan(x, axis=1)
    with pytest.raises(TypeError, match="immutable"):
        fd.isnan(x, out=np.empty(4, bool))
    with pytest.raises(TypeError, match="dask.array.Array"):
        fd.isnan(np.ones(3))
    unknown = x[x > 0]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        fd.first_nan(unknown)
    assert fd.count_nan(unknown).compute() == 0  # reductions do not need chunk sizes


def test_dispatch_hands_only_dask_input_to_dask():
    assert fd.dispatch("isnan", np.ones(3)) is NotImplemented
    x = da.from_array(np.array([np.nan, 1.0]), chunks=1)
    assert np.array_equal(fd.dispatch("isnan", x).compute(), [True, False])
    assert fd.dispatch("count_inf", x, axis=0, detect_positive=False).compute() == 0
    with pytest.raises(TypeError, match="does not accept dask"):
        fd.dispatch("no_such_query", x)


def test_top_level_functions_accept_dask_arrays():
    x = da.from_array(np.array([1.0, np.inf, np.nan]), chunks=2)
    result = fpclass.any_nan(x)
    assert isinstance(result, da.Array), f"fpclass.any_nan gave {type(result)} for a dask array"
    assert result.compute() == np.True_
    assert fpclass.first_inf(x).compute() == (1,)
    assert np.array_equal(fpclass.isinf(x).compute(), [False, True, False])


# -- laziness ------------------------------------------------------------------------------------

def test_building_graphs_computes_nothing():
    calls = {"scheduler": 0, "blocks": 0}

    def counting_get(dsk, keys, **kwargs):
        calls["scheduler"] += 1
        return dask.get(dsk, keys, **kwargs)

    def load(block_id=None):
        calls["blocks"] += 1
        out = np.ones((3, 4), np.float32)
        out[block_id[0], block_id[1]] = np.nan
        return out

    x = da.map_blocks(load, chunks=((3,) * 3, (4,) * 2), dtype=np.float32,
                      meta=np.empty((0, 0), np.float32))
    with dask.config.set(scheduler=counting_get):
        lazy = [f(x) for f in (fd.isnan, fd.isinf, fd.isfinite, fd.isposinf, fd.isneginf,
                               fd.any_nan, fd.any_inf, fd.any_nonfinite, fd.all_finite,
                               fd.count_nan, fd.count_inf, fd.count_nonfinite, fd.class_counts,
                               fd.first_nan, fd.first_inf, fd.first_nonfinite, fd.locate_nan,
                               fd.locate_inf, fd.locate_nonfinite)]
        lazy.append(fd.count_nan(x, axis=1, split_every=2))
        assert calls == {"scheduler": 0, "blocks": 0}
        assert lazy[9].compute() == 6  # the counter does count
    assert calls == {"scheduler": 1, "blocks": 6}


# -- the single-thread rule inside dask ----------------------------------------------------------

def _parallel_allowed():
    from fpclass.kernels import threads
    return threads.threads_for(1 << 30) > 1, threading.current_thread() is threading.main_thread()


def test_kernels_run_serially_in_dask_threads():
    from fpclass.kernels import threads
    import numba
    if numba.get_num_threads() > 1:
        assert threads.threads_for(1 << 30) > 1  # so the False below is the thread rule at work
    assert dask.delayed(_parallel_allowed)().compute(scheduler="threads") == (False, False)


# -- a real cluster ------------------------------------------------------------------------------

def _local_cluster(**options):
    """A process LocalCluster on 127.0.0.1 without a dashboard. Its scheduler's HTTP server listens
    on a free port: the default 8787 may be taken by another test run, and the warning distributed
    gives then is an error under -W error."""
    distributed = pytest.importorskip("distributed")
    return distributed.LocalCluster(processes=True, host="127.0.0.1", dashboard_address=None,
                                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                    **options)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    # One retry after a worker death, so the "dies every time" case gives up after two deaths.
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            _local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_cluster_workers_run_kernels_serially(client):
    results = client.run(lambda: None)
    assert len(results) == 2
    assert client.submit(_parallel_allowed, pure=False).result() == (False, False)


def test_cluster_operators_and_queries_match_local(client):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 30)).astype(np.float32)
    a[rng.integers(0, 40, 9), rng.integers(0, 30, 9)] = np.nan
    a[3, 29] = np.inf
    a[31, 0] = -np.inf
    x = da.from_array(a, chunks=(7, 8))
    lazy = [fd.isnan(x), fd.any_inf(x, axis=0), fd.count_nonfinite(x, axis=1),
            fd.class_counts(x), fd.first_nan(x), fd.locate_nonfinite(x, 5)]
    got = _compute(dict(enumerate(lazy)))  # the Client is the default scheduler now
    assert np.array_equal(got[0], twin.isnan(a))
    assert np.array_equal(got[1], twin.isinf(a).any(axis=0))
    assert np.array_equal(got[2], np.count_nonzero(~twin.isfinite(a), axis=1))
    assert got[3] == twin.class_counts(a)
    assert got[4] == _first(twin.isnan(a))
    assert np.array_equal(got[5], np.argwhere(~twin.isfinite(a))[:5])
    for _ in range(2):  # rebuilt and recomputed: fresh keys, never a stale or clashing result
        assert fd.class_counts(x).compute() == got[3]
        assert fd.first_nan(x).compute() == got[4]
        assert np.array_equal(fd.locate_nonfinite(x, 5).compute(), got[5])


# -- scan on the cluster -------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _comparable(report) -> dict:
    doc = report.to_dict()
    del doc["summary"]["seconds"], doc["summary"]["bytes_per_second"]
    return doc


def _die_once(marker, task, max_locations, **options):
    """run_task, except that the first attempt at `layer.0.weight` kills its worker process."""
    from fpclass.scan import run_task
    if task.name == "layer.0.weight" and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return run_task(task, max_locations, **options)


def _die_on_embed(task, max_locations, **options):
    """run_task, except that every attempt at `embed.weight` kills its worker process."""
    from fpclass.scan import run_task
    if task.name == "embed.weight":
        os._exit(1)
    return run_task(task, max_locations, **options)


@pytest.fixture(scope="module")
def examples():
    if not (EXAMPLES / "nan_inf.safetensors").exists():
        pytest.skip("examples/ has not been generated")
    from fpclass.scan import scan as local_scan
    return local_scan([str(EXAMPLES)])


def test_cluster_scan_reports_exactly_what_a_local_scan_reports(client, examples):
    from fpclass.dask.distributed import scan
    report = scan([str(EXAMPLES)], client.scheduler.address, max_locations=5)
    assert _comparable(report) == _comparable(examples)
    assert report.exit_code == examples.exit_code == 1
    assert fd.scan(str(EXAMPLES), client).exit_code == 1  # a Client works as well as an address


def test_cli_scheduler_flag_prints_the_local_report(client, examples):
    import io
    import json

    from fpclass.cli import main
    out_local, out_cluster = io.StringIO(), io.StringIO()
    assert main(["scan", "--json", str(EXAMPLES)], stdout=out_local, stderr=io.StringIO()) == 1
    code = main(["scan", "--json", "--scheduler", client.scheduler.address, str(EXAMPLES)],
                stdout=out_cluster, stderr=io.StringIO())
    assert code == 1
    strip = lambda doc: {**doc, "summary": {k: v for k, v in doc["summary"].items()
                                            if k not in ("seconds", "bytes_per_second")}}
    assert strip(json.loads(out_cluster.getvalue())) == strip(json.loads(out_local.getvalue()))


def test_cli_unreachable_scheduler_is_inconclusive(monkeypatch):
    import io

    import fpclass.dask.distributed
    from fpclass.cli import main
    monkeypatch.setattr(fpclass.dask.distributed, "CONNECT_TIMEOUT", "1s")
    err = io.StringIO()
    code = main(["scan", "--scheduler", "tcp://127.0.0.1:9", str(EXAMPLES)], stdout=io.StringIO(),
                stderr=err)
    assert code == 2 and "scheduler" in err.getvalue()


def test_a_worker_killed_mid_scan_is_retried(client, examples, tmp_path):
    from fpclass.dask.distributed import execute
    from fpclass.scan import assemble, plan
    client.wait_for_workers(2, timeout=60)
    tasks = plan([str(EXAMPLES)])
    assert any(t.name == "layer.0.weight" for t in tasks)
    marker = tmp_path / "died"
    results, interrupted = execute(tasks, client, run=partial(_die_once, str(marker)))
    assert marker.exists() and not interrupted  # a worker did die, and the scan went on
    report = assemble(tasks, results, fail_on=examples.fail_on)
    assert _comparable(report) == _comparable(examples)


def test_a_task_that_keeps_killing_workers_is_reported_unchecked(client, examples):
    from fpclass.dask.distributed import execute
    from fpclass.scan import assemble, plan
    from fpclass.results.exitcodes import ExitCode
    client.wait_for_workers(2, timeout=60)
    tasks = plan([str(EXAMPLES / "clean.safetensors"), str(EXAMPLES / "tiny.onnx")])
    results, _ = execute(tasks, client, run=_die_on_embed)
    report = assemble(tasks, results)
    assert [t.name for t in report.unchecked] == ["embed.weight"]
    assert "worker failed" in report.unchecked[0].reason
    assert report.exit_code == ExitCode.INCONCLUSIVE
    checked = {t.name for t in report.checked}
    assert checked == {t.name for t in examples.checked
                       if t.file.endswith(("clean.safetensors", "tiny.onnx"))} - {"embed.weight"}
    client.wait_for_workers(2, timeout=60)


# -- a cluster that loses every worker -----------------------------------------------------------

#: The bound these tests give the scan, and the slack they allow on top of it for the scheduler
#: to notice the workers leave, one worker-count poll and a loaded CI machine.
GONE_AFTER, SLACK = 3.0, 10.0


@pytest.fixture(scope="module")
def lonely():
    """(cluster, client) with one worker process of two threads; tests scale it as they need."""
    distributed = pytest.importorskip("distributed")
    with _local_cluster(n_workers=1, threads_per_worker=2) as cluster, \
            distributed.Client(cluster) as c:
        yield cluster, c


def _one_worker(cluster, client):
    cluster.scale(1)
    client.wait_for_workers(1, timeout=30)


def _within(seconds, call):
    """call()'s result, or a test failure (not a hung test run) if it takes over `seconds`."""
    box = {}

    def target():
        try:
            box["value"] = call()
        except BaseException as e:  # handed to the test thread below
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"did not return within {seconds} s: hangs without workers")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _hang_on_embed(task, max_locations, **options):
    """run_task, except that `embed.weight` never finishes (its worker goes first)."""
    import time

    from fpclass.scan import run_task
    if task.name == "embed.weight":
        time.sleep(600)
    return run_task(task, max_locations, **options)


def _fail_then_hang_on_embed(marker, task, max_locations, **options):
    """run_task, except that `embed.weight` raises with the others, and alone (the retry) says so
    in `marker` and never finishes."""
    import time

    from distributed import get_worker
    from fpclass.scan import run_task
    if task.name == "embed.weight":
        if not get_worker().get_current_task().endswith("-alone"):
            raise RuntimeError("fails with the others")
        open(marker, "w").close()
        time.sleep(600)
    return run_task(task, max_locations, **options)


CLEAN_PAIR = [str(EXAMPLES / "clean.safetensors"), str(EXAMPLES / "tiny.onnx")]


def test_a_scan_whose_workers_all_leave_returns_inconclusive_within_the_bound(lonely, examples):
    import time

    from fpclass.dask.distributed import execute
    from fpclass.scan import assemble, plan
    from fpclass.results.exitcodes import ExitCode
    cluster, client = lonely
    _one_worker(cluster, client)
    tasks = plan(CLEAN_PAIR)
    others = sum(t.status == "check" for t in tasks) - 1
    done, left = [], []

    def progress(task, result):  # every tensor but embed.weight is done: take the worker away
        done.append(task.name)
        if len(done) == others:
            left.append(time.monotonic())
            cluster.scale(0)

    results, interrupted = _within(30, lambda: execute(
        tasks, client, run=_hang_on_embed, progress=progress, no_workers_timeout=GONE_AFTER))
    assert left and time.monotonic() - left[0] < GONE_AFTER + SLACK
    report = assemble(tasks, results)
    assert not interrupted and report.exit_code == ExitCode.INCONCLUSIVE
    assert [(t.name, t.reason) for t in report.unchecked] == \
        [("embed.weight", "unchecked: no dask workers for 3 s")]
    assert {t.name for t in report.checked} == set(done)  # what finished keeps its result


def test_a_scan_of_a_cluster_without_workers_returns_within_the_bound(lonely):
    import time

    from fpclass.dask.distributed import scan
    cluster, client = lonely
    cluster.scale(0)
    while client.scheduler_info(n_workers=0)["n_workers"]:
        time.sleep(0.05)
    start = time.monotonic()
    report = _within(30, lambda: scan(CLEAN_PAIR, client, no_workers_timeout=GONE_AFTER))
    assert time.monotonic() - start < GONE_AFTER + SLACK
    assert report.exit_code == 2 and not report.checked and len(report.unchecked) == 6
    assert {t.reason for t in report.unchecked} == {"unchecked: no dask workers for 3 s"}


def test_workers_leaving_while_a_retry_runs_alone_do_not_hang_the_scan(lonely, tmp_path):
    import time

    from fpclass.dask.distributed import execute
    from fpclass.scan import assemble, plan
    cluster, client = lonely
    _one_worker(cluster, client)
    marker = tmp_path / "alone"

    def take_the_worker_when_the_retry_runs():
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.scale(0)

    killer = threading.Thread(target=take_the_worker_when_the_retry_runs, daemon=True)
    killer.start()
    tasks = plan(CLEAN_PAIR)
    results, _ = _within(30, lambda: execute(tasks, client, retries=0, no_workers_timeout=GONE_AFTER,
                                             run=partial(_fail_then_hang_on_embed, str(marker))))
    killer.join()
    report = assemble(tasks, results)
    assert marker.exists() and report.exit_code == 2
    assert [(t.name, t.reason) for t in report.unchecked] == \
        [("embed.weight", "unchecked: no dask workers for 3 s")]
    assert len(report.checked) == 5


@pytest.mark.parametrize("bad", [-1, "60", True, float("nan"), float("inf")])
def test_no_workers_timeout_is_checked_before_connecting(bad):
    from fpclass.dask.distributed import scan
    with pytest.raises(ValueError, match="no_workers_timeout must be a finite number of seconds"):
        scan(CLEAN_PAIR, "tcp://127.0.0.1:9", no_workers_timeout=bad)


def test_without_dask_fpclass_works_and_entry_points_name_the_extra():
    import subprocess
    import sys
    code = ("import sys; sys.modules['dask'] = None; sys.modules['dask.array'] = None\n"
            "import numpy as np, fpclass, fpclass.dask\n"
            "assert fpclass.any_nan(np.array([np.nan]))\n"
            "try:\n    fpclass.dask.isnan(None)\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "install the extra fpclass[dask]" in done.stdout
