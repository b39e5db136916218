"""Differential fuzzing of the PyTorch reader against torch.load(weights_only=True) (see
torch_fuzz.py): seeded, deterministic mutations of zip and legacy checkpoints, each scanned and
loaded in a sandboxed child process.

    FPCLASS_TORCH_FUZZ_CASES=3000 pytest tests/test_scan_fuzz_torch.py -s   # a soak
    FPCLASS_FUZZ_SEED=7                                                    # another base seed
    python tests/torch_fuzz.py show 17                                     # write one case
"""

import collections
import os
import time

import pytest

torch = pytest.importorskip("torch")

import torch_fuzz  # noqa: E402

#: Cases in a normal run (about 10 s on two cores); FPCLASS_TORCH_FUZZ_CASES for more.
CASES = int(os.environ.get("FPCLASS_TORCH_FUZZ_CASES", "1500"))
BASE_SEED = int(os.environ.get("FPCLASS_FUZZ_SEED", "0"))

def _run(tmp_path):
    seed_cases = []
    for name, data in torch_fuzz.seeds().items():
        path = tmp_path / "seeds" / f"{name}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        seed_cases.append((f"seed:{name}", str(path), torch_fuzz.FMT))
    cases, info = list(seed_cases), {}
    for i in range(CASES):
        case = torch_fuzz.make_case(i, BASE_SEED)
        cases.append((case.id, torch_fuzz.write_case(case, str(tmp_path / "cases")),
                      torch_fuzz.FMT))
        info[case.id] = case
    outcomes, stats = torch_fuzz.run(cases, str(tmp_path), [p for _, p, _ in seed_cases])
    return cases, info, outcomes, stats


def test_scan_fuzz_torch(tmp_path):
    start = time.perf_counter()
    cases, info, outcomes, stats = _run(tmp_path)
    table = collections.Counter()
    failures = collections.defaultdict(list)
    notes = collections.Counter()
    for case_id, _, _ in cases:
        o = outcomes.get(case_id)
        assert o is not None, f"{case_id}: no outcome"
        table["cases"] += 1
        table[{0: "clean", 1: "found", 2: "inconclusive"}.get(o.scan.get("exit"), "other")] += 1
        fails, case_notes = torch_fuzz.judge(o)
        if case_id.startswith("seed:") and o.scan.get("exit") != (0 if "clean" in case_id else 1):
            fails = fails or [("seed misread", f"exit {o.scan.get('exit')}")]
        for cls, detail in fails:
            failures[torch_fuzz.failure_kind(cls, detail)].append((case_id, detail))
        for cls, _ in case_notes:
            notes[cls] += 1
    print(f"\ntorch fuzz: base seed {BASE_SEED}, {CASES} cases, "
          f"{time.perf_counter() - start:.1f} s, worker restarts {len(stats['restarts'])}; "
          f"{dict(table)}")
    for cls, n in sorted(notes.items()):
        print(f"  note: {cls}: {n}")
    lines = []
    for kind, found in sorted(failures.items()):
        case_id, detail = found[0]
        steps = "; ".join(info[case_id].steps) if case_id in info else "unmutated seed"
        seed = f"seed {info[case_id].seed_name!r}, " if case_id in info else ""
        lines.append(f"{kind}: {len(found)} case(s); first {case_id} ({seed}{steps}): {detail}")
        print("  FAIL " + lines[-1])
    assert not lines, (f"{len(lines)} failure kinds (rerun one with `python tests/torch_fuzz.py "
                       f"show INDEX --seed {BASE_SEED}`):\n" + "\n".join(lines))
