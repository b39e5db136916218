"""fpclass: exact, memory-speed NaN / Inf / finite classification for every floating-point format.

    >>> import fpclass, numpy as np
    >>> fpclass.isnan(np.array([1.0, np.nan]))
    array([False,  True])
"""

from typing import TYPE_CHECKING

from . import formats
from .facade import (
    all_finite, any_inf, any_nan, any_nonfinite, class_counts, count_inf, count_nan, count_nonfinite,
    first_inf, first_nan, first_nonfinite, isfinite, isinf, isnan, isneginf, isposinf, locate_inf,
    locate_nan, locate_nonfinite,
)
from ._version import __version__
from .counts import ClassCounts
from .kernels.threads import get_num_threads, set_num_threads
from .operators.outputs import release_idle as release_idle_masks


#: Public subpackages and modules loaded on first attribute access (PEP 562), so that
#: `import fpclass` stays light and imports no optional extra: `fpclass.scan.scan(...)` works
#: after a plain `import fpclass`.
#: (Not in __all__: a star import would load them all.)
_SUBMODULES = ("dask", "dialects", "directml", "onnx", "openvino", "results", "scan", "torch")

if TYPE_CHECKING:  # what type checkers see; at run time each is loaded by __getattr__
    from . import dask, dialects, directml, onnx, openvino, results, scan, torch  # noqa: F401
    from .checking import check  # noqa: F401


def __getattr__(name: str):
    # fpclass.check imports the scan's report types: loaded on first use, not with fpclass
    if name == "check":
        from .checking import check
        return check
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'fpclass' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_SUBMODULES) | {"check"})


__all__ = [
    "ClassCounts", "all_finite", "any_inf", "any_nan", "any_nonfinite", "check", "class_counts",
    "count_inf", "count_nan", "count_nonfinite", "first_inf", "first_nan", "first_nonfinite",
    "formats", "get_num_threads", "isfinite", "isinf", "isnan", "isneginf", "isposinf",
    "locate_inf", "locate_nan", "locate_nonfinite", "release_idle_masks", "set_num_threads",
]
