"""fpclass.directml execute vs the core operators on the same packed data.

Rows: DML IS_INFINITY / IS_NAN on packed FLOAT32 and FLOAT16 buffers of 64 Mi elements against
fpclass.isinf / fpclass.isnan writing into a uint8 out= of the same memory. The descriptor layer
builds views over the caller's buffers, so the target is >= 0.9x the core.

    .venv/bin/python benchmarks/bench_directml.py [--elements N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import fpclass  # noqa: E402
import fpclass.directml as dml  # noqa: E402
from common import paired_times, table  # noqa: E402



def make_data(n: int, dtype) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32).astype(dtype)
    hits = rng.integers(0, n, n // 1000)
    x[hits[0::3]] = np.inf
    x[hits[1::3]] = -np.inf
    x[hits[2::3]] = np.nan
    return x


def rows(n: int, repeat: int):
    for type_name, dtype, data_type in (("FLOAT32", np.float32, dml.TensorDataType.FLOAT32),
                                         ("FLOAT16", np.float16, dml.TensorDataType.FLOAT16)):
        x = make_data(n, dtype)
        out = np.empty(n, np.uint8)
        source = dml.BufferTensorDesc(data_type, [n])
        target = dml.BufferTensorDesc(dml.TensorDataType.UINT8, [n])
        cases = (
            ("IS_INFINITY", dml.ElementWiseIsInfinityOperatorDesc(source, target),
             lambda: fpclass.isinf(x, out=out)),
            ("IS_NAN", dml.ElementWiseIsNanOperatorDesc(source, target), lambda: fpclass.isnan(x, out=out)),
        )
        for op_name, desc, core in cases:
            op = desc.create_operator()
            run = lambda: op.execute(x, out)  # noqa: E731
            core(), run()  # warm-up: kernels compile or load, pages fault in
            dml_s, core_s = paired_times(run, core, repeat)
            yield f"{op_name} {type_name}", core_s, dml_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=64 << 20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{args.elements} elements, best of {args.repeat}; ratio = core time / directml time "
          "(>= 0.9x is the target)")
    print(table(["operator", "core ms", "directml ms", "ratio"],
                [[name, f"{core_s * 1e3:.1f}", f"{dml_s * 1e3:.1f}", f"{core_s / dml_s:.2f}x"]
                 for name, core_s, dml_s in rows(args.elements, args.repeat)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
