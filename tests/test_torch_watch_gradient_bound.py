"""Gradients bounded, not read: watch reads a gradient with its magnitude bound, and the backward of
torch's own convolution, batch norm (in training) and masks (ReLU, clamps, max pools) carries a
bound from the gradient it used to the one it made; a gradient that arrives with a bound below its
format's largest binade is finite unread. torch's own gradients are the truth: every gradient
watch leaves unread is finite, the findings equal those of a watch that carries no bound, an
overflow is read and reported where it was born, and each guard makes watch read."""

import copy

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import watching  # noqa: E402

from test_torch_watch_norm_bound import Scale, read_addresses  # noqa: E402


@pytest.fixture(autouse=True)
def proofs_at_every_size(monkeypatch):
    """The proofs on these small tensors too (each starts at 2**17 elements)."""
    for name in ("MASK_MIN", "SUM_MIN", "NORM_MIN", "LINEAR_MIN"):
        monkeypatch.setattr(watching, name, 0)


def block(cin, cout, **conv):
    return [nn.Conv2d(cin, cout, 3, padding=conv.pop("padding", 1), **conv),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


#: name -> (the blocks after Scale, the input's shape)
MODELS = {
    "two blocks": (lambda: [*block(3, 8), *block(8, 8)], (4, 3, 8, 8)),
    "max pool between": (lambda: [*block(3, 8), nn.MaxPool2d(2), *block(8, 16)], (4, 3, 8, 8)),
    "grouped, strided, dilated": (lambda: [*block(4, 8), *block(8, 8, groups=4),
                                           *block(8, 16, stride=2, padding=2, dilation=2)],
                                  (4, 4, 9, 9)),
    "1-d": (lambda: [nn.Conv1d(3, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(),
                     nn.Conv1d(8, 8, 3, padding=1), nn.BatchNorm1d(8), nn.ReLU()], (4, 3, 32)),
    "3-d": (lambda: [nn.Conv3d(3, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(),
                     nn.Conv3d(8, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU()],
            (2, 3, 8, 8, 8)),
    "no affine": (lambda: [nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8, affine=False),
                           nn.ReLU(), *block(8, 8)], (4, 3, 8, 8)),
}


def _model(name, scale=1.0, conv=None, norm=None, dtype=torch.float32, frozen=False):
    """Sequential(Scale(scale), the blocks), each convolution's weight scaled to `conv` at most
    and each norm's weight filled with `norm`; the input requires grad."""
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = nn.Sequential(Scale(scale), *make()).to(dtype)
    with torch.no_grad():
        for layer in model:
            weight = getattr(layer, "weight", None)
            if weight is None:
                continue
            if conv is not None and weight.dim() > 2:
                weight.div_(weight.abs().max()).mul_(conv)
            if norm is not None and weight.dim() == 1:
                weight.fill_(norm)
            if frozen and weight.dim() == 1:
                weight.requires_grad_(False)
    return model, torch.randn(*shape, dtype=dtype, requires_grad=True)


def _step(model, x, grad, monkeypatch, chain=True, retain=False):
    """One watched step with the model's output gradient `grad` everywhere: (findings, every
    gradient that reached watch's hooks as (a copy, was it read?), the read gradients' count)."""
    arrived = []
    with pytest.MonkeyPatch.context() as m:
        if not chain:
            m.setattr(watching, "_bound_of", lambda state, t: None)
        original = watching.watch._gradient

        def noting(self, state, record, g):
            arrived.append((g, g.clone()))
            return original(self, state, record, g)
        m.setattr(watching.watch, "_gradient", noting)
        addresses = read_addresses(m)
        with ft.watch(model, raise_on=False) as w:
            out = model(x)
            out.backward(torch.full_like(out, grad), retain_graph=retain)
            if retain:
                out.backward(torch.full_like(out, grad * 4))
        reads = set(addresses)
    seen = [(copy_, g.data_ptr() in reads) for g, copy_ in arrived]
    return [(f.module, f.direction, f.tensor, f.counts, f.first, f.inputs_nonfinite)
            for f in w.findings], seen


def _agree(monkeypatch, name, grad, **kwargs):
    """Every gradient watch left unread is finite, and the findings equal a watch's that
    carries no bound; returns (findings, how many gradients went unread)."""
    model, x = _model(name, **kwargs)
    twin, x2 = copy.deepcopy(model), x.detach().clone().requires_grad_(True)
    findings, seen = _step(model, x, grad, monkeypatch)
    every, seen_all = _step(twin, x2, grad, monkeypatch, chain=False)
    unread = [g for g, read in seen if not read]
    assert all(bool(torch.isfinite(g).all()) for g in unread), (name, grad, kwargs)
    assert findings == every, (name, grad, kwargs)
    return findings, len(unread), len(seen_all) - sum(read for _, read in seen_all)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradients_made_from_bounded_ones_are_not_read(monkeypatch, name):
    findings, unread, unread_without = _agree(monkeypatch, name, 1.0)
    assert findings == []
    assert unread > unread_without  # the chain left more unread than the masks and sums alone


# (the output gradient, the input's scale, the convolutions' largest weight, the norms' weight):
# ordinary, gradients and weights on both sides of the overflow, huge activations
CASES = [(1.0, 1.0, None, None), (1e30, 1.0, None, None), (1e36, 1.0, None, None),
         (3e38, 1.0, None, None), (1.0, 1.0, 1e18, None), (1e20, 1.0, 1e18, None),
         (1.0, 1.0, None, 1e18), (1e20, 1.0, None, 1e19), (1.0, 1e30, None, None),
         (1e10, 1e30, 1e10, 1e3), (1e-30, 1.0, 1e-20, 1e-20), (1e37, 1.0, 1e2, 1e2)]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("grad, scale, conv, norm", CASES)
def test_an_unread_gradient_is_finite_and_findings_are_a_reads(monkeypatch, name, grad, scale,
                                                               conv, norm):
    _agree(monkeypatch, name, grad, scale=scale, conv=conv, norm=norm)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("grad", [1.0, 1e2, 1e4, 6e4, 1e30, 1e38])
def test_other_formats_agree(monkeypatch, dtype, grad):
    if dtype is torch.float16 and grad > 6.5e4:
        grad = float("inf")
    _agree(monkeypatch, "two blocks", grad, dtype=dtype)


@pytest.mark.parametrize("setting", ["onednn off", "float32 matmul precision medium",
                                     "channels_last"])
@pytest.mark.parametrize("grad", [1.0, 1e30, 1e36])
def test_other_kernels_agree(monkeypatch, setting, grad):
    if setting == "onednn off":
        before = torch._C._get_mkldnn_enabled()
        torch._C._set_mkldnn_enabled(False)
        try:
            _agree(monkeypatch, "max pool between", grad)
        finally:
            torch._C._set_mkldnn_enabled(before)
    elif setting == "channels_last":
        make, shape = MODELS["max pool between"]
        monkeypatch.setitem(MODELS, "channels_last", (make, shape))
        original = _model

        def last(name, **kwargs):
            model, x = original(name, **kwargs)
            return (model.to(memory_format=torch.channels_last),
                    x.detach().to(memory_format=torch.channels_last).requires_grad_(True))
        monkeypatch.setitem(globals(), "_model", last)
        _agree(monkeypatch, "channels_last", grad)
    else:
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("medium")
        try:
            _agree(monkeypatch, "max pool between", grad)
        finally:
            torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("mode", ["eval", "batch statistics in eval"])
@pytest.mark.parametrize("grad", [1.0, 1e36])
def test_norms_in_eval_agree(monkeypatch, mode, grad):
    """In eval mode the norm uses its running statistics (its backward is dy * invstd * w: no
    rule here, read as before); without running statistics it uses the batch's, as in
    training (the rule holds)."""
    make, shape = MODELS["two blocks"]

    def made():
        layers = make()
        for layer in layers:
            if isinstance(layer, nn.BatchNorm2d) and mode != "eval":
                layer.track_running_stats = False
                layer.running_mean = layer.running_var = None
        return layers
    monkeypatch.setitem(MODELS, mode, (made, shape))
    original = _model

    def evaluated(name, **kwargs):
        model, x = original(name, **kwargs)
        return model.eval(), x
    monkeypatch.setitem(globals(), "_model", evaluated)
    _agree(monkeypatch, mode, grad)


@pytest.mark.parametrize("grad", [1.0, 1e36])
def test_frozen_norm_weights_use_the_looser_rule(monkeypatch, grad):
    """Without the norm's weight gradient (frozen weights) the rule counts (x - mean) twice."""
    _agree(monkeypatch, "two blocks", grad, frozen=True)


class Boost(nn.Module):
    """Identity forward; its backward multiplies the gradient by `factor`."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        factor = self.factor

        class Multiply(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t.clone()

            @staticmethod
            def backward(ctx, g):
                return g * factor
        return Multiply.apply(x)


def test_a_gradient_made_by_another_node_is_read_below_bounded_ones(monkeypatch):
    """Bounded gradients through the last block, then a node no rule knows, whose backward
    makes Inf: the gradient it made is read, found and born there."""
    torch.manual_seed(0)
    model = nn.Sequential(Scale(1.0), *block(3, 8), Boost(float("inf")), *block(8, 8))
    x = torch.randn(4, 3, 8, 8, requires_grad=True)
    twin, x2 = copy.deepcopy(model), x.detach().clone().requires_grad_(True)
    findings, seen = _step(model, x, 1.0, monkeypatch)
    every, seen_all = _step(twin, x2, 1.0, monkeypatch, chain=False)
    assert sum(not read for _, read in seen) > sum(not read for _, read in seen_all)
    assert findings == every
    assert findings[0][:3] == ("4", "backward", "gradient of input[0]")
    assert findings[0][5] is False


def test_a_second_backward_through_a_retained_graph_agrees(monkeypatch):
    model, x = _model("two blocks")
    twin, x2 = copy.deepcopy(model), x.detach().clone().requires_grad_(True)
    findings, seen = _step(model, x, 1e37, monkeypatch, retain=True)
    every, _ = _step(twin, x2, 1e37, monkeypatch, chain=False, retain=True)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert findings == every and findings


class Hooked(nn.Module):
    """conv -> norm -> ReLU, with `hook` on the convolution's output gradient (registered in
    this forward, after watch's)."""

    def __init__(self, hook):
        super().__init__()
        self.scale, self.conv, self.norm, self.act = Scale(1.0), nn.Conv2d(3, 8, 3), \
            nn.BatchNorm2d(8), nn.ReLU()
        self.hook = hook

    def forward(self, x):
        y = self.conv(self.scale(x))
        y.register_hook(self.hook)
        return self.act(self.norm(y))


def _hooked(monkeypatch, hook):
    torch.manual_seed(0)
    model, x = Hooked(hook), torch.randn(4, 3, 10, 10, requires_grad=True)
    with torch.no_grad():
        model.conv.weight.mul_(1e3)
    findings, seen = _step(model, x, 1.0, monkeypatch)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    return findings


@pytest.mark.parametrize("hook", [lambda g: g * 3.4e38, lambda g: g.mul_(3.4e38)],
                         ids=["replaced", "written in place"])
def test_a_gradient_a_later_hook_changes_carries_no_bound(monkeypatch, hook):
    """A hook after watch's scales the convolution's output gradient by 3.4e38 (a new tensor, or
    the same one written in place): the convolution's backward then overflows, and its input's
    gradient is read and found."""
    findings = _hooked(monkeypatch, hook)
    assert findings and findings[0][:3] == ("conv", "backward", "gradient of input[0]")


class Residual(nn.Module):
    """norm(conv(x)) + conv(x) * big: the convolution's output gradient is a sum of two."""

    def __init__(self, big):
        super().__init__()
        self.scale, self.conv, self.norm, self.big = Scale(1.0), nn.Conv2d(3, 8, 3), \
            nn.BatchNorm2d(8), big

    def forward(self, x):
        y = self.conv(self.scale(x))
        return self.norm(y) + y * self.big


@pytest.mark.parametrize("big", [1.0, 1e38])
def test_a_gradient_summed_from_two_uses_agrees(monkeypatch, big):
    torch.manual_seed(0)
    model, x = Residual(big), torch.randn(4, 3, 10, 10, requires_grad=True)
    with torch.no_grad():
        model.conv.weight.mul_(1e3)
    twin, x2 = copy.deepcopy(model), x.detach().clone().requires_grad_(True)
    findings, seen = _step(model, x, 1.0, monkeypatch)
    every, _ = _step(twin, x2, 1.0, monkeypatch, chain=False)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert findings == every
    assert bool(findings) == (big > 1.0)


def test_saved_tensor_hooks_make_the_convolutions_input_gradient_read(monkeypatch):
    """Under saved-tensor hooks (checkpoint's) an unpacked weight may be another tensor: no
    bound through the convolution, whose input's gradient is then read."""
    def unread(hooks):
        model, x = _model("two blocks")
        with hooks():
            _, seen = _step(model, x, 1.0, monkeypatch)
        return sum(not read for _, read in seen)
    plain = unread(lambda: torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t))
    assert unread(lambda: pytest.MonkeyPatch.context()) > plain


def test_reflect_padding_carries_no_bound(monkeypatch):
    """A reflect-padded convolution's backward adds the gradients of the reflected copies (F.pad's
    backward): no bound through it."""
    def unread(mode):
        torch.manual_seed(0)
        model = nn.Sequential(Scale(1.0), nn.Conv2d(3, 8, 3, padding=1, padding_mode=mode),
                              nn.BatchNorm2d(8), nn.ReLU())
        _, seen = _step(model, torch.randn(4, 3, 8, 8, requires_grad=True), 1.0, monkeypatch)
        return sum(not read for _, read in seen)
    assert unread("zeros") > unread("reflect")


class Unpacked(nn.Module):
    """A convolution run under saved-tensor hooks whose unpack scales what it saved by 1e38,
    then a ReLU outside them."""

    def __init__(self):
        super().__init__()
        self.scale, self.conv, self.act = Scale(1.0), nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()

    def forward(self, x):
        x = self.scale(x)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 1e38):
            y = self.conv(x)
        return self.act(y)


def test_a_hostile_unpack_of_the_saved_weight_makes_the_input_gradient_read(monkeypatch):
    """The convolution's backward uses the weight as unpacked, 1e38 times what it saved, and
    overflows though the gradient it used was bounded (through the ReLU's mask): no bound
    passes a node saved under such hooks, and the overflow is read and found."""
    torch.manual_seed(0)
    model, x = Unpacked(), torch.randn(4, 3, 8, 8, requires_grad=True)
    findings, seen = _step(model, x, 1e4, monkeypatch)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert ("conv", "backward", "gradient of input[0]") in [f[:3] for f in findings]


def test_the_terms_of_a_wide_convolution_count(monkeypatch):
    """576 terms (64 output channels x 3 x 3) of weights 0.99 and a uniform gradient of 6.2e35
    (below 2**119) sum to 3.5e38 in the input's gradient: Inf. Without the terms' 10 binades
    the bound would be 2**127 and the Inf unread."""
    torch.manual_seed(0)
    model = nn.Sequential(Scale(1.0), nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.ReLU())
    with torch.no_grad():
        model[1].weight.fill_(0.99)
    x = torch.rand(4, 3, 8, 8).add_(0.5).requires_grad_(True)
    findings, seen = _step(model, x, 6.2e35, monkeypatch)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert findings and findings[0][:3] == ("1", "backward", "gradient of input[0]")
    assert findings[0][3]["posinf"] > 0


def test_a_channel_sum_that_overflows_in_a_batch_norm_counts(monkeypatch):
    """A uniform gradient of 6e34 (below 2**116, passed on whole by a 1x1 max pool's mask) over
    each channel's 16384 elements: their sum, mean(dy) before the division, overflows in the
    channels_last kernel's float sums, and the norm's backward makes Inf and NaN, though every
    term of its formula (and the weight's gradient: the sum of dy times the normalized input,
    which nearly cancels) stays far below the limit."""
    torch.manual_seed(0)
    model = nn.Sequential(Scale(1.0), nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                          nn.MaxPool2d(1))
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(16, 3, 32, 32).to(memory_format=torch.channels_last).requires_grad_(True)
    findings, seen = _step(model, x, 6e34, monkeypatch)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert ("2", "backward", "gradient of input[0]") in [f[:3] for f in findings]


@pytest.mark.parametrize("layout", ["contiguous", "neither contiguous nor channels_last"])
def test_a_dot_that_overflows_behind_a_finite_weight_gradient_counts(monkeypatch, layout):
    """Inputs of +-2**56 (invstd 2**-56) and a gradient of 2**60: the norm's weight gradient,
    dot * invstd summed in double, is 1.9e22, but the dot itself, 2**130, rounds to Inf in
    float32 for k, and every element of the input's gradient is Inf. The dot's own bound
    (the weight gradient over invstd's least value) refuses the chain; read and found."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Identity(), nn.BatchNorm2d(4), nn.ReLU())
    x = (torch.randint(0, 2, (32, 4, 32, 32)).float() * 2 - 1) * 2.0 ** 56
    if layout != "contiguous":  # torch's generic kernel
        x = x.transpose(0, 2).contiguous().transpose(0, 2)
        assert not x.is_contiguous() and not x.is_contiguous(
            memory_format=torch.channels_last)
    findings, seen = _step(model, x.requires_grad_(True), 2.0 ** 60, monkeypatch)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert findings and findings[0][:3] == ("1", "backward", "gradient of input[0]")


def test_the_dot_bound_takes_the_least_invstd_of_every_channel(monkeypatch):
    """As above, with channel 2 alone at +-2**56 (invstd 2**-56: its dot overflows) and the
    other channels at +-2**10 (invstd 2**-10): the dot's bound must come from the least invstd
    over the channels; taken from another channel's, it would pass the chain and leave the
    Inf unread."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Identity(), nn.BatchNorm2d(4), nn.ReLU())
    x = (torch.randint(0, 2, (32, 4, 32, 32)).float() * 2 - 1) * 2.0 ** 10
    x[:, 2] *= 2.0 ** 46  # (neither the first channel nor the last)
    findings, seen = _step(model, x.requires_grad_(True), 2.0 ** 60, monkeypatch)
    assert all(bool(torch.isfinite(g).all()) for g, read in seen if not read)
    assert findings and findings[0][:3] == ("1", "backward", "gradient of input[0]")


@pytest.mark.parametrize("shape", [(0,), (1,), (64,), (1024,), (1025,), (8, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_least_invstd_is_torchs_least(shape, dtype):
    """_least, the least of a norm's saved statistics (a list's min up to 1,024 words of one
    dimension, torch's beyond), against torch's own min over finite values of both signs, with
    the least in the middle; 0.0 for no value."""
    torch.manual_seed(0)
    t = (torch.randn(shape) * 100).to(dtype)
    if t.numel() > 2:
        t.view(-1)[t.numel() // 2] = -1e4
    expected = t.min().item() if t.numel() else 0.0
    assert watching._least(t) == expected
    assert type(watching._least(t)) is float


def test_a_gradient_met_again_in_a_later_backward_is_read_again(monkeypatch):
    """The caller's own output gradient, refilled through NumPy (no version counter moves)
    between two backwards of a retained graph: the second backward reads it again."""
    import numpy as np
    torch.manual_seed(0)
    model, x = _model("two blocks")
    with pytest.MonkeyPatch.context():
        with ft.watch(model, raise_on=False) as w:
            out = model(x)
            buffer = np.ones(tuple(out.shape), dtype=np.float32)
            grad = torch.from_numpy(buffer)
            out.backward(grad, retain_graph=True)
            assert w.findings == []
            buffer[...] = np.inf
            out.backward(grad)
    assert ("6", "backward", "gradient of output") in [(f.module, f.direction, f.tensor)
                                                       for f in w.findings]


def test_a_norm_with_an_eps_above_one_reads_its_dot(monkeypatch):
    """eps = 1e30 makes invstd 1e-15 whatever the input, and the dot over a channel is the
    weight's gradient over invstd: inputs of about 2**10 and a gradient of 2**105 * sign(x - mean)
    make the dot 2**128.7, Inf in float32, behind a weight gradient of 2**79 and channel sums of
    dy far below the limit. The dot's bound (from the least invstd, read) refuses: read and
    found."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Identity(), nn.BatchNorm2d(4, eps=1e30), nn.MaxPool2d(1))
    x = (torch.randn(16, 4, 32, 32) * 2.0 ** 10).requires_grad_(True)
    sign = torch.sign(x.detach() - x.detach().mean(dim=(0, 2, 3), keepdim=True))
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(2.0 ** 105 * sign)
    assert not bool(torch.isfinite(x.grad).all())
    assert ("1", "backward", "gradient of input[0]") in [(f.module, f.direction, f.tensor)
                                                         for f in w.findings]


def test_a_norm_whose_variance_overflowed_reads_its_input_gradient(monkeypatch):
    """Inputs of 2**66 +- 2**65: the kernel squares x - mean in float32, the variance is Inf and
    the saved invstd 0, so the output is the bias (finite) and the weight's gradient 0; the dot,
    2**129 in double, rounds to Inf for k, and k = Inf * 0 makes every element of the input's
    gradient NaN. An invstd of 0 gives the rule no bound on the dot: read and found, born at
    the norm."""
    torch.manual_seed(0)
    sign = torch.randint(0, 2, (4, 2, 128, 128)).float() * 2 - 1
    sign[..., 64:] = -sign[..., :64]  # balanced: the mean stays exact
    x = (2.0 ** 66 + sign * 2.0 ** 65).requires_grad_(True)
    model = nn.Sequential(Scale(1.0), nn.BatchNorm2d(2), nn.ReLU())
    with torch.no_grad():
        model[1].bias.fill_(1.0)  # the output is the bias, above 0: the ReLU passes dy
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(sign * 2.0 ** 48)
    assert bool(torch.isfinite(out).all()) and bool(torch.isnan(x.grad).all())
    found = [(f.module, f.direction, f.tensor, f.inputs_nonfinite) for f in w.findings]
    assert found[0] == ("1", "backward", "gradient of input[0]", False)
