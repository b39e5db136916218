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

import os
import time

import pytest

pytest.importorskip("zarr")
pytest.importorskip("astropy")

from fuzz_judge import print_table, tally  # noqa: E402
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

    def seed_failure(case_id, exit_code, o):
        if case_id in seed_ids and exit_code != (0 if "clean" in case_id else 1):
            return ("seed misjudged", f"exit {exit_code}: {o.scan}")
        return None

    table, failures, notes = tally(cases, outcomes, judge, seed_failure)

    print(f"\nzarr/FITS fuzz: base seed {BASE_SEED}, {CASES} cases per format, "
          f"{time.perf_counter() - start:.1f} s, worker restarts {len(stats['restarts'])}")
    print_table(FORMATS, table, notes)
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
