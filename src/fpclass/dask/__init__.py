"""fpclass on dask arrays: lazy operators and tree-reduced queries with the numpy answers.

    >>> import dask.array as da, numpy as np, fpclass.dask
    >>> x = da.from_array(np.array([1.0, np.nan, np.inf]), chunks=2)
    >>> fpclass.dask.any_nan(x).compute()   # fpclass.any_nan(x) gives the same lazy result
    np.True_
    >>> fpclass.dask.first_nonfinite(x).compute()
    (1,)

Importing this package does not import dask; calling an entry point without dask installed raises
ImportError naming the extra (fpclass[dask]).

The entry points are made from the one table of public functions (`fpclass.catalogue.KINDS`): each
has the NumPy function's signature and takes its arguments by it; all but the element-wise ones
add the keyword `split_every`, the fan-in of dask's tree of partial answers (None: dask's
default; 8 for locate_*). Inside dask's worker threads the kernels run single-threaded (see
`fpclass.kernels.threads`), so workers x threads never exceeds the cores.
"""

from __future__ import annotations

import importlib
import inspect

from .._optional import require
from ..catalogue import KIND, implementation, signature


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


#: Per kind of public function: the module and function that answer it lazily, called as
#: function(name, **arguments) with the arguments bound by the entry point's signature, and what
#: the answer is.
_IMPLEMENTATIONS = {
    "elementwise": ("operators", "blockwise", "a bool dask array with x's chunks (out= is refused: "
                    "dask arrays are immutable)"),
    "per_axis": ("reductions", "reduce", "a dask array (0-d for axis=None) of the NumPy answer's "
                 "dtype: each block answered by the NumPy query, the partial answers tree-reduced"),
    "histogram": ("reductions", "class_counts", "a dask Delayed computing to a fpclass.ClassCounts "
                  "(each block's counts, tree-summed)"),
    "first": ("locate", "first", "a dask Delayed computing to the global N-d index tuple of the "
              "first hit in C order, or None"),
    "locate": ("locate", "locate", "a dask Delayed computing to a (k, ndim) int64 array of global "
               "indices in C order"),
}

_SPLIT_EVERY = inspect.Parameter("split_every", inspect.Parameter.KEYWORD_ONLY, default=None)
_SPLIT_EVERY_DOC = ("split_every: how many partial answers dask merges per step of its tree "
                    "(None: dask's default; 8 for locate_*).")


def _entry_point(name: str):
    """fpclass.dask.`name`: the NumPy function's signature (plus `split_every` where partial
    answers are merged), its arguments handed by name to the implementation of its kind."""
    module, function, answer = _IMPLEMENTATIONS[KIND[name]]
    parameters = list(signature(name).parameters.values())
    if KIND[name] != "elementwise":
        parameters.append(_SPLIT_EVERY)
    own = inspect.Signature(parameters)

    def entry_point(x, *args, **kwargs):
        implement = getattr(_load(module), function)
        bound = own.bind(x, *args, **kwargs)
        bound.apply_defaults()
        return implement(name, **bound.arguments)

    entry_point.__name__ = entry_point.__qualname__ = name
    entry_point.__module__ = __name__
    entry_point.__signature__ = own
    contract = inspect.getdoc(implementation(name)).split("\n\n")[0]
    entry_point.__doc__ = "\n\n".join([f"Lazy fpclass.{name} of a dask array: {answer}.",
                                        f"fpclass.{name}: {contract}",
                                        *([_SPLIT_EVERY_DOC] if _SPLIT_EVERY in parameters else [])])
    return entry_point


#: Every public function by name, for dask arrays.
_PUBLIC = {name: _entry_point(name) for name in KIND}
globals().update(_PUBLIC)

__all__ = ["dispatch", "is_dask_collection", "scan", *_PUBLIC]


def scan(paths, scheduler_address, **options):
    """`fpclass scan` spread over a dask.distributed cluster; see fpclass.dask.distributed.scan."""
    return _load("distributed").scan(paths, scheduler_address, **options)
