#!/usr/bin/env python3
"""Run every benchmark script in one go and write docs/benchmarks.md from their output.

    python3 dev.py bench            # all of them (several minutes; needs the bench extra)
    python3 dev.py bench --only core,onnx
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = {  # name -> (script, arguments)
    "core": ("bench_core.py", []),
    "queries": ("bench_queries.py", []),
    "layouts": ("bench_layouts.py", []),
    "axes": ("bench_axes.py", []),
    "onnx": ("bench_onnx.py", []),
    "openvino": ("bench_openvino.py", []),
    "directml": ("bench_directml.py", []),
    "scan": ("bench_scan.py", ["--size-gib", "4"]),
    "scan-formats": ("bench_scan_formats.py", []),
    "scan-memory": ("bench_scan_formats.py", ["--memory", "--mib", "2048", "--only", "pt,h5,zarr"]),
    "startup": ("bench_startup.py", []),
    "dask": ("bench_dask.py", ["--gib", "8"]),
    "dask-memory": ("bench_dask.py", ["--gib", "8", "--source", "memory"]),
    "check": ("bench_check.py", []),
    "watch": ("bench_watch.py", ["--threads", "1"]),
    "callbacks": ("bench_callbacks.py", ["--threads", "1"]),
    "maps": ("bench_maps.py", []),
    "verify": ("bench_verify.py", []),
    "remote": ("bench_remote.py", ["--size-mib", "1024"]),
    "remote-memory": ("bench_remote.py", ["--size-mib", "4096", "--only", "scan", "--repeat", "1"]),
}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


NOTES = """How to read these tables: "% np.copyto bw" compares bytes read + written per second with
numpy copying a buffer on one thread (the issue's baseline); "% 2-thread copy bw" with a numba copy
over both cores, the stricter ceiling. "no read" rows are formats that cannot hold the asked value:
the format table answers without touching the data. Ratios "N×" are peer time / fpclass time.
"% read bw" in the queries table compares with reading the same bytes (a uint64 sum over both
cores), timed alternately with the query, since this machine's bandwidth drifts from minute to minute.
fpclass and every peer it is compared with run in turn, the same number of times (best of each), on
each side's no-copy, preallocated-output path where its API has one: numpy's `out=`, onnxruntime's
IOBinding, OpenVINO's shared input and output tensors, torch's `out=`; where a peer must allocate
its answer (torch's isinf / isfinite, onnx.reference), fpclass allocates its answer too. fpclass.onnx
and fpclass.openvino take no `out=`: their masks come from recycled memory, which faults in no pages.
"""


def _sections(text: str) -> dict[str, str]:
    """The '## name' sections of an earlier docs/benchmarks.md, by name (only names of SCRIPTS
    start a section: a script's own output may hold '## ' lines too)."""
    found, name, lines = {}, None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("## ") and line[3:].strip() in SCRIPTS:
            if name:
                found[name] = "".join(lines)
            name, lines = line[3:].strip(), [line]
        elif name:
            lines.append(line)
    if name:
        found[name] = "".join(lines)
    # one blank line between sections, however many an earlier write left
    return {n: text.rstrip("\n") + "\n" for n, text in found.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", default=",".join(SCRIPTS), help="comma-separated: " + ",".join(SCRIPTS))
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    out = Path(args.out)
    # A partial run replaces its own sections and keeps the others (each names its command/date).
    sections = _sections(out.read_text()) if out.exists() and set(names) != set(SCRIPTS) else {}
    failed = 0
    for name in names:
        script, extra = SCRIPTS[name]
        print(f"== {name}", file=sys.stderr, flush=True)
        run = subprocess.run([sys.executable, str(HERE / script), *extra], capture_output=True, text=True)
        sys.stderr.write(run.stderr[-2000:])
        body = run.stdout.strip() if run.returncode == 0 else f"(failed with exit {run.returncode})"
        failed += run.returncode != 0
        command = " ".join(["python", f"benchmarks/{script}", *extra])
        sections[name] = f"## {name}\n\n`{command}` on {datetime.date.today()}\n\n{body}\n"
    header = (
        "# Benchmarks\n\n"
        f"Made by `python3 dev.py bench` (all sections, or `--only NAME,...` for some) on a machine with "
        f"{os.cpu_count()} cores ({cpu_name()}), Python {platform.python_version()}. Every ratio "
        "compares timings taken in the same run; the machine's copy and read bandwidth are measured "
        "in that run too.\n\n" + NOTES)
    ordered = [sections[n] for n in SCRIPTS if n in sections]
    out.write_text("\n".join([header] + ordered))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
