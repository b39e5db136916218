"""Wheels of installed distributions, packed again from the running environment's files, so that a
test can let pip install fpclass into a fresh virtual environment with no index (pre-commit's hook
environment): PIP_NO_INDEX plus PIP_FIND_LINKS at the folder made here. No tests here."""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """A wheel of the installed `dist` in `folder`: its files below site-packages (scripts are
    made again from entry_points.txt), its metadata, a new RECORD, the tag of its WHEEL file."""
    info = next(f for f in dist.files if f.parts[0].endswith(".dist-info"))
    info_dir = info.parts[0]
    wheel_text = dist.read_text("WHEEL") or "Wheel-Version: 1.0\nTag: py3-none-any\n"
    tag = re.search(r"^Tag: (\S+)$", wheel_text, re.M).group(1)
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    path = folder / f"{name}-{dist.version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as whl:
        for f in dist.files:
            text = str(f)
            if f.parts[0] == ".." or "__pycache__" in f.parts or f.parts[0] == info_dir and \
                    f.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            source = Path(dist.locate_file(f))
            if not source.is_file():
                continue
            data = source.read_bytes()
            whl.writestr(text, data)
            record.append(_record_line(text, data))
        record.append(f"{info_dir}/RECORD,,")
        whl.writestr(f"{info_dir}/RECORD", "\n".join(record) + "\n")
    return path


def closure(requirements) -> list:
    """The installed distributions `requirements` (strings) need, with theirs, markers evaluated
    for this interpreter (extras left out)."""
    seen: dict = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[key] = dist
        todo += [Requirement(r) for r in dist.requires or ()]
    return list(seen.values())


def build(requirements, folder: Path) -> Path:
    """A folder of wheels of `requirements` and everything they need, from this environment."""
    folder.mkdir(parents=True, exist_ok=True)
    for dist in closure(requirements):
        repack(dist, folder)
    return folder
