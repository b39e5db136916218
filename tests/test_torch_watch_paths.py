"""fpclass.torch.watch's direct paths (a hook's tensor read straight by its dtype's counter, a
module's positional tensors read without the generic walk) report what torch itself says of the
same tensors: every float dtype and layout, large finite values whose sum would overflow,
argument labels; parameters are named by their first holder (shared, tied, or under a wrapper
that renames them)."""

import math

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn


def counts(t):
    parts = torch.view_as_real(t) if t.is_complex() else t
    return {"nan": int(torch.isnan(parts).sum()), "posinf": int(torch.isposinf(parts).sum()),
            "neginf": int(torch.isneginf(parts).sum())}


class Give(nn.Module):
    """Returns the tensor it was built with, as it is stored."""

    def __init__(self, t):
        super().__init__()
        self.t = t

    def forward(self, x):
        return self.t


def laid_out(layout, dtype, planted):
    """A 2x3x4x5 tensor of `dtype` in `layout` holding `planted` at one element; "hidden" and
    "strided" are views of every second stored word, with `planted` in a word they skip
    ("hidden") or in one they see ("strided")."""
    base = torch.ones(2, 3, 4, 5, dtype=dtype)
    if layout in ("hidden", "strided"):  # every second stored word is seen
        wide = torch.ones(2, 3, 4, 10, dtype=dtype)
        if layout == "hidden":
            wide[0, 0, 0, 1] = planted   # unseen, among the first numel() stored words
        else:
            wide[1, 2, 3, 8] = planted   # seen, past the first numel() stored words
        return wide[..., ::2]
    base[1, 2, 0, 3] = planted
    if layout == "channels_last":
        return base.to(memory_format=torch.channels_last)
    return base


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.complex64])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "hidden", "strided"])
@pytest.mark.parametrize("planted", [math.nan, math.inf, -math.inf])
def test_every_float_dtype_and_layout_reports_what_torch_sees(dtype, layout, planted):
    warm = nn.Sequential(Give(torch.ones(4, dtype=dtype)))
    with ft.watch(warm):  # as in a loop's later steps: the dtype's counter is ready
        warm(torch.zeros(1))
    t = laid_out(layout, dtype, planted)
    if layout == "channels_last":
        assert t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
    model = nn.Sequential(Give(t))
    with ft.watch(model, raise_on=False) as w:
        model(torch.zeros(1))
    truth = counts(t)
    if not any(truth.values()):
        assert layout == "hidden" and w.findings == []
        return
    assert [(f.module, f.tensor, f.counts) for f in w.findings] == [("0", "output", truth)]
    assert w.findings[0].first == tuple(torch.nonzero(~torch.isfinite(t))[0].tolist())


@pytest.mark.parametrize("dtype,big", [(torch.float32, 3e38), (torch.float16, 60000.0),
                                       (torch.bfloat16, 3e38), (torch.float64, 1e308)])
def test_large_finite_values_whose_sum_overflows_are_no_finding(dtype, big):
    # a screen by sum or norm would see Inf here: every value is finite, and only an exact
    # count may report (never the screen alone)
    x = torch.full((8, 16), big, dtype=dtype, requires_grad=True)
    assert torch.isfinite(x).all() and not torch.isfinite(x.sum())

    class Keep(nn.Module):
        def forward(self, x):
            return x * 1

    model = nn.Sequential(Keep(), Keep())
    with ft.watch(model, raise_on=False) as w:
        out = model(x)
        out.backward(torch.full_like(out, big))  # gradients as large, as finite
    assert torch.isfinite(x.grad).all() and w.findings == []


class Many(nn.Module):
    """forward(a, n, pair, scale=None, *, b): pair[1].sqrt() makes an infinite slope at its
    zero, born in this module's backward."""

    def forward(self, a, n, pair, scale=None, *, b):
        return a * n + pair[0] + pair[1].sqrt() + b


def test_arguments_are_labelled_by_their_place_however_passed():
    def leaf(*shape, zero=False):
        t = torch.rand(*shape) + 1
        if zero:
            t[1, 2] = 0.0
        return t.requires_grad_()

    a, p0, p1, b = leaf(3, 4), leaf(3, 4), leaf(3, 4, zero=True), leaf(3, 4)
    model = nn.Sequential()
    model.add_module("many", Many())
    with ft.watch(model, raise_on=False) as w:  # a submodule called on its own
        model.many(a, 3, (p0, p1), None, b=b).sum().backward()
    # torch: only pair[1]'s gradient is non-finite
    assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()
    assert torch.isfinite(p0.grad).all() and not torch.isfinite(p1.grad).all()
    [found] = w.findings
    assert (found.module, found.direction, found.tensor, found.born_here) == (
        "many", "backward", "gradient of input[2][1]", True)
    assert found.counts == counts(p1.grad)
    assert found.first == tuple(torch.nonzero(~torch.isfinite(p1.grad))[0].tolist())

    class Two(nn.Module):
        def forward(self, a, scale, b):
            return a * scale + b.sqrt()

    a, b = leaf(3, 4), leaf(3, 4, zero=True)
    model = nn.Sequential(nn.Identity(), Two())
    with ft.watch(model, raise_on=False) as w:  # positional tensors and a number only
        model[1](a, 2.0, b).sum().backward()
    assert torch.isfinite(a.grad).all() and not torch.isfinite(b.grad).all()
    [found] = w.findings
    assert (found.module, found.tensor, found.born_here, found.counts) == (
        "1", "gradient of input[2]", True, counts(b.grad))

    x = leaf(3, 4)
    model = nn.Sequential(nn.Identity(), Many())
    with ft.watch(model, raise_on=False) as w:  # b by keyword, a fault in it at the door
        model[1](x, 2, (x, x), b=torch.full((3, 4), math.nan))
    [found] = w.findings
    assert (found.module, found.direction, found.tensor, found.born_here) == (
        "1", "forward", "output", False)


class Shared(nn.Module):
    """emb and head tie one weight; `a` is also b's first layer: each weight has a first holder
    in named_modules() order (emb, a)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.a = nn.Linear(4, 4)
        self.b = nn.Sequential(self.a, nn.ReLU())
        self.head = nn.Linear(4, 6, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids, big):
        h = self.b(self.a(self.emb(ids)) * big)
        return self.head(h)


def test_shared_and_tied_weights_are_named_by_their_first_holder():
    torch.manual_seed(0)
    model = Shared()
    with torch.no_grad():
        model.a.weight.fill_(0.5)
        model.a.bias.fill_(0.0)
        model.emb.weight.abs_()
    owner = {id(model.emb.weight): ("emb", "Embedding", "gradient of weight"),  # head's too
             id(model.a.weight): ("a", "Linear", "gradient of weight"),         # b.0's too
             id(model.a.bias): ("a", "Linear", "gradient of bias")}
    ids = torch.tensor([[0, 1, 2]])
    # activations of 3e38 feed `a` the second time: its weight gradient (g^T x) overflows
    with ft.watch(model, raise_on=False, fail_on="inf") as w:
        model(ids, 3e38).sum().backward()
    bad = {owner[id(p)] for p in model.parameters() if not torch.isfinite(p.grad).all()}
    assert ("a", "Linear", "gradient of weight") in bad
    found = {(f.module, f.module_type, f.tensor) for f in w.findings
             if f.tensor in ("gradient of weight", "gradient of bias")}
    assert found == bad


class Renaming(nn.Module):
    """A wrapper whose named_parameters() drops its own prefix (as FSDP's does): owners are then
    read module by module, under the names named_modules() gives."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        return self.inner(x)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            yield name.replace("inner.", ""), p


def test_a_wrapper_renaming_its_parameters_keeps_their_owners():
    model = Renaming()
    x = torch.ones(2, 4)
    x[0, 2] = math.inf  # the weight's gradient (g^T x) holds it in a column
    with ft.watch(model, raise_on=False) as w:
        model(x).sum().backward()
    truth = model.inner.weight.grad
    assert not torch.isfinite(truth).all()
    grads = [(f.module, f.tensor, f.counts) for f in w.findings
             if f.tensor in ("gradient of weight", "gradient of bias")]
    assert ("inner", "gradient of weight", counts(truth)) in grads
