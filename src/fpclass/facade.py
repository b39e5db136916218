"""The public functions: one table of implementations, one router in front of them.

NumPy input (and anything numpy.asarray takes) goes straight to the operators and queries; a
dask, torch, JAX / DLPack, xarray or pandas object goes to its adapter (`fpclass.adapters`),
which answers in the caller's container. The operators never know the adapters exist.
"""

from __future__ import annotations

import functools

import numpy as np

from .adapters import adapter_for
from .adapters.arrays import ELEMENTWISE, LOCATING, PER_AXIS
from .operators import elementwise, queries


def _public(impl):
    """`impl` behind the router: same name, signature and docstring."""
    name = impl.__name__

    @functools.wraps(impl)
    def public(x, *args, **kwargs):
        if type(x) is not np.ndarray:
            adapter = adapter_for(x)
            if adapter is not None:
                return adapter.dispatch(name, x, *args, **kwargs)
        return impl(x, *args, **kwargs)
    return public


#: Every public function by name, routed.
PUBLIC = {name: _public(getattr(elementwise if name in ELEMENTWISE else queries, name))
          for name in ELEMENTWISE + PER_AXIS + ("class_counts",) + LOCATING}

isnan, isinf, isfinite, isposinf, isneginf = (PUBLIC[n] for n in ELEMENTWISE)
any_nan, any_inf, any_nonfinite, all_finite, count_nan, count_inf, count_nonfinite = (
    PUBLIC[n] for n in PER_AXIS)
class_counts = PUBLIC["class_counts"]
first_nan, first_inf, first_nonfinite, locate_nan, locate_inf, locate_nonfinite = (
    PUBLIC[n] for n in LOCATING)
