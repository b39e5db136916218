"""`--verify`: each file read once, in order, in blocks; every block is hashed and the tasks whose
bytes lie in it (raw byte ranges, stored zip members) are classified from the same block, so the
hash costs no second read. Files run on a pool of threads; within a file the hash of a block runs
beside the classification of that block (hashlib and the kernels release the GIL)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import threading
import zlib

import numpy as np

from .._oserrors import describe
from ..results import build
from ..results.integrity import Check, FileIntegrity
from .dtypes import np_dtype
from .density import Gatherer
from .run import (Interrupted, add_blocks, add_elements, block_fields, needs_reading,
                  new_tally, with_map)
from .storage.members import Member
from .storage.ranges import Range
from .storage.reads import (SourceError, close_source, open_source, read_exactly,
                            source_size)

#: Bytes read, hashed and classified at a time (as the scan's chunks: they stay in cache).
BLOCK_BYTES = 4 << 20


def streams_with(task, path: str) -> bool:
    """Whether `task` is classified from the blocks of `path` as they are hashed: a reading task
    whose bytes are a raw range of `path` or a whole stored (not compressed) member of it."""
    s = task.storage
    if not needs_reading(task) or getattr(s, "source", None) != path:
        return False
    if isinstance(s, Range):
        return True
    return isinstance(s, Member) and not s.deflate and task.count < 0


def hash_files(files, tasks_of, references, *, max_locations: int, threads: int, stop,
               progress=None, block_bytes: int | None = None,
               maps: bool = False) -> tuple[dict, list]:
    """Hash each of `files` ({path: [(index, task)] streamed with it} in `tasks_of`) on `threads`
    threads, classifying its streamed tasks on the way. Returns ({index: result}, [FileIntegrity]
    in the order of `files`); `references` is {path: [Reference]}. `maps`: the results carry
    the density maps of their findings."""
    block_bytes = block_bytes or BLOCK_BYTES
    results: dict = {}
    integrity: list = [None] * len(files)
    lock = threading.Lock()
    pending = iter(range(len(files)))
    errors: list = []

    def work():
        with concurrent.futures.ThreadPoolExecutor(1, "fpclass-hash") as hasher:
            while not stop.is_set():
                with lock:
                    k = next(pending, None)
                if k is None:
                    return
                path = files[k]
                try:
                    integrity[k] = _stream(path, tasks_of.get(path, []),
                                           references.get(path, []), results, max_locations,
                                           stop, hasher, block_bytes, progress, lock, maps)
                except Interrupted:  # the caller answers the unfinished tasks
                    return
                except BaseException as e:  # surfaced in the calling thread
                    errors.append(e)
                    stop.set()

    workers = [threading.Thread(target=work, name=f"fpclass-verify-{i}", daemon=True)
               for i in range(max(1, min(threads, len(files))))]
    for w in workers:
        w.start()
    for w in workers:
        while w.is_alive():
            w.join(0.2)  # a timed join lets Ctrl-C reach this thread
    if errors:
        raise errors[0]
    return results, integrity


class _Streamed:
    """One task classified from the blocks of its file that hold its bytes [start, end): whole
    items are classified in place, an item split by a block boundary is joined first."""

    def __init__(self, index, task, max_locations, maps=False):
        s = task.storage
        self.index, self.task = index, task
        self.item = task.block_bytes or np_dtype(task.element).itemsize
        self.fields = block_fields(task) if task.block_bytes else None
        if isinstance(s, Member):  # the whole member is read: its CRC-32 is checked
            first, count = 0, s.nbytes // self.item
            self.begin, self.crc = s.offset, 0
            self.start = s.offset + s.skip
        else:
            first = task.first
            count = (s.nbytes // self.item - first) if task.count < 0 else task.count
            self.crc = None
            self.begin = self.start = s.offset + first * self.item
        self.next_item = first
        self.end = self.start + count * self.item
        self.tally = new_tally(task, max_locations)
        self.gather = Gatherer(task) if maps else None
        self.carry = bytearray()

    def feed(self, block: np.ndarray, at: int) -> None:
        """Take this task's part of `block`, the file's bytes from byte `at`."""
        if self.crc is not None:
            lo, hi = max(self.begin, at), min(self.end, at + block.size)
            if lo < hi:
                self.crc = zlib.crc32(block[lo - at:hi - at], self.crc)
        lo, hi = max(self.start, at), min(self.end, at + block.size)
        if lo >= hi:
            return
        piece = block[lo - at:hi - at]
        if self.carry:
            take = min(self.item - len(self.carry), piece.size)
            self.carry += piece[:take].tobytes()
            piece = piece[take:]
            if len(self.carry) == self.item:
                self._classify(np.frombuffer(bytes(self.carry), np.uint8))
                self.carry = bytearray()
        whole = piece.size - piece.size % self.item
        if whole:
            self._classify(piece[:whole])
        if whole < piece.size:
            self.carry += piece[whole:].tobytes()

    def _classify(self, chunk: np.ndarray) -> None:
        if chunk.ctypes.data % self.item % 8:  # kernels read aligned items
            chunk = chunk.copy()
        first, self.next_item = self.next_item, self.next_item + chunk.size // self.item
        if self.fields is None:
            add_elements(self.task, self.tally, first, chunk, self.gather)
        else:
            add_blocks(self.task, self.tally, self.fields, first, chunk, self.gather)

    def result(self):
        s = self.task.storage
        if self.crc is not None and self.crc != s.crc:
            return build.unchecked_item(self.task, f"member {s.name}: CRC-32 mismatch "
                                                   "(corrupt archive)")
        return with_map(self.tally.result(), self.gather)


def _stream(path, streamed, references, results, max_locations, stop, hasher, block_bytes,
            progress, lock, maps) -> FileIntegrity:
    states = sorted((_Streamed(i, t, max_locations, maps) for i, t in streamed),
                    key=lambda s: s.begin)
    digests = {"sha256": hashlib.sha256()}
    if any(r.algorithm == "git-sha1" for r in references):
        digests["git-sha1"] = hashlib.sha1()
    try:
        fd = open_source(path)
        try:
            size = _read_all(fd, path, states, digests, results, stop, hasher, block_bytes,
                             progress, lock)
        finally:
            close_source(fd)  # a remote file that changed while it was read: SourceError
    except (SourceError, OSError) as e:
        return _unreadable(path, states, results, str(e) if isinstance(e, SourceError)
                           else f"cannot read: {describe(e)}", progress, lock)
    short = [s for s in states if s.index not in results]
    for s in short:
        results[s.index] = build.unchecked_item(
            s.task, f"data ends at byte {s.end} but {path} has {size} bytes (truncated?)")
    actual = {name: h.hexdigest() for name, h in digests.items()}
    checks = tuple(Check(r.source, r.algorithm, r.digest, actual[r.algorithm])
                   for r in references)
    return FileIntegrity(path, actual["sha256"], checks)


def _read_all(fd, path, states, digests, results, stop, hasher, block_bytes, progress,
              lock) -> int:
    """Read the file behind `fd` in order, hashing each block and feeding it to `states`;
    its size."""
    size = source_size(fd)
    if "git-sha1" in digests:
        digests["git-sha1"].update(b"blob %d\0" % size)
    buffers = [np.empty(min(block_bytes, max(size, 1)), np.uint8) for _ in range(2)]
    hashing = None
    active, at, k = 0, 0, 0
    while at < size:
        if stop.is_set():
            raise Interrupted
        block = buffers[k % 2][: min(block_bytes, size - at)]
        read_exactly(fd, memoryview(block), at, path)
        if hashing is not None:
            hashing.result()  # the other buffer is free again
        hashing = hasher.submit(_update, digests, block)
        while active < len(states) and states[active].end <= at:
            active += 1
        for s in states[active:]:
            if s.begin >= at + block.size:
                break
            if s.index not in results:
                s.feed(block, at)
                if s.end <= at + block.size:
                    _finish(s, results, progress, lock)
        at += block.size
        k += 1
    if hashing is not None:
        hashing.result()
    return size


def _update(digests, block) -> None:
    for h in digests.values():
        h.update(block)


def _finish(s, results, progress, lock) -> None:
    results[s.index] = s.result()
    if progress is not None:
        with lock:
            progress(s.task, results[s.index])


def _unreadable(path, states, results, reason, progress, lock) -> FileIntegrity:
    for s in states:
        if s.index not in results:
            results[s.index] = build.unchecked_item(s.task, reason)
    return FileIntegrity(path, None, (), reason)
