"""A normalization's output (torch's BatchNorm in training, LayerNorm, GroupNorm) is an affine map
of its input by the statistics its autograd node saved and the module's parameters. watch bounds
it from the bounds of those, read (its input as its producer's output), and reads it only when
the bound leaves room for an Inf. torch's own outputs are the truth: wherever watch leaves one
unread it is finite, outputs that overflow are read and reported as a read of every output
reports them, and each guard makes watch read."""

import math

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import watching  # noqa: E402

from test_torch_watch_keep_finite import Reads  # noqa: E402


@pytest.fixture(autouse=True)
def bound_at_every_size(monkeypatch):
    """The bound on these small tensors too (it starts at NORM_MIN elements)."""
    monkeypatch.setattr(watching, "NORM_MIN", 0)


#: name -> (the norm over 4 channels, the input's shape)
NORMS = {
    "batchnorm2d": (lambda: nn.BatchNorm2d(4), (8, 4, 5, 5)),
    "batchnorm1d": (lambda: nn.BatchNorm1d(4), (64, 4)),
    "batchnorm3d": (lambda: nn.BatchNorm3d(4), (2, 4, 3, 3, 3)),
    "batchnorm without affine": (lambda: nn.BatchNorm2d(4, affine=False), (8, 4, 5, 5)),
    "batchnorm without running stats": (lambda: nn.BatchNorm2d(4, track_running_stats=False),
                                        (8, 4, 5, 5)),
    "layernorm": (lambda: nn.LayerNorm(4), (8, 6, 4)),
    "layernorm without bias": (lambda: nn.LayerNorm(4, bias=False), (8, 6, 4)),
    "layernorm without affine": (lambda: nn.LayerNorm(4, elementwise_affine=False), (8, 6, 4)),
    "groupnorm": (lambda: nn.GroupNorm(2, 4), (8, 4, 5, 5)),
}


class Scale(nn.Module):
    """The norm's producer: x * scale + shift, read as its output (torch's own Linear or conv
    would do; this one sets the input's magnitudes exactly)."""

    def __init__(self, scale, shift=0.0):
        super().__init__()
        self.scale, self.shift = scale, shift

    def forward(self, x):
        return x * self.scale + self.shift


def _model(name, scale=1.0, shift=0.0):
    make, shape = NORMS[name]
    torch.manual_seed(0)
    # the input requires grad: a norm without parameters still has a node
    return nn.Sequential(Scale(scale, shift), make()), torch.randn(*shape, requires_grad=True)


def _run(model, x, monkeypatch=None, raise_on=False):
    """(the norm's output, was it read?, findings) of one watched training step."""
    reads = Reads(monkeypatch) if monkeypatch is not None else None
    with ft.watch(model, raise_on=raise_on) as w:
        out = model(x)
        out.float().square().mean().backward()
    read = reads is None or any(t.shape == out.shape and torch.equal(t.nan_to_num(), out.detach(
    ).nan_to_num()) for t in reads.tensors)
    return out.detach(), read, [(f.module, f.direction, f.tensor, f.counts, f.first,
                                 f.inputs_nonfinite) for f in w.findings]


@pytest.mark.parametrize("name", sorted(NORMS))
def test_a_norm_over_a_read_input_is_not_read(monkeypatch, name):
    model, x = _model(name)
    out, read, findings = _run(model, x, monkeypatch)
    assert findings == [] and bool(torch.isfinite(out).all())
    assert not read


def _set_affine(norm, weight=None, bias=None):
    with torch.no_grad():
        if weight is not None and norm.weight is not None:
            norm.weight.fill_(weight)
        if bias is not None and getattr(norm, "bias", None) is not None:
            norm.bias.fill_(bias)


# (input scale, input shift, weight, bias): ordinary, huge inputs, near-constant channels
# (invstd near 1/sqrt(eps)), huge weights and biases on both sides of the overflow
CASES = [(1.0, 0.0, 1.0, 0.0), (1e30, 0.0, 1.0, 0.0), (1e-3, 1e20, 1.0, 0.0),
         (1e-30, 0.0, 1e30, 0.0), (1.0, 0.0, 1e36, 0.0), (1.0, 0.0, 3e37, 0.0),
         (1.0, 0.0, 1e38, 0.0), (1.0, 0.0, 1.0, 3e38), (1.0, 0.0, 1e37, 3e38),
         (1.0, 0.0, 1e36, 3.39e38), (1e36, 1e37, 1e20, 1e20), (0.0, 0.0, 1e38, 1e38),
         (1.0, 0.0, -3e38, -3e38)]


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("scale, shift, weight, bias", CASES)
def test_an_unread_output_is_finite_and_findings_are_a_reads(monkeypatch, name, scale, shift,
                                                             weight, bias):
    """torch's output wherever watch leaves it unread is finite, and the findings equal those
    of a watch that reads every norm's output (NORM_MIN above every size)."""
    def step(least):
        monkeypatch.setattr(watching, "NORM_MIN", least)
        model, x = _model(name, scale, shift)
        _set_affine(model[1], weight, bias)
        with monkeypatch.context() as m:
            return _run(model, x, m)
    out, read, findings = step(0)
    truth, read_all, every = step(1 << 60)
    assert read_all
    assert torch.equal(out.nan_to_num(), truth.nan_to_num())
    if not read:
        assert bool(torch.isfinite(out).all()), (name, scale, shift, weight, bias)
    assert findings == every


def test_an_output_that_overflows_is_read_and_reported_as_born_there(monkeypatch):
    """One outlier in a channel of zeros normalizes to about sqrt(N): invstd times a weight of
    3e37 overflows (torch's kernel then makes NaN of the channel), and only the norm's output
    holds it."""
    model, x = _model("batchnorm2d")
    x = torch.zeros_like(x)
    x[0, 0, 0, 0] = 1.0
    _set_affine(model[1], 3e37, 0.0)
    out, read, findings = _run(model, x, monkeypatch)
    assert read and not bool(torch.isfinite(out).all())
    assert findings[0][:3] == ("1", "forward", "output") and findings[0][5] is False
    assert findings[0][3] == {"nan": int(torch.isnan(out).sum()),
                              "posinf": int(torch.isposinf(out).sum()),
                              "neginf": int(torch.isneginf(out).sum())}


def read_addresses(monkeypatch) -> list:
    """The memory address of every tensor watch's checker reads from now on (its finite() and
    magnitude()), in a list that fills as it reads. Each read tensor is kept alive until the
    monkeypatch ends, so that no tensor made later can take a read one's address and pass for
    read (CI once counted a gradient read that way)."""
    from fpclass.torch.tensors import checker
    checks, addresses, kept = checker(torch), [], []
    for name in ("finite", "magnitude"):
        def recording(t, read=getattr(checks, name)):
            addresses.append(t.data_ptr())
            kept.append(t)
            return read(t)
        monkeypatch.setattr(checks, name, recording)
    return addresses


def _norm_read(monkeypatch, model, x, **kwargs):
    """Did a watched forward pass of `model` read its output (by address: every read's
    memory is recorded)?"""
    addresses = read_addresses(monkeypatch)
    with ft.watch(model, **kwargs) as w:
        out = model(x)
    assert w.findings == [] and bool(torch.isfinite(out).all())
    return out.data_ptr() in addresses


def test_the_address_record_sees_an_unread_norm(monkeypatch):
    model, x = _model("batchnorm2d")
    assert not _norm_read(monkeypatch, model, x)


def test_a_constant_channel_with_a_tiny_eps_overflows_invstd_times_weight(monkeypatch):
    """var 0 makes invstd 1/sqrt(eps) = 1e10; times a weight of 1e30 torch's kernel makes NaN
    of the channel: the bound must count invstd."""
    model = nn.Sequential(Scale(0.0, 1.0), nn.BatchNorm2d(4, eps=1e-20))
    _set_affine(model[1], 1e30, 0.0)
    with monkeypatch.context() as m:
        out, read, findings = _run(model, torch.randn(8, 4, 5, 5, requires_grad=True), m)
    assert not bool(torch.isfinite(out).all())
    assert read and findings[0][:3] == ("1", "forward", "output")


def test_a_batch_norm_in_eval_mode_is_read(monkeypatch):
    model, x = _model("batchnorm2d")
    model[1].eval()
    assert _norm_read(monkeypatch, model, x)


def test_an_unread_input_leaves_the_norm_read(monkeypatch):
    """The model's own input is not read (check_inputs=False): no bound for it."""
    _, shape = NORMS["batchnorm2d"]
    assert _norm_read(monkeypatch, nn.Sequential(nn.BatchNorm2d(4)), torch.randn(*shape))


class ScaleThen(nn.Module):
    """Scale (its output read), `between` applied to that output in the parent's own code, then
    a batch norm of what `between` returns."""

    def __init__(self, between):
        super().__init__()
        self.scale, self.norm, self.between = Scale(1.0), nn.BatchNorm2d(4), between

    def forward(self, x):
        return self.norm(self.between(self.scale(x)))


def test_a_norm_of_another_tensor_than_the_one_read_is_read(monkeypatch):
    model = ScaleThen(lambda y: y * 2.0)  # the norm's input was never read
    assert _norm_read(monkeypatch, model, torch.randn(8, 4, 5, 5))


def test_a_forward_hook_of_the_users_on_the_norm_makes_it_read(monkeypatch):
    model, x = _model("batchnorm2d")
    model[1].register_forward_hook(lambda module, args, output: None)
    assert _norm_read(monkeypatch, model, x)


def test_a_subclass_of_a_norm_is_read(monkeypatch):
    class MyNorm(nn.BatchNorm2d):
        pass
    model, x = _model("batchnorm2d")
    model[1] = MyNorm(4)
    assert _norm_read(monkeypatch, model, x)


def test_a_norm_with_a_forward_of_its_own_is_read(monkeypatch):
    model, x = _model("layernorm")
    norm = model[1]
    norm.forward = lambda t: nn.LayerNorm.forward(norm, t) * 1.0
    assert _norm_read(monkeypatch, model, x)


def test_a_torch_function_mode_makes_it_read(monkeypatch):
    from torch.overrides import TorchFunctionMode

    class Passing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    model, x = _model("batchnorm2d")
    with Passing():
        assert _norm_read(monkeypatch, model, x)


def test_below_the_least_size_the_norm_is_read(monkeypatch):
    model, x = _model("batchnorm2d")
    monkeypatch.setattr(watching, "NORM_MIN", x.numel() + 1)
    assert _norm_read(monkeypatch, model, x)


def test_an_input_written_in_place_after_its_read_is_not_bounded(monkeypatch):
    model = ScaleThen(lambda y: y.mul_(1e30))  # after the read: the bound read no longer holds
    assert _norm_read(monkeypatch, model, torch.randn(8, 4, 5, 5))


@pytest.mark.parametrize("where", ["weight", "bias"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_parameter_makes_it_read_and_reported(monkeypatch, where, bad):
    model, x = _model("batchnorm2d")
    with torch.no_grad():
        getattr(model[1], where)[2] = bad
    out, read, findings = _run(model, x, monkeypatch)
    assert read and findings and findings[0][:3] == ("1", "forward", "output")
    assert findings[0][5] is False  # born at the norm: its input was finite


def test_half_precision_bounds_against_its_own_range(monkeypatch):
    """bfloat16 keeps float32's range, float16 tops out at 65504: the same input, scaled to
    2**12, is bounded in bfloat16 and read in float16 (where the bound reaches 2**16)."""
    reads = {}
    for dtype in (torch.bfloat16, torch.float16):
        model, x = _model("layernorm", 4096.0)
        model = model.to(dtype)
        with monkeypatch.context() as m:
            out, read, findings = _run(model, x.to(dtype), m)
        assert findings == [] and bool(torch.isfinite(out).all())
        reads[dtype] = read
    assert reads == {torch.bfloat16: False, torch.float16: True}


def test_under_checkpoint_the_saved_tensors_are_not_unpacked(monkeypatch):
    """A non-reentrant checkpoint's saved-tensor hooks would run the whole region again on an
    unpack in the forward (running statistics updated twice, findings doubled): no bound
    there, the norm is read, and the region runs once."""
    from torch.utils.checkpoint import checkpoint

    class Region(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.norm = Scale(1.0), nn.BatchNorm2d(4)

        def forward(self, x):
            return checkpoint(lambda t: self.norm(self.scale(t)), x, use_reentrant=False)
    model = Region()
    assert _norm_read(monkeypatch, model, torch.randn(8, 4, 5, 5, requires_grad=True))
    assert int(model.norm.num_batches_tracked) == 1


def test_a_subclass_input_that_reroutes_the_norm_is_read(monkeypatch):
    """A torch-function subclass can change what F.layer_norm computes (here its weight) while
    the node and the module stay torch's: its output is read."""
    import torch.nn.functional as F

    class Rescaled(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is F.layer_norm:
                kwargs["weight"] = kwargs["weight"] * 3e38
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)

    class Wrap(nn.Module):
        def forward(self, x):
            return (x * 1.0).as_subclass(Rescaled)
    model = nn.Sequential(Wrap(), nn.LayerNorm(16))
    with monkeypatch.context() as m:
        out, read, findings = _run(model, torch.randn(64, 16, requires_grad=True), m)
    assert not bool(torch.isfinite(out).all())
    assert read and findings[0][:3] == ("1", "forward", "output")


@pytest.mark.parametrize("where", ["weight", "bias"])
def test_a_parameter_held_as_a_plain_attribute_is_bounded_too(monkeypatch, where):
    """A weight or bias set as a plain tensor (not a Parameter) is what torch's forward passes
    on: its bound counts, and a huge one makes the norm read."""
    model, x = _model("batchnorm2d")
    norm = model[1]
    delattr(norm, where)
    setattr(norm, where, torch.full((4,), 3e38 if where == "weight" else 3.39e38))
    if where == "bias":
        norm.weight.data.fill_(1e36)
    with monkeypatch.context() as m:
        out, read, findings = _run(model, x, m)
    assert not bool(torch.isfinite(out).all())
    assert read and findings[0][:3] == ("1", "forward", "output")


class Rerouting(torch.Tensor):
    """A torch-function subclass that multiplies the norm's weight by 3e38 inside F.batch_norm /
    F.layer_norm: what the norm computes is no longer what its module and node say."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        import torch.nn.functional as F
        kwargs = dict(kwargs or {})
        if func in (F.batch_norm, F.layer_norm):
            args = list(args)
            weight = kwargs.get("weight", args[-1] if func is F.layer_norm and len(args) > 2
                                else None)
            kwargs["weight"] = torch.full((4,), 3e38) if weight is None else (
                weight.as_subclass(torch.Tensor) * 3e38)
            if func is F.layer_norm:
                args = args[:2]
            else:
                args = args[:3]
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


@pytest.mark.parametrize("name, where", [("batchnorm2d", "weight"), ("batchnorm2d", "bias"),
                                         ("batchnorm2d", "running_mean"),
                                         ("layernorm", "weight")])
def test_a_subclass_parameter_or_statistic_makes_it_read(monkeypatch, name, where):
    model, x = _model(name)
    norm = model[1]
    value = getattr(norm, where).detach().as_subclass(Rerouting)
    delattr(norm, where)
    setattr(norm, where, value)
    with monkeypatch.context() as m:
        out, read, findings = _run(model, x, m)
    assert not bool(torch.isfinite(out).all())
    assert read and findings[0][:3] == ("1", "forward", "output")


class Wrapper(torch.Tensor):
    """A dispatch wrapper subclass (as DTensor or a float8 weight): no memory of its own, its
    data_ptr() 0; its values are its inner tensor's, computed in dispatch."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype,
                                                   device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_map
        if func is torch.ops.aten.detach.default:
            return Wrapper(args[0].inner)
        inner = lambda t: t.inner if isinstance(t, Wrapper) else t  # noqa: E731
        return func(*tree_map(inner, args), **tree_map(inner, kwargs or {}))


def test_a_wrapper_subclass_weight_is_not_read_as_memory(monkeypatch):
    """Reading its 0 address would crash the process: watch reads the norm instead."""
    model, x = _model("layernorm")
    model[1].weight = nn.Parameter(Wrapper(torch.ones(4)))
    assert model[1].weight.data_ptr() == 0
    with ft.watch(model, raise_on=False, backward=False) as w:
        out = model(x)
    assert w.findings == [] and bool(torch.isfinite(out).all())


def test_the_checker_reads_a_wrapper_subclass_through_torch():
    from fpclass.torch.tensors import checker
    checks = checker(torch)
    clean = Wrapper(torch.ones(70))
    bad = Wrapper(torch.tensor([1.0] * 69 + [math.nan]))
    assert clean.data_ptr() == 0
    assert checks.finite(clean) is True and checks.magnitude(clean) is not None
    assert checks.finite(bad) is False and checks.magnitude(bad) is None
    assert checks.describe(bad)[0]["nan"] == 1
