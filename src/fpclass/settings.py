"""Settings of `fpclass scan` from a `[tool.fpclass]` table in pyproject.toml: the nearest
pyproject.toml holding one, upward from the scanned paths (as ruff finds its settings), or the
file `--config` names. Options given on the command line win over the file."""

from __future__ import annotations

import os
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from .results.report import parse_fail_on

TABLE = "tool.fpclass"
FILE_NAME = "pyproject.toml"

#: Key in [tool.fpclass] -> (the scan option's argparse dest, its default).
OPTIONS = {
    "fail-on": ("fail_on", "nan,inf"),
    "max-locations": ("max_locations", 5),
    "include": ("include", []),
    "exclude": ("exclude", []),
    "allow-global": ("allow_globals", []),
}


def _table(path: str) -> dict | None:
    """The [tool.fpclass] table of the TOML file at `path`, or None when it has none."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    table = doc.get("tool", {}).get("fpclass") if isinstance(doc.get("tool"), dict) else None
    if table is not None and not isinstance(table, dict):
        raise ValueError(f"{path}: [{TABLE}] must be a table")
    return table


def find(paths) -> str | None:
    """The nearest pyproject.toml with a [tool.fpclass] table in the directory holding all of
    `paths` or one above it; None when there is none."""
    dirs = []
    for p in paths:
        p = os.path.abspath(os.fspath(p))
        dirs.append(p if os.path.isdir(p) else os.path.dirname(p))
    if not dirs:
        return None
    here = os.path.commonpath(dirs)
    while True:
        candidate = os.path.join(here, FILE_NAME)
        if os.path.isfile(candidate) and _table(candidate) is not None:
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _strings(path: str, key: str, value) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{path}: [{TABLE}] {key} must be a list of strings, got {value!r}")
    return list(value)


def read(path: str) -> dict:
    """The scan options of the [tool.fpclass] table of `path`, by argparse dest; ValueError naming
    the file and the key for an unknown key or a value of the wrong kind."""
    table = _table(path)
    if table is None:
        raise ValueError(f"{path}: no [{TABLE}] table")
    out = {}
    for key, value in table.items():
        if key not in OPTIONS:
            raise ValueError(f"{path}: unknown key {key!r} in [{TABLE}]; accepted: "
                             + ", ".join(OPTIONS))
        dest = OPTIONS[key][0]
        if key == "fail-on":
            if isinstance(value, str):
                value = value.split(",")
            value = ",".join(_strings(path, key, value))
            try:
                parse_fail_on(value)
            except ValueError as e:
                raise ValueError(f"{path}: [{TABLE}] fail-on: {e}") from None
        elif key == "max-locations":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{path}: [{TABLE}] max-locations must be an integer >= 0, "
                                 f"got {value!r}")
        else:
            value = _strings(path, key, value)
        out[dest] = value
    return out


def apply(args, paths, config: str | None = None, use_config: bool = True) -> str | None:
    """Fill each option `args` leaves None from the settings file (`config`, else the one find()
    gives, unless not `use_config`), else from its default; return the file read, or None."""
    source = None
    values: dict = {}
    if config is not None:
        if not os.path.isfile(config):
            raise ValueError(f"--config {config}: no such file")
        source = config
    elif use_config:
        source = find(paths)
    if source is not None:
        values = read(source)
    for dest, default in OPTIONS.values():
        if getattr(args, dest, None) is None:
            value = values.get(dest, default)
            setattr(args, dest, list(value) if isinstance(value, list) else value)
    return source
