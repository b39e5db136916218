"""Reading HDF5 datasets block by block (tasks of Grid storage planned by hdf5.py).

Blocks follow the dataset's own chunking (a contiguous or compact one in slabs of about
SLAB_BYTES), each read with HDF5's file type as the memory type so the bytes come back as stored
(decompressed, never converted). Chunks that are unfiltered, shuffled, deflated or LZF-compressed
(h5py's filter) are read with positioned reads at the offset HDF5 gives for them and decoded here:
faster than through h5py (measured 2.5x for shuffle + deflate, 1.4x unfiltered), and outside the
lock h5py holds around every HDF5 call, so the parts of a dataset (storage.grids cuts compressed
ones small) decompress on every scan thread. A block whose storage was never
allocated holds the fill value everywhere: it is read as one element through HDF5 (what every
reader of the file gets); a finite fill value is reported checked from that one value, a NaN or
Inf one is counted for every element of the block. A task with a CF policy (its Grid storage's
`decode`) reads the stored values and yields them decoded (scan/missing/cf.py).
"""

from __future__ import annotations

import math
import zipfile
import zlib
from dataclasses import replace

import numpy as np

from . import ReaderError
from ... import count_nonfinite
from .hdf5_container import MEMBER_SEP, _h5_file, _member_bytes
from .hdf5_index import any_chunk
from .hdf5_runs import MIN_CHUNKS, RUN_BYTES, chunk_table, info_of, run_spans, runs
from .hdf5_types import _h5py, leaf_values, parts
from ..missing import cf
from ..storage.buffers import thread_buffer
from ..storage.classified import FiniteBlock
from ..storage.grids import BlockGrid
from ..storage.reads import SourceError, close_source, open_source, source_size, read_exactly
from ..storage.reads import path_size, zip_file
from ..dtypes import np_dtype
from ...kernels.lzf import lzf_decompress
from ...kernels.unshuffle import unshuffle
from ...operators import read_sieve as sieves
from ...operators.shuffled import SIZES, finite_shuffled_stats
from ...operators.statistics import ValueStats
from ..tasks import Field, Task

#: Contiguous and compact datasets read through h5py are read in slabs of about this many bytes.
SLAB_BYTES = 4 << 20
#: Runs of chunks the read sieve reads in one call: a call's cost (the GIL, numba's dispatch)
#: paid once for many runs, which HDF5's index nodes cut every 57 chunks or so.
SIEVED_BYTES = 16 << 20


def block_shape(dsid, dcpl, shape, layout, h5d, record: int) -> tuple:
    """The shape of the blocks a dataset (low-level id `dsid`, creation property list `dcpl`,
    of shape `shape` and layout `layout`) is read in: its chunks (the whole dataset when no
    chunk was ever written: one fill value); for a contiguous or compact dataset, whole
    trailing axes and a piece of the next one, about SLAB_BYTES."""
    shape = tuple(shape)
    if layout == h5d.CHUNKED:
        chunk = tuple(dcpl.get_chunk())
        # a dataset of fewer chunks than chunk_table reads at once is counted: HDF5's iteration
        # stopped at the first needs numba (hdf5_index), which scanning small files never loads
        cells = math.prod(-(-n // c) for n, c in zip(shape, chunk))
        written = any_chunk(dsid) if cells >= MIN_CHUNKS else dsid.get_num_chunks() > 0
        return chunk if written else shape
    out = list(shape)
    span = record
    for axis in range(len(shape) - 1, -1, -1):
        if span * shape[axis] <= SLAB_BYTES:
            span *= shape[axis]
            continue
        out[axis] = max(1, SLAB_BYTES // span)
        for outer in range(axis):
            out[outer] = 1
        break
    return tuple(out)



#: HDF5 filters decoded here, so that chunks are read without holding h5py's lock: deflate,
#: shuffle, and h5py's LZF (registered filter 32000).
FILTER_DEFLATE, FILTER_SHUFFLE, FILTER_LZF = 1, 2, 32000


def _decodes(code: int, cd: tuple) -> bool:
    """Whether filter `code` with client data `cd` is decoded here: the parameters HDF5's own
    filter accepts (deflate refuses to read with a level outside 0..9)."""
    return ((code == FILTER_DEFLATE and len(cd) == 1 and cd[0] <= 9)
            or (code == FILTER_SHUFFLE and len(cd) >= 1 and cd[0] > 0)
            or code == FILTER_LZF)


def _open(h5py, task: Task) -> tuple:
    """(h5py.File, its file closers, the dataset's path, (file, start) where the HDF5 bytes
    lie) for a task of Grid storage."""
    if MEMBER_SEP not in task.storage.member:
        f, closers = _h5_file(h5py, task.source, 0, path_size(task.source),
                              rdcc_nbytes=0)
        return f, closers, task.storage.member, (task.source, 0)
    zname, dpath = task.storage.member.split(MEMBER_SEP, 1)
    with zip_file(task.source) as z:
        where = _member_bytes(task.source, z, z.getinfo(zname))
    f, closers = _h5_file(h5py, *where, rdcc_nbytes=0)
    return f, closers, dpath, where[:2]


def read_blocks(task: Task, chunk_bytes: int):
    """Yield (origin, block) for blocks [first, first + count) of a task of Grid storage, in the
    dataset's chunk order (C order of the chunk grid); see the module docstring."""
    h5py = _h5py()
    try:
        f, closers, dpath, raw = _open(h5py, task)
    except (OSError, KeyError, ReaderError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        where = task.storage.member.replace(MEMBER_SEP, '/')
        raise SourceError(f"cannot open {where}: {e}") from None
    try:
        with f:
            dset = f.get(dpath.encode("utf-8", "surrogateescape"))  # names as the walk read them
            if not isinstance(dset, h5py.Dataset):
                raise SourceError(f"{dpath} is no longer a dataset (the file changed?)")
            blocks = _Blocks(h5py, dset, task, raw).blocks()
            if task.storage.decode is not None:
                blocks = cf.decode_blocks(blocks, task.storage.decode, chunk_bytes)
            yield from blocks
    except (ValueError, RuntimeError, KeyError) as e:  # h5py's errors for a corrupt file
        raise SourceError(f"HDF5: {e}") from None
    finally:
        for c in closers:
            c.close()


class _Blocks:
    """Reads the blocks of one dataset leaf."""

    def __init__(self, h5py, dset, task: Task, raw: tuple):
        self.h5py, self.dset, self.task = h5py, dset, task
        self.raw_path, self.raw_start = raw  # where the HDF5 file's bytes lie
        h5d = h5py.h5d
        self.id = dset.id
        self.ftype = self.id.get_type()
        self.record = self.ftype.get_size()
        field = task.fields[0] if task.fields else Field("", 0, task.element)
        self.element = field.element  # as stored (a CF task decodes it into task.element)
        found = [p for p in parts(h5py, self.ftype) if p.suffix == field.name]
        if found and task.storage.decode is not None and found[0].label == field.element:
            found = [replace(found[0], element=field.element)]  # integers a CF policy unpacks
        if not found or found[0].element != field.element or found[0].offset != field.offset:
            raise SourceError("the dataset's type differs from the one planned (the file "
                              "changed?)")
        self.part = found[0]
        self.shape = tuple(dset.shape or ())
        if self.shape + self.part.sub_shape != tuple(task.shape):
            raise SourceError(f"the dataset's shape is {list(self.shape)}, "
                              f"{list(task.shape)} was planned (the file changed?)")
        dcpl = self.id.get_create_plist()
        self.layout = dcpl.get_layout()
        self.block = block_shape(self.id, dcpl, self.shape, self.layout, h5d, self.record)
        self.walk = BlockGrid(self.shape, self.block)
        self.grid = self.walk.grid
        if math.prod(self.grid) != task.storage.nblocks:
            raise SourceError(f"the dataset has {math.prod(self.grid)} blocks, "
                              f"{task.storage.nblocks} were planned (the file changed?)")
        # Chunks unfiltered or through the filters decoded here are read at their offsets,
        # without HDF5 (whose lock lets one thread read at a time).
        self.filters = [dcpl.get_filter(i)[:3] for i in range(dcpl.get_nfilters())]
        self.direct = (self.layout == h5d.CHUNKED
                       and all(_decodes(code, cd) for code, _, cd in self.filters)
                       and sum(code == FILTER_LZF for code, _, _ in self.filters) <= 1)
        self.item = np_dtype(self.element).itemsize
        plain = (not self.part.offset and not self.part.complex and not self.part.sub_shape
                 and self.record == self.item and task.storage.decode is None)
        # Runs of plain float records are read and classified in one call (_runs); their
        # chunks, shuffled, are classified as stored (_classified).
        self.sieved = np_dtype(self.element) if plain else None
        self.shuffled = self.sieved if self.item in SIZES else None
        # Storage never allocated reads as the fill value, unless HDF5 writes none there.
        self.no_fill = (dcpl.get_fill_time() == h5d.FILL_TIME_NEVER
                        or dcpl.fill_value_defined() == h5d.FILL_VALUE_UNDEFINED)

    def blocks(self):
        total = math.prod(self.grid)
        first = self.task.first
        last = total if self.task.count < 0 else min(total, first + self.task.count)
        h5d = self.h5py.h5d
        unallocated = (self.layout == h5d.CONTIGUOUS
                       and self.id.get_space_status() != h5d.SPACE_STATUS_ALLOCATED)
        table = chunk_table(self.id, self.grid, self.block, first, last) \
            if self.layout == h5d.CHUNKED and self.direct else None
        if table is not None:  # many chunks: one pass over the index, runs read at once
            yield from self._runs(table, first, last)
            return
        fd = None
        try:
            for _, start, count in self.walk.each(first, last):
                origin = start + (0,) * len(self.part.grid_tail)
                if self.layout == h5d.CHUNKED:
                    info = self.id.get_chunk_info_by_coord(start)
                    if info.byte_offset is None:
                        yield origin, self._fill(start, count)
                    elif self.direct:
                        if fd is None:
                            fd = open_source(self.raw_path)
                        yield origin, self._chunk_at(fd, info, count)
                    else:
                        yield origin, self._read(start, count)
                elif unallocated:
                    yield origin, self._fill(start, count)
                else:
                    yield origin, self._read(start, count)
        finally:
            if fd is not None:
                close_source(fd)

    def _runs(self, table, first, last):
        """The chunks [first, last) as hdf5_runs groups them: back-to-back unfiltered chunks
        along the first axis read at once, every other chunk as `blocks` reads it. Runs of plain
        float records that their values fill (none past the dataset's end, or past its edge
        along a trailing axis of chunks wider than the dataset) are read and classified by the
        read sieve (_sieved); the others are read and yielded as their values (_run)."""
        nbytes = math.prod(self.block) * self.record
        whole = not self.filters and all(g == 1 for g in self.grid[1:])
        fd = open_source(self.raw_path)
        try:
            # (the sieve reads local files: a URL's runs are read the usual way)
            sieve = sieves.read_sieve(self.sieved, RUN_BYTES) \
                if whole and self.sieved is not None and fd.__class__ is int else None
            if sieve is None:
                tail = (0,) * len(self.part.grid_tail)
                for start, count, info, chunks in runs(table, self.walk, first, last, nbytes,
                                                       whole):
                    yield start + tail, self._run(fd, start, count, info, chunks, nbytes)
                return
            yield from self._sieved(fd, sieve, table, first, nbytes)
            if sieve.values:
                yield (), FiniteBlock(0, 0, sieve.stats())
        finally:
            close_source(fd)

    def _sieved(self, fd, sieve, table, first, nbytes):
        """`_runs` of chunks spanning the trailing axes through the read sieve: consecutive runs
        that their values fill, up to SIEVED_BYTES of them in one call, those it keeps as one
        FiniteBlock (their statistics in the sieve's); the first it does not keep is read as its
        values, and the sieve goes on from the run after it."""
        head, chunks, row, rows = run_spans(table, self.walk, first, nbytes)
        lengths = chunks * nbytes
        positions = self.raw_start + table[head, 0]
        rest = tuple(self.shape[1:])
        row_values = math.prod(rest)
        fills = (chunks > 1) & (rows * (row_values * self.record) == lengths) \
            & (lengths > sieves.SMALL_BYTES)
        pieces = thread_buffer("read", sieves.PIECE_BYTES)
        zeros = (0,) * (len(rest) + len(self.part.grid_tail))
        flags, sizes = fills.tolist(), lengths.tolist()

        def usual(j):  # run j read the usual way, where it lies in the task's part
            start = (int(row[j]),) + zeros[:len(rest)]
            return start + zeros[len(rest):], self._run(
                fd, start, (int(rows[j]),) + rest, info_of(table[head[j]], start),
                int(chunks[j]), nbytes)

        k, n = 0, len(flags)
        while k < n:
            if not flags[k]:
                yield usual(k)
                k += 1
                continue
            end, held = k, 0
            while end < n and flags[end] and held < SIEVED_BYTES:
                held += sizes[end]
                end += 1
            kept = k + sieve.read_runs(fd, pieces, positions[k:end], lengths[k:end])
            if kept > k:
                records = int(row[kept - 1] + rows[kept - 1] - row[k])
                yield (int(row[k]),) + zeros, FiniteBlock(records * row_values,
                                                          sum(sizes[k:kept]), ValueStats())
            if kept < end:  # read as its values; the sieve goes on from the next run
                yield usual(kept)
                kept += 1
            k = kept

    def _run(self, fd, start, count, info, chunks, nbytes):
        """A run of `runs` read the usual way: the fill value where never written, one chunk
        (decoded here), or back-to-back chunks read at once."""
        if info is None:
            return self._fill(start, count)
        if chunks == 1:
            return self._chunk_at(fd, info, count)
        return self._run_at(fd, info, count, chunks, nbytes)

    def _run_at(self, fd, info, count, chunks, nbytes):
        """`chunks` unfiltered chunks of `nbytes` each from the one `info` describes, back to
        back in the file along the first axis (`count` records of the array), read at once."""
        at = self.raw_start + info.byte_offset
        end = at + chunks * nbytes
        if end > source_size(fd):
            raise SourceError(f"chunks from {list(info.chunk_offset)} end at byte {end}, past "
                              "the end of the file (truncated or corrupt)")
        buf = self._buffer(end - at)
        read_exactly(fd, memoryview(buf), at, self.raw_path)
        return self._view(buf, count, (chunks * self.block[0],) + self.block[1:])

    def _buffer(self, nbytes: int) -> np.ndarray:
        return thread_buffer("decoded", nbytes)

    def _view(self, buf, count, full=None):
        """The leaf's values in records of shape `full` (default `count`) held by `buf`, cut to
        `count`."""
        return leaf_values(buf, count, self.record, self.part, full)

    def _read(self, start, count):
        """Records [start, start + count) through HDF5, in the file's own type."""
        h5s = self.h5py.h5s
        buf = self._buffer(math.prod(count) * self.record)
        fspace = self.id.get_space()
        if self.shape:
            if not math.prod(count):
                return self._view(buf, count)
            fspace.select_hyperslab(start, count)
            mspace = h5s.create_simple(count)
        else:
            mspace = h5s.create(h5s.SCALAR)
        self.id.read(mspace, fspace, buf, mtype=self.ftype)
        return self._view(buf, count)

    def _chunk_at(self, fd, info, count):
        """A chunk read at its offset in the file and decoded here (chunks are stored whole,
        even at the dataset's edges)."""
        nbytes = math.prod(self.block) * self.record
        where = f"chunk at {list(info.chunk_offset)}"
        end = self.raw_start + info.byte_offset + info.size
        if end > source_size(fd):
            raise SourceError(f"{where} ends at byte {end}, past the end of the file "
                              "(truncated or corrupt)")
        if not self.filters:
            if info.size != nbytes:
                raise SourceError(f"{where} holds {info.size} bytes, {nbytes} expected")
            buf = self._buffer(nbytes)
            read_exactly(fd, memoryview(buf), self.raw_start + info.byte_offset, self.raw_path)
            return self._view(buf, count, self.block)
        data = memoryview(thread_buffer("packed", info.size))
        read_exactly(fd, data, self.raw_start + info.byte_offset, self.raw_path)
        # Filters were applied in pipeline order when written: undone in reverse, skipping
        # those the chunk's filter mask says were not applied.
        for i in reversed(range(len(self.filters))):
            if info.filter_mask & (1 << i):
                continue
            code, _, cd = self.filters[i]
            if code == FILTER_DEFLATE:  # every stage decodes to at most the chunk's bytes:
                try:                      # one more is never inflated (a bomb stops there)
                    inflate = zlib.decompressobj()
                    data = inflate.decompress(data, nbytes + 1)
                except zlib.error as e:
                    raise SourceError(f"{where}: corrupt deflate data ({e})") from None
                if not inflate.eof:
                    raise SourceError(f"{where}: corrupt deflate data (longer than the chunk, "
                                      "or cut short)")
            elif code == FILTER_LZF:  # every filter here keeps the chunk's size when decoded
                inflated = thread_buffer("inflated", nbytes)
                size = lzf_decompress(data, inflated)
                if size < 0:
                    raise SourceError(f"{where}: corrupt LZF data")
                data = memoryview(inflated)[:size]
            else:
                if (self.shuffled is not None and cd[0] == self.record and len(data) == nbytes
                        and info.filter_mask & ((1 << i) - 1) == (1 << i) - 1):
                    found = self._classified(data, count)  # shuffle is the last filter undone
                    if found is not None:
                        return found
                data = unshuffle(data, cd[0], self._buffer(len(data)))
        if len(data) != nbytes:
            raise SourceError(f"{where} decodes to {len(data)} bytes, {nbytes} expected")
        return self._view(np.frombuffer(data, np.uint8), count, self.block)

    def _classified(self, data, count):
        """The chunk whose bytes `data` holds shuffled, `count` of it in the dataset, classified
        without unshuffling it to memory: a FiniteBlock, or None when it holds a NaN or Inf (to
        be located) or cannot be read so (cut short along an inner axis, the kernels cold)."""
        if tuple(count[1:]) != self.block[1:]:
            return None  # the values in the dataset are no prefix of the chunk
        values = math.prod(count)
        stats = finite_shuffled_stats(data, self.shuffled, values)
        if stats is None:
            return None
        return FiniteBlock(values, values * self.item, stats)

    def _fill(self, start, count):
        """A block whose storage was never allocated: every record is the fill value, read as one
        record through HDF5. A finite value is given once; a NaN or Inf one for every record."""
        if self.no_fill:
            raise SourceError("storage never written and no fill value written there (fill time "
                              "'never' or no fill value): its values are undefined")
        one = self._read(start, (1,) * len(start))
        values = np.array(one)  # a copy: the buffer is reused
        if self.task.storage.decode is None and not count_nonfinite(values):
            return values
        return np.broadcast_to(values.reshape(values.shape[len(start):]),
                               tuple(count) + values.shape[len(start):])
