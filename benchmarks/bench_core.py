#!/usr/bin/env python3
"""Core benchmark: element-wise operators and fused queries per format, against numpy
(+ml_dtypes ufuncs), onnxruntime, torch, bottleneck and the machine's own bandwidth, in one run.

    python benchmarks/bench_core.py [--elements 67108864] [--quick]

fpclass and its peers run in turn, the same number of times (common.alternated), each on its
preallocated-output path where it has one: numpy's out=, onnxruntime's IOBinding, torch's out=
(the comparison table's torch column: isposinf, isneginf, and isnan as torch.ne(t, t, out=)).
torch's isinf and isfinite take no out=, so against them fpclass allocates its answer too, from
the same torch tensor.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
# the comparison table the tests read too: every public function's numpy / torch / bottleneck peer
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
import fpclass  # noqa: E402
from common import (alternated, bandwidth, best_time, ort_bound_run, ort_session, paired_times, ratio,  # noqa: E402
                    read_baseline, table)
from comparisons import COMPARISONS, runner, tensor  # noqa: E402

FORMATS = ["float64", "float32", "float16", "bfloat16", "float8_e5m2", "float8_e4m3", "float8_e3m4",
           "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
           "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"]
OPS = ["isnan", "isinf", "isposinf", "isneginf", "isfinite"]


def dtype_of(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def sample(dtype, n, seed=0):
    """Clean data: standard-normal values (their magnitudes for the unsigned e8m0, where a
    negative value would become NaN), so queries read everything."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    if not fpclass.formats.format_of(dtype).signed:
        x = np.abs(x)
        x[x == 0] = 1  # e8m0 has no zero: 0 would become its NaN
    return x.astype(dtype)


def reads_data(dtype, op) -> bool:
    """False where the format table answers without reading (no such values in the format)."""
    f = fpclass.formats.format_of(dtype)
    if op in ("isnan", "any_nan"):
        return f.has_nan
    if op in ("isinf", "isposinf", "isneginf"):
        return f.has_inf
    return f.has_nan or f.has_inf


# -- peers ---------------------------------------------------------------------------------------

def ort_runner(x, op):
    """A function running the op in onnxruntime (opset 20) on `x`, writing into a preallocated
    output (IOBinding), or None where ORT cannot."""
    try:
        from onnx import TensorProto, helper
    except ImportError:
        return None
    onnx_type = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT,
                 "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
                 "float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
                 "float8_e5m2": TensorProto.FLOAT8E5M2, "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ
                 }.get(x.dtype.name)
    if onnx_type is None or op == "isfinite":
        return None
    attrs = {"isposinf": {"detect_negative": 0}, "isneginf": {"detect_positive": 0}}.get(op, {})
    node = helper.make_node("IsNaN" if op == "isnan" else "IsInf", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx_type, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    out = np.empty(x.shape, bool)
    try:
        run = ort_bound_run(ort_session(model), x, onnx_type, out)
        run()
    except Exception:
        return None
    if not np.array_equal(out, getattr(fpclass, op)(x)):
        raise SystemExit(f"{op} {x.dtype}: fpclass and onnxruntime disagree")
    return run


def torch_pair(x, op):
    """(fpclass, torch) functions answering the op for the same torch tensor over `x`'s memory:
    both into one preallocated mask where the table's torch expression takes out=, both
    allocating where it does not; None where torch cannot."""
    try:
        import torch
        t = tensor(x)
    except (ImportError, TypeError):
        return None
    mask = torch.empty(t.shape, dtype=torch.bool)
    ours = COMPARISONS[op]["fpclass"]
    if theirs := runner(op, "torch", x, out=mask):
        pair = (lambda: ours(t, out=mask)), theirs
    elif theirs := runner(op, "torch", x):
        pair = (lambda: ours(t)), theirs
    else:
        return None
    if not torch.equal(theirs(), ours(t)):
        raise SystemExit(f"{op} {x.dtype}: fpclass and torch disagree")
    return pair


# -- sections ------------------------------------------------------------------------------------

def operators_section(n, bw, quick):
    rows = []
    for name in FORMATS:
        dt = dtype_of(name)
        x = sample(dt, n)
        out = np.empty(n, bool)
        moved = x.nbytes + n
        for op in OPS:
            ours = COMPARISONS[op]["fpclass"]
            sides = {"fpclass": lambda: ours(x, out=out)}
            if np_op := runner(op, "numpy", x, out=out):
                sides["numpy"] = np_op
            if ort := ort_runner(x, op):
                sides["onnxruntime"] = ort
            if tch := torch_pair(x, op):
                sides["fpclass on the torch tensor"], sides["torch"] = tch
            t = dict(zip(sides, alternated(*sides.values(), repeat=3 if quick else 5)))
            t_fp = t["fpclass"]
            if reads_data(dt, op):
                share = (f"{100 * moved / t_fp / bw['copy_numpy']:.0f}%",
                         f"{100 * moved / t_fp / bw['copy']:.0f}%")
            else:
                share = ("no read", "no read")
            rows.append([name, op, f"{n / t_fp / 1e9:.2f}", f"{moved / t_fp / 1e9:.1f}", *share,
                         ratio(t_fp, t.get("numpy")), ratio(t_fp, t.get("onnxruntime")),
                         ratio(t.get("fpclass on the torch tensor"), t.get("torch"))])
        print(f"  {name} done", file=sys.stderr, flush=True)
    return table(["format", "op", "Gelem/s", "GB/s moved", "% np.copyto bw", "% 2-thread copy bw",
                  "vs numpy", "vs onnxruntime", "vs torch"], rows)


def call_overhead_section():
    x = np.ones(1024, np.float32)
    out = np.empty(1024, bool)
    loops = 20000

    def calls(fn):
        def run():
            for _ in range(loops):
                fn()
        return run
    rows = []
    for op in ("isnan", "isinf", "isfinite", "isposinf"):
        ours, numpy = COMPARISONS[op]["fpclass"], COMPARISONS[op]["numpy"]
        t_fp, t_np = (t / loops for t in alternated(calls(lambda: ours(x, out=out)),
                                                    calls(lambda: numpy(x, out=out)), repeat=3))
        rows.append([op, f"{t_fp * 1e6:.2f}", f"{t_np * 1e6:.2f}", f"{(t_fp - t_np) * 1e6:+.2f}"])
    return table(["1 Ki float32", "fpclass µs/call", "numpy µs/call", "difference µs"], rows)


def queries_section(n, bw, quick):
    rows = []
    for name in FORMATS:
        dt = dtype_of(name)
        x = sample(dt, n)
        fmt = fpclass.formats.format_of(dt)
        read_x = read_baseline(x.nbytes)
        with np.errstate(all="ignore"):
            t_nonfinite, t_read_nonfinite = paired_times(lambda: fpclass.any_nonfinite(x), read_x)
            peers = [runner("any_nan", "numpy", x)]
            if name in ("float64", "float32", "float16") and (bn_any := runner("any_nan", "bottleneck", x)):
                peers.append(bn_any)
            t_any, t_np_any, *t_bn = alternated(lambda: fpclass.any_nan(x), *peers, repeat=3 if quick else 5)
            t_bn = t_bn[0] if t_bn else None
            t_first = best_time(lambda: fpclass.first_nonfinite(x))
            t_hist, t_read_hist = paired_times(lambda: fpclass.class_counts(x), read_x)
            # numpy has no one-liner: the plain-numpy code is fpclass.twin's
            t_hist_np, t_np_hist = alternated(lambda: fpclass.class_counts(x), runner("class_counts", "numpy", x),
                                              repeat=1 if quick else 3)
            t_early = None
            if fmt.has_nan:
                early = x.copy()
                early[1000] = np.nan
                t_early = best_time(lambda: fpclass.any_nan(early), repeat=20)
        rows.append([name, f"{100 * t_read_nonfinite / t_nonfinite:.0f}%" if fmt.has_nan or fmt.has_inf
                     else "no read", ratio(t_any, t_np_any) if fmt.has_nan else "no read",
                     ratio(t_any, t_bn), "—" if t_early is None else f"{t_early * 1e6:.1f}",
                     f"{100 * t_read_hist / t_hist:.0f}%", ratio(t_hist_np, t_np_hist),
                     f"{t_first / t_nonfinite:.2f}" if fmt.has_nan or fmt.has_inf else "—"])
        print(f"  {name} queries done", file=sys.stderr, flush=True)
    return table(["format", "any_nonfinite % read bw", "any_nan vs numpy isnan().any()",
                  "any_nan vs bottleneck.anynan", "NaN at index 1000: µs", "class_counts % read bw",
                  "class_counts vs numpy", "first_nonfinite / any_nonfinite time"], rows)


def threads_section():
    """Why large arrays use several threads and small ones do not (threads.PARALLEL_MIN)."""
    from fpclass.kernels import threads
    rows = []
    default = threads.PARALLEL_MIN
    for n in (1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26):
        x = sample(np.dtype(np.float32), n)
        out = np.empty(n, bool)
        times = []
        for threshold in (1, 1 << 62):  # all threaded, all serial
            threads.PARALLEL_MIN = threshold
            times.append(best_time(lambda: fpclass.isnan(x, out=out), repeat=9))
        threads.PARALLEL_MIN = default
        rows.append([f"{n:,}", f"{times[1] * 1e3:.3f}", f"{times[0] * 1e3:.3f}", ratio(times[0], times[1]),
                     "threads" if n >= default else "one thread"])
    return table(["float32 isnan, elements", "one thread ms", "threads ms", "threads speed-up",
                  "fpclass uses"], rows)


def startup_section():
    code_import = "import time; t=time.perf_counter(); import fpclass; print(time.perf_counter()-t)"
    code_call = ("import numpy as np, fpclass, time; x=np.ones(8, np.float32); t=time.perf_counter(); "
                 "fpclass.isnan(x); fpclass.any_nan(x); fpclass.class_counts(x); print(time.perf_counter()-t)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        run = lambda code: float(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                                capture_output=True, text=True).stdout)
        t_import = min(run(code_import) for _ in range(3))
        cold = run(code_call)
        warm = min(run(code_call) for _ in range(2))
    return table(["startup (float32)", "seconds"], [["import fpclass", f"{t_import:.3f}"],
                                                    ["first isnan+any_nan+class_counts, empty cache", f"{cold:.2f}"],
                                                    ["same, in a new process with the cache", f"{warm:.3f}"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--elements", type=int, default=64 << 20)
    ap.add_argument("--quick", action="store_true", help="fewer repeats of the slow peers")
    args = ap.parse_args()
    bw = bandwidth()
    print(f"Baselines (same run): copy {bw['copy'] / 1e9:.1f} GB/s (read+write; np.copyto alone "
          f"{bw['copy_numpy'] / 1e9:.1f}), "
          f"read {bw['read'] / 1e9:.1f} GB/s; {args.elements} elements; numba threads "
          f"{__import__('numba').get_num_threads()}\n")
    print("### Element-wise operators\n")
    print(operators_section(args.elements, bw, args.quick), "\n")
    print("### Call overhead\n")
    print(call_overhead_section(), "\n")
    print("### Fused queries (clean data unless noted)\n")
    print(queries_section(args.elements, bw, args.quick), "\n")
    print("### Threads\n")
    print(threads_section(), "\n")
    print("### Startup\n")
    print(startup_section())


if __name__ == "__main__":
    main()
