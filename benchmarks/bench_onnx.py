"""ONNX IsNaN-20 / IsInf-20 on a one-node model: fpclass.onnx.Backend vs onnxruntime vs onnx.reference.

    .venv/bin/python benchmarks/bench_onnx.py            # 64 Mi elements
    .venv/bin/python benchmarks/bench_onnx.py --size 1M  # quicker

Prints best-of-N wall times and ratios (x = the peer's time / fpclass's time; above 1 fpclass is
faster). Targets: >= 1.0x onnxruntime; >= 10x onnx.reference on float16, bfloat16 and float8.
The three run in turn, the same number of times (common.alternated). Each answers into an array
that is already in memory or comes from the caller: onnxruntime through an IOBinding (input and
output OrtValues over NumPy arrays made before the clock starts; it writes the answer into the
preallocated output), fpclass into its recycled mask memory (no page faults), onnx.reference into
whatever NumPy allocates (it has no other path). Before timing, both onnxruntime's and
onnx.reference's answers are compared with fpclass's.
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import fpclass.onnx
from common import alternated, ort_bound_run, ort_session

DTYPES = {
    "float16": (np.dtype(np.float16), TensorProto.FLOAT16),
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), TensorProto.BFLOAT16),
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), TensorProto.FLOAT8E4M3FN),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), TensorProto.FLOAT8E5M2),
    "float32": (np.dtype(np.float32), TensorProto.FLOAT),
}
OPS = ("IsNaN", "IsInf")


def model(op: str, element_type: int):
    node = helper.make_node(op, ["x"], ["y"])
    graph = helper.make_graph([node], "bench", [helper.make_tensor_value_info("x", element_type, ["N"])],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL, ["N"])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    return m


def data(dtype: np.dtype, n: int) -> np.ndarray:
    """Random bit patterns: every class (finite, NaN, Inf) occurs, branch prediction gets no help."""
    words = np.random.default_rng(0).integers(0, 1 << (8 * dtype.itemsize), size=n,
                                              dtype=f"u{dtype.itemsize}")
    return words.view(dtype)


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().rstrip("i")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="64Mi", help="elements per tensor (e.g. 64Mi, 1M, 1000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each side, in turn")
    args = parser.parse_args(argv)
    n = parse_size(args.size)
    print(f"{n:,} elements, one-node opset-20 model, best of {args.repeat} each, alternated; "
          f"onnxruntime writes into a preallocated output (IOBinding)")
    header = f"{'dtype':<14}{'op':<7}{'fpclass ms':>11}{'ort ms':>9}{'ref ms':>10}{'vs ort':>9}{'vs ref':>9}"
    print(header)
    print("-" * len(header))
    for name, (dtype, element_type) in DTYPES.items():
        x = data(dtype, n)
        for op in OPS:
            m = model(op, element_type)
            rep = fpclass.onnx.Backend.prepare(m)
            ours = rep.run([x])[0]
            theirs = np.empty(n, bool)
            ort_run = ort_bound_run(ort_session(m), x, element_type, theirs)
            ort_run()
            if not np.array_equal(ours, theirs):
                raise SystemExit(f"{op} {name}: fpclass and onnxruntime disagree")
            reference = ReferenceEvaluator(m)
            with np.errstate(all="ignore"):
                if not np.array_equal(ours, reference.run(None, {"x": x})[0]):
                    raise SystemExit(f"{op} {name}: fpclass and onnx.reference disagree")
                t_fp, t_ort, t_ref = alternated(lambda: rep.run([x]), ort_run,
                                                lambda: reference.run(None, {"x": x}), repeat=args.repeat)
            print(f"{name:<14}{op:<7}{t_fp * 1e3:>11.1f}{t_ort * 1e3:>9.1f}{t_ref * 1e3:>10.1f}"
                  f"{t_ort / t_fp:>8.2f}x{t_ref / t_fp:>8.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
