"""Task: a small, picklable description of one unit of scan work (usually one tensor).

A planner turns files into tasks without reading tensor data; `engine.run_task` turns one task into
one result. Nothing in a task refers to an open file, so tasks travel to worker threads or
processes (dask) as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .._records import stored_through_slots
from ..results.status import FILE, NOT_APPLICABLE, PROBLEM, SKIPPED, UNCHECKED

#: What a task asks for.
#: A task's status is CHECK (read the bytes and classify them) or the status its result will
#: have: NOT_APPLICABLE, UNCHECKED, PROBLEM, FILE (`dtype` holds the format), SKIPPED.
CHECK = "check"

#: How a task's bytes are stored.
RAW = "raw"            # `nbytes` bytes at `offset` of `source`
#: Zip members (`member` names one for messages): their bytes start at `offset` of `source`
#: (`packed` of them for DEFLATE), and hold `skip` bytes (a .npy header) then the `nbytes` of the
#: tensor, nothing after. The whole member is read in one pass and its CRC-32 must be `crc`.
STORED = "stored"      # an uncompressed member
DEFLATE = "deflate"    # a deflate-compressed member
VARINT = "varint"      # protobuf varints (ONNX int32_data) at `offset` of `source`
STRIDED = "strided"    # a view of shape `shape` with element `strides` from byte `offset`
INLINE = "inline"      # `data` holds the bytes (arrays pickled inline in a checkpoint)
DATASET = "dataset"    # array `member` of `source`, read in its own blocks by the reader named
                       # `reader` (h5py, zarr, astropy); `first`/`count` select blocks


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
    """

    file: str
    name: str = ""
    dtype: str = ""                 # as the file names it: "BF16", "Q4_K", "<f4"
    shape: tuple = ()
    status: str = CHECK
    reason: str = ""
    source: str = ""                # the file holding the bytes (external data, shard)
    storage: str = RAW
    offset: int = 0
    nbytes: int = 0
    member: str = ""                # zip member name (STORED, DEFLATE)
    skip: int = 0                   # member bytes before the tensor's (STORED, DEFLATE)
    packed: int = 0                 # compressed bytes of the member (DEFLATE)
    crc: int = 0                    # CRC-32 of the whole member (STORED, DEFLATE)
    element: str = ""               # numpy dtype each element is classified as
    order: str = "C"                # storage order of the axes ("F" for Fortran-ordered .npy)
    grid: tuple = ()                # shape of the items (complex: shape + (2,); blocks: block grid)
    block: int = 1                  # elements per item along the last axis (blocks)
    block_bytes: int = 0            # bytes per block; 0 for plain elements
    fields: tuple = ()              # Field per float field of a block
    first: int = 0
    count: int = -1
    strides: tuple = ()             # STRIDED: element strides of `shape`
    data: bytes = b""               # INLINE: the bytes
    reader: str = ""                # DATASET: the reader module that reads the blocks
    blocks: int = 0                 # DATASET: how many blocks the array is read in
    flip: str = ""                  # "neg": stored values are negated (torch's lazy negation);
                                    # "conj": imaginary parts are (torch's lazy conjugate)
    missing: bool = False           # NaN is this format's declared blank: counted as missing
    broadcast: tuple = ()           # STRIDED: dimensions of stride 0, read once and counted
                                    # as many times as their sizes say
    overlap: bool = False           # STRIDED: other dimensions overlap: the span is read once
                                    # and each value counted as often as the view reaches it
    decode: object = None           # DATASET: a cf.Policy its reader applies to the stored values
                                    # (`element` is then the decoded dtype)

    @property
    def key(self) -> tuple:
        """Identifies the tensor this task (or part) belongs to."""
        return (self.file, self.name)

    @property
    def items(self) -> int:
        return math.prod(self.grid)

    @property
    def part_bytes(self) -> int:
        """The stored bytes of the items (DATASET: blocks) this task (or part) covers."""
        if self.count < 0:
            return self.nbytes
        return self.nbytes * self.count // max(self.blocks if self.storage == DATASET
                                               else self.items, 1)

    def part(self, first: int, count: int) -> "Task":
        return replace(self, first=first, count=count)


def skipped(file: str, reason: str) -> Task:
    """A task that only reports that `file` was not read, and why."""
    return Task(file, status=SKIPPED, reason=reason)


def problem(file: str, reason: str, name: str = "") -> Task:
    """A task that only reports `reason` for `file` (or for tensor `name` in it, as unchecked)."""
    return Task(file, name, status=UNCHECKED if name else PROBLEM, reason=reason)
