"""The reference of tests/torch_fuzz.py, torch.load(weights_only=True) with every NaN/+Inf/-Inf of
what it returns counted, and its worker script: fuzz_supervisor.run_cases starts `python
tests/torch_fuzz_reference.py worker BATCH`, which scans each case and loads it with torch in one
sandboxed child (address-space limit, alarm, no core dumps). Its loop is its own, not
fuzz_supervisor.serve: a scan is charged from the RSS of a worker without torch imported, the
reference answers in its own shape ({"counts": ...}), and the worker restarts above 3 x MEMORY_MB."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

from fuzz_supervisor import (ADDRESS_SLACK, MEMORY_MB, ORACLE_SECONDS, peak_rss_mb, reset_peak,
                             status_mb, vm_bytes)


# ---------------------------------------------------------------------------------------------
# The reference: torch.load(weights_only=True), every NaN/+Inf/-Inf of what it returns.

def reference(path: str) -> dict:
    """{"ok": True, "counts": [nan, +inf, -inf], "unverified": [type names]} or
    {"ok": False, "reason": ...} when torch refuses the file."""
    import torch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:
        return {"ok": False, "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                if str(e) else type(e).__name__}
    counts, unverified = count_values(obj)
    return {"ok": True, "counts": counts, "unverified": unverified}


def count_values(obj) -> tuple:
    """([nan, +inf, -inf], [type names not counted]) of every value reachable from `obj`:
    tensors (each time it is reached), Python floats and complex numbers, NumPy arrays; containers
    are walked once each."""
    import numpy as np
    import torch
    total = [0, 0, 0]
    unverified = []
    seen: set = set()
    stack = [obj]

    def add(c):
        for k in range(3):
            total[k] += c[k]

    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            add(tensor_counts(o, unverified))
            extra = getattr(o, "__dict__", None)
            if extra:
                stack.append(dict(extra))
        elif isinstance(o, bool) or o is None or isinstance(o, (int, str, bytes, bytearray)):
            continue
        elif isinstance(o, (float, complex)):
            add(_counts_np(np.asarray(o)))
        elif isinstance(o, (dict, list, tuple, set, frozenset)):
            if id(o) in seen:
                continue
            seen.add(id(o))
            stack.extend(list(o.keys()) + list(o.values()) if isinstance(o, dict) else list(o))
        elif isinstance(o, np.ndarray) or isinstance(o, np.generic):
            add(_counts_np(np.asarray(o)))
        elif isinstance(o, torch.storage.TypedStorage):
            t = torch.tensor([], dtype=o.dtype).set_(o._untyped_storage) if o.dtype not in (
                torch.quint8, torch.qint8, torch.qint32) else torch.tensor([], dtype=torch.uint8)
            add(tensor_counts(t, unverified))
        elif isinstance(o, (torch.UntypedStorage, torch.dtype, torch.device, torch.layout,
                            torch.memory_format)):
            continue
        else:
            unverified.append(type(o).__name__)
    return total, unverified


def tensor_counts(t, unverified) -> list:
    import torch
    if t.device.type == "meta":
        return [0, 0, 0]
    if t.is_quantized:
        scales = (torch.tensor([t.q_scale()], dtype=torch.float64)
                  if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric)
                  else t.q_per_channel_scales())
        return tensor_counts(scales, unverified)
    if t.layout != torch.strided:
        if t.layout == torch.sparse_coo:
            return tensor_counts(t._values(), unverified)
        unverified.append(f"tensor layout {t.layout}")
        return [0, 0, 0]
    if getattr(t, "is_nested", False):
        unverified.append("nested tensor")
        return [0, 0, 0]
    if t.dtype.is_complex:
        t = torch.view_as_real(t.resolve_conj().resolve_neg())
    elif not t.dtype.is_floating_point:
        return [0, 0, 0]
    x = t.resolve_neg().to(torch.float64)
    return [int(torch.isnan(x).sum()), int(torch.isposinf(x).sum()), int(torch.isneginf(x).sum())]


def _counts_np(a) -> list:
    import numpy as np
    if a.dtype.kind == "c":
        parts = [a.real, a.imag]
    elif a.dtype.kind == "f":
        parts = [a]
    else:
        return [0, 0, 0]
    out = [0, 0, 0]
    for p in parts:
        p = p.astype(np.float64)
        out[0] += int(np.isnan(p).sum())
        out[1] += int(np.isposinf(p).sum())
        out[2] += int(np.isneginf(p).sum())
    return out


# ---------------------------------------------------------------------------------------------
# The worker: scan, then the reference, per case.

def _worker(batch_file: str) -> None:
    import resource
    import signal

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def say(**msg):
        proto.write(json.dumps(msg) + "\n")

    with open(batch_file) as f:
        batch = json.load(f)
    from fpclass.scan import scan
    for path in batch["warmup"]:
        scan([path])
    warm = status_mb("VmRSS")  # what an fpclass-only worker holds: scans are charged from here
    reference(batch["warmup"][0])  # imports torch
    vms = vm_bytes()
    resource.setrlimit(resource.RLIMIT_AS, (vms + ADDRESS_SLACK, vms + ADDRESS_SLACK))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    say(ready=True, vms_mb=vms / 2 ** 20, rss_mb=warm)
    resets = reset_peak()

    class Timeout(Exception):
        pass

    def alarm(*_):
        raise Timeout

    signal.signal(signal.SIGALRM, alarm)
    for case_id, path, _ in batch["cases"]:
        say(id=case_id, phase="scan")
        reset_peak()
        before = status_mb("VmRSS")
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                report = scan([path])
                out = {"exit": int(report.exit_code),
                       "tensors": [[r.name, r.status, r.nan, r.posinf, r.neginf, r.reason]
                                   for r in report.tensors],
                       "problems": [p.reason for p in report.problems]}
            except BaseException as e:
                out = {"raised": f"{type(e).__name__}: {e}"}
        out.update(seconds=time.perf_counter() - t,
                   maxrss_mb=warm + peak_rss_mb() - before if resets else peak_rss_mb())
        say(id=case_id, scan=out)
        say(id=case_id, phase="oracle")
        signal.setitimer(signal.ITIMER_REAL, ORACLE_SECONDS)
        try:
            ref = reference(path)
        except Timeout:
            ref = {"ok": None, "reason": f"reference ran past {ORACLE_SECONDS} s"}
        except BaseException as e:
            ref = {"ok": None, "reason": f"reference raised {type(e).__name__}: {e}"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        say(id=case_id, oracle=ref)
        if peak_rss_mb() > 3 * MEMORY_MB and not resets:
            say(restart=f"{case_id}: peak RSS {peak_rss_mb():.0f} MB")
            return


if __name__ == "__main__":
    if sys.argv[1:2] != ["worker"]:
        sys.exit(__doc__)
    _worker(sys.argv[2])
