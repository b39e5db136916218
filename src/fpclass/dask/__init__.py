"""fpclass on dask arrays: lazy operators and tree-reduced queries with the numpy answers.

    >>> import dask.array as da, numpy as np, fpclass.dask
    >>> x = da.from_array(np.array([1.0, np.nan, np.inf]), chunks=2)
    >>> fpclass.dask.any_nan(x).compute()   # fpclass.any_nan(x) gives the same lazy result
    np.True_
    >>> fpclass.dask.first_nonfinite(x).compute()
    (1,)

Importing this package does not import dask; calling an entry point without dask installed raises
ImportError naming the extra (fpclass[dask]). Inside dask's worker threads the
kernels run single-threaded (see `fpclass.kernels.threads`), so workers x threads never
exceeds the cores.
"""

from __future__ import annotations

import importlib

from .._optional import require


def _load(module: str):
    # the dependency check: our modules import dask.array unguarded
    require("dask.array", "dask", "fpclass.dask")
    return importlib.import_module(f"{__name__}.{module}")


def is_dask_collection(x) -> bool:
    """True for any dask object (checked by module name, so dask is never imported to answer)."""
    return type(x).__module__.partition(".")[0] in ("dask", "distributed")


def dispatch(name: str, x, *args, **kwargs):
    """The dask implementation of the top-level fpclass function `name` applied to `x`, or
    NotImplemented if `x` is not a dask object (the caller then takes the numpy path)."""
    if not is_dask_collection(x):
        return NotImplemented
    target = _PUBLIC.get(name)
    if target is None:
        raise TypeError(f"fpclass.{name} does not accept dask input")
    return target(x, *args, **kwargs)


# -- element-wise operators: lazy dask arrays with the chunks of x -----------------------------

def isnan(x, out=None):
    """Lazy fpclass.isnan of a dask array: a bool dask array with the same chunks."""
    return _load("operators").isnan(x, out)


def isinf(x, out=None, *, detect_negative=True, detect_positive=True):
    """Lazy fpclass.isinf of a dask array (ONNX / OpenVINO sign attributes), same chunks."""
    return _load("operators").isinf(x, out, detect_negative=detect_negative,
                                    detect_positive=detect_positive)


def isfinite(x, out=None):
    """Lazy fpclass.isfinite of a dask array, same chunks."""
    return _load("operators").isfinite(x, out)


def isposinf(x, out=None):
    """Lazy fpclass.isposinf of a dask array, same chunks."""
    return _load("operators").isposinf(x, out)


def isneginf(x, out=None):
    """Lazy fpclass.isneginf of a dask array, same chunks."""
    return _load("operators").isneginf(x, out)


# -- reductions: lazy 0-d (axis=None) or n-d dask arrays, tree-reduced -------------------------

def any_nan(x, axis=None, keepdims=False, *, split_every=None):
    """Lazy fpclass.any_nan: a bool dask array (0-d for axis=None). Empty input gives False."""
    return _load("reductions").any_nan(x, axis, keepdims, split_every=split_every)


def any_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True,
            split_every=None):
    """Lazy fpclass.any_inf for the selected signs."""
    return _load("reductions").any_inf(x, axis, keepdims, detect_negative=detect_negative,
                                       detect_positive=detect_positive, split_every=split_every)


def any_nonfinite(x, axis=None, keepdims=False, *, split_every=None):
    """Lazy fpclass.any_nonfinite. Empty input gives False."""
    return _load("reductions").any_nonfinite(x, axis, keepdims, split_every=split_every)


def all_finite(x, axis=None, keepdims=False, *, split_every=None):
    """Lazy fpclass.all_finite. Empty input gives True."""
    return _load("reductions").all_finite(x, axis, keepdims, split_every=split_every)


def count_nan(x, axis=None, keepdims=False, *, split_every=None):
    """Lazy fpclass.count_nan: an int64 dask array. Empty input gives 0."""
    return _load("reductions").count_nan(x, axis, keepdims, split_every=split_every)


def count_inf(x, axis=None, keepdims=False, *, detect_negative=True, detect_positive=True,
              split_every=None):
    """Lazy fpclass.count_inf for the selected signs: an int64 dask array."""
    return _load("reductions").count_inf(x, axis, keepdims, detect_negative=detect_negative,
                                         detect_positive=detect_positive, split_every=split_every)


def count_nonfinite(x, axis=None, keepdims=False, *, split_every=None):
    """Lazy fpclass.count_nonfinite: an int64 dask array."""
    return _load("reductions").count_nonfinite(x, axis, keepdims, split_every=split_every)


def class_counts(x, *, split_every=None):
    """Lazy fpclass.class_counts: a dask Delayed whose .compute() is a fpclass.ClassCounts."""
    return _load("reductions").class_counts(x, split_every=split_every)


# -- locate: dask Delayed results with global indices ------------------------------------------

def first_nan(x, *, split_every=None):
    """Lazy fpclass.first_nan: a Delayed computing to the global N-d index tuple, or None."""
    return _load("locate").first_nan(x, split_every=split_every)


def first_inf(x, *, detect_negative=True, detect_positive=True, split_every=None):
    """Lazy fpclass.first_inf: a Delayed computing to the global N-d index tuple, or None."""
    return _load("locate").first_inf(x, detect_negative=detect_negative,
                                     detect_positive=detect_positive, split_every=split_every)


def first_nonfinite(x, *, split_every=None):
    """Lazy fpclass.first_nonfinite: a Delayed computing to the global N-d index tuple, or None."""
    return _load("locate").first_nonfinite(x, split_every=split_every)


def locate_nan(x, limit=None, *, split_every=None):
    """Lazy fpclass.locate_nan: a Delayed computing to a (k, ndim) int64 array in C order."""
    return _load("locate").locate_nan(x, limit, split_every=split_every)


def locate_inf(x, limit=None, *, detect_negative=True, detect_positive=True, split_every=None):
    """Lazy fpclass.locate_inf: a Delayed computing to a (k, ndim) int64 array in C order."""
    return _load("locate").locate_inf(x, limit, detect_negative=detect_negative,
                                      detect_positive=detect_positive, split_every=split_every)


def locate_nonfinite(x, limit=None, *, split_every=None):
    """Lazy fpclass.locate_nonfinite: a Delayed computing to a (k, ndim) int64 array in C order."""
    return _load("locate").locate_nonfinite(x, limit, split_every=split_every)


_PUBLIC = {f.__name__: f for f in (
    isnan, isinf, isfinite, isposinf, isneginf, any_nan, any_inf, any_nonfinite, all_finite,
    count_nan, count_inf, count_nonfinite, class_counts, first_nan, first_inf, first_nonfinite,
    locate_nan, locate_inf, locate_nonfinite)}

__all__ = ["dispatch", "is_dask_collection", "scan", *_PUBLIC]


def scan(paths, scheduler_address, **options):
    """`fpclass scan` spread over a dask.distributed cluster; see fpclass.dask.distributed.scan."""
    return _load("distributed").scan(paths, scheduler_address, **options)
