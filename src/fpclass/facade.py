"""The public functions: one table of them, one router in front of them.

`catalogue.KINDS` is the one list of the public functions (re-exported here). NumPy input (and anything numpy.asarray takes)
goes straight to the operator or query of the same name; a dask, torch, JAX / DLPack, xarray or
pandas object goes to its adapter (`fpclass.adapters`, `fpclass.dask`), which answers in the
caller's container, binding the arguments by the NumPy function's signature
(`catalogue.arguments`). The operators never know the adapters exist, and the adapters never
import this module (an xarray object's data is routed by `adapters.route`).
"""

from __future__ import annotations

import functools

import numpy as np

from .adapters import adapter_for
from .catalogue import ELEMENTWISE, KIND, KINDS, LOCATING, PER_AXIS, arguments, implementation
from .kernels import numpy_bits
from .operators import elementwise

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


__all__ = ["KINDS", "KIND", "ELEMENTWISE", "PER_AXIS", "LOCATING", "PUBLIC", "arguments",
           "implementation", *KIND]


def _public_small(impl, fast, answer):
    """`impl` behind the router, with the small-input answer inlined for a plain ndarray and no
    other argument: at ten elements the calls between here and NumPy are most of the cost.
    `answer(hit)` turns the operator's mask (from `fast`, an elementwise.SmallPath) into the result;
    the same mask and result the full path gives (tests/test_first_contact.py)."""
    name = impl.__name__
    by_dtype, bits, limit = fast.by_dtype, numpy_bits, elementwise.SMALL_ELEMENTS

    @functools.wraps(impl)
    def public(x, *args, **kwargs):
        if type(x) is np.ndarray:
            if not args and not kwargs and x.nbytes <= bits.SMALL_BYTES and x.size <= limit:
                entry = by_dtype.get(id(x.dtype))
                if entry is not None and entry.dtype is x.dtype and entry.one_call is not None:
                    return answer(entry.one_call(x))
        else:
            adapter = adapter_for(x)
            if adapter is not None:
                return adapter.dispatch(name, x, *args, **kwargs)
        return impl(x, *args, **kwargs)
    return public


def _same(hit):
    return hit


def _count(hit):
    return int(np.count_nonzero(hit))  # a Python int, as the full path gives


def _count_not(hit):
    return hit.size - int(np.count_nonzero(hit))


#: The small-input answers: (the operator whose mask it reads, how the mask becomes the answer).
_SMALL = {"isnan": (elementwise.SMALL_NAN, _same), "isinf": (elementwise.SMALL_INF, _same),
          "isfinite": (elementwise.SMALL_FINITE, _same),
          "any_nan": (elementwise.SMALL_NAN, lambda hit: hit.any()),
          "all_finite": (elementwise.SMALL_FINITE, lambda hit: hit.all()),
          "count_nan": (elementwise.SMALL_NAN, _count),
          "count_nonfinite": (elementwise.SMALL_FINITE, _count_not)}


def _route(name):
    impl = implementation(name)
    return _public_small(impl, *_SMALL[name]) if name in _SMALL else _public(impl)


#: Every public function by name, routed.
PUBLIC = {name: _route(name) for name in KIND}

isnan, isinf, isfinite, isposinf, isneginf = (PUBLIC[n] for n in ELEMENTWISE)
any_nan, any_inf, any_nonfinite, all_finite, count_nan, count_inf, count_nonfinite = (
    PUBLIC[n] for n in PER_AXIS)
class_counts = PUBLIC["class_counts"]
first_nan, first_inf, first_nonfinite, locate_nan, locate_inf, locate_nonfinite = (
    PUBLIC[n] for n in LOCATING)
