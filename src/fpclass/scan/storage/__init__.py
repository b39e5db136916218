"""How a task's bytes are stored: one small, frozen, picklable object per kind, each owning its
block iteration, so the engine asks a storage for its bytes and never switches on kinds.

    ranges.py   Range (bytes at an offset of a file), Varints (protobuf varints there)
    members.py  Member (a stored or deflate-compressed zip member, CRC-32 checked)
    inline.py   Inline (bytes held by the task: arrays pickled in a checkpoint, decoded values)
    strided.py  Strided (a view with element strides; broadcast and overlapping dimensions)
    bands.py    Bands (record bands: NetCDF classic record variables, FITS table columns)
    grids.py    Grid (chunked or compressed datasets a reader decodes: HDF5, zarr, FITS images)
                and the one grid walker (BlockGrid) of ceiling-division block grids
    reads.py    the one positioned read, its error (SourceError) and the one file Window

A storage reads in one of two shapes: `flat` storages yield (first item, uint8 array of whole
items) from `chunks(task, item_bytes, chunk_bytes)`; the others yield (origin, N-d array) from
`blocks(task, chunk_bytes)`, with `where(task)` mapping an origin and a row of a block to the
tensor's index. `units(task)` counts what a task's `first`/`count` select (items, rows or
blocks) and `parts(task, task_bytes)` cuts a large task into parts that run in parallel.
"""

from __future__ import annotations

#: Default bytes per chunk: small enough to stay in cache between the read and the classification
#: (4 MiB read as fast as 32 MiB mapped in benchmarks/bench_scan.py; 32 MiB reads were 2.5x slower).
CHUNK_BYTES = 4 << 20


def _same(origin, row):
    return tuple(o + r for o, r in zip(origin, row))


class Storage:
    """What every storage answers (each kind is a frozen dataclass deriving from this)."""

    __slots__ = ()
    #: The kind's name, as messages and tests name it.
    kind = ""
    #: Read as flat chunks of whole items (True) or as N-d blocks (False).
    flat = True
    #: Dimensions of the view overlap in the stored bytes (Strided only).
    overlap = False
    #: `chunks` takes a read sieve (operators/read_sieve.py: Range only).
    sieves = False
    # Every kind has `source` (the file holding the bytes; "" when the task holds them) and
    # `nbytes` (the stored bytes); they are fields of the kinds, not class attributes here, as a
    # dataclass would take a class attribute for a default.

    def units(self, task) -> int:
        """How many units (items, rows, blocks) `first`/`count` of a task count."""
        return task.items

    def parts(self, task, task_bytes: int) -> list:
        """(first, count) of the parts a task of about `task_bytes` each is cut into; [] when it
        is read whole."""
        return []

    def where(self, task):
        """(origin, row) -> the tensor's index of a value of a block (N-d storages)."""
        return _same


def cut(units: int, nbytes: int, task_bytes: int, per: int = 0) -> list:
    """(first, count) parts of `units` units holding `nbytes`, about `task_bytes` each (`per`
    units each when given)."""
    per = per or max(1, units * task_bytes // max(nbytes, 1))
    return [(first, min(per, units - first)) for first in range(0, units, per)]
