"""Task: a small, picklable description of one unit of scan work (usually one tensor).

A planner turns files into tasks without reading tensor data; `engine.run_task` turns one task into
one result. Nothing in a task refers to an open file, so tasks travel to worker threads or
processes (dask) as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

#: What a task asks for.
CHECK = "check"                    # read the bytes and classify them
NOT_APPLICABLE = "not_applicable"  # integer / bool / string data: cannot hold NaN or Inf
UNCHECKED = "unchecked"            # a tensor that cannot be checked; `reason` says why
PROBLEM = "problem"                # a file-level problem (no tensor name); `reason` says why
FILE = "file"                      # marks a file that was opened; `dtype` holds its format
SKIPPED = "skipped"                # a file that holds no tensors, or was filtered out; `reason`

#: How a task's bytes are stored.
RAW = "raw"            # `nbytes` bytes at `offset` of `source`
DEFLATE = "deflate"    # a deflate-compressed zip member of `source`, data after `offset` bytes
VARINT = "varint"      # protobuf varints (ONNX int32_data) at `offset` of `source`
STORED = "stored"      # `nbytes` raw bytes at `offset` of `source`: a whole stored zip member
                       # whose CRC-32 must be `crc` (checked as the bytes are read)
STRIDED = "strided"    # a view of shape `shape` with element `strides` from byte `offset`
INLINE = "inline"      # `data` holds the bytes (arrays pickled inline in a checkpoint)
DATASET = "dataset"    # array `member` of `source`, read in its own blocks by the reader named
                       # `reader` (h5py, zarr, astropy); `first`/`count` select blocks


@dataclass(frozen=True)
class Field:
    """A floating-point field at byte `offset` of every block of a block-quantized tensor."""

    name: str
    offset: int
    element: str   # numpy dtype name of the field, e.g. "<f2" or "float8_e8m0fnu"


@dataclass(frozen=True)
class Task:
    """One tensor (or one part of a large one) to check, or a file-level marker or problem.

    Items are what gets classified: elements, or blocks for block-quantized tensors. `grid` is the
    item shape; `first`/`count` select a part of the items (count -1: all of them).
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
    member: str = ""                # zip member name (DEFLATE)
    element: str = ""               # numpy dtype each element is classified as
    order: str = "C"                # storage order of `grid` ("F" for Fortran-ordered .npy)
    grid: tuple = ()                # shape of the items (complex: shape + (2,); blocks: block grid)
    block: int = 1                  # elements per item along the last axis (blocks)
    block_bytes: int = 0            # bytes per block; 0 for plain elements
    fields: tuple = ()              # Field per float field of a block
    first: int = 0
    count: int = -1
    strides: tuple = ()             # STRIDED: element strides of `shape`
    crc: int = 0                    # STORED: the zip member's CRC-32
    data: bytes = b""               # INLINE: the bytes
    reader: str = ""                # DATASET: the reader module that reads the blocks
    blocks: int = 0                 # DATASET: how many blocks the array is read in
    flip: str = ""                  # "neg": stored values are negated (torch's lazy negation);
                                    # "conj": imaginary parts are (torch's lazy conjugate)
    missing: bool = False           # NaN is this format's declared blank: counted as missing

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
