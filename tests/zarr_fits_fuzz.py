"""Structural fuzzing of `fpclass.scan` on zarr stores (v2 and v3) and FITS files: seed files
written by zarr and astropy with planted NaN/±Inf (scaled FITS data, blanks, attributes, arrays
below folders without group metadata), seeded mutations that know each format's structure, and
zarr / astropy as the independent readers: the cases (a seed and its mutations) and the
`show` command. The seeds are in zarr_fits_seeds.py, the mutations in zarr_fits_mutations.py;
the supervisor and the worker protocol are fuzz_supervisor.py's, the judge builds on
fuzz_judge.py.

    python tests/zarr_fits_fuzz.py show FORMAT INDEX [--seed S] [--out DIR]   # one case's files

A case is (base seed, format, index): the same triple always gives the same bytes.

The oracles, the judge and the worker script are in tests/zarr_fits_oracles.py.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import fuzz_supervisor  # noqa: E402
from fuzz_cases import show_command  # noqa: E402
import zarr_fits_oracles  # noqa: E402
from zarr_fits_mutations import MUTATORS  # noqa: E402
from zarr_fits_oracles import FORMATS, judge  # noqa: E402,F401  (the test imports both here)
from zarr_fits_seeds import MAIN, seeds  # noqa: E402,F401  (the test imports seeds here)


@dataclass
class Case:
    fmt: str
    index: int
    seed_name: str
    steps: list
    files: dict

    @property
    def id(self) -> str:
        return f"{self.fmt}#{self.index}"


def make_case(fmt: str, index: int, base_seed: int = 0) -> Case:
    rng = random.Random(f"{base_seed}:{fmt}:{index}")
    name = rng.choice(sorted(seeds(fmt)))
    files = dict(seeds(fmt)[name])
    steps = []
    table = MUTATORS[fmt]
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutator = rng.choices([m for m, _ in table], [w for _, w in table])[0]
        try:
            steps.append(mutator(rng, files, fmt))
        except Exception as e:  # a mutation that does not fit this seed: noted, nothing done
            steps.append(f"({mutator.__name__} n/a: {type(e).__name__})")
    return Case(fmt, index, name, steps, files)


def write_case(case: Case, root: str) -> str:
    d = os.path.join(root, case.fmt, str(case.index))
    return write_files(case.files, d, case.fmt)


def write_files(files: dict, d: str, fmt: str) -> str:
    for name, data in files.items():
        p = os.path.join(d, *name.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    main = os.path.join(d, MAIN[fmt])
    os.makedirs(main, exist_ok=True) if fmt == "zarr" else None
    return main


def run_cases(cases, workdir, warmup, workers=2):
    """fuzz_supervisor.run_cases with zarr_fits_oracles.py as the worker script."""
    return fuzz_supervisor.run_cases(cases, workdir, warmup, worker=zarr_fits_oracles.__file__,
                                     workers=workers)


if __name__ == "__main__":
    if sys.argv[1:2] == ["show"]:
        show_command("zarr_fits_fuzz.py", sys.argv[2:], make_case, write_case, FORMATS)
    else:
        sys.exit(__doc__)
