"""Differential fuzzing of the PyTorch reader: seeds written by torch.save (zip and legacy
format), mutations that know their structure (pickle opcodes, globals, storage keys, shapes,
strides, offsets, zip members, legacy storage counts), and torch.load(weights_only=True) as the
reference, run in the same sandboxed child as the scan (address-space limit, alarm, no core
dumps). The supervisor is fuzz_supervisor's. No tests here (see test_scan_fuzz_torch.py).

    python tests/torch_fuzz.py show INDEX [--seed S] [--out DIR]   # write one case's file

The promise checked per file: no crash, hang (SCAN_SECONDS) or blow-up (MEMORY_MB), no internal
error; never clean (exit 0) where the reference reads NaN/Inf; at exit 1, where the reference
loads and fpclass left nothing unchecked, the file's NaN/+Inf/-Inf totals equal the reference's
(with something unchecked, no count above the reference's).
"""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import random
import re
import sys
import time
import warnings
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from fuzz_supervisor import (ADDRESS_SLACK, MEMORY_MB, ORACLE_SECONDS, SCAN_SECONDS,  # noqa: E402
                             peak_rss_mb, reset_peak, run_cases, status_mb, vm_bytes)
from torch_fuzz_mutations import (MUTATORS, STRS, enc_str, legacy_split, m_bytes,  # noqa: E402
                                  ops_of)

FMT = "torch"
NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------------------------
# Seeds: small checkpoints with planted NaN/±Inf (and clean ones), written by torch itself.

def _save(obj, legacy=False) -> bytes:
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return _stable_keys(buf.getvalue()) if legacy else buf.getvalue()


def _stable_keys(data: bytes) -> bytes:
    """A legacy file with its storage keys (memory addresses, new in every run) renamed "0",
    "1", ... in key-list order, so that a case is the same bytes in every run."""
    parts, rest = legacy_split(data)
    keys = pickle.loads(parts[4])  # a list of str: nothing to construct
    names = {k: str(i) for i, k in enumerate(keys)}
    for k in (3, 4):
        ops = [(op, arg, enc_str(names[arg]) if op in STRS and arg in names else raw)
               for op, arg, raw in ops_of(parts[k])]
        parts[k] = b"".join(raw for _, _, raw in ops)
    return b"".join(parts) + rest


def _planted():
    import torch
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 4, generator=g)
    w[0, 1], w[2, 3] = NAN, INF
    base = torch.randn(6, generator=g, dtype=torch.float64)
    base[4] = -INF
    h = torch.randn(8, generator=g).half()
    h[5] = -INF
    b = torch.randn(4, generator=g).bfloat16()
    b[0] = NAN
    c = torch.randn(3, generator=g, dtype=torch.complex64)
    c[1] = complex(NAN, 1.0)
    return collections.OrderedDict([
        ("w", w), ("wt", w.t()), ("tail", base[3:]), ("base", base), ("h", h), ("b", b),
        ("c", c), ("i", torch.arange(5)), ("every2", base[::2])])


def _clean():
    import torch
    g = torch.Generator().manual_seed(1)
    w = torch.randn(4, 4, generator=g)
    return collections.OrderedDict([("w", w), ("wt", w.t()), ("h", torch.randn(6, generator=g)
                                    .half()), ("n", torch.arange(3))])


def seeds() -> dict:
    """{seed name: file bytes}."""
    import torch
    planted, clean = _planted(), _clean()
    nested = {"model": planted, "opt": {"step": 3, "lr": 0.1, "buf": [planted["w"] * 2]},
              "p": torch.nn.Parameter(torch.tensor([1.0, INF]))}
    # What torch.load returns beyond plain tensors in containers (the pickle grammar's part):
    # Python floats, a tensor attribute, tensors in a set, as dict keys and in a Counter.
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    p.extra = torch.tensor([NAN])
    key = torch.tensor([-INF])
    grammar = {"best": NAN, "lr": INF, "p": p, "s": {torch.tensor([INF, 1.0])}, "k": {key: 1},
               "c": collections.Counter({torch.tensor([NAN, NAN]): 2}), "w": planted["w"]}
    return {
        "zip_planted": _save(planted), "zip_clean": _save(clean), "zip_nested": _save(nested),
        "legacy_planted": _save(planted, legacy=True), "legacy_clean": _save(clean, legacy=True),
        "legacy_nested": _save(nested, legacy=True), "zip_grammar": _save(grammar),
        "legacy_grammar": _save(grammar, legacy=True),
        "zip_grammar_floats": _save({"best": NAN, "w": clean["w"]}),
        "zip_grammar_attr": _save({"p": p}),
        "legacy_grammar_keys": _save({"k": {key: 1}, "w": clean["w"]}, legacy=True),
    }


# ---------------------------------------------------------------------------------------------
# Cases

@dataclass
class Case:
    index: int
    seed_name: str
    steps: list
    data: bytes

    @property
    def id(self) -> str:
        return f"{FMT}#{self.index}"


_SEEDS: dict = {}


def make_case(index: int, base_seed: int = 0) -> Case:
    """Case `index`: a seed and 1-3 mutations, deterministic in (base_seed, index)."""
    if not _SEEDS:
        _SEEDS.update(seeds())
    rng = random.Random(f"{base_seed}:{FMT}:{index}")
    seed_name = rng.choice(sorted(_SEEDS))
    data = _SEEDS[seed_name]
    steps = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        mutator = rng.choices([m for m, _ in MUTATORS], [w for _, w in MUTATORS])[0]
        try:
            data, what = mutator(rng, data)
            steps.append(f"{mutator.__name__}: {what}")
        except Exception as e:
            data, what = m_bytes(rng, data)
            steps.append(f"({mutator.__name__} n/a: {type(e).__name__}) {what}")
    return Case(index, seed_name, steps, data)


def write_case(case: Case, root: str) -> str:
    d = os.path.join(root, FMT)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{case.index}.pt")
    with open(path, "wb") as f:
        f.write(case.data)
    return path


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
# The worker (spawned by fuzz_supervisor.run_cases): scan, then the reference, per case.

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


def run(cases: list, workdir: str, warmup: list, workers: int = 2) -> tuple:
    """({case id: Outcome}, stats) for [(id, path, "torch")]."""
    return run_cases(cases, workdir, warmup, worker=os.path.abspath(__file__), workers=workers)


# ---------------------------------------------------------------------------------------------
# Judging one file.

def judge(o) -> tuple[list, list]:
    """([(failure kind, detail)], [(note kind, detail)])."""
    s, ref = o.scan, o.oracle
    if o.failure:
        return [("crash or hang", o.failure)], []
    if "raised" in s:
        return [("scan raised", s["raised"])], []
    fails, notes = [], []
    if s.get("maxrss_mb", 0) > MEMORY_MB:
        fails.append(("memory", f"peak RSS {s['maxrss_mb']:.0f} MB"))
    if s.get("seconds", 0) > SCAN_SECONDS:
        fails.append(("slow", f"{s['seconds']:.1f} s"))
    reasons = s["problems"] + [t[5] for t in s["tensors"]]
    internal = [r for r in reasons if r and "internal error" in r]
    if internal:
        fails.append(("internal error", internal[0]))
    code = s["exit"]
    if code not in (0, 1, 2):
        fails.append(("exit code", str(code)))
    ours = [sum(t[k] for t in s["tensors"]) for k in (2, 3, 4)]
    partial = bool(s["problems"]) or any(t[1] == "unchecked" for t in s["tensors"])
    if ref.get("ok") is None:
        notes.append((f"exit {code}, reference unavailable", ref.get("reason", "")))
        return fails, notes
    if ref["ok"] is False:
        notes.append((f"exit {code}, reference refuses", ref["reason"]))
        return fails, notes
    theirs = ref["counts"]
    if ref["unverified"]:
        notes.append(("reference holds uncounted objects", ", ".join(ref["unverified"][:3])))
    if code == 0 and sum(theirs) and not ref["unverified"]:
        fails.append(("clean but the reference reads NaN/Inf", f"reference {theirs}"))
    elif code == 0 and sum(theirs):
        fails.append(("clean but the reference reads NaN/Inf", f"reference {theirs} "
                      f"(and uncounted {ref['unverified'][:3]})"))
    elif code == 1 and not partial and not ref["unverified"] and ours != theirs:
        fails.append(("counts differ", f"fpclass {ours}, reference {theirs}"))
    elif code == 1 and any(a > b for a, b in zip(ours, theirs)):
        fails.append(("counts above the reference's", f"fpclass {ours}, reference {theirs}"))
    elif code == 2:
        first = (s["problems"] + [t[5] for t in s["tensors"] if t[1] == "unchecked"])[0:1]
        notes.append(("inconclusive, reference loads", first[0] if first else ""))
    return fails, notes


def failure_kind(cls: str, detail: str) -> str:
    gist = re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"", "X", detail))
    if cls in ("internal error", "scan raised"):
        return f"{cls}: {gist[:60]}"
    return cls


def _show(argv):
    import argparse
    p = argparse.ArgumentParser(prog="torch_fuzz.py show")
    p.add_argument("index", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    case = make_case(args.index, args.seed)
    path = write_case(case, args.out)
    print(f"{case.id} from seed {case.seed_name!r}:")
    for step in case.steps:
        print("  " + step)
    print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        _worker(sys.argv[2])
    elif sys.argv[1:2] == ["show"]:
        _show(sys.argv[2:])
    else:
        sys.exit(__doc__)
