"""Reads of one buffer in per-thread parts (kernels/threads.py SplitChoice, the screens of
kernels/launch_buffers.py): the parts' answers against NumPy's isfinite with a non-finite value
at every part's edges, the choice's schedule with scripted read times, and fpclass.torch.watch
marking its passes."""

import threading

import ml_dtypes
import numpy as np
import pytest

from fpclass.kernels import buffers as kernels
from fpclass.kernels import threads
from fpclass.kernels.threads import SplitChoice
from fpclass.operators.buffers import nonfinite_screen

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64,
          ml_dtypes.float8_e4m3fn]


@pytest.fixture
def split_everything(monkeypatch):
    """The process's choice held at "split" for buffers of 64 elements and more; the calls of
    the parts' kernels recorded."""
    monkeypatch.setattr(threads, "SPLIT_MIN", 64)
    monkeypatch.setattr(threads.SPLIT, "split", True)
    monkeypatch.setattr(threads.SPLIT, "mark", lambda: None)
    calls = []
    for name in ("count_at_parallel", "max_at_parallel"):  # the screens', the bounds'
        monkeypatch.setattr(kernels, name, _recording(getattr(kernels, name), calls))
    return calls


def _recording(kernel, calls):
    def recording(addresses, lengths, *rest):
        calls.append((addresses.copy(), lengths.copy()))
        return kernel(addresses, lengths, *rest)
    return recording


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [64, 65, 1001, 4096])
def test_parts_find_a_value_at_every_edge(dtype, n, split_everything):
    """The parts tile the buffer's words (no gap, no overlap), and a non-finite value at the
    first or last word of any part, written through the word view, is found."""
    if not 2 <= threads.get_num_threads() <= 64:
        pytest.skip("one numba thread here (nothing to split), or more than the shortest buffer")
    screen = nonfinite_screen(np.dtype(dtype))
    clean = np.linspace(-2, 2, n).astype(dtype)
    assert screen(clean.ctypes.data, n) is False
    addresses, lengths = split_everything[-1]
    word = {np.complex64: np.float32}.get(dtype, dtype)
    words = clean.view(word)
    assert lengths.size == threads.get_num_threads() and (lengths > 0).all()
    assert lengths.max() - lengths.min() <= 1
    assert int(lengths.sum()) == words.size
    ends = np.cumsum(lengths)
    starts = ends - lengths
    assert (addresses == clean.ctypes.data + starts * words.itemsize).all()
    bad = np.array([np.nan, np.inf, -np.inf], np.float32).astype(word)
    for position in sorted(set(starts) | set(ends - 1)):
        for value in bad:
            x = clean.copy()
            x.view(word)[position] = value
            expected = not np.isfinite(x.astype(np.complex128)).all()
            assert screen(x.ctypes.data, n) is expected is True, (position, value)


def test_below_the_split_size_one_thread_reads(split_everything):
    screen = nonfinite_screen(np.dtype(np.float32))
    x = np.ones(63, np.float32)
    x[62] = np.nan
    assert screen(x.ctypes.data, x.size) is True
    assert split_everything == []


def test_a_foreign_thread_never_splits(split_everything):
    if threads.get_num_threads() < 2:
        pytest.skip("one numba thread here: nothing to split")
    assert threads.SPLIT.threads(1000) == threads.get_num_threads()  # the main thread splits
    answers = []
    worker = threading.Thread(target=lambda: answers.append(threads.SPLIT.threads(1000)))
    worker.start()
    worker.join()
    assert answers == [1]


class _Clock:
    """A clock that moves only when a test says."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _periods(choice, clock, count, seconds_alone, seconds_split, reads=True):
    """Run `count` periods: mark, then (with `reads`) a read that ends when the period's time for
    the way the choice reads now has passed, then untimed work. The split flag of each period."""
    ways = []
    for _ in range(count):
        choice.mark()
        ways.append(choice.split)
        clock.now += seconds_split if choice.split else seconds_alone
        if reads:
            choice.read_ended()
        clock.now += 5.0  # the optimizer's step, the data: after the last read, not timed
    return ways


def _choice():
    clock = _Clock()
    return SplitChoice(clock), clock


TRIAL = 2 * SplitChoice.PAIRS


def _pairs(ways):
    return [tuple(ways[i:i + 2]) for i in range(0, len(ways), 2)]


@pytest.mark.parametrize("alone, split, chosen", [(2.0, 1.0, True), (1.0, 2.0, False)])
def test_the_faster_way_is_kept_after_a_trial(alone, split, chosen):
    choice, clock = _choice()
    warm = _periods(choice, clock, SplitChoice.WARM, alone, split)
    trial = _periods(choice, clock, TRIAL, alone, split)
    kept = _periods(choice, clock, SplitChoice.KEEP, alone, split)
    again = _periods(choice, clock, TRIAL, split, alone)  # the machine changed
    after = _periods(choice, clock, 3, split, alone)
    assert warm == [False] * SplitChoice.WARM
    for ways in (trial, again):  # each pair tries both ways, in either order
        assert all(set(pair) == {False, True} for pair in _pairs(ways))
        assert {pair[0] for pair in _pairs(ways)} == {False, True}
    assert kept == [chosen] * SplitChoice.KEEP
    assert after == [not chosen] * 3
    assert list(choice.chosen) == [chosen, not chosen]


def test_pairs_outvote_a_slow_stretch():
    """A few slow periods (another process ran) on one side do not decide: most pairs do."""
    choice, clock = _choice()
    _periods(choice, clock, SplitChoice.WARM, 2.0, 1.0)
    for k in range(TRIAL):
        slow = 100.0 if k < 6 else 0.0  # the first three pairs' periods interrupted
        _periods(choice, clock, 1, 2.0, 1.0 + slow)
    assert _periods(choice, clock, 3, 2.0, 1.0) == [True] * 3


def test_periods_alternating_in_length_favour_neither_way():
    """Two models watched in turn, one twice as slow: which way each pair tries first is drawn,
    so the slow model is not always timed the same way and the ways, equal, are not told apart
    by the models' difference."""
    choices = []
    for seed in range(40):
        clock = _Clock()
        choice = SplitChoice(clock, seed=seed)
        for k in range(SplitChoice.WARM + TRIAL):
            choice.mark()
            clock.now += 2.0 if k % 2 else 1.0
            choice.read_ended()
        choice.mark()
        choices.append(choice.split)
    assert 5 <= sum(choices) <= 35


def test_marks_with_nothing_read_between_start_no_period():
    """Two marks a pass (two watches of one model) time the same periods as one."""
    single, clock1 = _choice()
    double, clock2 = _choice()
    ways = {id(single): [], id(double): []}
    for k in range(SplitChoice.WARM + TRIAL + 5):
        for choice, clock in ((single, clock1), (double, clock2)):
            choice.mark()
            if choice is double:
                clock.now += 0.5
                choice.mark()
            ways[id(choice)].append(choice.split)
            clock.now += 1.0 if choice.split else 2.0
            choice.read_ended()
    assert ways[id(single)] == ways[id(double)]
    assert list(single.chosen) == list(double.chosen) == [True]


def test_passes_without_large_reads_take_no_place_in_a_trial():
    """Evaluation passes (nothing large read) between training passes: the trial times the
    training passes alone, each pair still one of each way."""
    choice, clock = _choice()
    ways = []
    for k in range(3 * (SplitChoice.WARM + TRIAL) + 3):
        choice.mark()
        if k % 3 == 2:
            clock.now += 50.0  # an evaluation pass: long, and nothing read
            continue
        ways.append(choice.split)
        clock.now += 1.0 if choice.split else 2.0
        choice.read_ended()
    trial = ways[SplitChoice.WARM:SplitChoice.WARM + TRIAL]
    assert all(set(pair) == {False, True} for pair in _pairs(trial))
    assert ways[SplitChoice.WARM + TRIAL:] == [True] * (len(ways) - SplitChoice.WARM - TRIAL)


def test_periods_without_large_reads_never_split():
    choice, clock = _choice()
    ways = _periods(choice, clock, SplitChoice.WARM + TRIAL + 5, 2.0, 1.0, reads=False)
    assert ways == [False] * (SplitChoice.WARM + TRIAL + 5) and list(choice.chosen) == []


def _on_a_worker(function):
    worker = threading.Thread(target=function)
    worker.start()
    worker.join()


def test_a_foreign_threads_marks_and_reads_do_not_count():
    choice, clock = _choice()
    for _ in range(100):  # timed periods, but a worker's marks
        clock.now += 1.0
        choice.read_ended()
        _on_a_worker(choice.mark)
    ways = _periods(choice, clock, SplitChoice.WARM + 2, 1.0, 1.0)
    assert ways[:SplitChoice.WARM] == [False] * SplitChoice.WARM  # still warming
    assert set(ways[SplitChoice.WARM:]) == {False, True}         # then the first pair
    choice, clock = _choice()
    _periods(choice, clock, SplitChoice.WARM, 1.0, 1.0)
    for _ in range(TRIAL):  # the main thread's reads take as long both ways; a worker's
        _periods(choice, clock, 1, 1.0, 1.0)  # end sooner in split periods
        clock.now -= 5.5 if choice.split else 0.0
        _on_a_worker(choice.read_ended)
        clock.now += 5.5 if choice.split else 0.0
    assert _periods(choice, clock, 3, 1.0, 1.0) == [False] * 3


def test_the_threads_a_split_read_takes(monkeypatch):
    choice = SplitChoice()
    monkeypatch.setattr(choice, "split", True)
    assert choice.threads(threads.SPLIT_MIN - 1) == 1
    assert choice.threads(threads.PARALLEL_MIN) == 1
    assert choice.threads(threads.SPLIT_MIN) == threads.get_num_threads()


def test_watch_marks_each_forward_pass(monkeypatch):
    torch = pytest.importorskip("torch")
    import fpclass.torch as ft
    marks = []
    monkeypatch.setattr(threads.SPLIT, "mark", lambda: marks.append(1))
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    with ft.watch(model):
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
    assert len(marks) == 3


def test_watch_finds_nan_in_a_split_read(split_everything):
    """A NaN in the last word of a watched output, read in parts, is found."""
    torch = pytest.importorskip("torch")
    import fpclass.torch as ft
    if threads.get_num_threads() < 2:
        pytest.skip("one numba thread here: nothing to split")
    model = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Flatten(0))
    x = torch.randn(8, 300)
    x[7, 299] = float("nan")
    with pytest.raises(ft.NonFiniteError):
        with ft.watch(model):
            model(x)
    assert split_everything, "the watch read no buffer in parts"


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_parts_fewer_or_more_than_numbas_threads_count_alike(parts):
    """The parts' counter with fewer parts than numba's threads (numba's count lowered for the
    call, then restored) and with as many or more: NumPy's count of non-finite words is the
    truth, and numba's count is left as it was."""
    import numba

    from fpclass.formats import Query
    from fpclass.kernels import launch_buffers
    from fpclass.operators.inputs import as_source
    src = as_source(np.empty(0, np.float32))
    terms = launch_buffers._buffer_terms(src.word, src.test(Query.NONFINITE))
    count = launch_buffers._split_counter(src.word, terms)
    x = np.linspace(-1, 1, 1001).astype(np.float32)
    x[[0, 500, 1000]] = [np.nan, np.inf, -np.inf]
    before = numba.get_num_threads()
    assert count(x.ctypes.data, x.size, parts) == int((~np.isfinite(x)).sum()) == 3
    assert numba.get_num_threads() == before
