"""The result type of class_counts, in a module of its own: the operators and the NumPy twin
(fpclass.twin) both return it, and the twin imports nothing of the operators."""

from __future__ import annotations

from typing import NamedTuple


class ClassCounts(NamedTuple):
    """How many elements fall in each class; the fields add up to the element count."""

    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    pos_zero: int = 0
    neg_zero: int = 0
    pos_subnormal: int = 0
    neg_subnormal: int = 0
    pos_normal: int = 0
    neg_normal: int = 0

    @property
    def inf(self) -> int:
        return self.pos_inf + self.neg_inf

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
