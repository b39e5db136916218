"""Bytes a task holds itself: arrays pickled inline in a checkpoint, values a reader decoded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._records import stored_through_slots
from . import Storage
from .reads import SourceError


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Inline(Storage):
    """`data`, which must hold `nbytes` bytes: the items in storage order."""

    data: bytes
    nbytes: int
    kind = "inline"
    source = ""  # no file holds them

    def chunks(self, task, item_bytes: int, chunk_bytes: int):
        if len(self.data) != self.nbytes:
            raise SourceError(f"inline data holds {len(self.data)} bytes, {self.nbytes} "
                              "expected")
        first = task.first
        count = (self.nbytes // item_bytes - first) if task.count < 0 else task.count
        yield first, np.frombuffer(self.data, np.uint8)[first * item_bytes:
                                                        (first + count) * item_bytes]
