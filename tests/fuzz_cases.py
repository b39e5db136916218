"""Cases of the core fuzzer (tests/test_scan_fuzz.py): a seed file of one format and 1-3 mutations,
structural (format-aware) or byte-level.

    python tests/fuzz_cases.py show FORMAT INDEX [--seed S] [--out DIR]   # one case's files

A case is (base seed, format, index): the same triple always gives the same bytes."""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass

from fuzz_mutations_bytes import GENERIC
from fuzz_mutations_gguf import GGUF
from fuzz_mutations_headers import NPY, SAFETENSORS
from fuzz_mutations_onnx import ONNX
from fuzz_mutations_zip import NPZ
from fuzz_seeds_core import FORMATS, MAIN, seeds


#: Each format's structural mutators, with their weights.
STRUCTURAL = {"safetensors": SAFETENSORS, "npy": NPY, "npz": NPZ, "onnx": ONNX, "gguf": GGUF}


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


_SEEDS: dict = {}


def make_case(fmt: str, index: int, base_seed: int = 0) -> Case:
    """Case `index` of `fmt`: a seed and 1-3 mutations, deterministic in (base_seed, fmt, index).
    Structural mutations that cannot parse what an earlier step left fall back to byte-level ones."""
    if fmt not in _SEEDS:
        _SEEDS[fmt] = seeds(fmt)
    rng = random.Random(f"{base_seed}:{fmt}:{index}")
    seed_name = rng.choice(sorted(_SEEDS[fmt]))
    files = dict(_SEEDS[fmt][seed_name])
    structural = STRUCTURAL[fmt]
    steps = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        if rng.random() < 0.7:
            mutator = rng.choices([m for m, _ in structural], [w for _, w in structural])[0]
        else:
            mutator = rng.choice(GENERIC)
        try:
            steps.append(mutator(rng, files, fmt))
        except Exception as e:
            fallback = rng.choice(GENERIC)
            steps.append(f"({mutator.__name__} n/a: {type(e).__name__}) " + fallback(rng, files, fmt))
    return Case(fmt, index, seed_name, steps, files)


def write_case(case: Case, root: str) -> str:
    """Writes the case's files into root/FORMAT/INDEX/ and returns the main file's path."""
    d = os.path.join(root, case.fmt, str(case.index))
    os.makedirs(d, exist_ok=True)
    for name, data in case.files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return os.path.join(d, MAIN[case.fmt])


def show_command(prog: str, argv, make, write, formats=None) -> None:
    """`python PROG show [FORMAT] INDEX [--seed S] [--out DIR]` for any fuzzer: writes one case's
    files (`make(fmt, index, seed)`, or `make(index, seed)` without `formats`; `write(case, dir)`
    gives its main path) and prints its id, seed file and mutation steps."""
    import argparse
    p = argparse.ArgumentParser(prog=f"{prog} show")
    if formats is not None:
        p.add_argument("fmt", choices=formats)
    p.add_argument("index", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    case = (make(args.fmt, args.index, args.seed) if formats is not None
            else make(args.index, args.seed))
    path = write(case, args.out)
    print(f"{case.id} from seed file {case.seed_name!r}:")
    for step in case.steps:
        print("  " + step)
    print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["show"]:
        show_command("fuzz_cases.py", sys.argv[2:], make_case, write_case, FORMATS)
    else:
        sys.exit(__doc__)
