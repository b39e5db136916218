"""The storage kinds of scan tasks (fpclass.scan.storage): small frozen picklable objects that
read their own bytes, so the engine needs no change for a new kind; the one grid walker, band
reader, window and positioned read. Truth: NumPy on the same bytes."""

import dataclasses
import io
import itertools
import math
import os
import pickle
from dataclasses import dataclass

import numpy as np
import pytest

from fpclass.scan import run_task
from fpclass.scan.storage import Storage
from fpclass.scan.storage.bands import Bands, read_bands
from fpclass.scan.storage.grids import BlockGrid, Grid
from fpclass.scan.storage.inline import Inline
from fpclass.scan.storage.members import Member
from fpclass.scan.storage.ranges import Range, Varints
from fpclass.scan.storage.reads import SourceError, Window, read_exactly
from fpclass.scan.storage.strided import Strided
from fpclass.scan.tasks import Task

KINDS = [Range("f", 8, 16), Varints("f", 0, 3), Member("a.npz", 30, 16, "x.npy", 128, 7, True, 9),
         Inline(b"\0" * 8, 8), Strided("f", 0, 32, (1, 4), (), False),
         Bands("f", 4, 24, 10, ">f4"), Grid("f.h5", "hdf5", 64, 4, "g/d")]


@pytest.mark.parametrize("storage", KINDS, ids=lambda s: s.kind)
def test_each_kind_is_small_frozen_picklable_and_named(storage):
    assert not hasattr(storage, "__dict__")
    assert pickle.loads(pickle.dumps(storage)) == storage
    assert hash(storage) == hash(dataclasses.replace(storage))
    with pytest.raises(dataclasses.FrozenInstanceError):
        storage.nbytes = 1
    assert storage.kind and isinstance(storage.nbytes, int)
    t = Task("f", "n", "F32", (2,), element="<f4", grid=(2,), storage=storage)
    assert pickle.loads(pickle.dumps(t)) == t


@dataclass(frozen=True, slots=True)
class _Reversed(Storage):
    """A kind the engine has never heard of: the bytes of a file in reverse order of items."""

    source: str
    nbytes: int
    kind = "reversed"

    def chunks(self, task, item_bytes, chunk_bytes):
        data = np.fromfile(self.source, np.uint8).reshape(-1, item_bytes)[::-1].reshape(-1)
        yield 0, np.ascontiguousarray(data)


def test_a_new_kind_needs_no_change_in_the_engine(tmp_path):
    a = np.array([1, np.nan, 3, np.inf], "<f4")
    path = tmp_path / "x.bin"
    a.tofile(path)
    task = Task(str(path), "x", "F32", (4,), element="<f4", grid=(4,),
                storage=_Reversed(str(path), a.nbytes))
    r = run_task(task, 10)
    assert (r.status, r.nan, r.posinf) == ("checked", 1, 1)
    assert [(loc.index, loc.cls) for loc in r.locations] == [((0,), "posinf"), ((2,), "nan")]


@pytest.mark.parametrize("shape,block", [((7, 5), (3, 2)), ((4,), (4,)), ((), ()),
                                         ((2, 3, 4), (1, 2, 3)), ((0, 3), (2, 2))])
def test_block_grid_walks_every_element_once_in_c_order_of_the_grid(shape, block):
    g = BlockGrid(shape, block)
    assert g.grid == tuple(math.ceil(n / b) for n, b in zip(shape, block))
    seen = np.zeros(shape, int)
    order = []
    for idx, start, count in g.each(0, g.count):
        order.append(idx)
        seen[tuple(slice(s, s + c) for s, c in zip(start, count))] += 1
    assert order == list(itertools.product(*(range(n) for n in g.grid)))
    assert (seen == 1).all()
    for limit in (1, 2, 5):  # boxes: the same blocks, several at a time
        covered = [g.index(k) for k in range(g.count)]
        boxed = [tuple(s + o for s, o in zip(start, one))
                 for start, extent in g.boxes(0, g.count, limit)
                 for one in itertools.product(*(range(e) for e in extent))]
        assert boxed == covered


@pytest.mark.parametrize("row,inner", [(13, (3,)), (8, ()), (40, (2, 3))])
def test_read_bands_gives_the_rows_a_strided_view_would(tmp_path, row, inner):
    rows, item = 11, np.dtype(">f4")
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 7 + rows * row + 5, dtype=np.uint8)
    path = tmp_path / "rec.bin"
    data.tofile(path)
    field = math.prod(inner) * item.itemsize
    strides = (row,) + tuple(int(np.prod(inner[k + 1:])) * item.itemsize
                             for k in range(len(inner)))
    truth = np.ndarray((rows,) + inner, item, data.tobytes(), 7, strides)
    bands = Bands(str(path), 7, rows * field, row)
    for first, stop, chunk in ((0, rows, 1), (2, 9, 3 * row), (0, rows, 1 << 20)):
        got = [(o, b.copy()) for o, b in read_bands(bands, (rows,) + inner, item, first, stop,
                                                    chunk)]
        assert np.array_equal(np.concatenate([b for _, b in got]), truth[first:stop],
                              equal_nan=True)
        assert [o[0] for o, _ in got] == list(itertools.accumulate(
            [first] + [len(b) for _, b in got[:-1]]))


def test_window_is_a_file_of_its_own_and_positioned_reads_fail_with_one_error(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(range(100)))
    with io.BufferedReader(Window(str(path), 10, 20)) as w:
        assert w.read(5) == bytes(range(10, 15))
        w.seek(-3, io.SEEK_END)
        assert w.read() == bytes(range(27, 30)) and w.read() == b""
    with Window(str(path), 90) as w:   # to the end of the file
        assert w.read() == bytes(range(90, 100))
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = bytearray(8)
        read_exactly(fd, memoryview(buf), 92, str(path))
        assert bytes(buf) == bytes(range(92, 100))
        with pytest.raises(SourceError, match="ended at byte 100"):
            read_exactly(fd, memoryview(buf), 95, str(path))
    finally:
        os.close(fd)
