"""watch's per-step savings keep its answers: the root module's check also ends the forward pass
(its tensors are let go as before, whether or not the root is watched), and a fail_on spec read
once is read the same by every later watch. torch's isfinite is the truth."""

import gc
import weakref

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn


class Root(nn.Module):
    """A model whose own forward makes the last tensor: its output is the root's finding."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))

    def forward(self, x):
        return torch.log(self.inner(x) - 10.0)


@pytest.mark.parametrize("names", [None, ["inner", "inner.*"]])
def test_the_pass_lets_go_of_its_tensors_at_the_models_end(names):
    # in inference nothing else holds the first Linear's output once the ReLU has read it: only
    # the pass's memory of checked tensors, dropped when the model's forward returns
    torch.manual_seed(0)
    model = Root()
    refs = []
    handle = model.inner[0].register_forward_hook(lambda m, a, out: refs.append(weakref.ref(out)))
    try:
        with ft.watch(model, names=names, raise_on=False) as w, torch.no_grad():
            out = model(torch.randn(3, 4))
            assert refs[0]() is None or not gc.collect() and refs[0]() is None
    finally:
        handle.remove()
    truth = not bool(torch.isfinite(out).all())
    watched_root = names is None
    assert [f.module for f in w.findings] == ([""] if truth and watched_root else [])


def test_a_finding_at_the_root_is_reported_once_a_pass_and_the_next_pass_starts_fresh():
    torch.manual_seed(0)
    model = Root()
    x = torch.randn(3, 4)
    outs = []
    with ft.watch(model, raise_on=False, backward=False) as w:
        for _ in range(2):
            outs.append(model(x))
    assert all(not torch.isfinite(o).all() for o in outs)  # log of negatives: NaN
    assert [(f.module, f.tensor) for f in w.findings] == [("", "output")] * 2
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model, backward=False):
        model(x)
    assert caught.value.finding.module == ""
    with torch.no_grad():
        model.inner[2].bias.fill_(1e3)  # the root's log now finite
    with ft.watch(model, raise_on=False, backward=False) as w:  # no pass left half-ended
        out = model(x)
    assert torch.isfinite(out).all() and w.findings == []


def planted(value):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    with torch.no_grad():
        model[1].bias[0] = value
    return model


@pytest.mark.parametrize("spec", ["nan", "posinf", "neginf", "inf", "nan,inf", " NaN , Inf ",
                                  ["nan"], ("posinf", "neginf")])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_fail_on_spec_reads_the_same_at_every_watch(spec, value):
    x = torch.randn(2, 4)
    names = [spec] if isinstance(spec, str) else spec
    classes = set()
    for name in (n.strip().lower() for part in names for n in part.split(",")):
        classes |= {"inf": {"posinf", "neginf"}}.get(name, {name})
    out = planted(value)(x)
    held = {"nan": bool(torch.isnan(out).any()), "posinf": bool(torch.isposinf(out).any()),
            "neginf": bool(torch.isneginf(out).any())}
    expected = any(held[c] for c in classes)
    for _ in range(3):  # the first watch parses the spec, the later ones reuse it
        model = planted(value)
        with ft.watch(model, fail_on=spec, raise_on=False, backward=False) as w:
            model(x)
        assert bool(w.findings) == expected
        assert all(f.module == "1" for f in w.findings)


def test_a_spec_that_names_nothing_watch_checks_fails_every_time():
    model = planted(0.0)
    for _ in range(2):
        with pytest.raises(ValueError, match="accepted"):
            ft.watch(model, fail_on="nans")
        with pytest.raises(ValueError, match="names no class"):
            ft.watch(model, fail_on="absmax>1e4")
    for _ in range(2):  # an empty spec fails on nothing, each time
        model = planted(float("nan"))
        with ft.watch(model, fail_on="", backward=False) as w:
            model(torch.randn(2, 4))
        assert w.findings == []
