"""Differential fuzzing of `fpclass.scan` on NetCDF classic, NetCDF-4 and HDF5 files
(tests/cf_fuzz.py): random small files with CF attributes, packed variables, float attributes,
chunking and filters, some with changed header bytes, each scanned in a child process under time
and memory limits and compared with netCDF4 (default auto mask and scale) and h5py.

The promise checked: no crash, hang, memory blow-up or internal error; never clean (exit 0) where
the reference reads NaN/Inf or rejects the file; exact counts for every variable and attribute
fpclass checked; never "not applicable" where the reference reads NaN/Inf.

    FPCLASS_CF_FUZZ_CASES=2000 pytest tests/test_scan_fuzz_cf.py -s   # a soak: cases per format
    FPCLASS_CF_FUZZ_SEED=7                                           # another base seed
    python tests/cf_fuzz.py show nc4 17                              # write one case's file
"""

import os
import time

import numpy as np
import pytest

pytest.importorskip("h5py")
pytest.importorskip("netCDF4")

from cf_fuzz import FORMATS, INF, NAN, judge, make_case, run_cases  # noqa: E402
from fuzz_judge import print_table, tally  # noqa: E402

#: Cases per format in a normal run; FPCLASS_CF_FUZZ_CASES for more.
CASES = int(os.environ.get("FPCLASS_CF_FUZZ_CASES", "150"))
BASE_SEED = int(os.environ.get("FPCLASS_CF_FUZZ_SEED", "0"))


def warmup_files(root: str) -> list:
    """Files the workers scan before the clock starts, so that each kernel the cases need (every
    float type, packed and masked values) is compiled then, not inside a case's time limit."""
    import h5py
    import netCDF4
    os.makedirs(root, exist_ok=True)
    h5, nc = os.path.join(root, "warm.h5"), os.path.join(root, "warm.nc")
    with h5py.File(h5, "w") as f:
        for dt in ["<f2", "<f4", ">f4", "<f8", ">f8", "<c8", "<c16"]:
            f.create_dataset(dt, data=np.array([1, NAN, INF], "f8").astype(dt))
            f.create_dataset("chunked" + dt, data=np.ones((4, 4), dt), chunks=(2, 2),
                             compression="gzip", shuffle=True)
        f.attrs["a"] = np.array([NAN], "f4")
    with netCDF4.Dataset(nc, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 3)
        for i, (dt, scale) in enumerate([("i2", "f4"), ("i4", "f4"), ("i1", "f8"), ("f4", "f8"),
                                         ("f4", None), ("f8", None)]):
            v = ds.createVariable(f"v{i}", dt, ("x",))
            v.set_auto_maskandscale(False)
            if scale:
                v.scale_factor = np.array(NAN, scale)
            else:
                v.valid_max = np.array(1, dt)
            v[:] = np.array([1, 2, 3], dt)
    # The first is also what the oracles warm up on: netCDF4 crashes (SIGSEGV) opening h5.
    return [nc, h5]


def test_scan_fuzz_cf(tmp_path):
    start = time.perf_counter()
    cases, steps = [], {}
    for fmt in FORMATS:
        for i in range(CASES):
            case_id, path, case_steps = make_case(fmt, i, str(tmp_path / "cases"), BASE_SEED)
            cases.append((case_id, path, fmt))
            steps[case_id] = case_steps
    warmup = warmup_files(str(tmp_path / "warmup")) + [path for _, path, _ in cases[::CASES]]
    outcomes, stats = run_cases(cases, str(tmp_path), warmup)

    table, failures, notes = tally(cases, outcomes, judge)

    print(f"\ncf scan fuzz: base seed {BASE_SEED}, {CASES} cases per format, "
          f"{time.perf_counter() - start:.1f} s, worker restarts {len(stats['restarts'])}")
    print_table(FORMATS, table, notes)
    lines = []
    for (fmt, cls), found in sorted(failures.items()):
        case_id, detail = found[0]
        lines.append(f"{fmt}: {cls}: {len(found)} case(s); first {case_id} "
                     f"({'; '.join(steps[case_id])}): {detail}")
    if lines:
        print("failures:\n  " + "\n  ".join(lines))
    assert not lines, (f"{len(lines)} failure classes (rerun one with `python tests/cf_fuzz.py "
                       f"show FORMAT INDEX --seed {BASE_SEED}`):\n" + "\n".join(lines))
