"""fpclass.torch.watch's optional sum screen (tensors.SUM_MIN, off by default): with torch on
several threads, a large CPU tensor is first summed by torch (a finite sum proves it finite) and
only a non-finite sum is read by fpclass's counter. The
findings are what torch itself says of the same tensors: every screened dtype, both layouts, a
NaN or Inf at any place, finite values whose sum overflows (no finding), and gradients."""

import math

import pytest

import fpclass.torch as ft
from fpclass.torch import tensors

torch = pytest.importorskip("torch")
nn = torch.nn

from test_torch_watch_paths import Give, counts  # noqa: E402  (after torch is known)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture
def screened(monkeypatch):
    """torch on two threads, the screen from 64 elements on; yields the list of the dtypes
    torch summed (a spy on Tensor.sum), so a test can tell the screen ran."""
    for dtype in DTYPES:  # as in a loop's later steps: each dtype's counter is ready
        warm = nn.Sequential(Give(torch.ones(4, dtype=dtype)))
        with ft.watch(warm):
            warm(torch.zeros(1))
    summed = []
    real = torch.Tensor.sum

    def spy(self, *args, **kwargs):
        summed.append(self.dtype)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(torch.Tensor, "sum", spy)
    monkeypatch.setattr(tensors, "SUM_MIN", 64)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield summed
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("planted", [math.nan, math.inf, -math.inf, None])
@pytest.mark.parametrize("where", [(0, 0, 0, 0), (1, 2, 3, 4), (1, 0, 2, 7)])
def test_screened_outputs_report_what_torch_sees(screened, dtype, channels_last, planted, where):
    t = torch.rand(2, 3, 4, 8, dtype=dtype) + 0.5
    if planted is not None:
        t[where] = planted
    if channels_last:
        t = t.to(memory_format=torch.channels_last)
        assert not t.is_contiguous()
    model = nn.Sequential(Give(t))
    with ft.watch(model, raise_on=False) as w:
        model(torch.zeros(1))
    assert dtype in screened  # the screen ran on this tensor
    truth = counts(t)
    if planted is None:
        assert w.findings == []
        return
    assert [(f.module, f.tensor, f.counts) for f in w.findings] == [("0", "output", truth)]
    assert w.findings[0].first == tuple(torch.nonzero(~torch.isfinite(t))[0].tolist())


@pytest.mark.parametrize("dtype,big", [(torch.float32, 3e38), (torch.float16, 60000.0),
                                       (torch.bfloat16, 3e38), (torch.float64, 1e308)])
def test_large_finite_values_are_no_finding(screened, dtype, big):
    # float32, bfloat16 and float64: the screen's sum overflows and the counter decides;
    # float16 is summed in float32, where it stays finite
    t = torch.full((16, 16), big, dtype=dtype)
    assert torch.isfinite(t).all()
    wide = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    assert torch.isfinite(t.sum(dtype=wide)) == (dtype == torch.float16)
    model = nn.Sequential(Give(t))
    with ft.watch(model, raise_on=False) as w:
        model(torch.zeros(1))
    assert dtype in screened and w.findings == []


def test_screened_gradients_name_the_module_torch_blames(screened):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Linear(64, 8))
    x = torch.randn(16, 32)
    with torch.no_grad():
        model[2].weight[3, 5] = 1e37   # the second Linear's input gradient overflows
    out_grad = torch.full((16, 8), 1e30)
    h = model[1](model[0](x))          # torch's own answer: the gradient of model[2]'s input
    h.retain_grad()
    model[3](model[2](h)).backward(out_grad)
    truth = h.grad
    assert not torch.isfinite(truth).all()
    model.zero_grad()
    with ft.watch(model, raise_on=False, grads=False) as w:
        model(x).backward(out_grad)
    first = w.findings[0]
    assert (first.module, first.direction, first.tensor) == ("2", "backward",
                                                             "gradient of input[0]")
    assert first.counts == counts(truth) and first.born_here
    assert first.first == tuple(torch.nonzero(~torch.isfinite(truth))[0].tolist())
    assert torch.float32 in screened


def test_small_tensors_are_read_by_the_counter_alone(monkeypatch):
    summed = []
    real = torch.Tensor.sum
    monkeypatch.setattr(torch.Tensor, "sum",
                        lambda self, *a, **k: summed.append(1) or real(self, *a, **k))
    monkeypatch.setattr(tensors, "SUM_MIN", 257)
    t = torch.ones(4, 64)
    t[2, 7] = math.nan
    model = nn.Sequential(Give(t))
    with ft.watch(model, raise_on=False) as w:
        model(torch.zeros(1))
    assert summed == [] and [f.counts for f in w.findings] == [counts(t)]


@pytest.mark.parametrize("threads", [1, 2])
def test_one_or_two_threads_find_the_same(screened, threads):
    torch.set_num_threads(threads)  # the fixture sets two and restores the caller's count
    t = torch.ones(64, 64)
    t[40, 3] = -math.inf
    model = nn.Sequential(Give(t))
    with ft.watch(model, raise_on=False) as w:
        model(torch.zeros(1))
    assert bool(screened) == (threads > 1)  # on one thread the counter reads alone
    assert [f.counts for f in w.findings] == [counts(t)]


def test_the_screen_is_off_by_default(monkeypatch):
    summed = []
    real = torch.Tensor.sum
    monkeypatch.setattr(torch.Tensor, "sum",
                        lambda self, *a, **k: summed.append(1) or real(self, *a, **k))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        t = torch.ones(1 << 17)
        t[-1] = math.nan
        model = nn.Sequential(Give(t), Give(torch.ones(1 << 17)))
        with ft.watch(model, raise_on=False) as w:
            model(torch.zeros(1))
    finally:
        torch.set_num_threads(before)
    assert tensors.SUM_MIN is None and summed == []
    assert [(f.module, f.counts) for f in w.findings] == [("0", counts(t))]
