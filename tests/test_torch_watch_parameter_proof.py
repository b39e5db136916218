"""A Linear over a 2-d input makes its weight's gradient as x.t() @ g and its bias's as g summed
over the rows, from g, the gradient of its output. watch bounds both from bounds on x (as read in
this pass, or read for the proof) and on g (read with its bound when it arrives), and leaves a
parameter's .grad unread when it is exactly the memory the Linear's node made, unwritten since.
torch's own gradients are the truth: every parameter whose .grad holds a NaN or an Inf is
reported, in every scenario below, and the proof does leave reads out where it applies."""

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import watching  # noqa: E402

from test_torch_watch_norm_bound import Scale, read_addresses  # noqa: E402


@pytest.fixture(autouse=True)
def proof_at_every_size(monkeypatch):
    """The proof on these small weights too, and on weights no larger than their outputs (it
    starts at PARAMETER_MIN elements, PARAMETER_SHARE times the output's)."""
    monkeypatch.setattr(watching, "PARAMETER_MIN", 0)
    monkeypatch.setattr(watching, "PARAMETER_SHARE", 1)


def _mlp(inplace=False, bias=True, tied=False):
    torch.manual_seed(0)
    first, second = nn.Linear(16, 16, bias=bias), nn.Linear(16, 16, bias=bias)
    if tied:
        second.weight = first.weight
    return nn.Sequential(first, nn.ReLU(inplace=inplace), second)


def _flagged(w) -> set:
    """The parameters watch reported a non-finite gradient of."""
    return {f"{f.module}.{f.tensor[len('gradient of '):]}" for f in w.findings
            if f.direction == "backward" and f.tensor in ("gradient of weight", "gradient of bias")}


def _non_finite(model) -> set:
    return {name for name, p in model.named_parameters()
            if p.grad is not None and not bool(torch.isfinite(p.grad).all())}


#: Inputs of 2, 3 and 4 dimensions (over 2, torch's Linear flattens the rows: a view of addmm's)
SHAPES = [(4, 16), (2, 2, 16), (2, 1, 2, 16)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
def test_the_proof_leaves_the_parameter_gradients_unread(monkeypatch, shape, bias):
    model, x = _mlp(bias=bias), torch.randn(*shape)
    addresses = read_addresses(monkeypatch)
    with ft.watch(model) as w:
        model(x).square().sum().backward()
    assert w.findings == []
    grads = {name: p.grad.data_ptr() for name, p in model.named_parameters()}
    assert all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
    unread = {name for name, address in grads.items() if address not in addresses}
    assert unread == set(grads)


@pytest.mark.parametrize("limit", ["PARAMETER_MIN", "PARAMETER_SHARE"])
def test_without_the_proof_every_parameter_gradient_is_read(monkeypatch, limit):
    """The address record above sees the parameters' reads when there is no proof: weights
    below PARAMETER_MIN, or below PARAMETER_SHARE times their output."""
    monkeypatch.setattr(watching, limit, 1 << 60)
    monkeypatch.setattr(watching.chain, "plan", lambda *_: None)  # (a chain claims them all)
    model, x = _mlp(), torch.randn(4, 16)
    addresses = read_addresses(monkeypatch)
    with ft.watch(model):
        model(x).square().sum().backward()
    assert all(p.grad.data_ptr() in addresses for p in model.parameters())


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_gradient_that_overflows_is_read_and_reported(shape):
    """x near 1e30 and g 1e10: each product is finite, the weight's gradient +Inf."""
    model = nn.Sequential(nn.Linear(16, 16))
    x = torch.full(shape, 1e30)
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(torch.full_like(out, 1e10))
    assert _non_finite(model) == {"0.weight"}
    assert _flagged(w) == {"0.weight"}
    found = next(f for f in w.findings if f.tensor == "gradient of weight")
    assert found.counts["posinf"] == 16 * 16


@pytest.mark.parametrize("rows", [(2048,), (2, 1024), (2, 2, 512)], ids=str)
def test_the_bound_counts_the_rows_summed(rows):
    """2048 rows of x and g near 1.9 * 2^58 (each below 2^59): each product is below 2^118, the
    sum over the rows +Inf."""
    near = 1.9 * 2.0 ** 58
    torch.manual_seed(0)
    model = nn.Sequential(Scale(1.0), nn.Linear(2048, 1))
    x = torch.full((*rows, 2048), near)
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(torch.full_like(out, near))
    assert _non_finite(model) == {"1.weight"} == _flagged(w)


def test_a_gradient_accumulated_into_a_non_finite_one_is_read():
    model, x = _mlp(), torch.randn(4, 16)
    model[0].weight.grad = torch.full_like(model[0].weight, float("nan"))
    with ft.watch(model, raise_on=False) as w:
        model(x).square().sum().backward()
    assert _non_finite(model) == {"0.weight"} == _flagged(w)


@pytest.mark.parametrize("hook", [lambda g: g * float("inf"), lambda g: g.mul_(float("inf"))],
                         ids=["replaced", "written in place"])
def test_a_gradient_another_hook_made_non_finite_is_read(hook):
    model, x = _mlp(), torch.randn(4, 16)
    model[2].weight.register_hook(hook)
    with ft.watch(model, raise_on=False) as w:
        model(x).square().sum().backward()
    assert "2.weight" in _non_finite(model)
    assert _flagged(w) == _non_finite(model)


def test_a_gradient_written_after_accumulation_is_read():
    """Another post-accumulate hook, run before watch's, writes NaN into the .grad the node
    made."""
    model, x = _mlp(), torch.randn(4, 16)

    def spoil(p):
        p.grad.fill_(float("nan"))
    model[0].bias.register_post_accumulate_grad_hook(spoil)
    with ft.watch(model, raise_on=False) as w:
        model(x).square().sum().backward()
    assert _non_finite(model) == {"0.bias"} == _flagged(w)


@pytest.mark.parametrize("dims", SHAPES, ids=str)
@pytest.mark.parametrize("shape", ["plain", "inplace", "no bias", "tied"])
@pytest.mark.parametrize("scale", [1.0, 1e18, 1e36])
def test_every_non_finite_parameter_gradient_is_reported(shape, scale, dims):
    """Inputs from ordinary to near float32's largest: wherever torch's gradients overflow,
    watch reports exactly those parameters."""
    model = _mlp(inplace=shape == "inplace", bias=shape != "no bias", tied=shape == "tied")
    torch.manual_seed(1)
    x = torch.randn(*dims) * scale
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(torch.randn_like(out) * scale)
    assert _flagged(w) == _non_finite(model)


def test_a_second_backward_of_a_retained_graph_is_checked():
    """The second backward accumulates into the .grad the first one made: read, and an
    overflow there reported."""
    model = nn.Sequential(nn.Linear(16, 16))
    x = torch.full((4, 16), 1e19)
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(torch.full_like(out, 2.5e18), retain_graph=True)  # 1e38 each
        assert _flagged(w) == set() == _non_finite(model)
        for _ in range(3):
            out.backward(torch.full_like(out, 2.5e18), retain_graph=True)
    assert _non_finite(model) == {"0.weight"} == _flagged(w)


@pytest.mark.parametrize("shape", [(1,), ()])
def test_a_bias_broadcast_over_the_columns_is_read(shape):
    """A one-element bias's gradient sums g over every column as well as every row: more
    terms than the weight's bound counts."""
    layer = nn.Linear(4, 1024)
    layer.bias = nn.Parameter(torch.zeros(shape))
    model = nn.Sequential(layer)
    with ft.watch(model, raise_on=False) as w:
        out = model(torch.full((1, 4), 0.5))
        out.backward(torch.full_like(out, 2.0 ** 118.9))
    assert _non_finite(model) == {"0.bias"} == _flagged(w)


def _writing(write):
    """A hook body that writes non-finite values with `write` and returns None."""
    def hook(t):
        write(t)
    return hook


@pytest.mark.parametrize("where", ["weight's tensor hook", "post-accumulate hook",
                                   "post-accumulate hook, NumPy", "output's later hook"])
def test_writes_the_version_counter_misses_are_read(where):
    """Writes through .data or NumPy move no version counter: with a hook of anyone else's on
    the parameter, or after watch's on the Linear's output, the gradient is read."""
    model, x = _mlp(), torch.randn(4, 16)
    if where == "weight's tensor hook":
        model[2].weight.register_hook(_writing(lambda g: g.data.mul_(float("inf"))))
    elif where == "post-accumulate hook":
        model[0].bias.register_post_accumulate_grad_hook(
            _writing(lambda p: p.grad.data.fill_(float("nan"))))
    elif where == "post-accumulate hook, NumPy":
        model[2].weight.register_post_accumulate_grad_hook(
            _writing(lambda p: p.grad.numpy().__setitem__((0, 0), float("nan"))))
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        if where == "output's later hook":
            out.register_hook(_writing(lambda g: g.data.fill_(float("inf"))))
        out.square().sum().backward()
    assert _non_finite(model)
    assert _flagged(w) == _non_finite(model)


def test_a_sparse_gradient_after_a_claim_is_read():
    """autograd.grad over a Linear whose weight an Embedding(sparse=True) shares leaves the claim
    untaken; the Embedding's backward then makes the .grad sparse: read, no error."""
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.head = nn.Embedding(16, 16, sparse=True), nn.Linear(16, 16)
            self.head.weight = self.emb.weight

        def forward(self, i):
            e = self.emb(i)
            return e, self.head(e.detach())

    model = Tied()
    with ft.watch(model, raise_on=False) as w:
        e, logits = model(torch.arange(4))
        torch.autograd.grad(logits, [model.head.weight], torch.ones_like(logits),
                            retain_graph=True)
        e.backward(torch.full_like(e, float("inf")))
    assert model.emb.weight.grad.layout == torch.sparse_coo
    assert _flagged(w) == {"emb.weight"}


def test_claims_never_taken_are_dropped_at_the_backward_end():
    """autograd.grad accumulates nothing: what the Linears' nodes claimed (and the memory it
    holds) is gone once that backward ends."""
    model = _mlp()
    with ft.watch(model) as w:
        out = model(torch.randn(4, 16))
        torch.autograd.grad(out.square().sum(), list(model.parameters()))
        assert w._claims == {}


@pytest.mark.parametrize("bad", ["first", "second"])
def test_a_tied_weight_with_one_non_finite_use_is_read(bad):
    """Two Linears share a weight: one use's gradient is claimed finite, the other's is NaN, and
    autograd sums them (into one of them, in place, or into a new tensor): read, reported."""
    class TwoUses(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.a(x), self.b(x * 2)

    model = TwoUses()
    with ft.watch(model, raise_on=False) as w:
        one, two = model(torch.randn(4, 16))
        grads = [torch.ones_like(one), torch.ones_like(two)]
        grads[0 if bad == "first" else 1][0, 0] = float("nan")
        torch.autograd.backward([one, two], grads)
    assert "a.weight" in _non_finite(model)
    assert _flagged(w) >= {"a.weight"}
    assert _flagged(w) == _non_finite(model)


def test_a_gradient_written_in_place_by_the_accumulating_node_s_hook_is_read():
    """A pre-hook on the weight's AccumulateGrad node (no hook on the parameter itself) writes
    the gradient the Linear's node made, in place: its version moved, read."""
    model, x = _mlp(), torch.randn(4, 16)
    weight = model[2].weight
    accumulate = weight.view_as(weight).grad_fn.next_functions[0][0]
    accumulate.register_prehook(_writing(lambda grads: grads[0].mul_(float("inf"))))
    with ft.watch(model, raise_on=False) as w:
        model(x).square().sum().backward()
    assert _non_finite(model) == {"2.weight"} == _flagged(w)


@pytest.mark.parametrize("shape", [(4, 64), (2, 2, 64)], ids=str)
def test_a_backward_under_autocast_is_read(shape):
    """A float32 forward outside autocast, its backward inside CPU autocast to float16 (as a
    loop whose loss and backward are in the autocast block): the node's mm runs in half and
    overflows, then is cast back to float32."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64))
    x = torch.full(shape, 3e4)
    with ft.watch(model, raise_on=False) as w:
        with torch.autocast("cpu", dtype=torch.float16):
            with torch.autocast("cpu", enabled=False):
                out = model(x)
            (out.float() * 4).sum().backward()
    assert "0.weight" in _non_finite(model)
    assert _flagged(w) == _non_finite(model)
