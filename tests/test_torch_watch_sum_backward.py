"""A convolution's, a Linear's and a norm's backward sums its output's gradient into the bias's: a
NaN or an Inf anywhere in that gradient makes the sum NaN or Inf. watch reads the small sum
instead of the gradient, and the gradient only when the sum is not finite or the node never uses
it, so the findings are those of reading every gradient. torch's own gradients are the truth."""

import gc
import math
import weakref

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import watching  # noqa: E402

from test_torch_watch_keep_finite import Reads  # noqa: E402

INF = math.inf


@pytest.fixture(autouse=True)
def proof_at_every_size(monkeypatch):
    """The proof on these small tensors too (it starts at SUM_MIN elements)."""
    monkeypatch.setattr(watching, "SUM_MIN", 0)


def _channels_last(module):
    return module.to(memory_format=torch.channels_last)


def _eval(module):
    return module.eval()


#: name -> (the module, its input's shape, the input's memory format)
PRODUCERS = {
    "linear": (lambda: nn.Linear(4, 3), (5, 4), None),
    "linear over 3 dimensions": (lambda: nn.Linear(4, 3), (2, 5, 4), None),
    "conv2d": (lambda: nn.Conv2d(2, 3, 3, padding=1), (2, 2, 4, 4), None),
    "conv2d channels_last": (lambda: _channels_last(nn.Conv2d(2, 3, 3, padding=1)),
                             (2, 2, 4, 4), torch.channels_last),
    "conv1d": (lambda: nn.Conv1d(2, 3, 3), (2, 2, 6), None),
    "batchnorm": (lambda: nn.BatchNorm2d(3), (2, 3, 3, 3), None),
    "batchnorm channels_last": (lambda: _channels_last(nn.BatchNorm2d(3)), (2, 3, 3, 3),
                                torch.channels_last),
    "batchnorm eval": (lambda: _eval(nn.BatchNorm1d(3)), (4, 3), None),
    "layernorm": (lambda: nn.LayerNorm(4), (5, 4), None),
    "groupnorm": (lambda: nn.GroupNorm(1, 3), (2, 3, 2, 2), None),
}


def _input(name):
    torch.manual_seed(1)
    _, shape, memory = PRODUCERS[name]
    x = torch.randn(*shape)
    return x if memory is None else x.to(memory_format=memory)


def _producer(name):
    torch.manual_seed(0)
    return PRODUCERS[name][0]()


class PlantGrad(torch.autograd.Function):
    """Forward: its input. Backward: twice the gradient (unlike the gradient into its output),
    with `values` written at the places `at`."""

    @staticmethod
    def forward(ctx, x, at, values):
        ctx.at, ctx.values = at, values
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad * 2
        for place, value in zip(ctx.at, ctx.values):
            grad[place] = value
        return grad, None, None


class Plant(nn.Module):
    def __init__(self, at=(), values=()):
        super().__init__()
        self.at, self.values = at, values

    def forward(self, x):
        return PlantGrad.apply(x, self.at, self.values)


def _truth(name, at=(), values=()):
    """torch's gradient into the producer's output and into its bias."""
    model = nn.Sequential(_producer(name), Plant(at, values))
    h = model[0](_input(name))
    h.retain_grad()
    model[1](h).square().sum().backward()
    return h.grad, model[0].bias.grad


@pytest.mark.parametrize("name", sorted(PRODUCERS))
def test_torchs_bias_gradient_is_not_finite_wherever_its_output_gradient_is_not(name):
    module = _producer(name)
    out = module(_input(name))
    node = out.grad_fn
    if type(node).__name__ in watching._RESHAPES:  # a view of the addmm's output
        node = node.next_functions[0][0]
    index = watching._SUMS[type(node).__name__]  # the node and where its sum is
    assert node.next_functions[index][0].variable is module.bias
    assert bool(torch.isfinite(torch.autograd.grad(out, module.bias, torch.ones_like(out),
                                                   retain_graph=True)[0]).all())
    for place in range(out.numel()):
        for value in (math.nan, INF, -INF):
            grad = torch.ones(out.shape)
            grad.view(-1)[place] = value
            if out.is_contiguous(memory_format=torch.channels_last) and out.dim() == 4:
                grad = grad.contiguous(memory_format=torch.channels_last)
            summed, = torch.autograd.grad(out, module.bias, grad, retain_graph=True)
            assert not bool(torch.isfinite(summed).all()), (place, value)


@pytest.mark.parametrize("name", sorted(PRODUCERS))
def test_the_gradient_into_a_summing_modules_output_is_not_read(monkeypatch, name):
    into_output, into_bias = _truth(name)
    model = nn.Sequential(_producer(name), Plant())
    reads = Reads(monkeypatch)
    with ft.watch(model) as w:
        model(_input(name)).square().sum().backward()
    assert w.findings == []
    assert not reads.holds(into_output)
    assert reads.holds(into_bias)


PLANTS = {"nan": ([0], [math.nan]), "+inf": ([1], [INF]), "-inf": ([-1], [-INF]),
          "+inf and -inf in one sum": ([0, 1], [INF, -INF])}


def _findings(name, plant, monkeypatch, least):
    monkeypatch.setattr(watching, "SUM_MIN", least)
    at, values = plant
    model = nn.Sequential(_producer(name), Plant(at, values))
    with ft.watch(model, raise_on=False) as w:
        model(_input(name)).square().sum().backward()
    return [(f.module, f.direction, f.tensor, f.counts, f.first, f.inputs_nonfinite)
            for f in w.findings]


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("name", sorted(PRODUCERS))
def test_a_non_finite_gradient_is_found_as_a_read_finds_it(monkeypatch, name, plant):
    at, values = PLANTS[plant]
    at = [(0,) * (len(PRODUCERS[name][1]) - 1) + (i,) for i in at]
    truth, _ = _truth(name, at, values)
    counts = {"nan": int(torch.isnan(truth).sum()), "posinf": int(torch.isposinf(truth).sum()),
              "neginf": int(torch.isneginf(truth).sum())}
    found = _findings(name, (at, values), monkeypatch, 0)
    assert found[0][:4] == ("1", "backward", "gradient of input[0]", counts)
    assert found[0][5] is False  # born in Plant's backward
    assert found == _findings(name, (at, values), monkeypatch, 1 << 60)  # every gradient read


def test_a_sum_that_overflows_makes_watch_read_the_finite_gradient(monkeypatch):
    big = 3e38  # two of them in one bias's sum: +Inf from finite values
    into_output, into_bias = _truth("linear", [(0, 0), (1, 0)], [big, big])
    assert bool(torch.isfinite(into_output).all()) and math.isinf(float(into_bias[0]))
    model = nn.Sequential(_producer("linear"), Plant([(0, 0), (1, 0)], [big, big]))
    reads = Reads(monkeypatch)
    with ft.watch(model, grads=False) as w:
        model(_input("linear")).square().sum().backward()
    assert w.findings == [] and reads.holds(into_output)


class HookedAfter(nn.Module):
    """Its own code hooks the Linear's output after watch did: `hook` rewrites the gradient
    (in place or not) before the Linear's backward uses it."""

    def __init__(self, hook, node=False):
        super().__init__()
        self.lin, self.plant, self.hook, self.node = nn.Linear(4, 3), Plant([(0, 1)],
                                                                             [math.nan]), hook, node
        torch.manual_seed(0)

    def forward(self, x):
        h = self.lin(x)
        if self.node:
            h.grad_fn.register_prehook(lambda grads: (self.hook(grads[0]),))
        else:
            h.register_hook(self.hook)
        return self.plant(h)


@pytest.mark.parametrize("name", ["linear", "linear over 3 dimensions"])
@pytest.mark.parametrize("in_place, node", [(False, False), (True, False), (False, True)],
                         ids=["tensor hook", "tensor hook in place", "node pre-hook"])
def test_a_hook_after_watchs_that_clears_the_nan_does_not_hide_it(in_place, node, name):
    # (a node pre-hook writing in place is the documented limit: docs/torch.md)
    hook = (lambda g: g.nan_to_num_()) if in_place else (lambda g: torch.nan_to_num(g))
    model = HookedAfter(hook, node=node)
    x = _input(name)
    model.plant.at = [(0,) * (x.dim() - 1) + (1,)]
    with ft.watch(model, raise_on=False) as w:
        model(x).square().sum().backward()
    assert [(f.module, f.tensor, f.counts["nan"], f.first) for f in w.findings[:1]] == [
        ("plant", "gradient of input[0]", 1, model.plant.at[0])]
    assert model.lin.bias.grad is not None and bool(torch.isfinite(model.lin.bias.grad).all())


def test_a_backward_stopping_at_the_output_reads_its_gradient_at_its_end():
    model = nn.Sequential(_producer("linear"), Plant([(2, 1)], [math.nan]))
    outputs = []
    model[0].register_forward_hook(lambda m, a, out: outputs.append(out))  # runs before watch's
    with ft.watch(model) as w:
        loss = model(_input("linear")).square().sum()
        with pytest.raises(ft.NonFiniteError):
            torch.autograd.grad(loss, outputs[0])  # the Linear's backward never runs
    assert [(f.module, f.tensor, f.counts["nan"], f.first) for f in w.findings] == [
        ("1", "gradient of input[0]", 1, (2, 1))]


@pytest.mark.parametrize("which", ["no bias", "frozen bias"])
def test_without_a_bias_gradient_the_gradient_is_read(monkeypatch, which):
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1, bias=which != "no bias")
    if which == "frozen bias":
        conv.bias.requires_grad_(False)
    model = nn.Sequential(conv, Plant([(0, 2, 1, 1)], [math.nan]))
    x = _input("conv2d")
    h = conv(x)
    h.retain_grad()
    model[1](h).square().sum().backward()
    reads = Reads(monkeypatch)
    with ft.watch(model, raise_on=False) as w:
        model(x).square().sum().backward()
    assert any(t.shape == h.grad.shape and torch.equal(t.nan_to_num(), h.grad.nan_to_num())
               for t in reads.tensors)  # NaN is no NaN's equal
    assert [(f.module, f.counts["nan"], f.first) for f in w.findings[:1]] == [
        ("1", 1, (0, 2, 1, 1))]


def _failing_node(flag, error=RuntimeError):
    """A forward hook giving the module's output node a pre-hook that raises `error` while
    flag[0]."""
    def fail(grads):
        if flag[0]:
            raise error("the node fails")

    def hook(module, args, out):
        out.grad_fn.register_prehook(fail)
    return hook


def _failing_linear(flag, error=RuntimeError):
    """Linear, then a NaN planted in its output's gradient; the Linear's node fails while
    flag[0]."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), Plant([(0, 1)], [math.nan]))
    model[0].register_forward_hook(_failing_node(flag, error))
    return model


def test_a_watched_step_keeps_no_gradient_alive():
    model = nn.Sequential(_producer("conv2d"), Plant())
    refs = []
    raising = [False]

    def hooks(module, args, out):  # registered before watch's: its tensor hook comes first
        out.register_hook(lambda g: refs.append(weakref.ref(g)))

        def fail(grads):
            if raising[0]:
                raise RuntimeError("a backward that fails between watch's hook and the node")
        out.grad_fn.register_prehook(fail)
    model[0].register_forward_hook(hooks)
    gc.disable()  # freed by reference counts alone
    try:
        with ft.watch(model):
            model(_input("conv2d")).square().sum().backward()
            assert len(refs) == 1 and refs[0]() is None
            raising[0] = True
            loss = model(_input("conv2d")).square().sum()
            with pytest.raises(RuntimeError, match="fails between"):
                loss.backward(retain_graph=True)
            assert refs[1]() is not None  # held for the node that never ran
            raising[0] = False
            model(_input("conv2d"))  # a new pass reads it and lets it go; the old graph lives
            assert refs[1]() is None
            del loss
    finally:
        gc.enable()


def test_a_dispatch_mode_in_the_backward_gets_no_proof():
    from torch.utils._python_dispatch import TorchDispatchMode

    class ZeroSum(TorchDispatchMode):
        """Makes a convolution's backward return a zero bias gradient."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.convolution_backward.default and out[2] is not None:
                out = (out[0], out[1], torch.zeros_like(out[2]))
            return out
    model = nn.Sequential(_producer("conv2d"), Plant([(1, 0, 2, 3)], [math.nan]))
    with ft.watch(model, raise_on=False) as w:
        loss = model(_input("conv2d")).square().sum()
        with ZeroSum():
            loss.backward()
    assert bool(torch.isfinite(model[0].bias.grad).all())  # the mode hid it from the sum
    assert [(f.module, f.tensor, f.counts["nan"], f.first) for f in w.findings[:1]] == [
        ("1", "gradient of input[0]", 1, (1, 0, 2, 3))]


def _summary(w):
    return [(f.module, f.direction, f.tensor, f.counts, f.first, f.inputs_nonfinite)
            for f in w.findings]


def _with_and_without(monkeypatch, run):
    """run() with the proof, then with every gradient read: both results."""
    monkeypatch.setattr(watching, "SUM_MIN", 0)
    proved = run()
    monkeypatch.setattr(watching, "SUM_MIN", 1 << 60)
    return proved, run()


def test_two_gradients_waiting_on_one_sum_are_read_in_the_order_they_arrived(monkeypatch):
    # the Unflatten's output is a view of the Linear's: both gradients wait on its addmm, the
    # Unflatten's arriving first; the NaN is born in Plant's backward
    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Unflatten(1, (2, 3)),
                              Plant([(0, 1, 2)], [math.nan]))
        with ft.watch(model, raise_on=False) as w:
            model(torch.randn(5, 4)).square().sum().backward()
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read
    assert proved[0][0] == "2" and proved[0][5] is False  # born in Plant


def test_a_stop_at_the_output_keeps_the_order_of_findings(monkeypatch):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.act, self.p2 = nn.ReLU(), Plant([(0, 0)], [INF])
            self.lin, self.p1 = nn.Linear(4, 3), Plant([(0, 1)], [math.nan])

        def forward(self, x):
            u = self.act(x)
            w = self.p2(u)  # an older node: its backward runs after p1's
            self.h, self.u = self.lin(x), u
            return self.p1(self.h).sum() + w.sum()

    def run(**options):
        torch.manual_seed(0)
        model = Two()
        with ft.watch(model, **options) as w:
            loss = model(torch.randn(5, 4, requires_grad=True))
            try:
                torch.autograd.grad(loss, [model.h, model.u])  # the Linear's node never runs
            except ft.NonFiniteError as error:
                return error.finding.module, _summary(w)
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, lambda: run(raise_on=False))
    assert proved == read and [f[0] for f in proved] == ["p1", "p2"]
    assert _with_and_without(monkeypatch, run) == (("p1", proved[:1]),) * 2


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_checkpointed_watched_module_run_again_in_the_backward(monkeypatch, reentrant):
    from torch.utils.checkpoint import checkpoint

    def run():
        torch.manual_seed(0)
        block, plant = nn.Sequential(nn.Linear(4, 3)), Plant([(0, 1)], [math.nan])
        x = torch.randn(5, 4, requires_grad=True)
        with ft.watch(block, raise_on=False) as w:
            plant(checkpoint(block, x, use_reentrant=reentrant)).square().sum().backward()
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read
    assert proved[0][2:5] == ("gradient of output", {"nan": 1, "posinf": 0, "neginf": 0}, (0, 1))


@pytest.mark.parametrize("bad", [False, True])
def test_a_gradient_made_in_inference_mode(monkeypatch, bad):
    monkeypatch.setattr(watching, "MASK_MIN", 0)  # the ReLU's proof keeps the gradient too

    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
        with ft.watch(model, raise_on=False) as w:
            out = model(torch.randn(5, 4))
            with torch.inference_mode():
                g = torch.ones(5, 3)
                g[1, 2] = math.nan if bad else 2.0
            out.backward(g)
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read
    assert [f[2:5] for f in proved[:1]] == ([("gradient of output", {
        "nan": 1, "posinf": 0, "neginf": 0}, (1, 2))] if bad else [])


class FailsBelow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("a backward that fails below the Linear")


class Fails(nn.Module):
    def forward(self, x):
        return FailsBelow.apply(x)


def test_a_failed_backward_leaves_the_next_one_its_end(monkeypatch):
    def run():
        torch.manual_seed(0)
        model = nn.Sequential(Fails(), nn.Linear(4, 3), Plant([], []))
        outputs = []
        model[1].register_forward_hook(lambda m, a, out: outputs.append(out))  # returns None
        with ft.watch(model, raise_on=False) as w:
            loss = model(torch.randn(5, 4, requires_grad=True)).square().sum()
            with pytest.raises(RuntimeError, match="fails below"):
                loss.backward(retain_graph=True)
            model[2].at.append((0, 1))  # the lists its backward reads
            model[2].values.append(math.nan)
            torch.autograd.grad(loss, outputs[0])  # the Linear's node does not run
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read and [f[0] for f in proved] == ["2"]


def test_a_backward_failing_after_the_hold_reports_at_the_contexts_end(monkeypatch):
    def run(**options):
        model = _failing_linear([True])
        with ft.watch(model, **options) as w:
            try:
                model(torch.randn(5, 4)).square().sum().backward()
            except RuntimeError as error:
                assert isinstance(error, ft.NonFiniteError) or "fails" in str(error)
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, lambda: run(raise_on=False))
    assert proved == read and [f[0] for f in proved] == ["1"]
    # raising: read in the backward, or (held) when the context ends
    monkeypatch.setattr(watching, "SUM_MIN", 0)
    with pytest.raises(ft.NonFiniteError, match="Plant"):
        run()


def test_a_parameters_gradient_keeps_its_place_among_held_gradients(monkeypatch):
    class Branches(nn.Module):
        """Two Linears in parallel: b's weight gradient overflows (two 3e38 summed) from a
        finite output gradient, and a NaN is born in the backward of a's consumer."""

        def __init__(self):
            super().__init__()
            self.a, self.b, self.plant = nn.Linear(4, 3), nn.Linear(4, 3), Plant([(0, 1)],
                                                                               [math.nan])

        def forward(self, x):
            big = x.clone()
            big[:2, 0] = 3e38
            a, b = self.a(x), self.b(big)
            return self.plant(a).sum() + b.sum()

    def run():
        torch.manual_seed(0)
        model = Branches()
        with ft.watch(model, raise_on=False) as w:
            model(torch.randn(5, 4)).backward()
        return [f for f in _summary(w) if f[1] == "backward"]
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read
    assert [(f[0], f[2]) for f in proved[:2]] == [("b", "gradient of weight"),
                                                   ("plant", "gradient of input[0]")]


def test_a_retained_graphs_second_backward_reads_what_the_failed_first_held(monkeypatch):
    def run():
        failing = [True]
        model = _failing_linear(failing)
        with ft.watch(model, raise_on=False) as w:
            loss = model(torch.randn(5, 4)).square().sum()
            with pytest.raises(RuntimeError, match="node fails"):
                loss.backward(retain_graph=True)
            failing[0] = False
            model[1].at.clear()  # the second backward's gradient is finite
            model[1].values.clear()
            loss.backward()
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read and [f[0] for f in proved] == ["1"]


def test_held_gradients_of_another_threads_pass_are_read_when_the_context_ends(monkeypatch):
    import threading

    def run():
        model = _failing_linear([True])
        errors = []

        def work():
            try:
                model(torch.randn(5, 4)).square().sum().backward()
            except RuntimeError as error:
                errors.append(str(error))
        with ft.watch(model, raise_on=False) as w:
            worker = threading.Thread(target=work)
            worker.start()
            worker.join()
        assert errors == ["the node fails"]
        return _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read and [f[0] for f in proved] == ["1"]


def test_a_failed_checkpointed_backward_is_read_at_the_next_pass(monkeypatch):
    from torch.utils.checkpoint import checkpoint

    class Root(nn.Module):
        """Its forward runs again in the backward (a new pass); the Linear's node then fails."""

        def __init__(self):
            super().__init__()
            self.a, self.plant = nn.Linear(4, 3), Plant([(0, 1)], [math.nan])
            self.failing = [True]
            self.a.register_forward_hook(_failing_node(self.failing))

        def forward(self, x):
            return self.plant(self.a(x)).square().sum()

    def run():
        torch.manual_seed(0)
        model = Root()
        x = torch.randn(5, 4, requires_grad=True)
        with ft.watch(model, raise_on=False) as w:
            with pytest.raises(RuntimeError, match="node fails"):
                checkpoint(model, x, use_reentrant=False).backward()
            model.failing[0] = False
            model(x)  # the next pass
            counted = len(w.findings)  # before the context's end
        return _summary(w), counted
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read and [f[0] for f in proved[0]] == ["plant"] and proved[1] == 1


def test_a_raise_lets_the_gradients_held_after_it_go(monkeypatch):
    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Unflatten(1, (2, 3)),
                              Plant([(0, 1, 2)], [math.nan]))
        with ft.watch(model) as w:
            with pytest.raises(ft.NonFiniteError) as raised:
                model(torch.randn(5, 4)).square().sum().backward()
        return raised.value.finding.module, _summary(w)
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read and proved[0] == "2" and len(proved[1]) == 1


def test_a_parameters_gradient_after_a_failed_backward_comes_after_its_held_gradient(
        monkeypatch):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.plant = nn.Linear(4, 3), nn.Linear(4, 3), Plant([(0, 1)],
                                                                               [math.nan])

        def forward(self, x):
            return self.plant(self.a(x)).square().sum()

    def run():
        torch.manual_seed(0)
        model = Two()
        model.a.register_forward_hook(_failing_node([True]))
        with ft.watch(model, raise_on=False) as w:
            with pytest.raises(RuntimeError, match="node fails"):
                model(torch.randn(5, 4)).backward()
            big = torch.randn(5, 4)
            big[:2, 0] = 3e38  # b's weight gradient overflows
            model.b(big).sum().backward()  # b alone: no new pass
        return [(f[0], f[2]) for f in _summary(w) if f[1] == "backward"]
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read
    assert proved[:2] == [("plant", "gradient of input[0]"), ("b", "gradient of weight")]


def test_each_backward_reads_what_is_left_at_its_end(monkeypatch):
    def run():
        failing = [True]
        model = _failing_linear(failing)
        counted = []
        with ft.watch(model, raise_on=False) as w:
            with pytest.raises(RuntimeError, match="node fails"):
                model(torch.randn(5, 4)).square().sum().backward()
            failing[0] = False
            h = model[0](torch.randn(5, 4))  # a submodule alone: no new pass
            torch.autograd.grad(model[1](h).square().sum(), h)  # stops at the Linear's output
            counted.append(len(w.findings))  # before the context's end
        return _summary(w), counted
    proved, read = _with_and_without(monkeypatch, run)
    assert proved == read and proved[1] == [2]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_leaving_by_an_exception_keeps_it_and_removes_every_hook(error):
    model = _failing_linear([True], error)
    before = [len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()]
    w = ft.watch(model)
    with pytest.raises(error, match="node fails"):
        with w:
            model(torch.randn(5, 4)).square().sum().backward()
    assert [(f.module, f.first) for f in w.findings] == [("1", (0, 1))]  # read, not raised
    assert [len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()] == before
