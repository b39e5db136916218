"""The gradient a ReLU's backward makes from a gradient watch read finite is finite, and watch does
not read it again: only where it is exactly what that backward made. Another use of the ReLU's
input adding to its gradient, a hook changing the gradient the backward uses, or a ReLU that is not
torch's makes watch read it. torch's own gradients are the truth."""

import math

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import watching  # noqa: E402

from test_torch_watch_inplace import Poison  # noqa: E402
from test_torch_watch_keep_finite import Reads  # noqa: E402


def _eye(width=4):
    lin = nn.Linear(width, width)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(width))
        lin.bias.zero_()
    return lin


X = torch.tensor([[-1.0, 2.0, 3.0, 4.0], [5.0, -6.0, 7.0, 8.0]])  # the ReLU zeroes two places


MASK_MIN = watching.MASK_MIN


@pytest.fixture(autouse=True)
def proof_at_every_size(monkeypatch):
    """The proof on these small tensors too (it starts at MASK_MIN elements)."""
    monkeypatch.setattr(watching, "MASK_MIN", 0)


def _gradients(model, x):
    """torch's gradients into the ReLU's output and its input (model: eye, ReLU, last)."""
    h = model[0](x)
    h.retain_grad()
    r = torch.relu(h)
    r.retain_grad()
    model[2](r).square().sum().backward()
    model.zero_grad()
    return r.grad, h.grad


@pytest.mark.parametrize("inplace", [False, True])
def test_the_gradient_a_relu_made_from_a_finite_one_is_not_read(monkeypatch, inplace):
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), nn.ReLU(inplace=inplace), nn.Linear(4, 3))
    into_relu, into_input = _gradients(model, X)
    assert bool((into_input == 0).any()) and not bool((into_relu == 0).any())
    reads = Reads(monkeypatch)
    with ft.watch(model) as w:
        model(X).square().sum().backward()
    assert w.findings == []
    assert reads.holds(into_relu) and not reads.holds(into_input)


class TwoUses(nn.Module):
    """The ReLU's input is used twice: through the ReLU and through a module whose backward
    makes NaN; the gradient into the input is their sum."""

    def __init__(self, at):
        super().__init__()
        self.lin, self.relu, self.out, self.poison = _eye(), nn.ReLU(), nn.Linear(4, 2), Poison(at)

    def forward(self, x):
        h = self.lin(x)
        return self.out(self.relu(h)).sum() + self.poison(h).sum()


def test_a_second_use_adding_nan_to_the_gradient_is_found():
    torch.manual_seed(0)
    model = TwoUses((0, 0))
    x = X[:1]
    h = model.lin(x)
    h.retain_grad()
    (model.out(torch.relu(h)).sum() + model.poison(h).sum()).backward()
    truth = h.grad
    model.zero_grad()
    assert int(torch.isnan(truth).sum()) == 1
    with ft.watch(model, raise_on=False) as w:
        model(x).backward()
    # the sum arriving at the Linear's output is read, not taken as the ReLU's: its NaN is
    # found (told as the gradient into an input of the modules that took it)
    assert [(f.module in ("relu", "poison"), f.tensor, f.counts["nan"], f.first)
            for f in w.findings[:1]] == [(True, "gradient of input[0]",
                                          int(torch.isnan(truth).sum()), (0, 0))]


class HookedAfter(nn.Module):
    """Its own code hooks the ReLU's output after watch did: the hook turns the gradient the ReLU's
    backward uses into NaN where the ReLU kept its input."""

    def __init__(self):
        super().__init__()
        self.lin, self.relu, self.out = _eye(), nn.ReLU(), nn.Linear(4, 2)

    def forward(self, x):
        r = self.relu(self.lin(x))
        r.register_hook(lambda g: g.masked_fill(r > 0, math.nan))
        return self.out(r)


def test_a_hook_changing_the_gradient_after_watch_read_it_is_found():
    torch.manual_seed(0)
    model = HookedAfter()
    with ft.watch(model, raise_on=False) as w:
        model(X).sum().backward()
    truth = int((model.relu(model.lin(X)) > 0).sum())  # every place the ReLU kept
    assert any(f.module == "relu" and f.tensor == "gradient of input[0]"
               and f.counts["nan"] == truth for f in w.findings)


class LoggedReLU(nn.ReLU):
    """A ReLU subclass whose output's autograd node is not a mask's backward."""

    def forward(self, x):
        return PoisonBackward.apply(super().forward(x))


class PoisonBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * math.inf


def test_a_relu_whose_backward_is_not_a_mask_gets_no_proof():
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), LoggedReLU(), nn.Linear(4, 2))
    with ft.watch(model, raise_on=False) as w:
        model(X).sum().backward()
    assert any(f.module == "1" and f.tensor == "gradient of input[0]" for f in w.findings)


class Act(nn.Module):
    """A wrapper around an in-place ReLU: it takes and returns the tensor its child writes."""

    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(x)


class SqrtView(nn.Module):
    """Writes its input in place (its backward makes Inf at a 0) and returns a view of it."""

    def forward(self, x):
        x.sqrt_()
        return x.view(-1, 4)


@pytest.mark.parametrize("make", [lambda: Act(), lambda: nn.Sequential(nn.ReLU(inplace=True)),
                                  lambda: nn.Identity()], ids=["wrapper", "sequential", "identity"])
def test_a_module_passing_a_tensor_through_is_not_blamed_for_its_gradient(make):
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), make(), Poison((0, 1)), nn.Linear(4, 2))
    with ft.watch(model, raise_on=False) as w:
        model(X[:1]).sum().backward()
    assert (w.findings[0].module, w.findings[0].tensor, w.findings[0].born_here) == (
        "2", "gradient of input[0]", True)


def test_a_module_writing_its_input_is_blamed_for_the_gradient_its_write_makes():
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), SqrtView(), nn.Linear(4, 2))
    x = torch.tensor([[0.0, 2.0, 3.0, 4.0]])
    h = model[0](x)
    h.retain_grad()
    model[2](torch.sqrt(h).view(-1, 4)).sum().backward()
    assert not bool(torch.isfinite(h.grad).all())  # the truth: sqrt's backward at 0
    model.zero_grad()
    with ft.watch(model, raise_on=False) as w:
        model(x).sum().backward()
    assert (w.findings[0].module, w.findings[0].tensor, w.findings[0].born_here) == (
        "1", "gradient of input[0]", True)


class RaisesOnce(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("a forward that fails once (caught by the training loop)")
        return x


@pytest.mark.parametrize("inplace", [False, True])
def test_a_watched_step_keeps_no_tensor_of_its_forward_pass_alive(inplace):
    import gc
    import weakref
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), nn.ReLU(inplace=inplace), RaisesOnce(), nn.Linear(4, 3))
    refs = []
    model[0].register_forward_hook(lambda m, a, out: refs.append(weakref.ref(out)))
    gc.disable()  # freed by reference counts alone: a cycle through autograd's graph is a leak
    try:
        with ft.watch(model):  # one context, several steps, one of them failing in its forward
            for _ in range(4):
                try:
                    model(X).square().sum().backward()
                except RuntimeError:
                    pass
            assert len(refs) == 4 and all(ref() is None for ref in refs)
    finally:
        gc.enable()


def test_a_dispatch_mode_changing_the_relus_backward_gets_no_proof():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Fault(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.threshold_backward.default:
                out[0, 1] = math.nan
            return out
    model = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))
    x = X.clone().requires_grad_()
    with ft.watch(model, raise_on=False) as w:
        y = model(x).sum()
        with Fault():
            y.backward()
    assert int(torch.isnan(x.grad).sum()) == 1  # the truth
    assert [(f.module, f.tensor, f.counts["nan"]) for f in w.findings[:1]] == [
        ("0", "gradient of input[0]", 1)]


def test_a_gradient_taken_at_a_relus_output_is_not_kept_alive():
    import gc
    import weakref
    model = nn.Sequential(_eye(), nn.ReLU())
    x = X.clone().requires_grad_()
    refs = []
    with ft.watch(model):
        out = model(x)
        out.register_hook(lambda g: refs.append(weakref.ref(g)))  # sees the gradient watch read
        (g,) = torch.autograd.grad(out.square().sum(), out)  # the ReLU's backward never runs
        del g
        gc.collect()
        assert refs and refs[0]() is None


def test_a_chain_of_masks_passes_the_proof_on(monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), nn.ReLU(), nn.Hardtanh(-2.0, 2.0), nn.Linear(4, 3))
    reads = Reads(monkeypatch)
    with ft.watch(model, grads=False) as w:
        out = model(X)
        reads.tensors.clear()
        out.square().sum().backward()
    assert w.findings == []
    # the gradient into the Hardtanh's output is read; what the Hardtanh's and the ReLU's
    # backwards make from it is not
    assert [tuple(t.shape) for t in reads.tensors] == [(2, 3), (2, 4)]


def test_a_nan_passed_back_through_a_parents_in_place_write_is_not_born_twice():
    from test_torch_watch_inplace import ReluThenPoison
    model = ReluThenPoison((0, 1))  # the NaN at a place the parent's relu_ keeps
    with torch.no_grad():
        model.lin.weight.copy_(torch.eye(4))
        model.lin.bias.zero_()
    with ft.watch(model, raise_on=False) as w:
        model(X[:1]).sum().backward()
    poisoned = [f.born_here for f in w.findings if f.module == "poison"]
    assert poisoned == [True, False]  # made by poison's backward; then passed on by the relu_


def test_below_the_threshold_the_gradient_into_the_relus_input_is_read(monkeypatch):
    monkeypatch.setattr(watching, "MASK_MIN", MASK_MIN)
    monkeypatch.setattr(watching.chain, "plan", lambda *_: None)  # (a chain proves it always)
    torch.manual_seed(0)
    model = nn.Sequential(_eye(), nn.ReLU(), nn.Linear(4, 3))
    _, into_input = _gradients(model, X)
    assert X.numel() < MASK_MIN
    reads = Reads(monkeypatch)
    with ft.watch(model) as w:
        model(X).square().sum().backward()
    assert w.findings == [] and reads.holds(into_input)


class Both(nn.Module):
    """Returns its input and the input's square root: sqrt's backward at 0 makes Inf."""

    def forward(self, x):
        return x, torch.sqrt(x)


class ReturnsAndUses(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.both, self.b = _eye(), Both(), nn.Linear(4, 1)

    def forward(self, x):
        h, r = self.both(self.a(x))
        return self.b(h).sum() + r.sum()


def test_a_module_returning_its_input_and_using_it_is_blamed_for_its_gradient():
    model = ReturnsAndUses()
    x = torch.tensor([[0.0, 2.0, 3.0, 4.0]])
    h = model.a(x)
    h.retain_grad()
    (model.b(h).sum() + torch.sqrt(h).sum()).backward()
    assert int(torch.isposinf(h.grad).sum()) == 1  # the truth: sqrt's backward at 0
    model.zero_grad()
    with ft.watch(model, raise_on=False) as w:
        model(x).backward()
    assert (w.findings[0].module, w.findings[0].tensor) == ("both", "gradient of input[0]")


def _pooled(pool, x):
    """torch's gradients into `pool`'s output and its input, for (pool(x) * 3e38).sum() (x:
    a leaf that requires grad): every output gradient 3e38, finite."""
    h = x * 1.0
    h.retain_grad()
    y = pool(h)
    y.retain_grad()
    (y * 3e38).sum().backward()
    return y.grad, h.grad


def _pool_step(pool, x):
    model = nn.Sequential(nn.Identity(), pool)
    with ft.watch(model, raise_on=False) as w:
        (model(x * 1.0) * 3e38).sum().backward()
    return w


def test_the_gradient_a_max_pool_made_from_a_finite_one_is_not_read(monkeypatch):
    x = torch.arange(32.0).reshape(1, 2, 4, 4).div(100).requires_grad_()
    into_pool, into_input = _pooled(nn.MaxPool2d(2), x)
    assert bool(torch.isfinite(into_input).all()) and bool((into_input == 0).any())
    reads = Reads(monkeypatch)
    w = _pool_step(nn.MaxPool2d(2), x)
    assert w.findings == []
    assert reads.holds(into_pool) and not reads.holds(into_input)


ROW = [0.1, 0.5, 0.2, 0.3, 0.1]  # 0.5: the maximum of both windows that hold it


@pytest.mark.parametrize("pool, x", [
    (lambda: nn.MaxPool2d((1, 2), stride=1), torch.tensor(ROW).reshape(1, 1, 1, 5)),
    (lambda: nn.MaxPool2d(2, stride=(2, 1)), torch.tensor([ROW, [-1.0] * 5]).reshape(1, 1, 2, 5)),
    (lambda: nn.MaxPool3d((1, 1, 3), stride=(1, 1, 2)),
     torch.tensor([0.1, 0.2, 0.5, 0.3, 0.1]).reshape(1, 1, 1, 1, 5))],
    ids=["stride 1", "stride (2, 1)", "3d kernel 3 stride 2"])
def test_overlapping_windows_summing_two_finite_gradients_to_inf_are_read(pool, x):
    """Where windows overlap, one input element can be the maximum of two windows: its gradient
    is the sum of theirs, 3e38 + 3e38 = Inf in float32."""
    x = x.clone().requires_grad_()
    _, into_input = _pooled(pool(), x)
    infs = int(torch.isinf(into_input).sum())
    assert infs >= 1  # the truth: made by the pool's backward
    w = _pool_step(pool(), x)
    born = [(f.module, f.tensor, f.counts["posinf"], f.born_here) for f in w.findings]
    assert born[:1] == [("1", "gradient of input[0]", infs, True)]


@pytest.mark.parametrize("kernel, stride, apart", [
    (2, None, True), (2, 2, True), (2, 3, True), ((2, 2), (2, 2), True), (2, (2, 2), True),
    ((2, 3), 3, True), (3, 2, False), ((2, 2), (2, 1), False), ((1, 2), 1, False),
    ((2, 2, 2), (2, 2), False)])
def test_max_pool_windows_apart(kernel, stride, apart):
    assert watching._apart(nn.MaxPool2d(kernel, stride)) is apart
    assert watching._apart(nn.MaxPool2d(kernel, stride, dilation=2)) is False  # interleaved
    assert watching._apart(nn.ReLU()) is True
