"""Magnitude bounds read from stored exponent fields, for the binary formats that keep IEEE's
layout of specials (NaN and ±Inf in the all-ones exponent field, bias 2^(e-1) - 1): the largest
exponent field among a buffer's finite words bounds every magnitude in it. fpclass.torch.watch
uses these bounds to prove a normalization's output finite without reading it."""

from __future__ import annotations

from .table import Format, Kind, NaN


def has_magnitude_bounds(f: Format) -> bool:
    """Do `f`'s exponent fields bound its magnitudes as IEEE's do (real, NaN and ±Inf in the
    all-ones field, the standard bias)?"""
    return f.kind is Kind.FLOAT and f.nan is NaN.IEEE and f.inf and f.exponent_bits >= 2


def magnitude_exponent(f: Format, field: int) -> int:
    """The least k such that every finite value of `f` whose exponent field is at most `field`
    has magnitude below 2**k (field 0: zeros and subnormals, below 2**(1 - bias)). ValueError for
    formats without such bounds and for fields outside the finite ones."""
    if not has_magnitude_bounds(f):
        raise ValueError(f"{f.name} has no IEEE exponent bounds (accepted: {_bounded_names()})")
    top = (1 << f.exponent_bits) - 2  # the largest finite field: all ones holds NaN and Inf
    if not 0 <= field <= top:
        raise ValueError(f"exponent field {field} of {f.name} is not a finite one (0..{top})")
    bias = (1 << (f.exponent_bits - 1)) - 1
    return field - bias + 1


def largest_magnitude_exponent(f: Format) -> int:
    """The least k with every finite value of `f` below 2**k (128 for float32)."""
    return magnitude_exponent(f, (1 << f.exponent_bits) - 2)


def _bounded_names() -> str:
    from .table import FORMATS
    return ", ".join(name for name, f in FORMATS.items() if has_magnitude_bounds(f))

