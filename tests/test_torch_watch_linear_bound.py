"""A Linear's or a convolution's output (torch's own class) is a bias plus sums of products of input
elements and weights. watch bounds it from bounds on its input (as read in this pass, kept
through ReLU, max pools and views, or read here when the input is much smaller than the output),
its weight and its bias, and reads it only when the bound leaves room for an Inf or when reading
the weight costs more than reading the output. torch's own outputs are the truth: wherever watch
leaves one unread it is finite, outputs that overflow are read and reported as a read of every
output reports them, and each guard makes watch read."""

import math

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import watching  # noqa: E402

from test_torch_watch_norm_bound import Scale, read_addresses  # noqa: E402


@pytest.fixture(autouse=True)
def bound_at_every_size(monkeypatch):
    """The bound on these small tensors too (it starts at LINEAR_MIN elements)."""
    monkeypatch.setattr(watching, "LINEAR_MIN", 0)


#: name -> (a map from 3 input channels or features to 32 or more outputs, the input's shape):
#: outputs over LINEAR_SHARE (3) times the size of the weight and the input, as the bound needs
MAPS = {
    "conv2d": (lambda: nn.Conv2d(3, 32, 3, padding=1), (4, 3, 16, 16)),
    "conv2d strided, no bias": (lambda: nn.Conv2d(3, 64, 3, stride=2, bias=False),
                                (4, 3, 33, 33)),
    "conv2d reflect padding": (lambda: nn.Conv2d(3, 32, 3, padding=1, padding_mode="reflect"),
                               (4, 3, 16, 16)),
    "conv2d grouped": (lambda: nn.Conv2d(4, 32, 3, padding=1, groups=2), (4, 4, 16, 16)),
    "conv1d": (lambda: nn.Conv1d(3, 32, 5, padding=2), (8, 3, 64)),
    "conv3d": (lambda: nn.Conv3d(3, 32, 3, padding=1), (2, 3, 8, 8, 8)),
    "linear": (lambda: nn.Linear(3, 32), (512, 3)),
    "linear over 3 dimensions": (lambda: nn.Linear(3, 32), (8, 64, 3)),
    "linear without bias": (lambda: nn.Linear(3, 32, bias=False), (512, 3)),
}


def _model(name, scale=1.0, shift=0.0, read_input=True):
    """Sequential(Scale, the map) (the map's input read as Scale's output), or the map alone
    over the model's input (read_input=False: the bound reads it)."""
    make, shape = MAPS[name]
    torch.manual_seed(0)
    layer = make()
    x = torch.randn(*shape, requires_grad=True)
    if not read_input:
        with torch.no_grad():
            x.mul_(scale).add_(shift)
        return nn.Sequential(layer), x
    return nn.Sequential(Scale(scale, shift), layer), x


def _run(model, x, raise_on=False, backward=True):
    """(the last module's output, was it read?, findings) of one watched training step (a
    forward pass alone without `backward`); a read is known by its memory's address."""
    with pytest.MonkeyPatch.context() as m:
        addresses = read_addresses(m)
        with ft.watch(model, raise_on=raise_on, backward=backward) as w:
            out = model(x)
            if backward:
                out.float().square().mean().backward()
    return out.detach(), out.data_ptr() in addresses, [
        (f.module, f.direction, f.tensor, f.counts, f.first, f.inputs_nonfinite)
        for f in w.findings]


def _set(layer, weight=None, bias=None):
    with torch.no_grad():
        if weight is not None:
            layer.weight.div_(layer.weight.abs().max()).mul_(weight)
        if bias is not None and layer.bias is not None:
            layer.bias.fill_(bias)


@pytest.mark.parametrize("name", sorted(MAPS))
@pytest.mark.parametrize("read_input", [True, False])
def test_a_map_over_a_bounded_input_is_not_read(name, read_input):
    model, x = _model(name, read_input=read_input)
    out, read, findings = _run(model, x)
    assert findings == [] and bool(torch.isfinite(out).all())
    assert not read


# (input scale, input shift, the weight's largest magnitude, bias): ordinary, huge inputs or
# weights or biases on both sides of the overflow, products that overflow only summed
CASES = [(1.0, 0.0, 1.0, 0.0), (1e30, 0.0, 1.0, 0.0), (1e30, 0.0, 1e7, 0.0),
         (1e30, 0.0, 1e9, 0.0), (1.0, 0.0, 3e38, 0.0), (1.0, 0.0, 1e30, 0.0),
         (1.0, 0.0, 1.0, 3e38), (1.0, 0.0, 1.0, 3.4e38), (1e19, 1e19, 1e19, 0.0),
         (1e18, 0.0, 1e18, -3e38), (0.0, 0.0, 3e38, 3e38), (-1e36, 0.0, 1e2, 1e38),
         (1e-30, 0.0, 1e-30, 0.0)]


@pytest.mark.parametrize("name", sorted(MAPS))
@pytest.mark.parametrize("read_input", [True, False])
@pytest.mark.parametrize("scale, shift, weight, bias", CASES)
def test_an_unread_output_is_finite_and_findings_are_a_reads(monkeypatch, name, read_input,
                                                             scale, shift, weight, bias):
    """torch's output wherever watch leaves it unread is finite, and the findings equal those
    of a watch that reads every output (LINEAR_MIN above every size)."""
    def step(least):
        monkeypatch.setattr(watching, "LINEAR_MIN", least)
        model, x = _model(name, scale, shift, read_input)
        _set(model[-1], weight, bias)
        return _run(model, x)
    out, read, findings = step(0)
    truth, read_all, every = step(1 << 60)
    assert read_all
    assert torch.equal(out.nan_to_num(), truth.nan_to_num())
    if not read:
        assert bool(torch.isfinite(out).all()), (name, scale, shift, weight, bias)
    assert findings == every


def test_an_output_that_overflows_is_read_and_reported_as_born_there():
    """Finite inputs and weights whose products overflow float32: only the map's output holds
    an Inf."""
    model, x = _model("conv2d", 1e20)
    _set(model[1], 1e20, 0.0)
    out, read, findings = _run(model, x)
    assert read and not bool(torch.isfinite(out).all())
    assert findings[0][:3] == ("1", "forward", "output") and findings[0][5] is False
    assert findings[0][3] == {"nan": int(torch.isnan(out).sum()),
                              "posinf": int(torch.isposinf(out).sum()),
                              "neginf": int(torch.isneginf(out).sum())}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("read_input", [True, False])
def test_a_non_finite_input_is_reported_at_its_maker_and_the_map_output_after(bad, read_input):
    model, x = _model("conv2d", read_input=read_input)
    with torch.no_grad():
        x[1, 2, 3, 4] = bad
    out, read, findings = _run(model, x)
    assert read and not bool(torch.isfinite(out).all())
    mine = [f for f in findings if f[1] == "forward" and f[2] == "output"]
    if read_input:  # Scale's output holds it first; the map's output is born elsewhere
        assert mine[0][0] == "0" and mine[1][0] == "1" and mine[1][5] is True
    else:
        assert mine[0][0] == "0" and mine[0][5] is True


@pytest.mark.parametrize("where", ["weight", "bias"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_parameter_makes_it_read_and_reported(where, bad):
    model, x = _model("conv2d")
    with torch.no_grad():
        getattr(model[1], where).view(-1)[2] = bad
    out, read, findings = _run(model, x)
    assert read and findings and findings[0][:3] == ("1", "forward", "output")
    assert findings[0][5] is False  # born at the map: its input was finite


def _read(model, x, **kwargs) -> bool:
    """Was the last module's output read in a watched step that found nothing?"""
    out, read, findings = _run(model, x, **kwargs)
    assert findings == [] and bool(torch.isfinite(out).all())
    return read


def test_a_weight_larger_than_its_share_of_the_output_makes_it_read(monkeypatch):
    """Reading the weight would cost more than reading the output: the MLP's 512 x 512 Linear
    over a batch of 128."""
    model = nn.Sequential(Scale(1.0), nn.Linear(512, 512))
    assert _read(model, torch.randn(128, 512, requires_grad=True))
    monkeypatch.setattr(watching, "LINEAR_SHARE", 1)  # an equal cost: the bound
    assert not _read(model, torch.randn(1024, 512, requires_grad=True))


def test_below_the_least_size_the_map_is_read(monkeypatch):
    model, x = _model("conv2d")
    monkeypatch.setattr(watching, "LINEAR_MIN", 4 * 32 * 16 * 16 + 1)
    assert _read(model, x)


def test_a_forward_hook_of_the_users_makes_it_read():
    model, x = _model("conv2d")
    model[1].register_forward_hook(lambda module, args, output: None)
    assert _read(model, x)


def test_a_subclass_is_read():
    class MyConv(nn.Conv2d):
        pass
    model, x = _model("conv2d")
    model[1] = MyConv(3, 32, 3, padding=1)
    assert _read(model, x)


def test_a_conv_forward_of_the_instance_is_read():
    model, x = _model("conv2d")
    conv = model[1]
    conv._conv_forward = lambda t, w, b: nn.Conv2d._conv_forward(conv, t, w * 1e30, b)
    out, read, findings = _run(model, x)
    assert read


def test_a_torch_function_mode_makes_it_read():
    from torch.overrides import TorchFunctionMode

    class Passing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    model, x = _model("conv2d")
    with Passing():
        assert _read(model, x)


def test_an_input_written_in_place_after_its_read_is_not_bounded():
    class Then(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.conv = Scale(1.0), nn.Conv2d(3, 32, 3, padding=1)

        def forward(self, x):
            return self.conv(self.scale(x).mul_(1e30))
    model = Then()
    with torch.no_grad():
        model.conv.weight.fill_(1e10)
    out, read, findings = _run(model, torch.randn(4, 3, 16, 16))
    assert read and findings and findings[0][:3] == ("conv", "forward", "output")


def test_a_subclass_input_that_reroutes_the_map_is_read():
    """A torch-function subclass can change what F.conv2d computes (here its weight) while the
    module stays torch's: its output is read, and the overflow reported."""
    import torch.nn.functional as F

    class Rescaled(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is F.conv2d:
                args = (args[0], args[1] * 3e38, *args[2:])
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    class Wrap(nn.Module):
        def forward(self, x):
            return (x * 1.0).as_subclass(Rescaled)
    model = nn.Sequential(Wrap(), nn.Conv2d(3, 32, 3, padding=1))
    out, read, findings = _run(model, torch.randn(4, 3, 16, 16))
    assert not bool(torch.isfinite(out).all())
    assert read and findings[0][:3] == ("1", "forward", "output")


def test_half_precision_bounds_against_its_own_range():
    """bfloat16 keeps float32's range, float16 tops out at 65504: the same input, scaled to
    2**6, is bounded in bfloat16 and read in float16 (where the bound's margin passes 2**16)."""
    reads = {}
    for dtype in (torch.bfloat16, torch.float16):
        model, x = _model("linear", 64.0)
        model = model.to(dtype)
        reads[dtype] = _read(model, x.detach().to(dtype))
    assert reads == {torch.bfloat16: False, torch.float16: True}


@pytest.mark.parametrize("between, bounded", [
    (nn.ReLU(), True), (nn.ReLU(inplace=True), True), (nn.MaxPool2d(2), True),
    (nn.Tanh(), True), (nn.Hardtanh(-1.0, 1.0), True), (nn.Hardtanh(2.0, 3.0), False)])
def test_a_bound_passes_through_the_rules_that_keep_it(between, bounded):
    """Scale -> `between` -> conv: the conv's input is bounded without a read when `between` is
    a rule that keeps (or sets) magnitudes; a clamp to [2, 3] is known finite but may raise
    magnitudes. (The input, 8 x 3 x 32 x 32, is too large a share of the output to be read for
    the bound.)"""
    model = nn.Sequential(Scale(1.0), between, nn.Conv2d(3, 8, 3, padding=1))
    assert _read(model, torch.randn(8, 3, 32, 32, requires_grad=True)) is not bounded


@pytest.mark.parametrize("activation, bounded", [
    (torch.relu, True), (torch.tanh, True), (torch.sigmoid, True),
    (torch.nn.functional.silu, True), (lambda t: torch.softmax(t, 1), True),
    (torch.exp, False)])
def test_a_bound_passes_through_functional_activations(activation, bounded):
    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.conv = Scale(1.0), nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return self.conv(activation(self.scale(x)))
    model = Functional()
    assert _read(model, torch.randn(8, 3, 32, 32, requires_grad=True)) is not bounded


def test_a_huge_bound_through_a_relu_keeps_the_next_output_read():
    """Magnitudes of 1e36 kept through a ReLU: the conv after it must be read (and overflows)."""
    model = nn.Sequential(Scale(1e36), nn.ReLU(), nn.Conv2d(3, 8, 3, padding=1))
    with torch.no_grad():
        model[2].weight.fill_(10.0)
    out, read, findings = _run(model, torch.randn(8, 3, 32, 32, requires_grad=True).abs())
    assert read and not bool(torch.isfinite(out).all())
    assert findings[0][:3] == ("2", "forward", "output")


def _agree(model_maker, x, context=None):
    """Run a watched forward pass of model_maker() over `x` (inside `context`, made anew for
    each run) with the bound, and again reading every output: torch's outputs agree, an
    output left unread is finite, and the findings agree. (read?, findings)."""
    import contextlib

    def step(least):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(watching, "LINEAR_MIN", least)
            model = model_maker()
            with ft.watch(model, raise_on=False) as w:
                with (context() if context is not None else contextlib.nullcontext()):
                    out = model(x)
            return out.detach(), [(f.module, f.tensor, f.counts) for f in w.findings]
    out, findings = step(0)
    truth, every = step(1 << 60)
    assert torch.equal(out.float().nan_to_num(), truth.float().nan_to_num())
    assert findings == every
    return findings


def _filled(map_, scale, weight, bias=None):
    def make():
        model = nn.Sequential(Scale(scale), map_())
        with torch.no_grad():
            model[1].weight.fill_(weight)
            if model[1].bias is not None:
                model[1].bias.fill_(0.0 if bias is None else bias)
        return model
    return make


@pytest.mark.parametrize("dtype, scale, weight", [
    (torch.bfloat16, 1e-6, 3.4e38),  # the weight, finite in float32, rounds to Inf
    (torch.float16, 1e5, 1e-9),      # the input overflows float16
    (torch.float16, 1.0, 1e9)])      # the weight does
def test_autocast_casts_are_not_bounded(dtype, scale, weight):
    """Under CPU autocast the map computes in another dtype than its float32 operands: a cast
    can overflow where every bound in float32 is small. The output is read, and the Inf found."""
    for make in (_filled(lambda: nn.Linear(4, 64), scale, weight),
                 _filled(lambda: nn.Conv2d(3, 32, 3, padding=1), scale, weight)):
        x = torch.rand(256, 4) + 1 if isinstance(make()[1], nn.Linear) else torch.rand(
            4, 3, 16, 16) + 1
        findings = _agree(make, x, lambda: torch.autocast("cpu", dtype=dtype))
        assert findings and findings[0][:2] == ("1", "output")


def test_under_inference_mode_an_input_written_in_place_is_read_again():
    """Inference tensors keep no version counter: a bound read before an in-place write would
    pass unseen. The map over it is not bounded by that entry."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(4, 64), nn.Linear(64, 64)

        def forward(self, x):
            h = self.fc1(x)
            h /= h.norm(dim=-1, keepdim=True) * 0  # every row Inf or NaN, in place
            return self.fc2(h)

    def make():
        torch.manual_seed(0)
        return Block()
    for context in (torch.no_grad, torch.inference_mode):
        findings = _agree(make, torch.randn(4096, 4), context)
        assert ("fc2", "output") in [f[:2] for f in findings]


def test_reduced_float32_precision_is_covered_by_each_operands_own_bound():
    """set_float32_matmul_precision("medium") lets oneDNN round float32 operands to bfloat16
    (where the CPU has it): a weight of 3.4e38 then becomes Inf whatever the input. The bound
    covers each operand alone, so the output is read and what torch made is found."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        for map_, x in ((lambda: nn.Linear(64, 256), torch.rand(256, 64) + 1),
                        (lambda: nn.Conv2d(3, 32, 3, padding=1), torch.rand(4, 3, 16, 16) + 1)):
            _agree(_filled(map_, 1e-6, 3.4e38), x)
    finally:
        torch.set_float32_matmul_precision(previous)


def test_a_kernel_that_transforms_the_input_alone_is_covered():
    """Without oneDNN, torch runs float32 convolutions of 16 images or more on NNPACK, whose
    transforms of the input alone overflow from 2**122: |x| of 1e38 with weights of 1e-30
    (an exact output below 4e9) comes out Inf. Read, and found as torch made it."""
    x = torch.full((16, 4, 16, 16), 1e38)
    x[:, :, ::2] *= -1

    def make():
        model = nn.Sequential(Scale(1.0), nn.Conv2d(4, 32, 3, padding=1, bias=False))
        with torch.no_grad():
            model[1].weight.fill_(1e-30)
        return model
    import contextlib

    @contextlib.contextmanager
    def onednn(enabled):
        before = torch._C._get_mkldnn_enabled()
        torch._C._set_mkldnn_enabled(enabled)
        try:
            yield
        finally:
            torch._C._set_mkldnn_enabled(before)
    for enabled in (True, False):
        _agree(make, x, lambda: onednn(enabled))


def test_a_patched_functional_makes_every_map_read(monkeypatch):
    """A patch of F.linear that computes in float16 (apex's O1 casts): the Linear's operands are
    float32 and small-bounded, its output Inf. Read and found."""
    import torch.nn.functional as F
    original = F.linear

    def half_linear(x, w, b=None):
        return original(x.half(), w.half(), None if b is None else b.half()).float()
    watching._fill_tables(torch) if not watching._TORCH_FUNCTIONS else None
    monkeypatch.setattr(F, "linear", half_linear)
    findings = _agree(_filled(lambda: nn.Linear(4, 64), 1e5, 1e-9), torch.rand(256, 4) + 1)
    assert findings and findings[0][:2] == ("1", "output")


def test_the_sum_over_a_large_fan_in_counts():
    """Products each below 2**118 summed over a 31 x 31 kernel of 2 channels (fan-in 1922)
    overflow: only ceil(log2 fan_in) of the whole kernel puts the bound past the limit."""
    def make():
        model = nn.Sequential(Scale(2.0 ** 59.9), nn.Conv2d(2, 8, 31, bias=False))
        with torch.no_grad():
            model[1].weight.fill_(2.0 ** 57.5)
        return model
    findings = _agree(make, torch.ones(2, 2, 86, 86))
    assert findings and findings[0][:2] == ("1", "output")


def test_a_bias_at_the_top_of_the_range_counts():
    """A bias of float32's largest value plus sums of 2.7e33: Inf, though the sums' own bound
    is far below the limit."""
    def make():
        model = nn.Sequential(Scale(1e16), nn.Conv2d(3, 32, 3))
        with torch.no_grad():
            model[1].weight.fill_(1e16)
            model[1].bias.fill_(torch.finfo(torch.float32).max)
        return model
    findings = _agree(make, torch.ones(4, 3, 18, 18))
    assert findings and findings[0][:2] == ("1", "output")


@pytest.mark.parametrize("weight, read", [(2.0 ** 59.5, True), (2.0 ** 58.5, False)])
def test_the_bound_must_lie_below_the_limit(weight, read):
    """A 1x1 convolution of one channel (fan-in 1), |x| below 2**60: with |w| below 2**60 the
    bound is 60 + 60 + 8 = 128, float32's limit, and the output is read; below 2**59 it is 127,
    and it is not (the output, about 2**118, is finite)."""
    model = nn.Sequential(Scale(2.0 ** 59.5), nn.Conv2d(1, 32, 1, bias=False))
    with torch.no_grad():
        model[1].weight.fill_(weight)
    out, was_read, findings = _run(model, torch.ones(4, 1, 16, 16), backward=False)
    assert findings == [] and bool(torch.isfinite(out).all())
    assert was_read is read


@pytest.mark.parametrize("activation, scale, weight", [
    (nn.Tanh(), 1e4, 2.0 ** 124), (nn.Sigmoid(), 1e4, 2.0 ** 124), (torch.tanh, 1e4, 2.0 ** 124),
    (nn.ReLU(), 1e30, 2.0 ** 24), (torch.relu, 1e30, 2.0 ** 24),
    (torch.nn.functional.silu, 1e30, 2.0 ** 24)])
def test_an_activations_bound_is_its_true_one(activation, scale, weight):
    """A conv over an activation of inputs of `scale`, its weights `weight`, over a fan-in of
    27: the products overflow, and the bound passed on must say so (tanh and sigmoid of 1e4
    are 1, below 2; ReLU and SiLU keep 1e30, below 2**100); the output is read and found.
    (Below 2 cannot be too low to see: only weights of 2**123 overflow after it, and a weight's
    own bound already rules those out.)"""
    class Then(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.conv = Scale(scale), nn.Conv2d(3, 8, 3, padding=1, bias=False)
            if isinstance(activation, nn.Module):
                self.activation = activation  # hooked: the module's rule

        def forward(self, x):
            return self.conv(activation(self.scale(x)))

    def make():
        model = Then()
        with torch.no_grad():
            model.conv.weight.fill_(weight)
        return model
    # the input requires grad: a function's output has the node its rule reads
    findings = _agree(make, torch.ones(8, 3, 32, 32, requires_grad=True))
    assert findings and findings[0][:2] == ("conv", "output")


@pytest.mark.parametrize("write", ["no_grad", "detach"])
def test_a_functions_input_rewritten_after_it_ran_bounds_nothing(write):
    """relu(u) holds a NaN; u is then zeroed (under no_grad, or through u.detach(): its node and
    edge stay) and read finite. That read says nothing of what the relu saw: the Linear over
    the relu's output is read, and the NaN found."""
    class Rewrites(nn.Module):
        def __init__(self):
            super().__init__()
            self.again, self.linear = nn.Identity(), nn.Linear(64, 512)

        def forward(self, x):
            u = x * 2
            t = torch.relu(u)
            if write == "no_grad":
                with torch.no_grad():
                    u.zero_()
            else:
                u.detach().zero_()
            self.again(u)  # u read, finite now
            return self.linear(t)
    x = torch.randn(512, 64, requires_grad=True)
    x.data[3, 5] = math.nan
    out, read, findings = _run(Rewrites(), x, backward=False)
    assert bool(torch.isnan(out).any())
    assert read and ("linear", "forward", "output") in [f[:3] for f in findings]


@pytest.mark.parametrize("where", ["F.pad", "torch._C._nn.pad beneath it"])
def test_a_patched_pad_makes_a_padded_convolution_read(monkeypatch, where):
    """A reflect-padded convolution pads through F.pad, a Python wrapper of torch._C._nn.pad: a
    patch of either that scales the input by 1e38 makes the output Inf. Read and found."""
    import torch.nn.functional as F
    if not watching._TORCH_FUNCTIONS:
        watching._fill_tables(torch)
    home = F if where == "F.pad" else torch._C._nn
    original = home.pad
    monkeypatch.setattr(home, "pad", lambda x, *a, **k: original(x, *a, **k) * 1e38)

    def make():
        model = nn.Sequential(Scale(1.0), nn.Conv2d(3, 32, 3, padding=1,
                                                    padding_mode="reflect"))
        with torch.no_grad():
            model[1].weight.fill_(10.0)
        return model
    findings = _agree(make, torch.ones(4, 3, 16, 16))
    assert findings and findings[0][:2] == ("1", "output")


def test_a_rebound_F_of_the_linear_module_makes_it_read(monkeypatch):
    """The `F` torch's Linear calls by, rebound to a namespace whose linear computes in float16
    (F.linear itself untouched): the Linear's output is Inf. Read and found."""
    import types
    import torch.nn.functional as F
    if not watching._TORCH_FUNCTIONS:
        watching._fill_tables(torch)

    def half_linear(x, w, b=None):
        return F.linear(x.half(), w.half(), None if b is None else b.half()).float()
    monkeypatch.setattr(torch.nn.modules.linear, "F", types.SimpleNamespace(linear=half_linear))
    findings = _agree(_filled(lambda: nn.Linear(4, 64), 1e5, 1e-9), torch.rand(256, 4) + 1)
    assert findings and findings[0][:2] == ("1", "output")


def test_a_rebound_F_of_the_conv_module_makes_it_read(monkeypatch):
    """The `F` torch's convolutions call by, rebound to a namespace whose conv2d scales its
    output by 1e30: the output is Inf. Read and found."""
    import types
    import torch.nn.functional as F
    if not watching._TORCH_FUNCTIONS:
        watching._fill_tables(torch)
    monkeypatch.setattr(torch.nn.modules.conv, "F", types.SimpleNamespace(
        conv2d=lambda *a, **k: F.conv2d(*a, **k) * 1e30, pad=F.pad))

    def make():
        torch.manual_seed(0)
        return nn.Sequential(Scale(1e10), nn.Conv2d(3, 32, 3, padding=1))
    findings = _agree(make, torch.ones(4, 3, 16, 16))
    assert findings and findings[0][:2] == ("1", "output")


def test_a_patched_conv_forward_of_the_class_makes_it_read(monkeypatch):
    """_conv_forward replaced on the class after the first watch (its weight scaled by 1e30):
    the output is read and the overflow found."""
    if not watching._TORCH_FUNCTIONS:
        watching._fill_tables(torch)
    original = nn.Conv2d._conv_forward
    monkeypatch.setattr(nn.Conv2d, "_conv_forward",
                        lambda self, x, w, b: original(self, x, w * 1e30, b))

    def make():
        torch.manual_seed(0)
        return nn.Sequential(Scale(1e10), nn.Conv2d(3, 32, 3, padding=1))
    findings = _agree(make, torch.ones(4, 3, 16, 16))
    assert findings and findings[0][:2] == ("1", "output")
