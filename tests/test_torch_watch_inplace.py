"""A tensor written in place after watch checked it (its version moved) is checked again, so a
module that makes NaN / Inf in place (`x.log_()`) is where watch finds it, born there; an
in-place ReLU reports as the out-of-place one; inference tensors (no version) by identity, as
before. torch's
isfinite on the tensors is the truth."""

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn


class LogInPlace(nn.Module):
    def forward(self, x):
        return x.log_()


class Inner(nn.Module):
    """Its own code writes into a watched child's output, then an in-place ReLU runs on it."""

    def __init__(self):
        super().__init__()
        self.lin, self.relu = nn.Linear(4, 4), nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.lin(x)
        h.mul_(float("inf"))  # no module of its own: first seen by the ReLU's hook
        return self.relu(h)


def nonfinite(t):
    return not bool(torch.isfinite(t).all())


def test_a_module_that_writes_nan_in_place_is_found_there_born_here():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), LogInPlace(), nn.Linear(4, 2))
    x = torch.randn(6, 4)
    with torch.no_grad():
        made = model[0](x)
        assert not nonfinite(made)
        truth = made.clone().log_()
    assert nonfinite(truth)
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    first = w.findings[0]
    assert (first.module, first.tensor, first.born_here) == ("1", "output", True)
    assert first.counts["nan"] == int(torch.isnan(truth).sum())
    assert first.first == tuple(torch.nonzero(~torch.isfinite(truth))[0].tolist())
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        model(x).sum().backward()
    assert caught.value.finding.module == "1"


@pytest.mark.parametrize("inplace", [True, False])
def test_an_in_place_relu_reports_as_the_out_of_place_one(inplace):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=inplace), nn.Linear(4, 2))
    with torch.no_grad():
        model[0].bias[:2] = torch.tensor([float("nan"), float("inf")])
    x = torch.randn(5, 4)
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    # by torch: the Linear's output holds NaN and +Inf, the ReLU keeps both, the last mixes them
    with torch.no_grad():
        a = model[0](x)
        b = torch.relu(a)
        c = model[2](b)
    expected = [(name, {"nan": int(torch.isnan(t).sum()), "posinf": int(torch.isposinf(t).sum()),
                        "neginf": int(torch.isneginf(t).sum())})
                for name, t in (("0", a), ("1", b), ("2", c), ("", c)) if nonfinite(t)][:3]
    assert [(f.module, f.counts) for f in w.findings] == expected
    assert [f.born_here for f in w.findings] == [True, False, False]


def test_a_finite_tensor_clamped_in_place_is_not_read_again_but_a_second_write_is():
    torch.manual_seed(0)
    model = nn.Sequential(Inner(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with ft.watch(model, raise_on=False, backward=False) as w:
        out = model(x)
    assert nonfinite(out)
    # found at the ReLU, which received the Inf its parent's own code wrote: not born there
    assert w.findings and w.findings[0].module == "0.relu" and not w.findings[0].born_here


def test_a_relu_after_a_finite_layer_in_a_training_step_finds_nothing():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 2)).to(
                              memory_format=torch.channels_last)
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    with ft.watch(model) as w:
        model(x).square().mean().backward()
    assert w.findings == []


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


def test_inference_tensors_keep_the_container_rule():
    # no version to read: a container's output (its last child's) is not reported twice, as before
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(inplace=True), Log()))
    x = torch.randn(6, 4)
    with torch.inference_mode(), ft.watch(model, raise_on=False) as w:
        out = model(x)
    assert nonfinite(out) and out.is_inference()
    assert [f.module for f in w.findings] == ["1.1"]


class LogView(nn.Module):
    """Writes NaN into its input in place and returns a view of it."""

    def forward(self, x):
        return x.log_().unsqueeze(1)


def test_a_module_writing_its_input_and_returning_a_view_is_where_it_was_born():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), LogView(), nn.Flatten(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with torch.no_grad():
        received = model[0](x)
    assert bool(torch.isfinite(received).all())  # the truth: LogView receives finite values
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    assert w.findings and w.findings[0].module == "1" and w.findings[0].born_here


class AddBias(nn.Module):
    def forward(self, x):
        return x.add_(1)


class LogThenBias(nn.Module):
    """Its own code writes NaN into a child's output before the next child writes in place."""

    def __init__(self):
        super().__init__()
        self.lin, self.act, self.out = nn.Linear(4, 4), AddBias(), nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin(x)
        h.log_()
        return self.out(self.act(h))


def test_a_module_receiving_nan_its_parent_wrote_in_place_passes_it_along():
    torch.manual_seed(0)
    model = LogThenBias()
    x = torch.randn(3, 4)
    with torch.no_grad():
        received = model.lin(x).log_()
    assert not bool(torch.isfinite(received).all())  # the truth: act receives NaN
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    act = [f for f in w.findings if f.module == "act"]
    assert act and not act[0].born_here


class PoisonGrad(torch.autograd.Function):
    """Forward: a view of its input. Backward: the gradient with NaN at `at` (and its input
    gradient otherwise unchanged)."""

    @staticmethod
    def forward(ctx, x, at):
        ctx.at = at
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        grad[ctx.at] = float("nan")
        return grad, None


class Poison(nn.Module):
    def __init__(self, at):
        super().__init__()
        self.at = at

    def forward(self, x):
        return PoisonGrad.apply(x, self.at)


class ReluThenPoison(nn.Module):
    """Its own code clamps a child's output in place (no module of its own) before the next
    child."""

    def __init__(self, at):
        super().__init__()
        self.lin, self.poison, self.out = nn.Linear(4, 4), Poison(at), nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin(x)
        h.relu_()
        return self.out(self.poison(h))


def _relu_poison(inplace, at):
    torch.manual_seed(0)
    lin = nn.Linear(4, 4)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(4))
        lin.bias.zero_()
    return nn.Sequential(lin, nn.ReLU(inplace=inplace), Poison(at), nn.Linear(4, 2))


def _gradient_into(model, x, index):
    """torch's gradient flowing into model[index]'s input (the truth), out of place."""
    h = x
    for module in list(model)[:index]:
        h = module(h.clone()) if isinstance(module, nn.ReLU) else module(h)
    h.retain_grad()
    out = h
    for module in list(model)[index:]:
        out = module(out)
    out.sum().backward()
    return h.grad


# x's first element is negative: the ReLU's output is 0 there, and its backward zeroes the NaN
@pytest.mark.parametrize("at", [(0, 0), (0, 1)], ids=["masked by the relu", "passed through"])
@pytest.mark.parametrize("inplace", [True, False])
def test_the_gradient_into_an_in_place_relus_output_is_checked(inplace, at):
    x = torch.tensor([[-1.0, 2.0, 3.0, 4.0]])
    truth = _gradient_into(_relu_poison(False, at), x, 2)
    assert torch.isnan(truth[at]) and int(torch.isnan(truth).sum()) == 1
    model = _relu_poison(inplace, at)
    with ft.watch(model, raise_on=False) as w:
        model(x).sum().backward()
    first = w.findings[0]
    assert (first.module, first.direction, first.tensor, first.born_here) == (
        "2", "backward", "gradient of input[0]", True)
    assert first.counts == {"nan": 1, "posinf": 0, "neginf": 0} and first.first == at
    # where the ReLU passed the NaN on, it reports it at its own input, not born there
    passed = [(f.module, f.tensor, f.born_here) for f in w.findings[1:2]]
    assert passed == ([] if at == (0, 0) else [("1", "gradient of input[0]", False)])


def test_the_gradient_into_a_tensor_its_parent_clamped_in_place_is_checked():
    model = ReluThenPoison((0, 0))
    with torch.no_grad():
        model.lin.weight.copy_(torch.eye(4))
        model.lin.bias.zero_()
    x = torch.tensor([[-1.0, 2.0, 3.0, 4.0]])
    with ft.watch(model, raise_on=False) as w:
        model(x).sum().backward()
    assert [(f.module, f.tensor, f.born_here) for f in w.findings[:1]] == [
        ("poison", "gradient of input[0]", True)]
    assert w.findings[0].first == (0, 0)
