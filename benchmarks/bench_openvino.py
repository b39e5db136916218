"""fpclass.openvino vs the OpenVINO runtime (CPU) on a one-layer IR, 64 Mi elements.

    python benchmarks/bench_openvino.py [--elements N] [--repeat R]

Prints a table: per format and operator, the best wall time of each and the ratio (target >= 5x).
Inputs are random bit patterns with specials mixed in, so no branch predictor gets a free ride.
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np

import fpclass.openvino as fov
from common import best_time
from fpclass._optional import require

ov = require("openvino", "openvino", "bench_openvino (the OpenVINO runtime it compares with)")

FORMATS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
OPERATORS = {"IsInf": lambda b, x: b.is_inf(x), "IsFinite": lambda b, x: b.is_finite(x),
             "IsNaN": lambda b, x: b.is_nan(x)}


def one_layer_model(fmt: str, op: str, n: int) -> fov.Model:
    b = fov.Builder(f"{op}_{fmt}")
    b.result(OPERATORS[op](b, b.parameter("x", fmt, [n])), "y")
    return b.build()


def data(fmt: str, n: int) -> np.ndarray:
    dtype = np.dtype(FORMATS[fmt])
    x = np.frombuffer(np.random.default_rng(0).bytes(n * dtype.itemsize), dtype=dtype).copy()
    x[::97] = np.inf
    x[::101] = -np.inf
    return x


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=64 * 2**20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--operators", default="IsInf,IsFinite,IsNaN")
    args = parser.parse_args(argv)
    n, core = args.elements, ov.Core()
    print(f"{n} elements, best of {args.repeat}; OpenVINO {ov.__version__} CPU")
    print(f"{'format':7} {'operator':9} {'fpclass ms':>11} {'OpenVINO ms':>12} {'ratio':>7} "
          f"{'fpclass Gelem/s':>16}")
    for fmt in FORMATS:
        x = data(fmt, n)
        x_ov = ov.Tensor(x.view(np.uint16), [n], ov.Type.bf16) if fmt == "bf16" else x
        for op in args.operators.split(","):
            model = one_layer_model(fmt, op, n)
            request = core.compile_model(core.read_model(
                model.to_xml().encode(), ov.Tensor(np.empty(0, np.uint8))), "CPU").create_infer_request()
            ours = best_time(lambda: model.infer({"x": x}), args.repeat)
            theirs = best_time(lambda: request.infer({0: x_ov}), args.repeat)
            print(f"{fmt:7} {op:9} {ours * 1e3:11.1f} {theirs * 1e3:12.1f} {theirs / ours:6.1f}x "
                  f"{n / ours / 1e9:16.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
