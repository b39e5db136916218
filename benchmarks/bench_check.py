"""fpclass.check on many tensors vs a Python loop of torch.isfinite(t).all(), and vs reading the
same number of bytes.

    python benchmarks/bench_check.py                 # 1,000 bf16 tensors (1 GiB) and 10,000 tiny ones
    python benchmarks/bench_check.py --gib 0.25 --tiny 2000

Each pair is timed alternately in the same run (common.paired_times: best of `--repeat`). torch
runs on its fastest honest path: inference mode, one isfinite().all() per tensor, its own threads.
"% read bw" compares with reading the tensors' own memory (a uint64 sum over all cores,
common.read_buffers_baseline); "% numpy read bw" with reading as many bytes of a NumPy array
(common.read_baseline), which the kernel allocates in huge pages and so reads faster than torch's
memory.
"""

from __future__ import annotations

import argparse
import os
import sys

import numba
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import paired_times, read_baseline, read_buffers_baseline, table  # noqa: E402

import fpclass  # noqa: E402


def torch_loop(tensors):
    def run():
        with torch.inference_mode():
            return all(bool(torch.isfinite(t).all()) for t in tensors)
    return run


def check(named):
    def run():
        return fpclass.check(named).exit_code
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gib", type=float, default=1.0, help="total size of the large tensors")
    ap.add_argument("--count", type=int, default=1000, help="how many large tensors")
    ap.add_argument("--tiny", type=int, default=10_000, help="how many tiny tensors")
    ap.add_argument("--tiny-elements", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    per = int(args.gib * (1 << 30)) // 2 // args.count
    large = {f"layers.{i}.weight": torch.randn(per, dtype=torch.bfloat16) for i in range(args.count)}
    nbytes = per * 2 * args.count
    tiny = {f"t{i}": torch.randn(args.tiny_elements, dtype=torch.bfloat16) for i in range(args.tiny)}
    assert fpclass.check(large).exit_code == 0 and fpclass.check(tiny).exit_code == 0

    print(f"{args.count} bf16 tensors of {per} elements ({nbytes / (1 << 30):.2f} GiB); "
          f"{args.tiny} tensors of {args.tiny_elements}; numba threads {numba.get_num_threads()}, "
          f"torch threads {torch.get_num_threads()}; best of {args.repeat}, alternated\n")
    rows = []
    same = read_buffers_baseline([t.data_ptr() for t in large.values()],
                                 [t.numel() * 2 for t in large.values()])
    t_check, t_torch = paired_times(check(large), torch_loop(large.values()), args.repeat)
    t_check2, t_read = paired_times(check(large), same, args.repeat)
    t_check3, t_numpy = paired_times(check(large), read_baseline(nbytes), args.repeat)
    rows.append([f"{args.count} × bf16, {nbytes / (1 << 30):.2f} GiB", f"{t_check * 1e3:.1f} ms",
                 f"{t_torch * 1e3:.1f} ms", f"{t_torch / t_check:.1f}×",
                 f"{t_read / t_check2:.0%}", f"{t_numpy / t_check3:.0%}",
                 f"{nbytes / t_check2 / 1e9:.1f}"])
    s_check, s_torch = paired_times(check(tiny), torch_loop(tiny.values()), args.repeat)
    rows.append([f"{args.tiny} × bf16[{args.tiny_elements}]", f"{s_check * 1e3:.1f} ms",
                 f"{s_torch * 1e3:.1f} ms", f"{s_torch / s_check:.1f}×", "—", "—", "—"])
    print(table(["tensors", "fpclass.check", "torch loop", "vs torch", "% read bw",
                 "% numpy read bw", "GB/s"], rows))
    print(f"\nPer tiny tensor: fpclass.check {s_check / args.tiny * 1e6:.2f} µs, "
          f"torch.isfinite(t).all() {s_torch / args.tiny * 1e6:.2f} µs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
