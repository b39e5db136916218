"""Density maps: where a tensor's NaN, +Inf, -Inf and missing values are, as counts over a small
grid of its 2-D layout (the picture of `fpclass scan --html` and ScanReport.plot).

The layout is the tensor's two trailing dimensions (rows x columns of a weight matrix, latitude x
longitude of a field), the leading ones summed over; a 1-D tensor is one row, a 0-d one a single
cell. Each axis of n positions is cut into min(n, MAX_BINS) bins, position i in bin
i * bins // n, so a map holds at most 4 x 128 x 128 counts whatever the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .report import CLASSES

#: Bins per axis of a map, at most.
MAX_BINS = 128


def layout(shape: tuple) -> tuple:
    """(rows, columns) of the 2-D layout of a tensor of `shape`: its two trailing dimensions."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return int(shape[-2]), int(shape[-1])


def bins(n: int) -> int:
    """Bins along an axis of `n` positions."""
    return min(n, MAX_BINS)


def edges(n: int) -> np.ndarray:
    """The first position of each bin of an axis of `n` positions, then n (bins + 1 values):
    bin b holds positions edges[b] <= i < edges[b + 1]."""
    b = bins(n)
    return -(-np.arange(b + 1, dtype=np.int64) * n // max(b, 1))


@dataclass(frozen=True, eq=False)
class DensityMap:
    """The counts of one tensor's map: counts[k] is class CLASSES[k] over the (rows, columns)
    layout, binned; or, when no map could be gathered, None with the reason in `note`."""

    rows: int
    columns: int
    counts: np.ndarray | None = None   # int64, (len(CLASSES), bins(rows), bins(columns))
    note: str = ""

    @classmethod
    def empty(cls, shape: tuple) -> "DensityMap":
        rows, columns = layout(shape)
        return cls(rows, columns, np.zeros((len(CLASSES), bins(rows), bins(columns)), np.int64))

    @property
    def classes(self) -> tuple:
        """The class of each channel of `counts`."""
        return CLASSES

    def of(self, cls: str) -> np.ndarray:
        """The binned counts of class `cls` (one of CLASSES)."""
        if self.counts is None:
            raise ValueError(f"no map was gathered: {self.note}")
        if cls not in CLASSES:
            raise ValueError(f"unknown class {cls!r}; accepted: {', '.join(CLASSES)}")
        return self.counts[CLASSES.index(cls)]

    def merged(self, other: "DensityMap | None") -> "DensityMap":
        """The map of two parts of one tensor (counts added; a part without a map voids it)."""
        if other is None:
            return self
        if self.counts is None:
            return self
        if other.counts is None:
            return other
        return DensityMap(self.rows, self.columns, self.counts + other.counts)

    def to_dict(self) -> dict:
        """The map as plain values (the HTML report's data): the layout, the bin edges and each
        class's counts as nested lists."""
        out: dict = {"rows": self.rows, "columns": self.columns}
        if self.counts is None:
            out["note"] = self.note
            return out
        out["row_edges"] = edges(self.rows).tolist()
        out["column_edges"] = edges(self.columns).tolist()
        out["counts"] = {c: self.counts[k].tolist() for k, c in enumerate(CLASSES)}
        return out


def merge(maps) -> DensityMap | None:
    """One map from the maps of a tensor's parts (None where no part has one)."""
    out = None
    for m in maps:
        if m is not None:
            out = m if out is None else out.merged(m)
    return out
