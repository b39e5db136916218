"""value_stats: the class histogram and the finite extremes of a real array, in one pass.

Zero, tiny (zero or subnormal) and non-finite are the format table's bit tests; min and max
are found on order keys of the stored words (kernels/stats.py) and only the two winners are
converted to float64, with the format's own conversion (NumPy's or ml_dtypes'); max-abs is the
larger magnitude of the two.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import twin
from ..formats import BitTest, Format, Query, bit_test
from .inputs import real_float_source


class ValueStats(NamedTuple):
    """What value_stats finds: `values` elements, of which `nonfinite` are NaN or ±Inf and the
    rest zero, subnormal or normal; min, max and absmax of the finite values as floats (None when
    there is none)."""

    values: int = 0
    nonfinite: int = 0
    zero: int = 0
    subnormal: int = 0
    normal: int = 0
    min: float | None = None
    max: float | None = None
    absmax: float | None = None

    def negated(self) -> "ValueStats":
        """The statistics of the negated values."""
        if self.min is None:
            return self
        return self._replace(min=-self.max, max=-self.min)

    def __add__(self, other) -> "ValueStats":  # type: ignore[override]
        """The statistics of both sets of values together."""
        def pick(f, a, b):
            return b if a is None else a if b is None else f(a, b)
        return ValueStats(*(a + b for a, b in zip(self[:5], other[:5])),
                          pick(min, self.min, other.min), pick(max, self.max, other.max),
                          pick(max, self.absmax, other.absmax))


def value_stats(x) -> ValueStats:
    """ValueStats of a real floating-point `x` (any layout, any byte order). Subnormal means
    exponent field 0 and mantissa != 0, as in class_counts. Complex, integer and datetime input
    raise TypeError (for complex, pass the real and imaginary parts). Empty input: all zero, None
    extremes."""
    src = real_float_source(x, "value_stats", "for complex, pass x.real and x.imag")
    a = src.array
    if src.by_value:
        return _by_value(a)
    rule = _RULES.get(a.dtype)
    if rule is None:
        rule = _RULES[a.dtype] = _rule(src)
    stats, tests, consts, word, swapped, decode = rule
    return _from_row(stats(a, word, tests, consts, swapped), a.size, decode)


def word_stats(dtype: np.dtype):
    """(bit tests, constants, word, swapped, to_stats) with which the statistics kernel
    (kernels/stats.py) classifies words of real float `dtype` that reach it some other way than
    value_stats takes them (the scan's shuffled HDF5 chunks); to_stats(row, n) is the ValueStats
    of the n values the kernel's row counted. None for formats classified by value."""
    src = real_float_source(np.empty(0, dtype), "value_stats", "complex numbers have no order")
    if src.by_value:
        return None
    rule = _RULES.get(src.array.dtype)
    if rule is None:
        rule = _RULES[src.array.dtype] = _rule(src)
    _, tests, consts, word, swapped, decode = rule
    return tests, consts, word, swapped, lambda row, n: _from_row(row, n, decode)


def _from_row(row: np.ndarray, n: int, decode) -> ValueStats:
    """The ValueStats of `n` values from the statistics kernel's row (launch_stats)."""
    nonfinite, tiny, zero, key_min, key_max = row.tolist()
    counts = (n, nonfinite, zero, tiny - zero, n - nonfinite - tiny)
    if n == nonfinite:
        return ValueStats(*counts)
    low, high = decode(key_min, key_max)
    return ValueStats(*counts, low, high, max(-low, high) if low < 0 else high)


_RULES: dict = {}  # dtype -> what value_stats needs for it (_rule)


def _rule(src):
    """(launcher, bit tests, constants, word, swapped, decode) for the dtype of `src`: decode
    turns the two winning order keys into (min, max) as floats."""
    from ..kernels import launch_stats
    tests, consts = _constants(src.word_format, src.word, src.swapped)
    a = src.array
    native = a.dtype.newbyteorder("=") if a.dtype.byteorder in "<>" else a.dtype
    _, _, pad, shift, mag, flip = (int(v) for v in consts[:6])
    bits, word = 8 * src.word.itemsize, src.word

    def from_key(key: int) -> int:  # the same flip undoes itself
        x = key ^ ((key >> shift) & mag)
        return ((x ^ flip) % (1 << bits)) >> pad

    def decode(key_min: int, key_max: int) -> tuple:
        words = np.array([from_key(key_min), from_key(key_max)], word)
        low, high = words.view(native).astype(np.float64).tolist()
        return low, high
    return launch_stats.stats, tests, consts, word, src.swapped, decode


@functools.lru_cache(maxsize=256)
def _constants(f: Format, word: np.dtype, swapped: bool) -> tuple:
    """The kernel's bit tests (stored byte order, unsigned words) and constants (signed words)
    for format `f`: kernels/stats.py's docstring names them."""
    never = BitTest(0, 1, 0, 1)
    tests = [bit_test(f, q) or never for q in (Query.NONFINITE, Query.TINY, Query.ZERO)]
    stored = [t.byteswapped(word.itemsize) if swapped else t for t in tests]
    tests_words = np.array([list(t) for t in stored], word)
    bits = 8 * word.itemsize
    pad = bits - f.bits
    top = 1 << (bits - 1)
    nonfinite = tests[0]
    if nonfinite.mask2:  # never: the non-finite test is one clause in every format
        raise AssertionError(f"two-clause non-finite test for {f.name}")
    signed = [nonfinite.mask, nonfinite.value, pad, bits - 1, f.magnitude_mask << pad if f.signed else 0,
              0 if f.signed else top]
    signed = [v - (1 << bits) if v >= top else v for v in signed]
    info = np.iinfo(np.dtype(f"i{word.itemsize}"))
    consts = np.array(signed + [info.min, info.max], f"i{word.itemsize}")
    tests_words.flags.writeable = consts.flags.writeable = False
    return tests_words, consts


def _by_value(a: np.ndarray) -> ValueStats:
    """value_stats for formats classified by value (long double), with NumPy."""
    c = twin.class_counts(a)
    finite = a[np.isfinite(a)]
    if not finite.size:
        return ValueStats(a.size, a.size - c.finite, c.zero, c.subnormal, c.normal)
    return ValueStats(a.size, a.size - c.finite, c.zero, c.subnormal, c.normal,
                      float(finite.min()), float(finite.max()), float(np.abs(finite).max()))
