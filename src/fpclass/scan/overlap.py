"""Views whose dimensions overlap in their storage (a PyTorch `as_strided` window: sizes
(2^20, 2^20), strides (1, 1) over 2^21 stored values), counted without materialising them: each
stored value of the span is read and classified once, and counts as many times as indices of the
view reach it (views.multiplicity). Locations are indices found for the first non-finite stored
values (views.find_index), each verified by construction."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..facade import isnan, isneginf, isposinf
from .storage import strided as views
from .storage.ranges import Range
from .dtypes import np_dtype
from ..results import build
from ..results.report import Location, TensorResult
from .tasks import Task

def run_overlap(task: Task, max_locations: int, chunk_bytes: int, stop, interrupted) -> TensorResult:
    """Counts and first locations of a Strided task marked `overlap` (broadcast dimensions
    count by their sizes, as elsewhere). `interrupted` is raised when `stop` is set."""
    view = task.storage
    sizes, strides = view.layout(task)
    dtype = np_dtype(task.element)
    many = views.multiplicity(sizes, strides)
    repeat = 1
    for d in view.broadcast:
        repeat *= task.shape[d]
    span = replace(task, storage=Range(view.source, view.offset, many.size * dtype.itemsize),
                   first=0, count=-1)
    complex_parts = len(task.grid) == len(task.shape) + 1
    totals = {"nan": 0, "posinf": 0, "neginf": 0}
    hits: list = []
    for first, chunk in span.storage.chunks(span, dtype.itemsize, chunk_bytes):
        if stop is not None and stop.is_set():
            raise interrupted
        v = chunk.view(dtype)
        m = many[first:first + v.size]
        swap = np.zeros(v.size, bool)
        if task.flip == "neg":
            swap[:] = True
        elif task.flip == "conj" and complex_parts:  # the imaginary parts: odd items
            swap[(np.arange(first, first + v.size) & 1) == 1] = True
        for cls, mask in (("nan", isnan(v)), ("posinf", isposinf(v)), ("neginf", isneginf(v))):
            mask &= m > 0
            if cls == "nan":
                totals["nan"] += int(m[mask].sum())
            else:
                other = build.SWAPPED[cls]
                totals[cls] += int(m[mask & ~swap].sum())
                totals[other] += int(m[mask & swap].sum())
            if len(hits) < 4 * max_locations:
                for x in np.flatnonzero(mask)[:max_locations].tolist():
                    hits.append((first + x, build.SWAPPED[cls] if swap[x] else cls))
    locations = []
    for position, cls in sorted(hits)[:max_locations]:
        index = views.find_index(position, sizes, strides)
        if index is not None:
            locations.append(Location(index, cls))
    return build.checked(task.file, task.name, task.dtype, task.shape, totals["nan"] * repeat,
                         totals["posinf"] * repeat, totals["neginf"] * repeat, tuple(locations),
                         int(many.sum()) * repeat, span.nbytes, first=task.first)
