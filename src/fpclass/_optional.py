"""Optional dependencies: `require(module, extra)` imports one, or raises an ImportError that says
which fpclass extra installs it. fpclass is not on a package index, so the message also gives the
command that works from a clone."""

from __future__ import annotations

import importlib


def install_hint(extra: str) -> str:
    """How to install fpclass[extra]: from a wheel or an index, and from a clone."""
    return f"install fpclass[{extra}] (pip install '.[{extra}]' from a clone)"


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
