"""fpclass.torch.watch: the first module whose output (forward) or gradient (backward) holds NaN
or Inf, named with its class, the direction, which tensor, the counts, the first index and whether
it was born there; every hook gone on leaving the context."""

import math

import pytest

import fpclass
import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class Sqrt(nn.Module):
    def forward(self, x):
        return torch.sqrt(x)


class Block(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


def net(act=None):
    torch.manual_seed(0)
    return nn.Sequential(Block(nn.ReLU(inplace=True)), Block(act or Log()), nn.Linear(4, 2))


def hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
               + len(m._backward_pre_hooks) for m in model.modules())


def test_a_planted_log_of_a_negative_is_born_in_its_module():
    model = net()
    x = torch.randn(16, 4)
    with pytest.raises(ft.NonFiniteError) as caught:
        with ft.watch(model):
            model(x)
    err = caught.value
    inside = model[1].act(model[1].fc(model[0](x)))  # torch's own answer, unwatched
    assert (err.module, err.module_type, err.direction, err.tensor) == ("1.act", "Log", "forward", "output")
    assert err.counts == {"nan": int(torch.isnan(inside).sum()), "posinf": int(torch.isposinf(inside).sum()),
                          "neginf": int(torch.isneginf(inside).sum())}
    assert err.first == tuple(torch.nonzero(~torch.isfinite(inside))[0].tolist())
    assert err.born_here and err.inputs_nonfinite is False
    assert "1.act (Log)" in str(err) and "born here" in str(err)
    assert hooks(model) == 0


def test_nonfinite_input_is_passed_along_or_caught_at_the_door():
    model = net(nn.Tanh())
    x = torch.ones(2, 4)
    x[1, 3] = math.nan
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        model(x)
    assert caught.value.module == "0.fc" and not caught.value.born_here
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, check_inputs=True):
        model(x)
    err = caught.value
    assert (err.module, err.tensor, err.first) == ("", "input[0]", (1, 3))
    assert err.module_type == "Sequential" and not err.born_here


def test_a_gradient_born_in_a_backward_pass():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), Sqrt(), nn.Linear(3, 1))
    x = torch.randn(5, 3)
    with ft.watch(model):
        out = model(x)  # relu gives exact zeros, whose sqrt has an infinite slope
        with pytest.raises(ft.NonFiniteError) as caught:
            out.sum().backward()
    err = caught.value
    assert (err.module, err.module_type, err.direction) == ("2", "Sqrt", "backward")
    assert err.tensor == "gradient of input[0]" and err.born_here
    assert err.counts["posinf"] > 0
    assert hooks(model) == 0


def test_a_gradient_arriving_nonfinite_from_the_loss_is_passed_along():
    model = net(nn.Tanh())
    with ft.watch(model, raise_on=False) as w:
        (model(torch.randn(3, 4)) * math.inf).sum().backward()
    first = w.findings[0]
    assert (first.module, first.direction, first.tensor) == ("2", "backward", "gradient of output")
    assert not first.born_here


def test_findings_are_recorded_instead_of_raised():
    model = net()
    with ft.watch(model, raise_on=False) as w:
        model(torch.randn(16, 4)).sum().backward()
    assert w.findings and w.findings[0].module == "1.act" and w.findings[0].born_here
    assert all(not f.born_here for f in w.findings[1:] if f.direction == "forward")
    assert hooks(model) == 0


def test_a_name_filter_watches_only_those_modules():
    model = net()
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, names=["*.fc", "2"],
                                                                backward=False):
        model(torch.randn(16, 4))
    assert caught.value.module == "2" and not caught.value.born_here
    with ft.watch(model, names=lambda name: name.endswith("fc")):
        model(torch.randn(16, 4))  # the NaN is born after the last watched module


def test_leaving_removes_every_hook_and_disarms_the_graph():
    model = net(nn.Tanh())
    before = hooks(model)
    with ft.watch(model, check_inputs=True):
        assert hooks(model) > before
        out = model(torch.randn(2, 4))
    assert hooks(model) == before
    (out * math.nan).sum().backward()  # the graph built while watching no longer reports


def test_watching_changes_no_answer():
    model = net(nn.Tanh()).to(torch.bfloat16)
    x = torch.randn(8, 4, dtype=torch.bfloat16)
    plain = model(x)
    with ft.watch(model):
        watched = model(x)
        watched.float().sum().backward()
    assert torch.equal(plain, watched)


def test_import_needs_no_torch_until_watching():
    assert fpclass.torch is ft and issubclass(ft.NonFiniteError, FloatingPointError)


def test_a_meta_device_model_is_refused_by_name_and_leaves_no_hook():
    """A tensor on the meta device holds no values: watch says so (its dtype, shape and what to
    do), not torch's `.item()` error, and leaving the context removes every hook."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).to("meta")
    with pytest.raises(TypeError, match=r"shape \(3, 4\) on the meta device: meta tensors hold "
                                        "no data"):
        with ft.watch(model):
            model(torch.randn(3, 4, device="meta"))
    assert not any(m._forward_hooks for m in model.modules())
