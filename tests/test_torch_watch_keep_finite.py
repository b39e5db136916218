"""Modules whose output watch knows finite without reading it (finite in, finite out): torch's own
outputs are the truth for each class, over every finite 16-bit pattern and float32 / float64
extremes; and watch reads the output again wherever that rule does not hold (an unchecked or
non-finite input, a subclass, a replaced forward, a hook that changes the output)."""

import math

import numpy as np
import pytest

import fpclass.torch as ft
from fpclass.torch import watching

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch.tensors import checker  # noqa: E402

# each class watch trusts, with the input shape it is tried on (N, C, spatial...)
MODULES = {
    "ReLU": (lambda: nn.ReLU(), 2),
    "ReLU6": (lambda: nn.ReLU6(), 2),
    "Hardtanh": (lambda: nn.Hardtanh(-2.0, 3.0), 2),
    "MaxPool1d": (lambda: nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True), 3),
    "MaxPool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), 4),
    "MaxPool3d": (lambda: nn.MaxPool3d(2, padding=1, ceil_mode=True), 5),
    "AdaptiveMaxPool1d": (lambda: nn.AdaptiveMaxPool1d(5), 3),
    "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d((3, 5)), 4),
    "AdaptiveMaxPool3d": (lambda: nn.AdaptiveMaxPool3d(2), 5),
    "Flatten": (lambda: nn.Flatten(), 4),
    "Unflatten": (lambda: nn.Unflatten(1, (2, -1)), 2),
    "Tanh": (lambda: nn.Tanh(), 2),
    "Sigmoid": (lambda: nn.Sigmoid(), 2),
    "Softmax": (lambda: nn.Softmax(dim=-1), 2),
}

SHAPES = {2: (4096, 16), 3: (64, 4, 256), 4: (16, 4, 32, 32), 5: (8, 4, 8, 16, 16)}


def test_every_trusted_class_is_tried_here():
    assert set(watching.KEEP_FINITE_NAMES) == set(MODULES)


def _finite_values(dtype) -> torch.Tensor:
    """65,536 finite values of `dtype`: every finite 16-bit pattern (repeated to fill), or
    float32 / float64 extremes and random bit patterns of every exponent."""
    if dtype in (torch.float16, torch.bfloat16):
        every = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
        finite = every[torch.isfinite(every)]
        values = finite.repeat(2)[:2**16]
    else:
        info = torch.finfo(dtype)
        extremes = torch.tensor([info.max, -info.max, info.tiny, -info.tiny,
                                 info.smallest_normal / 2**20, 0.0, -0.0, 1.0, -1.0, 88.72,
                                 -88.72, 709.78, -709.78, info.max / 2, -info.max / 2],
                                dtype=dtype)
        width = np.uint32 if dtype == torch.float32 else np.uint64
        bits = np.random.default_rng(0).integers(0, np.iinfo(width).max, 2**16, dtype=width)
        random = torch.from_numpy(bits.view(np.float32 if width is np.uint32 else np.float64))
        random = random[torch.isfinite(random)]
        values = torch.cat([extremes.repeat(64), random])[:2**16]
    shuffled = values[torch.randperm(values.numel(), generator=torch.Generator().manual_seed(0))]
    # rows that mix the largest of both signs (a softmax's max minus the row's least)
    top = torch.finfo(dtype).max
    shuffled[:16] = torch.tensor([top, -top] * 8, dtype=dtype)
    return shuffled


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64],
                         ids=str)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_torch_keeps_every_finite_input_finite(name, dtype):
    make, rank = MODULES[name]
    x = _finite_values(dtype).reshape(SHAPES[rank])
    assert bool(torch.isfinite(x).all())
    try:
        out = make()(x)
    except (RuntimeError, NotImplementedError) as e:  # no CPU kernel for this dtype: watch never
        pytest.skip(f"torch has no CPU {name} for {dtype}: {e}")  # sees such an output
    assert out.dtype == dtype
    assert bool(torch.isfinite(out).all())


class Reads:
    """A copy of every tensor watch's checker reads (its finite() and magnitude()), as it was
    read."""

    def __init__(self, monkeypatch):
        self.tensors = []
        checks = checker(torch)
        for name in ("finite", "magnitude"):
            monkeypatch.setattr(checks, name, self._recording(getattr(checks, name)))

    def _recording(self, read):
        def recording(t):
            self.tensors.append(t.detach().clone())
            return read(t)
        return recording

    def holds(self, truth) -> bool:
        return any(t.shape == truth.shape and torch.equal(t, truth) for t in self.tensors)


def _forward_reads(monkeypatch, *modules):
    """A watched forward pass (no backward) of Sequential(modules) over a 5 x 8 input: (its
    output, what watch read); it finds nothing and the output is finite."""
    torch.manual_seed(0)
    model = nn.Sequential(*modules)
    x = torch.randn(5, 8)
    reads = Reads(monkeypatch)
    with ft.watch(model, backward=False) as w:
        out = model(x)
    assert w.findings == [] and bool(torch.isfinite(out).all())
    return out, reads


def test_outputs_of_trusted_modules_over_checked_finite_inputs_are_not_read(monkeypatch):
    out, reads = _forward_reads(monkeypatch, nn.Linear(8, 8), nn.ReLU(), nn.Unflatten(1, (1, 8)),
                                nn.MaxPool1d(2), nn.Flatten(), nn.Linear(4, 3), nn.Tanh())
    # the Linears' outputs are read (the first holds negatives: not the ReLU's); the ReLU's, the
    # pool's, the views' and the Tanh's are not
    assert [tuple(t.shape) for t in reads.tensors] == [(5, 8), (5, 3)]
    assert bool((reads.tensors[0] < 0).any()) and not reads.holds(out)


def test_a_trusted_module_over_an_unchecked_input_is_read():
    model = nn.Sequential(nn.ReLU(), nn.Linear(2, 2))  # x is not checked (check_inputs=False)
    x = torch.tensor([[math.inf, 1.0]])
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    first = w.findings[0]
    assert (first.module, first.tensor, first.counts["posinf"]) == ("0", "output", 1)


class LogReLU(nn.ReLU):
    def forward(self, x):
        return torch.log(x - 10)


def _replaced(module):
    module.forward = lambda x: x * math.inf
    return module


def _hooked(module):
    module.register_forward_hook(lambda m, a, o: o - math.inf)
    return module


@pytest.mark.parametrize("make", [lambda: LogReLU(), lambda: _replaced(nn.ReLU()),
                                  lambda: _hooked(nn.Sigmoid())],
                         ids=["subclass", "forward replaced", "hook before watch's"])
def test_a_trusted_class_computing_something_else_is_read(make):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), make(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    assert w.findings and (w.findings[0].module, w.findings[0].born_here) == ("1", True)


def test_a_global_hook_changing_outputs_makes_trusted_modules_read():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))

    def poison(module, args, output):
        return output * math.inf if isinstance(module, nn.Tanh) else None
    handle = nn.modules.module.register_module_forward_hook(poison)
    try:
        with ft.watch(model, raise_on=False, backward=False) as w:
            model(torch.randn(3, 4))
    finally:
        handle.remove()
    assert w.findings and (w.findings[0].module, w.findings[0].born_here) == ("1", True)


def test_a_trusted_module_over_a_non_finite_input_reports_it_passed_along():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.MaxPool1d(2), nn.Linear(2, 2))
    with torch.no_grad():
        model[0].bias[0] = math.nan
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(torch.randn(3, 4))
    assert [(f.module, f.born_here) for f in w.findings[:2]] == [("0", True), ("1", False)]


def _after_linear(module, x):
    """watch's findings on Sequential(Linear (identity), module) over x (Linear's output is
    what the module receives, read first); torch's output of the module as the truth."""
    width = x.shape[-1]
    lin = nn.Linear(width, width, dtype=x.dtype)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(width, dtype=x.dtype))
        lin.bias.zero_()
        truth = module(x)
    model = nn.Sequential(lin, module)
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(x)
    return [f.module for f in w.findings], truth


@pytest.mark.parametrize("pool", ["MaxPool1d", "AdaptiveMaxPool1d"])
def test_every_small_pool_over_finite_input_is_found_as_torch_computes_it(pool):
    # windows wholly in padding (dilation) give -Inf: watch must read those outputs
    nonfinite = 0
    for length in range(1, 6):
        x = torch.arange(1.0, length + 1).reshape(1, 1, length)
        if pool == "AdaptiveMaxPool1d":
            configs = [nn.AdaptiveMaxPool1d(size) for size in range(1, 7)]
        else:
            configs = [nn.MaxPool1d(k, stride=s, padding=p, dilation=d, ceil_mode=c)
                       for k in range(1, 4) for s in range(1, 4) for p in range(0, k // 2 + 1)
                       for d in range(1, 4) for c in (False, True)]
        for module in configs:
            try:
                found, truth = _after_linear(module, x)
            except RuntimeError:  # torch refuses the shape
                continue
            bad = not bool(torch.isfinite(truth).all())
            nonfinite += bad
            assert found == (["1"] if bad else []), (module, length)
    assert nonfinite > 0 if pool == "MaxPool1d" else nonfinite == 0


def test_a_complex_input_is_read():
    found, truth = _after_linear(nn.Sigmoid(), torch.tensor([[-1000 + 3j, 1 + 0j]],
                                                            dtype=torch.complex64))
    assert not bool(torch.isfinite(truth).all()) and found == ["1"]


def test_a_clamp_with_a_nan_bound_is_read():
    module = nn.Hardtanh()
    module.min_val = math.nan
    found, truth = _after_linear(module, torch.tensor([[-2.0, 0.5]]))
    assert not bool(torch.isfinite(truth).all()) and found == ["1"]


def test_a_class_whose_forward_was_replaced_is_read(monkeypatch):
    with ft.watch(nn.Tanh()):  # the rules' table is made when a watch is first entered
        pass
    monkeypatch.setattr(nn.Tanh, "forward", lambda self, x: x * math.inf)
    found, truth = _after_linear(nn.Tanh(), torch.tensor([[1.0, 2.0]]))
    assert not bool(torch.isfinite(truth).all()) and found == ["1"]


def test_a_torch_function_mode_rerouting_the_call_makes_it_read():
    from torch.overrides import TorchFunctionMode

    class Scaled(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * math.inf if func is torch.tanh else out
    x = torch.tensor([[1.0, 2.0]])
    with Scaled():
        found, truth = _after_linear(nn.Tanh(), x)
    assert not bool(torch.isfinite(truth).all()) and found == ["1"]


class WriteThenAct(nn.Module):
    """Its own code writes Inf into a child's output in place before the next child."""

    def __init__(self):
        super().__init__()
        self.lin, self.act = nn.Linear(2, 2), nn.ReLU()

    def forward(self, x):
        h = self.lin(x)
        h.mul_(math.inf)
        return self.act(h)


@pytest.mark.parametrize("mode", ["inference", "grad"])
def test_an_input_written_after_its_read_is_read_again(mode):
    torch.manual_seed(0)
    model = WriteThenAct()
    with torch.no_grad():
        model.lin.weight.fill_(1.0)
        model.lin.bias.fill_(1.0)
    context = torch.inference_mode() if mode == "inference" else torch.enable_grad()
    with context, ft.watch(model, raise_on=False, backward=False) as w:
        out = model(torch.ones(1, 2))
    assert not bool(torch.isfinite(out).all())
    assert "act" in [f.module for f in w.findings]


def test_a_forward_wrapped_before_the_first_watch_is_not_torchs(monkeypatch):
    import functools
    torchs = nn.Sigmoid.forward

    @functools.wraps(torchs)  # torch's names, another function's code
    def forward(self, x):
        return torchs(self, x) * math.inf
    monkeypatch.setattr(nn.Sigmoid, "forward", forward)
    # the rules' tables as a process makes them when it first enters a watch
    monkeypatch.setattr(watching, "_KEEP_FINITE", set())
    monkeypatch.setattr(watching, "_MASKS", {})
    monkeypatch.setattr(watching, "_TORCH_FORWARD", {})
    found, truth = _after_linear(nn.Sigmoid(), torch.tensor([[1.0, 2.0]]))
    assert not bool(torch.isfinite(truth).all()) and found == ["1"]


@pytest.mark.parametrize("make", [lambda: nn.ReLU(inplace=True), lambda: nn.ReLU6(inplace=True),
                                  lambda: nn.Hardtanh(inplace=True)],
                         ids=["ReLU", "ReLU6", "Hardtanh"])
def test_a_finite_tensor_clamped_in_place_is_not_read_again(monkeypatch, make):
    _, reads = _forward_reads(monkeypatch, nn.Linear(8, 8), make(), nn.Linear(8, 3))
    assert [tuple(t.shape) for t in reads.tensors] == [(5, 8), (5, 3)]


class Log(nn.Module):
    def forward(self, x):
        return x.log()


def test_a_non_finite_output_is_read_once_and_reported(monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), Log())
    x = torch.randn(5, 8)
    truth = model(x)
    assert bool(torch.isnan(truth).any())
    reads = Reads(monkeypatch)
    with ft.watch(model, backward=False, raise_on=False) as w:
        out = model(x)
    assert [(f.module, f.counts["nan"]) for f in w.findings[:1]] == [
        ("1", int(torch.isnan(truth).sum()))]
    # the container's output is the Log's: read when the Log returned it, once
    assert sum(torch.equal(t.nan_to_num(), out.nan_to_num()) for t in reads.tensors) == 1


#: name -> (a functional operation over a 2-d tensor, the autograd node it makes)
OPERATIONS = {
    "relu": (torch.relu, "ReluBackward0"),
    "tanh": (torch.tanh, "TanhBackward0"),
    "sigmoid": (torch.sigmoid, "SigmoidBackward0"),
    "softmax": (lambda x: torch.softmax(x, dim=-1), "SoftmaxBackward0"),
    "silu": (nn.functional.silu, "SiluBackward0"),
}


def test_gelu_is_not_trusted_it_overflows_near_the_largest_values():
    x = _finite_values(torch.float32).reshape(SHAPES[2]).requires_grad_()  # (its vector path)
    assert not bool(torch.isfinite(nn.functional.gelu(x)).all())
    assert "GeluBackward0" not in watching._KEEP_FINITE_NODES


def test_every_trusted_node_is_tried_here():
    assert {node for _, node in OPERATIONS.values()} == watching._KEEP_FINITE_NODES


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64],
                         ids=str)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_trusted_node_keeps_every_finite_input_finite(name, dtype):
    """torch's operation over every finite 16-bit value (float32 / float64: extremes and random
    patterns of every exponent), in rows that mix both signs' largest: finite, and the node the
    table names."""
    operation, node = OPERATIONS[name]
    x = _finite_values(dtype).reshape(SHAPES[2]).requires_grad_()
    try:
        out = operation(x)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"torch has no CPU {name} for {dtype}: {e}")
    assert type(out.grad_fn).__name__ == node and out.dtype == dtype
    assert bool(torch.isfinite(out).all())


class Functional(nn.Module):
    """Linear, a functional operation in the forward (as a transformer layer's activation),
    then Dropout(0.0), which returns its input: what watch sees as the Dropout's output is the
    operation's."""

    def __init__(self, operation, before=None):
        super().__init__()
        self.lin, self.drop, self.out = nn.Linear(8, 8), nn.Dropout(0.0), nn.Linear(8, 3)
        self.operation, self.before = operation, before

    def forward(self, x):
        h = self.lin(x)
        if self.before is not None:
            self.before(h)
        return self.out(self.drop(self.operation(h)))


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_an_operations_output_over_a_read_input_is_not_read(monkeypatch, name):
    _, reads = _forward_reads(monkeypatch, Functional(OPERATIONS[name][0]))
    assert [tuple(t.shape) for t in reads.tensors] == [(5, 8), (5, 3)]


@pytest.mark.parametrize("operation", [lambda h: torch.log_softmax(h, dim=-1),
                                       lambda h: h * 2.0, lambda h: torch.relu(h * 1.0)],
                         ids=["log_softmax", "a scale", "relu of an unread tensor"])
def test_other_operations_and_unread_inputs_are_read(monkeypatch, operation):
    _, reads = _forward_reads(monkeypatch, Functional(operation))
    assert [tuple(t.shape) for t in reads.tensors] == [(5, 8), (5, 8), (5, 3)]


def test_an_input_written_in_place_after_its_read_makes_it_read(monkeypatch):
    model = Functional(torch.relu, before=lambda h: h.mul_(1.0))
    _, reads = _forward_reads(monkeypatch, model)
    assert [tuple(t.shape) for t in reads.tensors] == [(5, 8), (5, 8), (5, 3)]


def _relu_then_written(h):
    t = torch.relu(h)
    with torch.no_grad():  # a write autograd does not record: the node stays relu's
        t.mul_(math.inf)
    assert type(t.grad_fn).__name__ == "ReluBackward0" and t._version == 1
    return t


def test_an_output_written_in_place_after_the_operation_is_read():
    model = Functional(_relu_then_written)
    torch.manual_seed(0)
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(torch.randn(5, 8))
    assert [f.module for f in w.findings][:1] == ["drop"]


def test_a_dispatch_mode_makes_it_read(monkeypatch):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Passing():
        _, reads = _forward_reads(monkeypatch, Functional(torch.relu))
    assert [tuple(t.shape) for t in reads.tensors] == [(5, 8), (5, 8), (5, 3)]


@pytest.mark.parametrize("name", ["relu", "softmax", "silu"])
def test_a_non_finite_input_is_found_as_a_read_finds_it(monkeypatch, name):
    """NaN from the Linear: the operation's output is read (its input is not known finite) and
    the findings equal those of a watch without the node rule."""
    def findings(nodes):
        monkeypatch.setattr(watching, "_KEEP_FINITE_NODES", nodes)
        torch.manual_seed(0)
        model = Functional(OPERATIONS[name][0])
        with torch.no_grad():
            model.lin.weight[2, 3] = math.nan
        with ft.watch(model, raise_on=False) as w:
            model(torch.randn(5, 8)).sum().backward()
        return [(f.module, f.direction, f.tensor, f.counts, f.first, f.inputs_nonfinite)
                for f in w.findings]
    with_rule = findings(watching._KEEP_FINITE_NODES)
    assert with_rule and with_rule == findings(frozenset())
    assert ("drop", "forward", "output") in [f[:3] for f in with_rule]


def test_another_output_of_the_same_node_is_not_the_input_read():
    """split's two halves share a node (output 0 and 1): the first read finite says nothing of
    the second, whose NaN the operation passes on."""
    class Halves(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.first, self.drop = nn.Linear(8, 8), nn.Identity(), nn.Dropout(0.0)

        def forward(self, x):
            a, b = self.lin(x).split(4, dim=1)
            return self.first(a), self.drop(torch.relu(b))
    torch.manual_seed(0)
    model = Halves()
    with torch.no_grad():
        model.lin.weight[6] = math.nan  # the second half's column 2
    with ft.watch(model, raise_on=False, backward=False) as w:
        model(torch.randn(5, 8))
    assert "drop" in [f.module for f in w.findings]
