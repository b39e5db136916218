"""Bit tests derived from the format table: which stored words hold a given class of value.

Every class fpclass answers (NaN, ±Inf, non-finite, zero, tiny, negative) is one *bit test*
on the stored word `w`:  ``(w & mask) == value  and  (w & mask2) != value2``.
Kernels only ever evaluate bit tests; they never know what a format is. Because a bit test uses
nothing but AND and equality, a byte-swapped test on raw big-endian words answers exactly like the
native test on the swapped word — data in foreign byte order is classified without swapping it.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from .table import Format, Kind, NaN


class Query(enum.Enum):
    """A class of values a kernel can look for."""

    NAN = "nan"
    INF = "inf"
    POSINF = "posinf"
    NEGINF = "neginf"
    NONFINITE = "nonfinite"
    ZERO = "zero"
    TINY = "tiny"           # zero or subnormal: exponent field zero, and not a NaN
    NEGATIVE = "negative"   # sign bit set


class BitTest(NamedTuple):
    """Matches a word `w` iff ``(w & mask) == value and (w & mask2) != value2``.

    With ``mask2 == 0`` and ``value2 == 1`` the second clause is always true.
    """

    mask: int
    value: int
    mask2: int = 0
    value2: int = 1

    def with_sign(self, sign_mask: int) -> "BitTest | None":
        """This test restricted to words whose sign bit is set (None if that is impossible)."""
        if self.mask & sign_mask:
            return self if self.value & sign_mask else None
        return BitTest(self.mask | sign_mask, self.value | sign_mask, self.mask2, self.value2)

    def byteswapped(self, nbytes: int) -> "BitTest":
        """The same test for words stored in the opposite byte order."""
        return BitTest(*(int.from_bytes(v.to_bytes(nbytes, "little"), "big") for v in self))


def _nan_test(f: Format) -> BitTest | None:
    every = f.value_mask
    if f.nan is NaN.IEEE:
        return BitTest(f.exponent_mask, f.exponent_mask, f.mantissa_mask, 0)
    if f.nan is NaN.MAX_MAGNITUDE:
        return BitTest(f.magnitude_mask, f.magnitude_mask)
    if f.nan is NaN.NEGATIVE_ZERO:
        return BitTest(every, f.sign_mask)
    if f.nan is NaN.ALL_ONES:
        return BitTest(every, every)
    return None


def bit_test(f: Format, query: Query) -> BitTest | None:
    """The bit test selecting `query` in format `f` (native byte order), or None if `f` has no such
    values — the caller then answers without reading the data.

    For COMPLEX formats ask the component format; NATIVE formats have no bit tests.
    """
    if f.kind is Kind.DATETIME:
        # NaT is the most negative int64.
        nat = BitTest((1 << 64) - 1, 1 << 63)
        return nat if query in (Query.NAN, Query.NONFINITE) else None
    if f.kind is not Kind.FLOAT:
        return None
    every, exponent, sign = f.value_mask, f.exponent_mask, f.sign_mask
    if query is Query.NAN:
        return _nan_test(f)
    if query in (Query.INF, Query.POSINF, Query.NEGINF):
        if not f.inf:
            return None
        if query is Query.INF:
            return BitTest(f.magnitude_mask, exponent)
        return BitTest(every, exponent if query is Query.POSINF else sign | exponent)
    if query is Query.NONFINITE:
        # With IEEE Inf, NaN and ±Inf together are exactly "exponent all ones".
        return BitTest(exponent, exponent) if f.inf else _nan_test(f)
    if query is Query.ZERO:
        if not f.has_zero:
            return None
        return BitTest(f.magnitude_mask if f.negative_zero else every, 0)
    if query is Query.TINY:
        if not (f.has_zero or f.has_subnormals):
            return None
        if f.nan is NaN.NEGATIVE_ZERO:
            # The *fnuz NaN sits in the -0 slot, exponent field zero: keep it out, so that
            # tiny = zero + subnormal exactly.
            return BitTest(exponent, 0, every, sign)
        return BitTest(exponent, 0)
    if query is Query.NEGATIVE:
        return BitTest(sign, sign) if f.signed else None
    raise ValueError(f"unknown query {query!r}")
