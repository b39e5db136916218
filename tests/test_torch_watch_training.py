"""fpclass.torch.watch on real (tiny) training loops: parameter gradients and optimizer states named
with the module that owns them, attention masks whose -Inf is no finding, fail_on / ignore /
action / collect, and one watch shared by threads. torch's own answer on the same step, unwatched,
is the truth each test compares with."""

import functools
import math
import sys
import threading

import pytest
from switching import run_switching

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


def counts(t):
    return {"nan": int(torch.isnan(t).sum()), "posinf": int(torch.isposinf(t).sum()),
            "neginf": int(torch.isneginf(t).sum())}


class Scale(nn.Module):
    """y = x * sqrt(g): with g = 0 the forward is finite and so is x's gradient, g's is not."""

    def __init__(self):
        super().__init__()
        self.g = nn.Parameter(torch.tensor([0.0, 1.0, 0.0, 4.0]))

    def forward(self, x):
        return x * self.g.sqrt()


def scaled():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), Scale(), nn.Linear(4, 1))


def train_step(model, opt, x):
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


# -- parameter gradients and optimizer states ------------------------------------------------------


def test_a_parameter_gradient_born_in_its_module_is_named():
    x = torch.randn(8, 4)
    truth = scaled()
    truth(x).square().mean().backward()
    g_grad = truth[1].g.grad  # torch: [±inf, finite, ±inf, finite]; everything else finite
    assert not torch.isfinite(g_grad).all()
    assert all(torch.isfinite(p.grad).all() for n, p in truth.named_parameters() if n != "1.g")

    model = scaled()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        train_step(model, opt, x)
    err = caught.value
    assert (err.module, err.module_type, err.direction, err.tensor) == (
        "1", "Scale", "backward", "gradient of g")
    assert err.born_here and err.counts == counts(g_grad)
    assert err.first == tuple(torch.nonzero(~torch.isfinite(g_grad))[0].tolist())

    model = scaled()
    with ft.watch(model, grads=False):  # only activations and their gradients: all finite
        train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x)


def test_optimizer_states_after_the_step_on_request():
    # Adam with eps=0 divides 0 by 0 wherever a gradient is exactly zero: fc's bias column for
    # an input that is all zeros stays finite, the weight column for it becomes NaN
    x = torch.randn(8, 4)
    x[:, 2] = 0

    def fresh():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))
        return model, torch.optim.Adam(model.parameters(), lr=0.1, eps=0.0)

    truth, opt = fresh()
    train_step(truth, opt, x)
    assert all(torch.isfinite(p.grad).all() for p in truth.parameters())
    weight = truth[0].weight.detach()
    assert not torch.isfinite(weight).all()

    model, opt = fresh()
    with ft.watch(model):  # without optimizer=, the step is not watched
        train_step(model, opt, x)
    model, opt = fresh()
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, optimizer=opt):
        train_step(model, opt, x)
    err = caught.value
    assert (err.module, err.module_type, err.direction, err.tensor) == (
        "0", "Linear", "step", "weight after step")
    assert err.born_here and err.counts == counts(weight)
    model, opt = fresh()
    with ft.watch(model, optimizer=opt, raise_on=False) as w:
        train_step(model, opt, x)
    assert [f.tensor for f in w.findings if f.module == "0"] == ["weight after step"]
    assert all(f.direction == "step" for f in w.findings)


# -- masks ---------------------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.out = nn.Linear(8, 8)

    def forward(self, x, attn_mask):
        return self.out(self.attn(x, x, x, attn_mask=attn_mask)[0])


class Sdpa(nn.Module):
    def __init__(self, manual=False):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.manual = manual

    def forward(self, x, bias):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.manual:  # softmax of a row that is all -inf: NaN (SDPA gives 0 there)
            return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8) + bias, -1) @ v
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def causal(n):
    return nn.Transformer.generate_square_subsequent_mask(n)  # 0 on and below, -inf above


def test_a_causal_mask_is_no_finding_even_at_the_door():
    torch.manual_seed(0)
    model, x = Attention(), torch.randn(2, 5, 8)
    mask = causal(5)
    assert torch.isneginf(mask).any() and torch.isfinite(model(x, mask)).all()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with ft.watch(model, check_inputs=True, optimizer=opt):
        opt.zero_grad()
        model(x, mask).square().mean().backward()
        opt.step()
    with pytest.raises(ft.NonFiniteError) as caught:  # unless masks are not recognised
        with ft.watch(model, check_inputs=True, masks=()):
            model(x, mask)
    assert caught.value.tensor == "input[1]" and caught.value.counts["neginf"] == 10


def test_a_fully_masked_row_is_born_inside_the_attention():
    torch.manual_seed(0)
    model, x = Attention(), torch.randn(2, 5, 8)
    mask = causal(5)
    mask[3] = -math.inf  # query 3 may attend to nothing: softmax of all -inf is NaN
    out = model.attn(x, x, x, attn_mask=mask)[0]
    assert torch.isnan(out[:, 3]).all() and torch.isfinite(out[:, [0, 1, 2, 4]]).all()
    for check_inputs in (False, True):
        with pytest.raises(ft.NonFiniteError) as caught:
            with ft.watch(model, check_inputs=check_inputs):
                model(x, mask)
        err = caught.value
        assert (err.module, err.module_type, err.tensor) == ("attn", "MultiheadAttention", "output[0]")
        assert err.born_here and err.counts == counts(out)


def test_sdpa_masks_by_name_or_marked_by_the_user():
    torch.manual_seed(0)
    model, x = Sdpa(), torch.randn(2, 4, 8)
    bias = causal(4)
    with pytest.raises(ft.NonFiniteError) as caught:  # "bias" is data by default
        with ft.watch(model, check_inputs=True):
            model(x, bias).sum().backward()
    assert caught.value.tensor == "input[1]"
    for masks in ("bias", ["*mask", "bias"], lambda module, argument: argument == "bias"):
        with ft.watch(model, check_inputs=True, masks=masks):
            model(x, bias).sum().backward()

    model = Sdpa(manual=True)
    bias[0] = -math.inf
    out = model(x, bias)
    assert torch.isnan(out[:, 0]).all()
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        model(x, bias)
    assert caught.value.module == "" and not caught.value.born_here  # "bias" is data by default
    for masks in ("bias", ["*mask", "bias"], lambda module, argument: argument == "bias"):
        with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, masks=masks):
            model(x, bias)
        assert caught.value.module == "" and caught.value.born_here
        assert caught.value.counts == counts(out)
    bias[0] = math.nan  # a NaN in a mask is a finding, mask or not
    with pytest.raises(ft.NonFiniteError) as caught:
        with ft.watch(model, masks="bias", check_inputs=True):
            model(x, bias)
    assert caught.value.tensor == "input[1]" and caught.value.counts["nan"] == 4


# -- what counts and what happens ----------------------------------------------------------------


class Exp(nn.Module):
    def forward(self, x):
        return torch.exp(x * 100)  # +Inf for x > ~0.89, never NaN


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)  # NaN below 0, -Inf at 0


class Sqrt(nn.Module):
    def forward(self, x):
        return torch.sqrt(x)  # an infinite slope at 0: +Inf gradients


def planted(act, last=True):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), act, *[nn.Linear(4, 2)] * last)


def test_fail_on_counts_only_the_named_classes():
    x = torch.randn(16, 4)
    model = planted(Exp(), last=False)
    inside = model(x)
    assert torch.isposinf(inside).any() and not torch.isnan(inside).any()
    with ft.watch(model, fail_on="nan", backward=False):
        model(x)
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, fail_on="posinf"):
        model(x)
    assert caught.value.module == "1" and caught.value.counts == counts(inside)
    with pytest.raises(ValueError, match="accepted"):
        ft.watch(model, fail_on="nans")
    with pytest.raises(ValueError, match="accepted"):
        ft.watch(model, action="log")
    with pytest.raises(TypeError, match="Optimizer"):
        ft.watch(model, optimizer=model.parameters())
    with pytest.raises(TypeError, match="nn.Module"):
        ft.watch({"weight": torch.ones(2)})
    with pytest.raises(TypeError, match="masks must be"):
        ft.watch(model, masks=[1])


def test_ignore_drops_findings_by_module_or_parameter_name():
    x = torch.randn(16, 4)
    model = planted(Log())
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, ignore="1"):
        model(x)
    assert caught.value.module == "2" and not caught.value.born_here
    with ft.watch(model, ignore=["1", "2"], backward=False):
        model(x)
    model = scaled()
    with ft.watch(model, ignore="1.g"):
        model(torch.randn(8, 4)).square().mean().backward()


def test_collect_reports_every_finding_of_the_step():
    x = torch.randn(16, 4)
    model = planted(Log())
    with ft.watch(model, raise_on=False) as recorded:
        model(x).sum().backward()
    assert len(recorded.findings) > 1
    with pytest.raises(ft.NonFiniteError) as caught:
        with ft.watch(model, collect=True) as collected:
            model(x).sum().backward()  # goes on to the end of the step
    assert caught.value.findings == collected.findings == recorded.findings
    assert caught.value.module == "1" and caught.value.born_here


def test_warn_warns_once_a_pass_and_records_all():
    x = torch.randn(16, 4)
    model = planted(Log())
    with pytest.warns(ft.NonFiniteWarning) as caught, ft.watch(model, action="warn") as w:
        for _ in range(2):
            model(x).sum().backward()
    assert [str(c.message) for c in caught] == [str(w.findings[0])] * 2
    assert caught[0].message.finding.module == "1" and len(w.findings) > 2


def test_pdb_stops_at_the_module_that_made_it(monkeypatch):
    import pdb
    import sys
    stops = []
    monkeypatch.setattr(pdb, "set_trace", lambda: stops.append(dict(sys._getframe(1).f_locals)))
    x = torch.randn(16, 4)
    model = planted(Log())
    with ft.watch(model, action="pdb"):
        model(x).sum().backward()
    assert len(stops) == 1
    assert stops[0]["module"] is model[1] and stops[0]["finding"].born_here
    torch.testing.assert_close(stops[0]["tensor"], model[1](model[0](x)), equal_nan=True)
    model = scaled()
    with ft.watch(model, action="pdb"):
        model(torch.randn(8, 4)).square().mean().backward()
    assert stops[1]["module"] is model[1] and stops[1]["finding"].tensor == "gradient of g"


# -- threads -------------------------------------------------------------------------------------


class Gate(nn.Module):
    """Holds every thread here until all have arrived: the passes interleave for sure."""

    def __init__(self, barrier):
        super().__init__()
        self.barrier = barrier

    def forward(self, x):
        if self.barrier is not None:
            self.barrier.wait(timeout=60)
        return x


def test_threads_sharing_a_watch_get_their_own_findings():
    def model_with(barrier):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 4), Gate(barrier), nn.ReLU(), Sqrt(), nn.Linear(4, 4),
                             Log(), Scale())

    inputs = [torch.full((3, 4), 0.5), torch.randn(6, 4), torch.randn(5, 4) * 3]
    alone = []
    for x in inputs:
        model = model_with(None)
        with ft.watch(model, raise_on=False) as w:
            for _ in range(3):
                model(x).sum().backward()
        alone.append(w.findings)
    assert all(alone) and alone[0] != alone[1] != alone[2] != alone[0]

    model = model_with(threading.Barrier(len(inputs)))
    mine = {}

    def run(i, x):
        for _ in range(3):
            model(x).sum().backward()
        mine[i] = threading.get_ident()

    with ft.watch(model, raise_on=False, max_findings=10_000) as w:
        # threads take turns between any two bytecodes, nearly
        run_switching([functools.partial(run, i, x) for i, x in enumerate(inputs)])
    # a parameter's .grad is one tensor every thread accumulates into (torch's own sharing):
    # its findings depend on the other threads; every other finding is this thread's alone
    own = [f"gradient of {name}" for name in ("weight", "bias", "g")]
    for i in range(len(inputs)):
        threaded = [f for f in w.findings if f.thread == mine[i] and f.tensor not in own]
        assert threaded == [f for f in alone[i] if f.tensor not in own]


class Hold(torch.autograd.Function):
    """Identity; in thread "A" its backward lets thread B run a whole step first."""

    @staticmethod
    def forward(ctx, x, events):
        ctx.events = events
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if threading.current_thread().name == "A" and ctx.events is not None:
            ctx.events[0].set()
            assert ctx.events[1].wait(timeout=60)
        return grad, None


class Held(nn.Linear):
    """A Linear whose backward, between the gradient of its output and that of its input, waits."""

    events = None

    def forward(self, x):
        return Hold.apply(super().forward(x), self.events)


def test_another_threads_step_inside_a_backward_changes_nothing():
    # thread A's loss gradient is already NaN: every finding of its backward is passed along;
    # thread B's whole step happens while A's backward is between module 2's output gradient
    # and its input gradient
    def model_with(events):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), Held(4, 4))
        model[2].events = events
        return model

    xa, xb = torch.randn(3, 4), torch.randn(5, 4)

    def step_a(model):
        (model(xa) * math.inf).sum().backward()

    def step_b(model):
        model(xb).sum().backward()

    alone = {}
    for name, step in (("A", step_a), ("B", step_b)):
        model = model_with(None)
        with ft.watch(model, raise_on=False) as w:
            step(model)
        alone[name] = w.findings
    assert alone["A"] and not any(f.born_here for f in alone["A"]) and not alone["B"]

    events = (threading.Event(), threading.Event())
    model = model_with(events)

    def run_b():
        assert events[0].wait(timeout=60)
        step_b(model)
        events[1].set()

    with ft.watch(model, raise_on=False) as w:
        threads = [threading.Thread(target=step_a, args=(model,), name="A"),
                   threading.Thread(target=run_b, name="B")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert events[1].is_set()
    assert w.findings == alone["A"]


def test_a_channels_last_cnn_step():
    # channels_last activations and gradients are read as one block of memory, in place
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), Log(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 2)).to(memory_format=torch.channels_last)
    x = torch.randn(4, 3, 8, 8).to(memory_format=torch.channels_last)
    with torch.no_grad():
        inside = model[4](model[3](model[2](model[1](model[0](x)))))
    assert inside.is_contiguous(memory_format=torch.channels_last) and not inside.is_contiguous()
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        model(x).sum().backward()
    err = caught.value
    assert (err.module, err.born_here, err.counts) == ("4", True, counts(inside))
    assert err.first == tuple(torch.nonzero(~torch.isfinite(inside))[0].tolist())
    model[4] = nn.Tanh()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with ft.watch(model, optimizer=opt):  # finite everywhere: nothing read out of place
        train_step(model, opt, x)


def test_a_sparse_embedding_gradient():
    def fresh():
        torch.manual_seed(0)
        model = nn.Embedding(10, 4, sparse=True)
        with torch.no_grad():
            model.weight[2, 1] = 0.0
        return model

    ids = torch.tensor([[1, 2], [2, 7]])
    truth = fresh()
    truth(ids).abs().sqrt().sum().backward()  # sqrt's slope at the zero: +Inf
    dense = truth.weight.grad.to_dense()
    assert truth.weight.grad.is_sparse and not torch.isfinite(dense).all()
    model = fresh()
    opt = torch.optim.SparseAdam(model.parameters(), lr=0.1)
    with ft.watch(model, optimizer=opt, raise_on=False) as w:
        opt.zero_grad()
        model(ids).abs().sqrt().sum().backward()
        opt.step()
    found = {f.tensor: f for f in w.findings}
    assert found["gradient of output"].direction == "backward"  # from the loss: passed along
    grad = found["gradient of weight"]
    assert (grad.module, grad.module_type, grad.counts) == ("", "Embedding", counts(dense))
    assert grad.first == tuple(torch.nonzero(~torch.isfinite(dense))[0].tolist())


@pytest.mark.parametrize("planted", [None, math.nan, -math.inf])
def test_expanded_and_transposed_tensors_are_read_as_stored(planted):
    # sum()'s gradient is one stored value expanded (stride 0); a transpose is dense but not
    # contiguous; a step of 2 is neither: each is read from its own stored words, and only those
    base = torch.ones(3)
    if planted is not None:
        base[1] = planted
    ones, every = torch.ones(4, 3), torch.ones(7)
    every[4] = base[1]  # read by every[::2], after its third stored word
    for t in (base.expand(4, 3), base.view(3, 1).expand(3, 5).t(), (ones * base).t(),
              every[::2]):
        class Give(nn.Module):
            def forward(self, x):
                return t  # as it is stored

        model = nn.Sequential(Give())
        with ft.watch(model, raise_on=False) as w:
            model(torch.zeros(t.shape))
        assert [f.counts for f in w.findings] == ([] if planted is None else [counts(t)])
        if planted is not None:
            assert w.findings[0].first == tuple(torch.nonzero(~torch.isfinite(t))[0].tolist())
