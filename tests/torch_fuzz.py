"""Differential fuzzing of the PyTorch reader: seeds written by torch.save (zip and legacy
format), mutations that know their structure (pickle opcodes, globals, storage keys, shapes,
strides, offsets, zip members, legacy storage counts), and torch.load(weights_only=True) as the
reference, run in the same sandboxed child as the scan (address-space limit, alarm, no core
dumps). The reference and the worker are in torch_fuzz_reference.py, the supervisor is
fuzz_supervisor's. No tests here (see test_scan_fuzz_torch.py).

    python tests/torch_fuzz.py show INDEX [--seed S] [--out DIR]   # write one case's file

The promise checked per file: no crash, hang (SCAN_SECONDS) or blow-up (MEMORY_MB), no internal
error; never clean (exit 0) where the reference reads NaN/Inf; at exit 1, where the reference
loads and fpclass left nothing unchecked, the file's NaN/+Inf/-Inf totals equal the reference's
(with something unchecked, no count above the reference's).
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import random
import re
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import torch_fuzz_reference  # noqa: E402
from fuzz_cases import show_command  # noqa: E402
from fuzz_judge import promise_failures  # noqa: E402
from fuzz_supervisor import run_cases  # noqa: E402
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


def run(cases: list, workdir: str, warmup: list, workers: int = 2) -> tuple:
    """({case id: Outcome}, stats) for [(id, path, "torch")]."""
    return run_cases(cases, workdir, warmup, worker=torch_fuzz_reference.__file__,
                     workers=workers)


# ---------------------------------------------------------------------------------------------
# Judging one file.

def judge(o) -> tuple[list, list]:
    """([(failure kind, detail)], [(note kind, detail)])."""
    s, ref = o.scan, o.oracle
    fails, judged = promise_failures(o)
    if not judged:
        return fails, []
    notes = []
    code = s["exit"]
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["show"]:
        show_command("torch_fuzz.py", sys.argv[2:], make_case, write_case)
    else:
        sys.exit(__doc__)
