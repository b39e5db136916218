"""watch's per-tensor screen (operators.buffers.nonfinite_screen through Checker.finite) against
torch.isfinite: every float dtype, NaN / +Inf / -Inf (and NaN payloads, finite extremes) at the
start, inside a vector block, in the tail, C- and channels_last-contiguous, both launchers."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fpclass.torch as ft  # noqa: E402
from fpclass.kernels import threads  # noqa: E402
from fpclass.operators.buffers import nonfinite_screen  # noqa: E402
from fpclass.torch.tensors import SUM_MIN, checker  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]
SIZES = [1, 63, 64, 65, 200, 1031]


def _truth(t) -> bool:
    return bool(torch.isfinite(t).all())


def _planted(dtype, n, position, value):
    t = torch.linspace(-3, 3, n).to(dtype)
    if position is not None:
        t[position] = value
    return t


def _values(dtype):
    real = [float("nan"), float("inf"), float("-inf")]
    if dtype.is_complex:
        return real + [complex(1, float("nan")), complex(float("-inf"), 0)]
    return real


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_screen_matches_isfinite_at_every_position(dtype, n):
    finite = checker(torch).finite
    assert finite(_planted(dtype, n, None, 0)) is True
    for position in sorted({0, n // 2, n - 1, min(n - 1, 64)}):
        for value in _values(dtype):
            t = _planted(dtype, n, position, value)
            assert finite(t) == _truth(t) is False, (dtype, n, position, value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_finite_extremes_and_nan_payloads(dtype):
    finite = checker(torch).finite
    info = torch.finfo(dtype)
    edge = torch.tensor([info.max, -info.max, info.tiny, info.tiny / 4, -0.0, info.min],
                        dtype=dtype)
    assert finite(edge) is True and _truth(edge)
    # (integer view, exponent field, the mantissa's top bit) of each format
    bits, exponent, top = {torch.float16: (torch.int16, 0x7C00, 0x200),
                           torch.bfloat16: (torch.int16, 0x7F80, 0x40),
                           torch.float32: (torch.int32, 0x7F800000, 0x400000),
                           torch.float64: (torch.int64, 0x7FF << 52, 1 << 51)}[dtype]
    for payload in (exponent | 1, exponent | top, -1):  # signalling, quiet, a NaN of all ones
        words = torch.zeros(70, dtype=bits)
        words[67] = payload
        t = words.view(dtype)
        assert finite(t) == _truth(t) is False, (dtype, hex(payload))


def test_channels_last_and_empty():
    finite = checker(torch).finite
    x = torch.randn(2, 3, 5, 7).to(memory_format=torch.channels_last)
    assert finite(x)
    for index in [(0, 0, 0, 0), (1, 2, 4, 6), (1, 0, 2, 3)]:
        y = x.clone()
        y[index] = float("nan")
        assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
        assert finite(y) is False
    assert finite(torch.empty(0)) is True


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.complex64])
def test_parallel_launcher(dtype, monkeypatch):
    """Above the parallel threshold the screen asks the counter on every core: same answers."""
    screen = nonfinite_screen(np.dtype(dtype))
    monkeypatch.setattr(threads, "PARALLEL_MIN", 64)
    a = np.zeros(5000, dtype)
    assert screen(a.ctypes.data, a.size) is False
    for position in (0, 2500, 4999):
        b = a.copy()
        b[position] = np.inf
        assert screen(b.ctypes.data, b.size) is True


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float8_e5m2fnuz"])
def test_every_float8_pattern_alone_and_planted(name):
    """Each of the 256 bytes of each torch float8 format, alone and planted in a run of finite
    bytes (at the start, in a vector block, in the tail), against ml_dtypes' own isfinite."""
    import ml_dtypes
    if not hasattr(torch, name):
        pytest.skip(f"this torch has no {name}")
    finite = checker(torch).finite
    patterns = np.arange(256, dtype=np.uint8)
    truth = np.isfinite(patterns.view(getattr(ml_dtypes, name)).astype(np.float32))
    calm = patterns[truth][:130]               # finite bytes only
    for byte, expected in zip(patterns, truth):
        alone = torch.from_numpy(np.array([byte], np.uint8)).view(getattr(torch, name))
        assert finite(alone) == bool(expected), (name, hex(byte))
        for position in (0, 64, 129):
            run = calm.copy()
            run[position] = byte
            t = torch.from_numpy(run).view(getattr(torch, name))
            assert finite(t) == bool(expected), (name, hex(byte), position)


# -- torch's sum first (Checker._summed) ---------------------------------------------------------

SUMMED = [torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture
def two_threads():
    """torch on two threads (the sum is asked only then), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


class _ScreenSpy:
    """Wraps the checker's screen of one dtype and counts its calls."""

    def __init__(self, monkeypatch, dtype):
        finite = checker(torch).finite
        finite(torch.zeros(1, dtype=dtype))  # the dtype's screen made
        screens = checker(torch).screens
        inner, self.calls = screens[dtype], 0

        def counted(address, length):
            self.calls += 1
            return inner(address, length)
        monkeypatch.setitem(screens, dtype, counted)


@pytest.mark.parametrize("dtype", SUMMED)
def test_a_finite_sum_answers_without_the_screen(dtype, two_threads, monkeypatch):
    spy = _ScreenSpy(monkeypatch, dtype)
    finite = checker(torch).finite
    t = torch.randn(1 << 18).to(dtype)
    assert finite(t) is True and spy.calls == 0
    t[12345] = float("nan")
    assert finite(t) is False and spy.calls == 1


def test_half_is_screened_only(two_threads, monkeypatch):
    """Half is not summed: a sum in half overflows for large finite tensors, and one in
    float32 copies the tensor first."""
    spy = _ScreenSpy(monkeypatch, torch.float16)
    t = torch.full((1 << 16,), 0.25, dtype=torch.float16)
    assert torch.isfinite(t.sum())  # (a sum would answer: it is not asked)
    assert checker(torch).finite(t) is True and spy.calls == 1


@pytest.mark.parametrize("dtype", SUMMED)
def test_a_sum_that_overflows_from_finite_terms_goes_to_the_screen(dtype, two_threads,
                                                                   monkeypatch):
    spy = _ScreenSpy(monkeypatch, dtype)
    finite = checker(torch).finite
    big = torch.full((1 << 16,), torch.finfo(dtype).max, dtype=dtype)
    assert not torch.isfinite(big.sum()) and _truth(big)
    assert finite(big) is True and spy.calls == 1


@pytest.mark.parametrize("dtype", SUMMED)
def test_every_nonfinite_kind_anywhere_in_a_large_tensor_with_the_sum(dtype, two_threads):
    """Large enough for torch to split the sum between its threads: NaN, +Inf, -Inf and both
    infinities together (their sum NaN), at the ends, at a split, inside and at random places
    (a new draw every run), on both layouts."""
    finite = checker(torch).finite
    n = 1 << 20
    base = torch.linspace(-1, 1, n).to(dtype)
    assert finite(base) is True
    draws = np.random.default_rng().integers(0, n, 8).tolist()
    cases = [((0,), ("nan",)), ((n - 1,), ("inf",)), ((n // 2,), ("-inf",)),
             ((n // 2 - 1,), ("nan",)), ((12345, 987654), ("inf", "-inf"))]
    cases += [((p,), (v,)) for p, v in zip(draws, ["nan", "inf", "-inf"] * 3)]
    for positions, values in cases:
        t = base.clone()
        for p, v in zip(positions, values):
            t[p] = float(v)
        assert finite(t) == _truth(t) is False, (dtype, positions, values)
        image = t.reshape(16, 64, 32, 32).to(memory_format=torch.channels_last)
        assert finite(image) == _truth(image) is False, (dtype, positions, values)


def test_no_sum_on_one_thread(monkeypatch):
    spy = _ScreenSpy(monkeypatch, torch.float32)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert checker(torch).finite(torch.ones(SUM_MIN)) is True
    finally:
        torch.set_num_threads(before)
    assert spy.calls == 1


def test_no_sum_below_its_size(two_threads, monkeypatch):
    spy = _ScreenSpy(monkeypatch, torch.float32)
    finite = checker(torch).finite
    assert finite(torch.ones(SUM_MIN - 1)) is True and spy.calls == 1
    assert finite(torch.ones(SUM_MIN)) is True and spy.calls == 1


def test_no_sum_into_autograd_graph_or_where_others_would_see_it(two_threads, monkeypatch):
    """A tensor that requires grad under grad mode is screened (a sum would join the graph);
    so is every tensor while a torch-function or dispatch mode is active or torch's profiler
    records (each would see the sum)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    spy = _ScreenSpy(monkeypatch, torch.float32)
    finite = checker(torch).finite
    leaf = torch.ones(SUM_MIN, requires_grad=True)
    assert finite(leaf) is True and spy.calls == 1
    with torch.no_grad():
        assert finite(leaf) is True and spy.calls == 1  # summed: no graph to join

    seen = []

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    class Dispatches(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    plain = torch.ones(SUM_MIN)
    for mode in (Functions, Dispatches):
        with mode():
            assert finite(plain) is True
    assert spy.calls == 3
    with torch.profiler.profile() as recorded:
        assert finite(plain) is True
    assert spy.calls == 4
    assert not [e for e in recorded.events() if "sum" in e.name]


def test_torch_own_sum_whatever_torch_sum_is_now(two_threads, monkeypatch):
    """A library that replaced torch.sum before the first watch does not answer for it."""
    from fpclass.torch.tensors import Checker
    monkeypatch.setattr(torch, "sum", lambda *args, **kwargs: torch.zeros(()))
    finite = Checker(torch).finite
    t = torch.ones(SUM_MIN)
    t[7] = float("nan")
    assert finite(t) is False


def test_no_sum_on_a_torch_without_its_parts(two_threads, monkeypatch):
    from fpclass.torch.tensors import Checker
    monkeypatch.delattr(torch._C._autograd, "_profiler_enabled")
    checks = Checker(torch)
    checks.finite(torch.zeros(1))  # the dtype's screen made
    screens = checks.screens
    inner, calls = screens[torch.float32], []
    monkeypatch.setitem(screens, torch.float32, lambda a, n: calls.append(n) or inner(a, n))
    assert checks.finite(torch.ones(SUM_MIN)) is True and calls == [SUM_MIN]


def test_watch_raises_on_a_summed_gradient(two_threads, monkeypatch):
    """Through watch's own backward: the output gradients and the weight gradient of a
    512-wide Linear at batch 128 are summed (a spy counts them); a NaN arriving in the
    output's gradient is found there."""
    import fpclass.torch as ft
    from fpclass.torch.tensors import Checker, _CHECKERS

    sums = []
    own = torch._C._VariableFunctions.sum

    class Counting:  # torch._C._VariableFunctions with its sum counted
        def __getattr__(self, name):
            return getattr(torch._C._VariableFunctions, name)

        @staticmethod
        def sum(*args, **kwargs):
            sums.append(args[0].shape)
            return own(*args, **kwargs)

    monkeypatch.setattr(torch._C, "_VariableFunctions", Counting())
    monkeypatch.setitem(_CHECKERS, id(torch), Checker(torch))
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 512))
    x = torch.randn(128, 512)
    with ft.watch(model):
        model(x).square().mean().backward()
    assert (512, 512) in sums and (128, 512) in sums
    weights = torch.ones(128, 512)
    weights[77, 300] = float("nan")
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        (model(x) * weights).sum().backward()
    err = caught.value
    assert (err.module, err.direction, err.tensor) == ("1", "backward", "gradient of output")
    assert err.counts["nan"] == 1


@pytest.mark.parametrize("bad", [None, 5], ids=["finite", "NaN in one batch element"])
def test_a_watched_model_under_vmap_is_read_through_its_wrappers(bad):
    """torch.vmap's batched tensors have no storage of their own: watch reads the tensor they
    wrap (every batch element's values), never fails on them."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 4))
    x = torch.randn(8, 1, 64)
    if bad is not None:
        x[bad, 0, 3] = float("nan")
    with ft.watch(model, raise_on=False) as w:
        torch.vmap(model)(x).sum().backward()
    forward = [f for f in w.findings if f.direction == "forward"]
    assert [f.counts["nan"] for f in forward] == ([] if bad is None else [4])
