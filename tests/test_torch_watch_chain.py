"""watch checks a chain (torch's own Sequential of Linear and ReLU layers, alternating, Linear
first and last: the README's MLP) with one forward hook and one autograd-node hook a Linear
(fpclass.torch.chain): each ReLU's output is proven finite from the Linear's before it, each
Linear output's gradient from the gradient the next Linear made for the ReLU between, and each
parameter's gradient from bounds. Every scenario below runs twice from the same state, once as a
chain and once with the chain's plan turned off (watch's hooks on every module and tensor), and
both must raise the same first finding; torch's own tensors are the truth for whether anything
was non-finite at all."""

import collections
import copy
import math
import warnings
import weakref

import pytest

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn

from fpclass.torch import chain, watching  # noqa: E402

from test_torch_watch_norm_bound import read_addresses  # noqa: E402

NAN, INF = float("nan"), float("inf")


def _mlp(widths=(6, 8, 8, 5), bias=True, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers += [nn.Linear(a, b, bias=bias, dtype=dtype)] + ([nn.ReLU()] if i < len(widths) - 2
                                                             else [])
    return nn.Sequential(*layers)


class Spy:
    """Records each forward pass's kind: a chain's ("chain") or any other's ("other")."""

    def __init__(self, monkeypatch):
        self.kinds = []
        made = watching.watch._chain_pass

        def recording(w, args):
            passing = made(w, args)
            self.kinds.append("other" if passing is None else "chain")
            return passing
        monkeypatch.setattr(watching.watch, "_chain_pass", recording)


def _run(model, x, step, as_chain, monkeypatch, **kwargs):
    """(the finding watch raised or None, each parameter's .grad, the passes' kinds) for one
    step(model, x) of a copy of `model` inside watch, with the chain's plan on or off; the
    watch's findings left in _run.findings."""
    model, x = copy.deepcopy(model), x.clone()
    with monkeypatch.context() as patch:
        if not as_chain:
            patch.setattr(watching.chain, "plan", lambda *_: None)
        spy = Spy(patch)
        w = ft.watch(model, **kwargs)
        try:
            with w:
                step(model, x)
            found = None
        except ft.NonFiniteError as error:
            found = error.finding
    grads = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    _run.findings = w.findings
    return found, grads, spy.kinds


def _both(model, x, step, monkeypatch, chain_expected=True, **kwargs):
    """The first finding of both runs, asserted equal (and the chain's run a chain's when
    `chain_expected`); also torch's gradients equal in both runs. Each run's whole list of
    findings is left in _both.findings (the chain's, the other's)."""
    found, grads, kinds = _run(model, x, step, True, monkeypatch, **kwargs)
    findings = _run.findings
    other, other_grads, other_kinds = _run(model, x, step, False, monkeypatch, **kwargs)
    _both.findings = (findings, _run.findings)
    assert set(other_kinds) <= {"other"}
    if chain_expected:
        assert kinds and set(kinds) == {"chain"}, kinds
    else:
        assert "chain" not in kinds, kinds
    assert _same(found, other), (found, other)
    for name, g in grads.items():
        h = other_grads[name]
        assert (g is None) == (h is None)
        if g is not None:
            assert torch.equal(g.isnan(), h.isnan()) and torch.equal(g.nan_to_num(), h.nan_to_num())
    return found, grads


def _non_finite(grads) -> bool:
    """Does any gradient torch made (None: never made, the step raised first) hold NaN or Inf?"""
    return any(g is not None and not bool(torch.isfinite(g).all()) for g in grads.values())


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return (a.module, a.module_type, a.direction, a.tensor, a.counts, a.first,
            a.inputs_nonfinite) == (b.module, b.module_type, b.direction, b.tensor, b.counts,
                                    b.first, b.inputs_nonfinite)


def mse(model, x):
    model.zero_grad(set_to_none=True)
    model(x).square().mean().backward()


def scaled(scale):
    def step(model, x):
        model.zero_grad(set_to_none=True)
        (model(x) * scale).sum().backward()
    return step


X = torch.randn(7, 6)


def _set(model, layer, name, index, value):
    with torch.no_grad():
        getattr(model[layer], name)[index] = value
    return model


# -- the same first finding as watch's hooks on every module ------------------------------------

def test_a_clean_step_finds_nothing_and_reads_no_parameter_gradient(monkeypatch):
    model = _mlp()
    found, grads = _both(model, X, mse, monkeypatch)
    assert found is None and all(bool(torch.isfinite(g).all()) for g in grads.values())
    addresses = read_addresses(monkeypatch)
    with ft.watch(model):
        mse(model, X)
    assert not {p.grad.data_ptr() for p in model.parameters()} & set(addresses)


@pytest.mark.parametrize("layer", [0, 2, 4])
@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name", ["weight", "bias"])
def test_a_non_finite_parameter_is_found_at_its_linear(monkeypatch, layer, value, name):
    model = _set(_mlp(), layer, name, (1, 2) if name == "weight" else 3, value)
    found, _ = _both(model, X, mse, monkeypatch)
    assert found.module == str(layer) and found.direction == "forward" and found.born_here


@pytest.mark.parametrize("value", [NAN, INF])
def test_a_non_finite_input_is_found_at_the_first_linear_not_born_there(monkeypatch, value):
    x = X.clone()
    x[3, 1] = value
    found, _ = _both(_mlp(), x, mse, monkeypatch)
    assert (found.module, found.direction, found.inputs_nonfinite) == ("0", "forward", True)


def test_an_overflow_in_the_forward(monkeypatch):
    model = _mlp()
    with torch.no_grad():
        model[2].weight.mul_(1e38)
    found, _ = _both(model, X * 100, mse, monkeypatch)
    assert (found.module, found.direction, found.born_here) == ("2", "forward", True)


def test_a_non_finite_gradient_from_the_loss(monkeypatch):
    found, _ = _both(_mlp(), X, scaled(NAN), monkeypatch)
    assert (found.module, found.tensor, found.inputs_nonfinite) == (
        "4", "gradient of output", True)


@pytest.mark.parametrize("scale", [1e30, 1e34, 1e36, 1e37, 3e37, 1e38, 3e38])
def test_gradients_that_overflow_on_the_way_back(monkeypatch, scale):
    """The loss's gradient scaled toward float32's limit: some gradient, of an activation or a
    parameter, overflows somewhere (or none does); both runs find the same first one, and any
    non-finite gradient torch made is found."""
    model = _mlp()
    with torch.no_grad():
        model[2].weight.mul_(40.0)
    found, grads = _both(model, X, scaled(scale), monkeypatch)
    if _non_finite(grads):
        assert found is not None and found.direction == "backward"


def test_a_weight_gradient_that_overflows_from_finite_activations(monkeypatch):
    """x near 1e19 and the first weight near 1e-19: every activation and activation gradient
    finite, the first weight's gradient (x.t() @ g) +-Inf."""
    model = _mlp()
    with torch.no_grad():
        model[0].weight.mul_(1e-19)
    x = X * 1e19
    found, grads = _both(model, x, scaled(1e21), monkeypatch)
    assert not bool(torch.isfinite(grads["0.weight"]).all())
    assert (found.module, found.tensor) == ("0", "gradient of weight")


def test_weight_decay_in_the_loss_is_read_not_claimed(monkeypatch):
    """The weight's gradient is the Linear's part plus the decay's: the Linear's claim does not
    hold for it, and the decay's overflow is found."""
    def step(model, x):
        model.zero_grad(set_to_none=True)
        (model(x).square().mean() + 3e38 * model[2].weight.square().sum()).backward()
    found, grads = _both(_set(_mlp(), 2, "weight", (0, 0), 1.0), X, step, monkeypatch)
    assert not bool(torch.isfinite(grads["2.weight"]).all())
    assert (found.module, found.tensor) == ("2", "gradient of weight")


def test_tied_weights_summing_past_the_limit(monkeypatch):
    """Two Linears share one weight: each part finite, their sum +-Inf."""
    model = _mlp(widths=(8, 8, 8, 8))
    model[2].weight = model[0].weight
    with torch.no_grad():
        model[0].weight.fill_(0.5)
    found, grads = _both(model, X.new_ones(7, 8), scaled(3e37), monkeypatch)
    if _non_finite(grads):
        assert found is not None


def test_a_gradient_accumulated_past_the_limit(monkeypatch):
    """.grad kept (zero_grad(set_to_none=False)) and filled near float32's limit: the step's
    gradient added to it overflows."""
    def step(model, x):
        for p in model.parameters():
            p.grad = torch.full_like(p, -3.4e38)
        (model(x) * 1e36).sum().backward()
    found, grads = _both(_mlp(), X, step, monkeypatch)
    assert _non_finite(grads)
    assert found is not None and found.tensor.startswith("gradient of ")


def test_a_retained_graph_run_twice(monkeypatch):
    def step(model, x):
        model.zero_grad(set_to_none=True)
        loss = (model(x) * 1e38).sum()
        loss.backward(retain_graph=True)
        loss.backward()
    _both(_mlp(), X, step, monkeypatch)


def test_autograd_grad_claims_nothing_it_leaves(monkeypatch):
    def step(model, x):
        model.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
        loss.backward()
    found, _ = _both(_mlp(), X, step, monkeypatch)
    assert found is None


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
@pytest.mark.parametrize("widths", [(6, 5), (6, 8, 5), (6, 8, 8, 8, 5)], ids=str)
def test_chains_of_every_length_with_and_without_bias(monkeypatch, bias, widths):
    model = _set(_mlp(widths, bias=bias), len(widths) * 2 - 4, "weight", (0, 0), NAN)
    found, _ = _both(model, X, mse, monkeypatch)
    assert found.module == str(len(widths) * 2 - 4)
    found, _ = _both(_mlp(widths, bias=bias), X, scaled(NAN), monkeypatch)
    assert found.tensor == "gradient of output"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_other_dtypes(monkeypatch, dtype):
    found, _ = _both(_mlp(dtype=dtype), X.to(dtype), mse, monkeypatch)
    assert found is None
    found, _ = _both(_mlp(dtype=dtype), X.to(dtype), scaled(1e4 if dtype == torch.float16
                                                          else 1e300), monkeypatch)


# -- when a pass is no chain's ------------------------------------------------------------------

def _relu_hook(module, args, output):
    return output * NAN


def _hooked(register):
    """A step (mse) with the hook register(model) adds inside the watch, removed after."""
    def step(model, x):
        handle = register(model)
        try:
            mse(model, x)
        finally:
            handle.remove()
    return step


@pytest.mark.parametrize("case", [
    "3-d input", "input requires grad", "no_grad", "inference_mode", "hook on a ReLU",
    "hook on the model", "global hook", "autocast", "saved tensors hooks", "function mode",
    "float64 input", "F.linear patched", "the F of torch's Linear replaced"])
def test_passes_that_are_no_chains(monkeypatch, case):
    model, x, step = _mlp(), X, mse
    with ft.watch(model):  # torch's own functions noted before the patch
        pass
    if case == "F.linear patched":
        linear = nn.functional.linear
        monkeypatch.setattr(nn.functional, "linear", lambda *a, **k: linear(*a, **k))
    elif case == "the F of torch's Linear replaced":
        import types
        shim = types.SimpleNamespace(linear=nn.functional.linear)
        monkeypatch.setattr(nn.modules.linear, "F", shim)
    if case == "3-d input":
        x = X.reshape(1, 7, 6)
    elif case == "input requires grad":
        x = X.clone().requires_grad_()
    elif case in ("no_grad", "inference_mode"):
        def step(model, x):
            with (torch.no_grad() if case == "no_grad" else torch.inference_mode()):
                model(x)
    elif case == "hook on a ReLU":
        step = _hooked(lambda model: model[1].register_forward_hook(_relu_hook))
    elif case == "hook on the model":
        step = _hooked(lambda model: model.register_forward_hook(lambda m, a, o: o * NAN))
    elif case == "global hook":
        step = _hooked(lambda model: nn.modules.module.register_module_forward_hook(
            lambda m, a, o: None))
    elif case == "autocast":
        def step(model, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mse(model, x)
    elif case == "saved tensors hooks":
        def step(model, x):
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                mse(model, x)
    elif case == "function mode":
        from torch.overrides import TorchFunctionMode

        class Passing(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        def step(model, x):
            with Passing():
                mse(model, x)
    elif case == "float64 input":
        def step(model, x):
            with pytest.raises(RuntimeError):  # torch's own error: dtypes differ
                model(x.double())
    _both(model, x, step, monkeypatch, chain_expected=False)


@pytest.mark.parametrize("case", [
    "inplace ReLU", "Dropout", "Sequential subclass", "instance forward", "names", "collect",
    "raise_on=False", "warn", "fail_on nan", "ignore", "check_inputs", "compiled wrapper",
    "mixed dtypes", "Linear last missing", "weight_norm", "spectral_norm", "weight None",
    "a layer named as compile's wrapper"])
def test_models_and_watches_that_are_no_chains(case):
    model, kwargs = _mlp(), {}
    if case in ("weight_norm", "spectral_norm"):  # (weight made by a pre-hook: its forward's)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (weight_norm's deprecation)
            model[0] = getattr(nn.utils, case)(model[0])
    elif case == "weight None":
        model[0].weight = None
    elif case == "a layer named as compile's wrapper":
        model = nn.Sequential(collections.OrderedDict(
            (name if name != "2" else "_orig_mod", layer) for name, layer in model.named_children()))
    elif case == "inplace ReLU":
        model[1] = nn.ReLU(inplace=True)
    elif case == "Dropout":
        model[1] = nn.Dropout(0.0)
    elif case == "Sequential subclass":
        model = type("Mine", (nn.Sequential,), {})(*model)
    elif case == "instance forward":
        model[3].forward = lambda x: x
    elif case == "mixed dtypes":
        model[2].double()
    elif case == "Linear last missing":
        model = nn.Sequential(*list(model)[:-1])
    elif case == "compiled wrapper":
        class OptimizedModule(nn.Module):  # as torch.compile wraps: _orig_mod runs
            def __init__(self, inner):
                super().__init__()
                self._orig_mod = inner

            def forward(self, x):
                return self._orig_mod(x)
        model = OptimizedModule(model)
    else:
        kwargs = {"names": {"names": "*"}, "collect": {"collect": True},
                  "raise_on=False": {"raise_on": False}, "warn": {"action": "warn"},
                  "fail_on nan": {"fail_on": "nan"}, "ignore": {"ignore": "9"},
                  "check_inputs": {"check_inputs": True}}[case]
    with ft.watch(model, **kwargs) as w:
        assert w._plan is None


@pytest.mark.parametrize("owner", ["model", "Linear"])
def test_a_parameter_beside_the_linears_weights_and_biases_makes_no_chain(monkeypatch, owner):
    """A parameter the chain's plan would not hold (the model's own, or one a Linear was given)
    makes the model no chain: its gradient is hooked and checked as any parameter's."""
    model = _mlp()
    (model if owner == "model" else model[2]).register_parameter(
        "extra", nn.Parameter(torch.ones(3)))

    def step(model, x):
        model.zero_grad(set_to_none=True)
        extra = (model if owner == "model" else model[2]).extra
        (model(x).square().mean() + (extra * NAN).sum()).backward()
    found, grads = _both(model, X, step, monkeypatch, chain_expected=False)
    assert _non_finite(grads)
    assert (found.module, found.tensor) == ("" if owner == "model" else "2", "gradient of extra")


def test_a_layer_held_twice_makes_no_chain(monkeypatch):
    """A Linear held twice in the Sequential (one module, two places) makes no chain: a NaN in
    its weight is found as with hooks on every module."""
    torch.manual_seed(0)
    shared = nn.Linear(6, 6)
    model = nn.Sequential(shared, nn.ReLU(), nn.Linear(6, 6), nn.ReLU(), shared)
    with ft.watch(model) as w:
        assert w._plan is None
    _set(model, 0, "weight", (1, 2), NAN)
    assert not torch.isfinite(shared(X)).all()
    found, _ = _both(model, X, mse, monkeypatch, chain_expected=False)
    assert (found.module, found.tensor) == ("0", "output")


def test_a_parameter_replaced_inside_the_context_is_named_as_entered():
    """A Linear's weight replaced between the forward and the backward: the gradient of the
    weight that took part, hooked when the context was entered, is named by the module that held
    it then."""
    model = _mlp()
    old = model[2].weight
    with pytest.raises(ft.NonFiniteError) as raised:
        with ft.watch(model) as w:
            assert w._plan is not None
            loss = model(X).sum() + old[0, 0] * math.inf * 0  # a NaN into old's gradient
            model[2].weight = nn.Parameter(old.detach().clone())
            loss.backward()
    assert not bool(torch.isfinite(old.grad).all())
    error = raised.value
    assert (error.module, error.direction, error.tensor) == ("2", "backward", "gradient of weight")


# -- what entering keeps of a chain for the next watch (watch._chain_derived) --------------------

def _mutations():
    """(what was done, a function doing it to an _mlp()) for each change chain.plan looks at."""
    def replace_layer(m):
        m[2] = nn.Linear(8, 8)

    def rename(m):
        m._modules = collections.OrderedDict(
            ("x" + name, layer) for name, layer in m._modules.items())

    def new_bias(m):
        m[2].bias = nn.Parameter(m[2].bias.detach().clone())

    def extra_parameter(m):
        m[2].register_parameter("scale", nn.Parameter(torch.ones(1)))

    def submodule(m):
        m[1].inner = nn.Identity()

    def in_place(m):
        m[1].inplace = True

    def patched_forward(m):
        m[3].forward = lambda x: x

    return [("nothing", lambda m: None), ("a layer replaced", replace_layer),
            ("renamed", rename), ("a bias replaced", new_bias),
            ("a parameter added", extra_parameter), ("a submodule added", submodule),
            ("a ReLU made in place", in_place), ("a forward patched", patched_forward),
            ("a layer appended", lambda m: m.append(nn.Linear(5, 5))),
            ("float64", lambda m: m.double()), ("a parameter of the model", lambda m:
                m.register_parameter("p", nn.Parameter(torch.ones(1))))]


@pytest.mark.parametrize("what, change", _mutations(), ids=[w for w, _ in _mutations()])
def test_a_plan_known_is_kept_only_while_the_model_is_that_chain(what, change):
    """chain.plan with `known` returns that plan when a plan made now would hold the same
    layers, names, parameters and dtype, else what a plan made now is."""
    watching._fill_tables(torch) if not watching._TORCH_FUNCTIONS else None
    model, plain = _mlp(), (torch.Tensor, nn.Parameter)
    known = chain.plan(torch, model, watching._TORCH_FORWARD, plain)
    change(model)
    fresh = chain.plan(torch, model, watching._TORCH_FORWARD, plain)
    kept = chain.plan(torch, model, watching._TORCH_FORWARD, plain, known)
    same = fresh is not None and _same_chain(fresh, known)
    assert same == (what == "nothing")
    if same:
        assert kept is known
    else:
        assert kept is not known and (kept is None) == (fresh is None)
        assert kept is None or _same_chain(kept, fresh)


def _same_chain(a, b) -> bool:
    """Do plans `a` and `b` hold the same layers, names, dtype and parameter tensors?"""
    return ((a.layers, a.names, a.dtype) == (b.layers, b.names, b.dtype)
            and all(p is q for pa, pb in zip(a.params, b.params) for p, q in zip(pa, pb))
            and len(a.params) == len(b.params))


def _bias_overflows(model):
    """One step whose last bias gradient sums two rows of 3e38 to Inf, all else finite."""
    model.zero_grad(set_to_none=True)
    (model(torch.zeros(2, 2)) * 3e38).sum().backward()


def _one_linear():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 2))


@pytest.mark.parametrize("between", ["a bias replaced", "requires_grad turned on",
                                     "grads=False before"])
def test_what_a_watch_kept_follows_the_model_to_the_next(between):
    """A parameter replaced, or made to require grad, between two watches of a chain, or a
    watch without grads before: the next watch hooks the parameter as it is now and finds its
    gradient's Inf."""
    model = _one_linear()
    if between == "requires_grad turned on":
        model[0].bias.requires_grad_(False)
    with ft.watch(model, grads=between != "grads=False before") as w:
        assert w._plan is not None
        model(torch.ones(2, 2)).sum().backward()
    if between == "a bias replaced":
        model[0].bias = nn.Parameter(model[0].bias.detach().clone())
    elif between == "requires_grad turned on":
        model[0].bias.requires_grad_(True)
    with pytest.raises(ft.NonFiniteError) as raised:
        with ft.watch(model) as w:
            assert w._plan is not None
            _bias_overflows(model)
    assert not bool(torch.isfinite(model[0].bias.grad).all())
    error = raised.value
    assert (error.module, error.direction, error.tensor) == ("0", "backward", "gradient of bias")


def test_what_a_watch_kept_keeps_no_model_alive():
    model = _mlp()
    with ft.watch(model) as w:
        mse(model, X)
    assert model in watching._DERIVED
    gone = weakref.ref(model)
    del model, w
    import gc
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("change", ["a layer replaced", "no chain any more"])
def test_what_a_watch_kept_goes_when_the_model_changes(change):
    """The next watch entered on a changed model lets go of the layers the last one kept."""
    model = _mlp()
    with ft.watch(model):
        mse(model, X)
    old = weakref.ref(model[2])
    if change == "a layer replaced":
        model[2] = nn.Linear(8, 8)
    else:
        model[2] = nn.Linear(8, 8)
        model[1].inplace = True
    import gc
    gc.collect()
    assert old() is not None  # (kept until the next watch)
    with ft.watch(model) as w:
        assert (w._plan is None) == (change == "no chain any more")
    del w
    gc.collect()
    assert old() is None
    assert (True in watching._DERIVED.get(model, {})) == (change == "a layer replaced")


def test_a_watch_of_the_chain_has_a_plan():
    with ft.watch(_mlp()) as w:
        assert w._plan is not None and len(w._plan.layers) == 5


def test_a_relu_called_alone_is_checked():
    """Outside the model's pass a chain's ReLU is checked as any module."""
    model = _mlp()
    with pytest.raises(ft.NonFiniteError) as raised:
        with ft.watch(model):
            mse(model, X)
            model[1](torch.tensor([NAN, 1.0]))
    assert (raised.value.module, raised.value.direction, raised.value.inputs_nonfinite) == (
        "1", "forward", True)


def test_a_linear_called_alone_after_a_pass_is_checked():
    model = _mlp()
    with pytest.raises(ft.NonFiniteError) as raised:
        with ft.watch(model):
            mse(model, X)
            model[2](torch.full((2, 8), INF))
    assert (raised.value.module, raised.value.direction) == ("2", "forward")


def test_a_relu_whose_output_is_not_relu_of_its_input_is_read(monkeypatch):
    """Were a hook to slip past the pass's checks (chain.intact told True here), the next
    Linear finds its input is no relu of the Linear's output before, reads it, and reports it as
    the ReLU's output."""
    model = _mlp()
    monkeypatch.setattr(chain, "intact", lambda *_: True)
    spy = Spy(monkeypatch)
    model[3].register_forward_hook(_relu_hook)
    with pytest.raises(ft.NonFiniteError) as raised:
        with ft.watch(model):
            mse(model, X)
    assert spy.kinds == ["chain"]
    assert (raised.value.module, raised.value.module_type, raised.value.direction,
            raised.value.inputs_nonfinite) == ("3", "ReLU", "forward", False)


def test_the_reads_of_a_chain_pass(monkeypatch):
    """In a chain pass the reads are the input, each Linear's output, the model output's gradient
    and each gradient a Linear makes for the ReLU before it: not the gradients the ReLUs make,
    nor the parameters'. A pass as any other's reads those too."""
    model = _mlp()
    for as_chain, count in ((True, 1 + 3 + 1 + 2), (False, 3 + 5 + 6)):
        with monkeypatch.context() as patch:
            if not as_chain:
                patch.setattr(watching.chain, "plan", lambda *_: None)
            addresses = read_addresses(patch)
            with ft.watch(model):
                mse(model, X)
            assert len(addresses) == count, as_chain
            grads = {p.grad.data_ptr() for p in model.parameters()}
            assert (grads & set(addresses) == set()) == as_chain


class _GradientTimes(torch.autograd.Function):
    """x unchanged forward, its gradient times `factor` backward."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


@pytest.mark.parametrize("made", ["scaled", "relu of scaled"])
def test_a_link_that_does_not_hold_leaves_the_gradient_read(monkeypatch, made):
    """Were a hook to slip past the pass's checks and hand the next Linear a tensor whose
    backward scales the gradient past float32's limit (made by that, or by a relu of it), the
    Linear output's gradient before it is not proven from the next Linear's: it is read, and
    its Inf found."""
    model = _mlp()
    monkeypatch.setattr(chain, "intact", lambda *_: True)
    spy = Spy(monkeypatch)
    if made == "scaled":
        model[1].register_forward_hook(lambda m, a, o: _GradientTimes.apply(o, 1e38))
    else:
        model[1].register_forward_hook(lambda m, a, o: torch.relu(_GradientTimes.apply(o, 1e38)))
    with pytest.raises(ft.NonFiniteError) as raised:
        with ft.watch(model):
            model.zero_grad(set_to_none=True)
            (model(X) * 100).sum().backward()
    assert spy.kinds == ["chain"]
    assert (raised.value.module, raised.value.module_type, raised.value.tensor) == (
        "1", "ReLU", "gradient of input[0]")


@pytest.mark.parametrize("which", ["weight", "bias"])
def test_a_sum_over_many_rows_that_overflows(monkeypatch, which):
    """Each term of the parameter's gradient (a sum over 4096 rows) is finite, 8 binades or more
    below float32's limit, their sum +Inf: the bound counts the rows' 12 binades, and the
    gradient is read."""
    model = _mlp(widths=(4, 4, 3))
    with torch.no_grad():  # the second Linear's input is the model's, bounded from the first's
        model[0].weight.copy_(torch.eye(4))
        model[0].bias.zero_()
    x = torch.full((4096, 4), 2.0 ** 60 if which == "weight" else 2.0 ** -60)
    found, grads = _both(model, x, scaled(2.0 ** (57 if which == "weight" else 117)),
                         monkeypatch)
    assert _non_finite(grads)
    assert (found.module, found.tensor) == ("2", f"gradient of {which}")


def test_a_backward_under_autocast_is_read(monkeypatch):
    """A float32 forward outside autocast (a chain pass), its backward inside CPU autocast to
    float16: the node's mm runs in half and overflows, then is cast back to float32."""
    def step(model, x):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            with torch.autocast("cpu", enabled=False):
                out = model(x)
            (out.float() * 4).sum().backward()
    model = _mlp(widths=(64, 64))
    found, grads = _both(model, torch.full((4, 64), 3e4), step, monkeypatch)
    assert _non_finite(grads) and found.tensor == "gradient of weight"


def test_a_second_backward_of_a_pass_under_autocast_is_read(monkeypatch):
    """The same chain pass backwarded twice: first as it ran (nothing found), then inside CPU
    autocast to float16, whose mm overflows. What the first backward learnt of modes and
    autocast is not the second's."""
    def step(model, x):
        model.zero_grad(set_to_none=True)
        out = model(x)
        (out * 4).sum().backward(retain_graph=True)
        assert all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            (out.float() * 4).sum().backward()
    model = _mlp(widths=(64, 64))
    found, grads = _both(model, torch.full((4, 64), 3e4), step, monkeypatch)
    assert _non_finite(grads) and found.tensor == "gradient of weight"


def _parameter_before_input_model():
    model = _mlp(widths=(4, 4, 3))
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(4))
        model[0].bias.zero_()
        model[2].weight.fill_(2.0 ** 60)
        model[2].bias.zero_()
    return model


def test_a_parameter_gradient_is_found_before_the_input_gradient_of_the_same_node(monkeypatch):
    """The last Linear's backward makes an Inf in its bias's gradient (g summed over the rows)
    and in its input's (g @ W): watch's hooks on every module meet the bias's first (autograd
    accumulates a parameter's gradient before it runs the ReLU's backward, where the input's
    gradient is read), and so does the chain (the input's gradient, read in the node's
    post-hook, is reported at the next node's)."""
    model = _parameter_before_input_model()
    found, grads = _both(model, torch.full((8, 4), 2.0 ** -60), scaled(2.0 ** 125), monkeypatch)
    assert not bool(torch.isfinite(grads["2.bias"]).all())
    assert (found.module, found.tensor) == ("2", "gradient of bias")


def test_a_finding_held_for_the_next_node_does_not_outlive_its_backward(monkeypatch):
    """The backward above raises at the bias's gradient with the input's held for the next node;
    a second backward of the retained graph, finite, finds nothing: the held finding was that
    backward's."""
    model = _parameter_before_input_model()

    def step(model, x):
        model.zero_grad(set_to_none=True)
        out = model(x)
        with pytest.raises(ft.NonFiniteError):
            (out * 2.0 ** 125).sum().backward(retain_graph=True)
        model.zero_grad(set_to_none=True)
        out.sum().backward()
    found, grads = _both(model, torch.full((8, 4), 2.0 ** -60), step, monkeypatch)
    assert found is None and not _non_finite(grads)
    chained, other = _both.findings
    assert len(chained) == len(other) == 1 and _same(chained[0], other[0])


# -- what a pass checks anew (an independent review's scenarios) --------------------------------

def _second_use(stash):
    """A step whose loss also uses, times NaN, the tensor `stash` holds once the forward ran:
    a second consumer of an intermediate."""
    def step(model, x):
        model.zero_grad(set_to_none=True)
        (model(x).square().mean() + (stash[0] * NAN).sum()).backward()
    return step


def _instance_forward(model, x):
    stash, linear = [], model[2]

    def forward(h):
        stash.append(h)
        return torch.nn.functional.linear(h, linear.weight, linear.bias)
    linear.forward = forward
    _second_use(stash)(model, x)


def _class_forward(model, x):
    stash, torch_own = [], nn.ReLU.forward

    def forward(self, h):
        stash.append(torch_own(self, h))
        return stash[-1]
    nn.ReLU.forward = forward
    try:
        _second_use(stash)(model, x)
    finally:
        nn.ReLU.forward = torch_own


class _Probe(nn.Module):
    def __init__(self, stash):
        super().__init__()
        self.stash = stash

    def forward(self, h):
        self.stash.append(h)
        return h


def _inserted(model, x):
    stash = []
    model.insert(2, _Probe(stash))
    _second_use(stash)(model, x)


def _deleted(model, x):
    del model[4]
    scaled(NAN)(model, x)


def _relu_made_in_place(model, x):
    model[1].inplace = True
    scaled(1e38)(model, x)


def _weight_replaced(model, x):
    model[2].weight = nn.Parameter(model[2].weight.detach() * 1e37)
    scaled(10.0)(model, x)


@pytest.mark.parametrize("step", [_instance_forward, _class_forward, _inserted, _deleted,
                                  _relu_made_in_place, _weight_replaced],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_model_changed_inside_the_context_is_no_chain(monkeypatch, step):
    """The plan is made as the context is entered; each pass checks that the model is still
    that chain (layers, forwards, parameters, ReLUs not in place): a layer's forward set or
    patched, a layer inserted or deleted inside the context end the chain's passes."""
    found, grads = _both(_mlp(), X, step, monkeypatch, chain_expected=False)
    if _non_finite(grads):
        assert found is not None


class _Scaled(nn.Parameter):
    """A parameter whose torch function feeds F.linear its input times 2**100."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            if func is torch.nn.functional.linear:
                return func(args[0] * 2.0 ** 100, *args[1:], **(kwargs or {}))
            return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("which", ["weight", "bias"])
def test_a_parameter_of_a_subclass_makes_no_chain(monkeypatch, which):
    model = _mlp()
    with torch.no_grad():
        model[4].weight.mul_(2.0 ** -60)
    setattr(model[4], which, _Scaled(getattr(model[4], which).detach().clone()))
    with ft.watch(model) as w:
        assert w._plan is None
    found, grads = _both(model, X, scaled(2.0 ** 60), monkeypatch, chain_expected=False)
    assert _non_finite(grads) and found is not None


def test_a_layer_called_alone_after_a_pass_that_raised(monkeypatch):
    """A forward that raised (a wrong width) ends its pass: the first layer called on its own
    afterwards is checked as any module, its output's gradient its own."""
    def step(model, x):
        with pytest.raises(RuntimeError):
            model(torch.randn(7, 5))
        model.zero_grad(set_to_none=True)
        (model[0](x) * NAN).sum().backward()
    found, _ = _both(_mlp(), X, step, monkeypatch)
    assert (found.module, found.tensor, found.inputs_nonfinite) == ("0", "gradient of output", True)


def test_a_middle_layer_called_alone_after_a_pass_that_raised(monkeypatch):
    def step(model, x):
        model[2].double()  # the pass raises inside the second Linear
        with pytest.raises(RuntimeError):
            model(x)
        model[2](torch.full((7, 8), NAN, dtype=torch.float64))
    found, _ = _both(_mlp(), X, step, monkeypatch)
    assert (found.module, found.direction, found.inputs_nonfinite) == ("2", "forward", True)


def test_a_pass_interrupted_keeps_no_graph_once_the_context_is_left(monkeypatch):
    """A KeyboardInterrupt inside a chain's forward skips torch's always-called hooks (which
    run on Exception only): leaving the context still lets go of the pass's autograd nodes, and
    with them the graph and the input it saved."""
    model, x = _mlp(widths=(6, 8, 8, 8, 5)), X.clone()
    relu = torch.nn.functional.relu

    def interrupted(t, *args, **kwargs):
        if interrupted.calls == 1:
            raise KeyboardInterrupt
        interrupted.calls += 1
        return relu(t, *args, **kwargs)
    interrupted.calls = 0
    spy = Spy(monkeypatch)
    alive = weakref.ref(x)  # the first Linear's node saves it
    with ft.watch(model) as watched:  # (kept: the pass is its thread-local's)
        with monkeypatch.context() as patch:
            patch.setattr(torch.nn.functional, "relu", interrupted)
            with pytest.raises(KeyboardInterrupt):
                model(x)
    del x
    assert spy.kinds == ["chain"] and interrupted.calls == 1
    assert alive() is None and not watched.findings


def test_a_hook_on_the_model_output_is_met_after_the_read(monkeypatch):
    """The model output's gradient is read as it arrives, before a hook the caller puts on the
    output changes it: the change is found where it goes next (the bias's gradient, made from
    it), as with watch's hooks on every module."""
    def step(model, x):
        model.zero_grad(set_to_none=True)
        out = model(x)
        out.register_hook(lambda g: g * NAN)
        out.sum().backward()
    found, _ = _both(_mlp(), X, step, monkeypatch)
    assert (found.module, found.tensor) == ("4", "gradient of bias")


def test_a_hook_on_the_model_output_that_scales_its_gradient(monkeypatch):
    """The gradient read (2 out) is not the one the last Linear's node used (3e38 times that): its
    bound does not bound that node's weight gradient, which is read, and found +-Inf."""
    def step(model, x):
        model.zero_grad(set_to_none=True)
        out = model(x)
        out.register_hook(lambda g: g * 3e38)
        out.square().sum().backward()
    found, grads = _both(_mlp(bias=False), X * 4, step, monkeypatch)
    assert not bool(torch.isfinite(grads["4.weight"]).all())
    assert (found.module, found.tensor) == ("4", "gradient of weight")


def test_a_hook_of_the_callers_that_raises_leaves_the_output_unchecked():
    """A model whose forward returned, and whose own forward hook (before watch's) raised: the
    output never reached the caller and watch neither checks it nor warns (the hook that ends a
    chain's pass is a chain's alone, and checks nothing)."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 3)

        def forward(self, x):
            return self.linear(x) * INF

    def raising(module, args, output):
        raise KeyError("the caller's hook")
    model = Scaled()
    model.register_forward_hook(raising)
    import warnings
    for kwargs in ({}, {"collect": True}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with ft.watch(model, **kwargs) as w:
                with pytest.raises(KeyError):
                    model(torch.randn(2, 3))
        assert w.findings == []


def test_a_model_whose_register_method_takes_no_always_call():
    class Older(nn.Sequential):
        def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
            return super().register_forward_hook(hook, prepend=prepend, with_kwargs=with_kwargs)
    model = Older(nn.Linear(3, 3))
    with ft.watch(model) as w:
        model(torch.randn(2, 3)).sum().backward()
    assert w.findings == [] and w._plan is None
