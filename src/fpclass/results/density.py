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

#: The classes a map tells apart: where the bit tests place them (a CF out-of-range value is
#: counted, not mapped).
MAP_CLASSES = ("nan", "posinf", "neginf", "missing")


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


def _smallest(plane: np.ndarray) -> np.ndarray:
    """`plane` (counts, >= 0) in the smallest unsigned type that holds them."""
    top = int(plane.max()) if plane.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return plane.astype(dtype)
    return plane.astype(np.uint64)


@dataclass(frozen=True, eq=False)
class DensityMap:
    """The counts of one tensor's map over its (rows, columns) layout, binned: `counts[k]` is class
    MAP_CLASSES[k]; or, when no map could be gathered, `counts` is None and `note` says why. Kept as
    the planes of the classes present, each in the smallest unsigned type that holds it (a map
    of NaN alone in a 4096 x 4096 weight: 32 KiB), so a report of many maps stays small."""

    rows: int
    columns: int
    planes: dict | None = None   # class -> (bins(rows), bins(columns)) counts; classes present
    note: str = ""

    @classmethod
    def from_counts(cls, rows: int, columns: int, counts: np.ndarray) -> "DensityMap":
        """The map of `counts` (len(MAP_CLASSES), bins(rows), bins(columns))."""
        return cls(rows, columns, {c: _smallest(counts[k]) for k, c in enumerate(MAP_CLASSES)
                                   if counts[k].any()})

    @classmethod
    def empty(cls, shape: tuple) -> "DensityMap":
        rows, columns = layout(shape)
        return cls(rows, columns, {})

    @property
    def classes(self) -> tuple:
        """The class of each channel of `counts`."""
        return MAP_CLASSES

    @property
    def counts(self) -> np.ndarray | None:
        """All the counts as int64 (len(MAP_CLASSES), bins(rows), bins(columns)); None: no map."""
        if self.planes is None:
            return None
        out = np.zeros((len(MAP_CLASSES), bins(self.rows), bins(self.columns)), np.int64)
        for k, c in enumerate(MAP_CLASSES):
            if c in self.planes:
                out[k] = self.planes[c]
        return out

    def of(self, cls: str) -> np.ndarray:
        """The binned counts of class `cls` (one of MAP_CLASSES), as int64."""
        if self.planes is None:
            raise ValueError(f"no map was gathered: {self.note}")
        if cls not in MAP_CLASSES:
            raise ValueError(f"unknown class {cls!r}; accepted: {', '.join(MAP_CLASSES)}")
        plane = self.planes.get(cls)
        if plane is None:
            return np.zeros((bins(self.rows), bins(self.columns)), np.int64)
        return plane.astype(np.int64)

    def bin_edges(self) -> tuple:
        """(row edges, column edges): each bin's first position, then the axis length."""
        return edges(self.rows), edges(self.columns)

    def merged(self, other: "DensityMap | None") -> "DensityMap":
        """The map of two parts of one tensor (counts added; a part without a map voids it)."""
        if other is None or self.planes is None:
            return self
        if other.planes is None:
            return other
        return DensityMap.from_counts(self.rows, self.columns, self.counts + other.counts)

    def to_dict(self) -> dict:
        """The map as plain values: the layout, the bin edges and each class's counts as nested
        lists."""
        out: dict = {"rows": self.rows, "columns": self.columns}
        if self.planes is None:
            out["note"] = self.note
            return out
        row_edges, column_edges = self.bin_edges()
        out["row_edges"], out["column_edges"] = row_edges.tolist(), column_edges.tolist()
        out["counts"] = {c: self.of(c).tolist() for c in MAP_CLASSES}
        return out


def merge(maps) -> DensityMap | None:
    """One map from the maps of a tensor's parts (None where no part has one)."""
    out = None
    for m in maps:
        if m is not None:
            out = m if out is None else out.merged(m)
    return out
