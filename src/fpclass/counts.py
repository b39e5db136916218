"""The result type of class_counts, in a module of its own: the operators and the NumPy twin
(fpclass.twin) both return it, and the twin imports nothing of the operators."""

from __future__ import annotations

import html
import warnings
from typing import NamedTuple


class ClassCounts(NamedTuple):
    """How many elements fall in each class; the fields add up to the element count. Every field
    is a Python int (json.dumps(counts._asdict()) works). The infinities are `posinf` and
    `neginf`, as in the scan's JSON and numpy.isposinf."""

    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    pos_zero: int = 0
    neg_zero: int = 0
    pos_subnormal: int = 0
    neg_subnormal: int = 0
    pos_normal: int = 0
    neg_normal: int = 0

    @property
    def pos_inf(self) -> int:
        """Deprecated spelling of `posinf`."""
        warnings.warn("ClassCounts.pos_inf is deprecated; use .posinf (the scan JSON's name)",
                      DeprecationWarning, stacklevel=2)
        return self.posinf

    @property
    def neg_inf(self) -> int:
        """Deprecated spelling of `neginf`."""
        warnings.warn("ClassCounts.neg_inf is deprecated; use .neginf (the scan JSON's name)",
                      DeprecationWarning, stacklevel=2)
        return self.neginf

    @property
    def inf(self) -> int:
        return self.posinf + self.neginf

    @property
    def zero(self) -> int:
        return self.pos_zero + self.neg_zero

    @property
    def subnormal(self) -> int:
        return self.pos_subnormal + self.neg_subnormal

    @property
    def normal(self) -> int:
        return self.pos_normal + self.neg_normal

    @property
    def finite(self) -> int:
        return self.zero + self.subnormal + self.normal

    @property
    def total(self) -> int:
        return sum(self)

    def _repr_html_(self) -> str:
        """A table of the counts, for Jupyter."""
        rows = "".join(f"<tr><th>{html.escape(name)}</th><td>{int(n)}</td></tr>"
                       for name, n in zip(self._fields, self))
        return (f"<table class=\"fpclass-class-counts\"><caption>ClassCounts ({self.total} "
                f"values)</caption>{rows}</table>")
