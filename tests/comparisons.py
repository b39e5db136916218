"""One table of every public function and its implementations, as numbagg's COMPARISONS: the
tests (tests/test_twin.py) and the benchmarks (benchmarks/bench_core.py) both read it.

COMPARISONS[name][library] is a function taking the input the library takes (see `prepare`) and
the keyword arguments its signature names:
- "fpclass": the public function; "twin": its plain-NumPy twin (fpclass.twin), the oracle;
- "numpy": what a NumPy user would write (class_counts has no one-liner: the twin is that code);
- "torch": the torch expression, on a tensor over the same memory (`prepare`), where torch has one
  (taking `out=` where torch has a preallocated form: the benchmarks time that one);
- "bottleneck": bottleneck's function, where it has one (anynan).
A peer takes only the arguments in its signature (torch and bottleneck: default signs; `out` only
where torch takes it).

It lives beside the tests, not in the package: it names torch and bottleneck, which fpclass does
not need. The benchmarks put this directory on sys.path, as tests/conftest.py does.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

import fpclass
from fpclass import twin

# -- the peers' own spellings ----------------------------------------------------------------------


def _bottleneck():
    import bottleneck
    return bottleneck


def _first(hits):
    """The first row of np.argwhere's answer as an index tuple, or None."""
    return tuple(int(i) for i in hits[0]) if len(hits) else None


def _numpy(mask):
    """The numpy column of the queries over `mask(a)`: the expressions a NumPy user writes."""
    return {
        "any": lambda a, axis=None, keepdims=False: mask(a).any(axis=axis, keepdims=keepdims),
        "count": lambda a, axis=None, keepdims=False: np.count_nonzero(mask(a), axis=axis,
                                                                       keepdims=keepdims),
        "first": lambda a: _first(np.argwhere(mask(a))),
        "locate": lambda a, limit=None: np.argwhere(mask(a))[:limit],
    }


def _torch(mask):
    """The torch column of the queries over `mask(t)`."""
    return {
        "any": lambda t, axis=None, keepdims=False: mask(t).any(dim=axis, keepdim=keepdims),
        "count": lambda t, axis=None, keepdims=False: mask(t).sum(dim=axis, keepdim=keepdims),
        "locate": lambda t, limit=None: mask(t).argwhere()[:limit],
    }


def _torch_isnan(t, out=None):
    """torch.isnan takes no out=; it is t != t, which does."""
    import torch
    return torch.ne(t, t, out=out)


def _torch_sign_inf(name):
    """torch.isposinf / torch.isneginf, with their out=."""
    def one_sign(t, out=None):
        import torch
        return getattr(torch, name)(t, out=out)
    return one_sign


_NUMPY = {"nan": _numpy(np.isnan), "inf": _numpy(np.isinf),
          "nonfinite": _numpy(lambda a: ~np.isfinite(a))}
_TORCH = {"nan": _torch(lambda t: t.isnan()), "inf": _torch(lambda t: t.isinf()),
          "nonfinite": _torch(lambda t: ~t.isfinite())}


def _entry(name, **peers):
    return {"fpclass": getattr(fpclass, name), "twin": getattr(twin, name), **peers}


COMPARISONS = {
    # numpy's own functions, not wrapped: the call-overhead benchmark times them as they are
    "isnan": _entry("isnan", numpy=np.isnan, torch=_torch_isnan),
    "isinf": _entry("isinf", numpy=np.isinf, torch=lambda t: t.isinf()),
    "isfinite": _entry("isfinite", numpy=np.isfinite, torch=lambda t: t.isfinite()),
    "isposinf": _entry("isposinf", numpy=np.isposinf, torch=_torch_sign_inf("isposinf")),
    "isneginf": _entry("isneginf", numpy=np.isneginf, torch=_torch_sign_inf("isneginf")),
    "any_nan": _entry("any_nan", numpy=_NUMPY["nan"]["any"], torch=_TORCH["nan"]["any"],
                      bottleneck=lambda a, axis=None: _bottleneck().anynan(a, axis=axis)),
    "any_inf": _entry("any_inf", numpy=_NUMPY["inf"]["any"], torch=_TORCH["inf"]["any"]),
    "any_nonfinite": _entry("any_nonfinite", numpy=_NUMPY["nonfinite"]["any"],
                            torch=_TORCH["nonfinite"]["any"]),
    "all_finite": _entry("all_finite",
                         numpy=lambda a, axis=None, keepdims=False: np.isfinite(a).all(
                             axis=axis, keepdims=keepdims),
                         torch=lambda t, axis=None, keepdims=False: t.isfinite().all(
                             dim=axis, keepdim=keepdims)),
    "count_nan": _entry("count_nan", numpy=_NUMPY["nan"]["count"], torch=_TORCH["nan"]["count"]),
    "count_inf": _entry("count_inf", numpy=_NUMPY["inf"]["count"], torch=_TORCH["inf"]["count"]),
    "count_nonfinite": _entry("count_nonfinite", numpy=_NUMPY["nonfinite"]["count"],
                              torch=_TORCH["nonfinite"]["count"]),
    "class_counts": _entry("class_counts", numpy=twin.class_counts),
    "first_nan": _entry("first_nan", numpy=_NUMPY["nan"]["first"]),
    "first_inf": _entry("first_inf", numpy=_NUMPY["inf"]["first"]),
    "first_nonfinite": _entry("first_nonfinite", numpy=_NUMPY["nonfinite"]["first"]),
    "locate_nan": _entry("locate_nan", numpy=_NUMPY["nan"]["locate"],
                         torch=_TORCH["nan"]["locate"]),
    "locate_inf": _entry("locate_inf", numpy=_NUMPY["inf"]["locate"],
                         torch=_TORCH["inf"]["locate"]),
    "locate_nonfinite": _entry("locate_nonfinite", numpy=_NUMPY["nonfinite"]["locate"],
                               torch=_TORCH["nonfinite"]["locate"]),
}

LIBRARIES = ("fpclass", "twin", "numpy", "torch", "bottleneck")


# -- inputs ----------------------------------------------------------------------------------------

#: torch dtypes by the name of the NumPy / ml_dtypes dtype of the same format. Not
#: float8_e8m0fnu: torch.isfinite calls its NaN finite (tests/test_adapter_torch.py, TORCH_WRONG).
_TORCH_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                 "float8_e4m3fnuz", "float8_e5m2fnuz", "complex64", "complex128")


def tensor(a: np.ndarray):
    """`a` as a torch tensor over the same memory, of torch's dtype for its format (ml_dtypes
    formats through their stored words); TypeError where torch has no such dtype."""
    import torch
    name = a.dtype.name
    if name not in _TORCH_DTYPES or not a.dtype.isnative:
        raise TypeError(f"torch has no dtype for {a.dtype}")
    if a.dtype.type.__module__ == "numpy":  # not by kind: ml_dtypes' float8_e5m2 has kind "f"
        return torch.from_numpy(a)
    return torch.from_numpy(a.view(f"u{a.dtype.itemsize}")).view(getattr(torch, name))


def prepare(library: str, a: np.ndarray):
    """The input `library` takes for the NumPy array `a` (TypeError where it takes none)."""
    return tensor(a) if library == "torch" else a


def accepts(fn, kwargs) -> bool:
    """Whether `fn`'s signature names every keyword of `kwargs`."""
    return set(kwargs) <= set(_parameters(fn))


@functools.lru_cache(maxsize=None)
def _parameters(fn):
    try:
        return tuple(inspect.signature(fn).parameters)
    except ValueError:  # a ufunc of a numpy without ufunc signatures
        return ("x", "out")


def runner(name: str, library: str, a: np.ndarray, **kwargs):
    """A function of no arguments that runs `library`'s `name` on `a` (converted beforehand, as a
    benchmark wants it), or None where the library has no such function, is not installed, does not
    take these arguments, or fails on `a` (torch has no isnan for some float8 formats)."""
    fn = COMPARISONS[name].get(library)
    if fn is None or not accepts(fn, kwargs):
        return None
    try:
        x = prepare(library, a)
        run = functools.partial(fn, x, **kwargs)
        run()
    except (ImportError, TypeError, RuntimeError, NotImplementedError, ValueError):
        return None
    return run
