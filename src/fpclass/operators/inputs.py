"""What every operator and query does first: accept the input, find its format, check `out`."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..formats import BitTest, Format, Kind, Query, bit_test, component_format, format_of, is_byteswapped


class Source(NamedTuple):
    """An input array and how its stored words are classified."""

    array: np.ndarray
    format: Format          # the row of the input's dtype
    word_format: Format | None  # the row each stored word is tested with (a complex's part); None: by value
    word: np.dtype          # unsigned word dtype the kernels read
    lanes: int              # words per element (2 for complex)
    swapped: bool           # stored in foreign byte order

    def test(self, query: Query, negative: bool = False) -> BitTest | None:
        """The bit test for `query` on this input's words (only those with the sign bit set if
        `negative`), or None if no word can match."""
        return _test(self.word_format, self.swapped, self.word.itemsize, query, negative)

    @property
    def by_value(self) -> bool:
        """True for formats with a platform-defined layout (long double), classified by numpy."""
        return self.format.kind is Kind.NATIVE or (
            self.format.kind is Kind.COMPLEX and self.word_format is None)


@functools.lru_cache(maxsize=1024)
def _test(word_format, swapped, nbytes, query, negative):
    if word_format is None:
        return None
    t = bit_test(word_format, query)
    if t is not None and negative:
        t = t.with_sign(word_format.sign_mask) if word_format.signed else None
    if t is not None and swapped:
        t = t.byteswapped(nbytes)
    return t


def as_source(x) -> Source:
    """`x` (any array-like, scalar, or ndarray of any layout) as a Source; TypeError for dtypes
    fpclass does not classify."""
    if type(x) is np.ndarray:
        a = x
    elif isinstance(x, np.ma.MaskedArray):
        raise TypeError("fpclass does not take masked arrays (numpy.ma): pass x.data, or "
                        "x.filled(value), and combine the answer with x.mask yourself")
    else:
        a = np.asarray(x)
        if a.dtype.kind in "OUSV":  # not numbers: say what was passed, not only its dtype
            raise TypeError(f"fpclass takes {ACCEPTED}; got {_short(x)} (dtype {a.dtype})")
    return Source(a, *_describe(a.dtype))


#: What the public functions take, for the error messages.
ACCEPTED = ("numeric arrays: a NumPy array, a number, anything numpy.asarray turns into a numeric "
            "array (a list of numbers), or a torch, JAX, CuPy, dask, xarray or pandas object")


def real_float_source(x, what: str, complex_hint: str) -> Source:
    """as_source(x) for an operation on real floating-point values only; TypeError naming `what`
    and the dtype otherwise (complex, integer, datetime), with `complex_hint` in parentheses."""
    src = as_source(x)
    if src.format.kind not in (Kind.FLOAT, Kind.NATIVE):
        raise TypeError(f"{what} needs a real floating-point dtype, got {src.array.dtype} "
                        f"({complex_hint})")
    return src


def _short(x) -> str:
    """`x` named for a message: None, or its type and a clipped repr."""
    if x is None:
        return "None"
    cls = type(x)
    name = cls.__qualname__
    if cls.__module__ != "builtins":
        name = f"{cls.__module__}.{name}"
    text = repr(x)
    return f"{name} {text if len(text) <= 40 else text[:37] + '...'}"


@functools.lru_cache(maxsize=256)
def _describe(dtype: np.dtype):
    """Everything about a dtype that as_source needs, computed once per dtype (call overhead
    matters for small arrays)."""
    fmt = format_of(dtype)
    word_format: Format | None = fmt
    lanes = 1
    if fmt.kind is Kind.COMPLEX:
        word_format, lanes = component_format(fmt), 2
    elif fmt.kind is Kind.NATIVE:
        word_format = None
    size = dtype.itemsize // lanes
    word = np.dtype(f"u{size}") if size in (1, 2, 4, 8) else np.dtype("u1")
    return fmt, word_format, word, lanes, is_byteswapped(dtype)


#: What out= accepts, for the error messages.
_OUT_ACCEPTED = "a writable numpy.ndarray of dtype bool or uint8 and exactly the input's shape"


def check_out(out, shape) -> np.ndarray:
    """Validate a user's `out=` (a writable bool or uint8 ndarray of exactly `shape`) and return
    the plain ndarray over its memory that the kernels write; TypeError / ValueError otherwise."""
    if isinstance(out, np.ma.MaskedArray):
        # Writing its data would leave its mask describing an earlier answer.
        raise TypeError(f"out must be {_OUT_ACCEPTED} {tuple(shape)}; masked arrays (numpy.ma) are "
                        "not accepted: pass out.data and set out.mask yourself")
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be {_OUT_ACCEPTED} {tuple(shape)}, got {type(out).__name__}")
    if out.dtype not in (np.dtype(bool), np.dtype(np.uint8)):
        raise TypeError(f"out must have dtype bool or uint8, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, but the input has shape {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError(f"out is read-only; pass {_OUT_ACCEPTED}")
    if _overlaps(out):
        # answers written to one element twice would lose all but the last (torch refuses too)
        raise ValueError(f"out has elements that share memory (strides {out.strides}, e.g. from "
                         "np.broadcast_to or expand()); pass an array whose elements are distinct, "
                         "such as np.empty_like(x, dtype=bool)")
    # A subclass (np.matrix, np.memmap) is written through a plain view of the same memory: the
    # kernels reshape and view `out`, and np.matrix's reshape(-1) stays 2-D.
    return out if type(out) is np.ndarray else out.view(np.ndarray)


def _overlaps(a: np.ndarray) -> bool:
    """Whether two elements of `a` share memory. Axes sorted by stride must each step past all
    the smaller axes' span; a layout that fails this (rare without a broadcast) is checked
    element by element."""
    if a.flags.c_contiguous or a.flags.f_contiguous or a.size <= 1:
        return False
    axes = sorted((abs(st), n) for st, n in zip(a.strides, a.shape) if n > 1)
    span = a.itemsize
    for stride, n in axes:
        if stride < span:
            break
        span += stride * (n - 1)
    else:
        return False
    if any(stride == 0 for stride, _ in axes):
        return True
    offsets = np.zeros((), np.int64)
    for stride, n in zip(a.strides, a.shape):
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * stride)
    return np.unique(offsets).size < a.size


def check_flag(name: str, value) -> bool:
    """An attribute flag: a bool, or the integers 0/1 that ONNX and OpenVINO use."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool (or 0/1), got {value!r}")
