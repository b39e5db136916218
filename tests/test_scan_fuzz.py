"""Structural fuzzing of `fpclass.scan`: seeded mutations of small files of every format, each
scanned in a child process under time and memory limits and compared with an independent reader.

The promise checked: no case crashes, hangs, passes MEMORY_MB or reports an internal error; no
case ends clean (exit 0) where the independent reader rejects the file; and where that reader
accepts it, every tensor fpclass checked has the reader's NaN/+Inf/-Inf counts, and none is
silently left out. fpclass may be stricter (unchecked with a reason): counted as a note.

    FPCLASS_FUZZ_CASES=2000 pytest tests/test_scan_fuzz.py -s   # a soak: cases per format
    FPCLASS_FUZZ_SEED=7                                        # another base seed
    python tests/fuzz_cases.py show npz 17                     # write one case's files

Needs onnx, safetensors, gguf (gguf-py) and ml_dtypes as independent readers.

The parts: fuzz_seeds_core.py (seed files), fuzz_mutations_*.py (byte-level and per-format
mutations), fuzz_cases.py (a case: a seed and its mutations; the `show` command),
fuzz_oracles_core.py (the independent readers and the worker script), fuzz_supervisor.py (child
processes, limits, the worker protocol) and fuzz_judge.py (the promise, case by case).
"""

import os
import time

import pytest

pytest.importorskip("onnx")
pytest.importorskip("safetensors")
pytest.importorskip("gguf")

import fuzz_oracles_core
from fuzz_cases import make_case, write_case
from fuzz_judge import judge, print_table, tally
from fuzz_seeds_core import FORMATS, MAIN, seeds
from fuzz_supervisor import run_cases

#: Cases per format in a normal run (under a minute on two cores); FPCLASS_FUZZ_CASES for more.
CASES = int(os.environ.get("FPCLASS_FUZZ_CASES", "500"))
BASE_SEED = int(os.environ.get("FPCLASS_FUZZ_SEED", "0"))


def _write_seeds(root):
    """Every seed file, unmutated: the workers' warm-up, and a first check of the oracles."""
    paths = []
    for fmt in FORMATS:
        for name, files in seeds(fmt).items():
            d = os.path.join(root, "seeds", fmt, name)
            os.makedirs(d)
            for fname, data in files.items():
                with open(os.path.join(d, fname), "wb") as f:
                    f.write(data)
            paths.append((f"{fmt}:{name}", os.path.join(d, MAIN[fmt]), fmt))
    return paths


def test_scan_fuzz(tmp_path):
    start = time.perf_counter()
    seed_cases = _write_seeds(str(tmp_path))
    cases, info = list(seed_cases), {}
    for fmt in FORMATS:
        for i in range(CASES):
            case = make_case(fmt, i, BASE_SEED)
            cases.append((case.id, write_case(case, str(tmp_path / "cases")), fmt))
            info[case.id] = case
    outcomes, stats = run_cases(cases, str(tmp_path), warmup=[p for _, p, _ in seed_cases],
                                worker=fuzz_oracles_core.__file__)

    def seed_failure(case_id, exit_code, o):
        # an unmutated seed: every one holds NaN/Inf or is clean, and both readers agree
        if case_id.split(":")[0] == fmt_of[case_id] and ":" in case_id and exit_code != 1 \
                and "clean" not in case_id:
            return ("seed not found", f"exit {exit_code}")
        return None

    fmt_of = {case_id: fmt for case_id, _, fmt in cases}
    table, failures, notes = tally(cases, outcomes, judge, seed_failure)

    print(f"\nscan fuzz: base seed {BASE_SEED}, {CASES} cases per format, "
          f"{time.perf_counter() - start:.1f} s, worker restarts {len(stats['restarts'])}, "
          f"warm worker RSS {stats['ready_rss_mb']} MB / address space {stats['ready_vms_mb']} MB")
    print_table(FORMATS, table, notes)
    for why in stats["restarts"]:
        print(f"  worker restarted after {why}")
    lines = []
    for (fmt, cls), found in sorted(failures.items()):
        case_id, detail = found[0]
        steps = "; ".join(info[case_id].steps) if case_id in info else "unmutated seed"
        seed = f"seed file {info[case_id].seed_name!r}, " if case_id in info else ""
        lines.append(f"{fmt}: {cls}: {len(found)} case(s); first {case_id} ({seed}{steps}): "
                     f"{detail}")
    if lines:
        print("failures:\n  " + "\n  ".join(lines))
    assert not lines, (f"{len(lines)} failure classes (rerun one with `python "
                       f"tests/fuzz_cases.py show FORMAT INDEX --seed {BASE_SEED}`):\n"
                       + "\n".join(lines))
