"""The parallel warm-up: units compiled in worker processes, each into its own private numba
cache (seeded with what the real cache holds), merged into the real cache when all are done
(kernels/cache_merge.py says why two processes must never write one cache).

Units that share word widths share most compiled kernels (float16 and bfloat16 both run the
uint16 kernels; the threaded kernels call the serial ones), so units are handed out in groups of
one word width, the largest groups first, each to the least loaded worker.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..kernels import cache_merge, compile_cache

#: Rough compile CPU seconds of one word width's units (serial and threaded; measured in one
#: process on a quiet 2-core machine, the first group with numba's start-up), to balance the
#: workers; the codecs and density units are groups of their own.
_GROUP_SECONDS = {1: 21.7, 2: 20.3, 4: 20.0, 8: 19.3, "codecs": 1.5, "density": 3.7}


def _group_of(unit) -> object:
    name, _ = unit
    if name in ("codecs", "density"):
        return name
    import ml_dtypes
    dtype = np.dtype(getattr(ml_dtypes, name, name))
    return dtype.itemsize // (2 if dtype.kind == "c" else 1)


def assign(todo: list, workers: int) -> list:
    """`todo` split into at most `workers` lists of units, whole groups each, balanced."""
    groups: dict = {}
    for u in todo:
        groups.setdefault(_group_of(u), []).append(u)
    shares = [[] for _ in range(max(1, workers))]
    load = [0.0] * len(shares)
    for key in sorted(groups, key=lambda k: -_GROUP_SECONDS.get(k, 10.0)):
        k = load.index(min(load))
        shares[k] += groups[key]
        load[k] += _GROUP_SECONDS.get(key, 10.0)
    return [s for s in shares if s]


def compile_in_workers(todo: list, workers: int, progress=None) -> int:
    """Compile `todo` in up to `workers` processes, then merge their caches into the real one
    (the caller holds compile_cache.warmup_lock). Returns the entries merged. RuntimeError naming
    the worker's error if one fails (nothing of it is merged)."""
    target = compile_cache.cache_dir()
    shares = assign(todo, workers)
    worker_cpu_seconds.clear()
    lines: queue.Queue = queue.Queue()
    with tempfile.TemporaryDirectory(prefix="fpclass-warmup-") as scratch:
        procs = []
        for k, share in enumerate(shares):
            private = Path(scratch) / f"worker{k}"
            _seed(target, private / compile_cache.cache_subpath())
            procs.append(_start(share, private, Path(scratch) / f"worker{k}.err"))
        for p in procs:
            threading.Thread(target=_read, args=(p, lines), daemon=True).start()
        done = ended = 0
        while ended < len(procs):
            item = lines.get()
            if item is None:
                ended += 1
                continue
            done += 1
            if progress is not None:
                progress(done, len(todo), tuple(item[:2]), item[2])
        failed = [_last_line(Path(scratch) / f"worker{k}.err") or f"exit status {p.returncode}"
                  for k, p in enumerate(procs) if _wait(p) != 0]
        if failed or done < len(todo):
            raise RuntimeError("a warm-up worker failed: " + "; ".join(failed or ["no answer"]))
        return sum(cache_merge.merge_into(Path(scratch) / f"worker{k}", target)
                   for k in range(len(procs)))


#: The CPU seconds (user + system) of each worker of the last compile_in_workers, for the
#: benchmark: on a busy machine the workers' CPU time, not the wall time, shows the balance.
worker_cpu_seconds: list = []


def _wait(proc: subprocess.Popen) -> int:
    """proc's exit status, its CPU time appended to worker_cpu_seconds (os.wait4 where there)."""
    if hasattr(os, "wait4") and proc.returncode is None:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        worker_cpu_seconds.append(usage.ru_utime + usage.ru_stime)
    return proc.wait()


def _seed(real: Path, private: Path) -> None:
    """The private cache starts with the real cache's entries, so a worker loads what is there."""
    private.mkdir(parents=True)
    if real.is_dir():
        for f in real.iterdir():
            if f.suffix in (".nbi", ".nbc"):
                shutil.copy2(f, private / f.name)


def _start(share: list, private: Path, errors: Path) -> subprocess.Popen:
    src = str(Path(__file__).resolve().parents[2])  # the folder fpclass was imported from
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(private), compile_cache.ENV: "inline",
           "PYTHONPATH": src if not path else src + os.pathsep + path}
    code = "import sys; from fpclass.operators.warmup import work; work(sys.argv[1])"
    with open(errors, "wb") as err:
        return subprocess.Popen([sys.executable, "-c", code, json.dumps(share)], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                text=True)


def _read(proc: subprocess.Popen, lines: queue.Queue) -> None:
    """Each unit the worker reports, then None when its output ends."""
    try:
        for line in proc.stdout:
            try:
                lines.put(json.loads(line))
            except ValueError:
                pass
    finally:
        lines.put(None)


def _last_line(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return text.splitlines()[-1] if text else ""
