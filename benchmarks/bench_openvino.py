"""fpclass.openvino vs the OpenVINO runtime (CPU) on a one-layer IR, 64 Mi elements.

    python benchmarks/bench_openvino.py [--elements N] [--repeat R]

Prints a table: per format and operator, the best wall time of each and the ratio (target >= 5x).
Inputs are random bit patterns with specials mixed in, so no branch predictor gets a free ride.
The two run in turn, the same number of times (common.alternated). OpenVINO runs on its zero-copy
path: the input is an ov.Tensor over the NumPy array, the output an ov.Tensor over a preallocated
NumPy bool array (set_output_tensor), and infer(share_inputs=True, share_outputs=True), so it
copies neither way (its default infer() copies both: 1.4-1.5x the time on f32 and bf16 IsNaN
here).
fpclass.openvino's infer() has no out=; its masks come from recycled memory, so it page-faults no
new memory either. "agrees" compares the two answers: where OpenVINO's CPU plugin answers wrongly
(f64 ±Inf, subnormals in IsFinite: docs/openvino.md) it counts the elements that differ.
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np

import fpclass.openvino as fov
from common import alternated
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
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--operators", default="IsInf,IsFinite,IsNaN")
    args = parser.parse_args(argv)
    n, core = args.elements, ov.Core()
    print(f"{n} elements, best of {args.repeat} each, alternated; OpenVINO {ov.__version__} CPU, "
          "zero-copy input and preallocated output")
    print(f"{'format':7} {'operator':9} {'fpclass ms':>11} {'OpenVINO ms':>12} {'ratio':>7} "
          f"{'fpclass Gelem/s':>16}  agrees")
    for fmt in FORMATS:
        x = data(fmt, n)
        x_ov = (ov.Tensor(x.view(np.uint16), [n], ov.Type.bf16) if fmt == "bf16"
                else ov.Tensor(x, shared_memory=True))
        for op in args.operators.split(","):
            model = one_layer_model(fmt, op, n)
            request = core.compile_model(core.read_model(
                model.to_xml().encode(), ov.Tensor(np.empty(0, np.uint8))), "CPU").create_infer_request()
            theirs = np.empty(n, bool)
            request.set_output_tensor(0, ov.Tensor(theirs, shared_memory=True))
            run = lambda: request.infer({0: x_ov}, share_inputs=True, share_outputs=True)  # noqa: E731
            run()
            if request.get_output_tensor(0).data.ctypes.data != theirs.ctypes.data:
                raise SystemExit(f"{fmt} {op}: OpenVINO did not keep the preallocated output")
            differ = np.count_nonzero(model.infer({"x": x})[0] != theirs)
            ours, t_ov = alternated(lambda: model.infer({"x": x}), run, repeat=args.repeat)
            print(f"{fmt:7} {op:9} {ours * 1e3:11.1f} {t_ov * 1e3:12.1f} {t_ov / ours:6.1f}x "
                  f"{n / ours / 1e9:16.2f}  {'yes' if not differ else f'no: {differ} differ'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
