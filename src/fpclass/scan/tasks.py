"""Task: a small, picklable description of one unit of scan work (usually one tensor).

A planner turns files into tasks without reading tensor data; `engine.run_task` turns one task into
one result. Nothing in a task refers to an open file, so tasks travel to worker threads or
processes (dask) as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .._records import stored_through_slots
from ..results.status import FILE, NOT_APPLICABLE, PROBLEM, SKIPPED, UNCHECKED  # noqa: F401

#: What a task asks for.
#: A task's status is CHECK (read the bytes and classify them) or the status its result will
#: have: NOT_APPLICABLE, UNCHECKED, PROBLEM, FILE (`dtype` holds the format), SKIPPED.
CHECK = "check"


@dataclass(frozen=True, slots=True)
class Field:
    """A floating-point field at byte `offset` of every block of a block-quantized tensor."""

    name: str
    offset: int
    element: str   # numpy dtype name of the field, e.g. "<f2" or "float8_e8m0fnu"


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Task:
    """One tensor (or one part of a large one) to check, or a file-level marker or problem.

    Items are what gets classified: elements, or blocks for block-quantized tensors. `grid` is the
    item shape; `first`/`count` select a part of the items (count -1: all of them). `order` is the
    storage order of the tensor's own axes; grid axes past the shape's (a complex element's real
    and imaginary part) vary fastest in either order, as the parts of one element are adjacent.
    `storage` (a scan.storage object: a byte range, a zip member, a strided view, record bands,
    a block grid, inline bytes) says where the bytes are and reads them; a task that reads
    nothing has none.
    """

    file: str
    name: str = ""
    dtype: str = ""                 # as the file names it: "BF16", "Q4_K", "<f4"
    shape: tuple = ()
    status: str = CHECK
    reason: str = ""
    element: str = ""               # numpy dtype each element is classified as
    order: str = "C"                # storage order of the axes ("F" for Fortran-ordered .npy)
    grid: tuple = ()                # shape of the items (complex: shape + (2,); blocks: block grid)
    block: int = 1                  # elements per item along the last axis (blocks)
    block_bytes: int = 0            # bytes per block; 0 for plain elements
    fields: tuple = ()              # Field per float field of a block
    first: int = 0
    count: int = -1
    flip: str = ""                  # "neg": stored values are negated (torch's lazy negation);
                                    # "conj": imaginary parts are (torch's lazy conjugate)
    missing: bool = False           # NaN is this format's declared blank: counted as missing
    storage: object = None          # how the bytes are stored (a scan.storage object)
    declared_range: tuple = ()      # a CF actual_range (low, high, precision dtype) to check
    stats: bool = True              # gather the values' statistics (TensorResult.stats)

    @property
    def key(self) -> tuple:
        """Identifies the tensor this task (or part) belongs to."""
        return (self.file, self.name)

    @property
    def items(self) -> int:
        return math.prod(self.grid)

    @property
    def source(self) -> str:
        """The file holding the bytes (external data, a shard); "" when the task holds them."""
        return self.storage.source if self.storage is not None else ""

    @property
    def nbytes(self) -> int:
        """The stored bytes of the whole tensor (0 when the task reads nothing)."""
        return self.storage.nbytes if self.storage is not None else 0

    @property
    def broadcast(self) -> tuple:
        """Dimensions whose values are read once and counted as many times as their sizes say
        (a strided view's dimensions of stride 0)."""
        return getattr(self.storage, "broadcast", ())

    @property
    def part_bytes(self) -> int:
        """The stored bytes of the units (items, rows, blocks) this task (or part) covers."""
        storage = self.storage
        if storage is None:
            return 0
        if self.count < 0:
            return storage.nbytes
        return storage.nbytes * self.count // max(storage.units(self), 1)

    def part(self, first: int, count: int) -> "Task":
        return replace(self, first=first, count=count)


def skipped(file: str, reason: str) -> Task:
    """A task that only reports that `file` was not read, and why."""
    return Task(file, status=SKIPPED, reason=reason)


def problem(file: str, reason: str, name: str = "") -> Task:
    """A task that only reports `reason` for `file` (or for tensor `name` in it, as unchecked)."""
    return Task(file, name, status=UNCHECKED if name else PROBLEM, reason=reason)
