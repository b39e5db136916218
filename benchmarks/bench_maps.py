"""What gathering density maps costs (`fpclass scan --html`, `scan(..., maps=True)`): one float32
.npy of --mib MiB per finding density, page cache warm, scanned with and without maps in the same
run (alternated, best of --repeat). A chunk without findings costs nothing more; a chunk with
findings is binned once more from cache, so the cost follows how many chunks hold findings and
how many findings they hold.

    python benchmarks/bench_maps.py [--mib 512] [--repeat 3] [--threads N]

No target (the issue sets none); the table says what --html adds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import alternated, table  # noqa: E402

#: name -> fraction of values that are NaN / +Inf / -Inf (a third each, at random); "all NaN":
#: every value NaN (a diverged tensor), "all, mixed": every value non-finite, classes at random
DENSITIES = {"clean": 0.0, "1e-6": 1e-6, "1e-3": 1e-3, "1e-2": 1e-2, "all NaN": None,
             "all, mixed": 1.0}


def write(path: str, n: int, density: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n, dtype=np.float32)
    if density is None:
        a[:] = np.nan
    elif density >= 1.0:
        a[:] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), n)
    elif density > 0:
        where = rng.choice(n, max(1, int(n * density)), replace=False)
        a[where] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), where.size)
    side = 1 << 12
    np.save(path, a.reshape(-1, side))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    from fpclass.scan import scan
    n = (args.mib << 20) // 4 // (1 << 12) * (1 << 12)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for k, (name, density) in enumerate(DENSITIES.items()):
            path = os.path.join(d, f"{k}.npy")
            write(path, n, density, k)
            plain, mapped = alternated(lambda: scan(path, threads=args.threads),
                                       lambda: scan(path, threads=args.threads, maps=True),
                                       repeat=args.repeat)
            gib = n * 4 / (1 << 30)
            rows.append([name, f"{gib / plain:.2f}", f"{gib / mapped:.2f}",
                         f"{plain / mapped:.0%}"])
            os.remove(path)
    print(f"float32 .npy of {args.mib} MiB, page cache warm, threads={args.threads or 'all'}")
    print(table(["findings", "scan GiB/s", "scan with maps GiB/s", "maps / scan"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
