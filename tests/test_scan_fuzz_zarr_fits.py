"""Structural fuzzing of `fpclass.scan` on zarr stores (v2, v3) and FITS files, judged against
zarr and astropy (tests/zarr_fits_fuzz.py): seeded mutations of small files, each scanned in a
child process under time and memory limits.

The promise checked: no case crashes, hangs, passes the memory limit or reports an internal
error; no case ends clean (exit 0) where the reference reads NaN/Inf or rejects the file; where
the reference reads the file, every tensor fpclass checked has the reference's counts (blanks
as missing), and none is left out or called not applicable while holding NaN/Inf.

    FPCLASS_FUZZ_ZF_CASES=2000 pytest tests/test_scan_fuzz_zarr_fits.py -s   # a soak
    FPCLASS_FUZZ_SEED=7                                                      # another seed
    python tests/zarr_fits_fuzz.py show fits 17                              # one case's files
"""

import collections
import os
import time

import pytest

pytest.importorskip("zarr")
pytest.importorskip("astropy")

from fuzz_judge import failure_kind  # noqa: E402
from zarr_fits_fuzz import FORMATS, judge, make_case, run_cases, seeds, write_files  # noqa: E402

#: Cases per format in a normal run (about 20 s on two idle cores); FPCLASS_FUZZ_ZF_CASES for more.
CASES = int(os.environ.get("FPCLASS_FUZZ_ZF_CASES", "150"))
BASE_SEED = int(os.environ.get("FPCLASS_FUZZ_SEED", "0"))


def test_scan_fuzz_zarr_fits(tmp_path):
    start = time.perf_counter()
    cases, info, seed_ids = [], {}, set()
    for fmt in FORMATS:
        for name, files in seeds(fmt).items():
            case_id = f"{fmt}:{name}"
            cases.append((case_id, write_files(files, str(tmp_path / "seeds" / fmt / name), fmt),
                          fmt))
            seed_ids.add(case_id)
    warmup = [p for _, p, _ in cases]
    for fmt in FORMATS:
        for i in range(CASES):
            case = make_case(fmt, i, BASE_SEED)
            cases.append((case.id, write_files(case.files, str(tmp_path / "cases" / fmt / str(i)),
                                               fmt), fmt))
            info[case.id] = case
    outcomes, stats = run_cases(cases, str(tmp_path), warmup)

    table = collections.defaultdict(collections.Counter)
    failures, notes = collections.defaultdict(list), collections.Counter()
    for case_id, _, fmt in cases:
        o = outcomes.get(case_id)
        assert o is not None, f"{case_id}: no outcome"
        row = table[fmt]
        row["cases"] += 1
        exit_code = o.scan.get("exit")
        row[{0: "clean", 1: "found", 2: "inconclusive"}.get(exit_code, "other")] += 1
        fails, case_notes = judge(case_id, o)
        if case_id in seed_ids and exit_code != (0 if "clean" in case_id else 1):
            fails = fails or [("seed misjudged", f"exit {exit_code}: {o.scan}")]
        for cls, detail in fails:
            row["failures"] += 1
            failures[(fmt, failure_kind(cls, detail))].append((case_id, detail))
        for cls, _ in case_notes:
            notes[(fmt, cls)] += 1

    print(f"\nzarr/FITS fuzz: base seed {BASE_SEED}, {CASES} cases per format, "
          f"{time.perf_counter() - start:.1f} s, worker restarts {len(stats['restarts'])}")
    print(f"{'format':<8} {'cases':>6} {'clean':>6} {'found':>6} {'inconcl.':>8} {'failures':>8}")
    for fmt in FORMATS:
        r = table[fmt]
        print(f"{fmt:<8} {r['cases']:>6} {r['clean']:>6} {r['found']:>6} {r['inconclusive']:>8} "
              f"{r['failures']:>8}")
    for (fmt, cls), n in sorted(notes.items()):
        print(f"  note {fmt} {cls}: {n}")
    lines = []
    for (fmt, cls), found in sorted(failures.items()):
        case_id, detail = found[0]
        steps = "; ".join(info[case_id].steps) if case_id in info else "unmutated seed"
        lines.append(f"{fmt}: {cls}: {len(found)} case(s); first {case_id} ({steps}): {detail}")
    if lines:
        print("failures:\n  " + "\n  ".join(lines))
    assert not lines, (f"{len(lines)} failure classes (rerun one with `python "
                       f"tests/zarr_fits_fuzz.py show FORMAT INDEX --seed {BASE_SEED}`):\n"
                       + "\n".join(lines))
