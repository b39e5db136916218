"""Optional dependencies: `require(module, extra)` imports one, or raises an ImportError that says
which fpclass extra installs it, through `install_hint`, the one wording of that advice. fpclass
is not on a package index, so the hint names the clone or wheel this copy was installed from
(pip's direct_url.json), or else both ways."""

from __future__ import annotations

import functools
import importlib
import json
import os
from urllib.parse import unquote, urlparse


@functools.lru_cache(maxsize=None)
def _installed_from() -> tuple:
    """(path, editable) of the clone or wheel pip installed fpclass from, or () when unknown
    (a copy on sys.path, an index, a path that is gone)."""
    try:
        from importlib.metadata import distribution
        info = json.loads(distribution("fpclass").read_text("direct_url.json") or "null")
        url = urlparse(info["url"])
        path = unquote(url.path)
        if url.scheme != "file" or not os.path.exists(path):
            return ()
        return path, bool(info.get("dir_info", {}).get("editable"))
    except Exception:   # no metadata, no direct_url.json, a form pip may change: the generic hint
        return ()


def install_hint(extra: str) -> str:
    """How to install the extra `extra`: from the clone or wheel fpclass came from, when pip
    recorded it, else from a clone or a wheel (fpclass is not on PyPI)."""
    where = _installed_from()
    if where:
        path, editable = where
        return (f"install the extra fpclass[{extra}]: pip install {'-e ' if editable else ''}"
                f"'{path}[{extra}]' (the {'clone' if os.path.isdir(path) else 'wheel'} "
                "fpclass was installed from)")
    return (f"install the extra fpclass[{extra}]: pip install -e '.[{extra}]' in a clone of "
            f"fpclass, or pip install 'WHEEL[{extra}]' with fpclass's wheel file (fpclass is not "
            "on PyPI)")


def require(module: str, extra: str, needed_by: str = "fpclass"):
    """`module` imported, or ImportError (ModuleNotFoundError when it is absent) naming `extra`,
    the extra that installs it, and what needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        # The cause stays in the message: an installed module can fail on its own import (a
        # broken dependency), and "install the extra" alone would then mislead.
        kind = ModuleNotFoundError if isinstance(e, ModuleNotFoundError) else ImportError
        raise kind(f"{needed_by} needs {module}, which cannot be imported ({e}): "
                   f"{install_hint(extra)}", name=module) from e
