#!/usr/bin/env python3
"""Bootstrap and run fpclass from a fresh clone with nothing but python3.

    python3 dev.py demo    scan the shipped example files (examples/)
    python3 dev.py test    run the whole test suite
    python3 dev.py bench   run the benchmarks (installs the bench extra, incl. torch==2.13.0 CPU)

Each command creates .venv on first use and (re)installs the package with the extras it needs
whenever pyproject.toml changes.
"""

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
EXTRAS = {"demo": "cli,hdf5", "test": "test,cli,dask", "bench": "test,cli,dask,bench"}


def ensure_env(extras: str) -> None:
    """Create .venv and install fpclass[extras] unless that exact install is already there."""
    if not PY.exists():
        print(f"creating {VENV.name} ...", flush=True)
        venv.create(VENV, with_pip=True)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    stamp = VENV / f".installed-{extras.replace(',', '-')}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"installing fpclass[{extras}] into {VENV.name} ...", flush=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-e", f"{ROOT}[{extras}]"], check=True)
    stamp.write_text(digest)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__.strip())
        return 2
    command, rest = argv[0], argv[1:]
    ensure_env(EXTRAS[command])
    if command == "demo":
        run = [str(PY), "-m", "fpclass", "scan", "examples", *rest]
    elif command == "test":
        run = [str(PY), "-m", "pytest", *rest]
    else:
        run = [str(PY), str(ROOT / "benchmarks" / "run_all.py"), *rest]
    return subprocess.run(run, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
