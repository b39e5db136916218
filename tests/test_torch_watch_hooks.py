"""How fpclass.torch.watch hooks a model: one forward hook a watched module, registered when the
context is entered (after the user's own hooks, and on DataParallel's replicas, which copy a
module's hooks); modules outside the model are never reported; no hook is left after the
context, nor after a context that failed to enter. torch's isfinite on the same tensors is the
truth."""

import functools
import threading

import pytest
from compiled_runs import run_compiled
from switching import run_switching

import fpclass.torch as ft

torch = pytest.importorskip("torch")
nn = torch.nn


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


def planted():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Tanh(), Log()), nn.Linear(4, 3),
                         nn.ReLU())


def bad_outputs(model, x):
    """The names of the modules whose forward output holds NaN / Inf, by torch, in the order
    they return; a container returning its last child's tensor is that child's finding."""
    names = {m: n for n, m in model.named_modules()}
    bad, seen = [], []

    def note(m, a, out):
        if not torch.isfinite(out).all() and not any(out is s for s in seen):
            bad.append(names[m])
        seen.append(out)

    handles = [m.register_forward_hook(note) for m in model.modules()]
    model(x)
    for h in handles:
        h.remove()
    return bad


def hooks_left(model) -> int:
    """Entries left in the modules' hook tables (their kwargs flags too) and the parameters'."""
    tables = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
              "_forward_pre_hooks_with_kwargs")
    return sum(len(getattr(m, t)) for m in model.modules() for t in tables) + sum(
        len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in model.parameters())


def test_torchs_own_register_methods_where_its_tables_differ(monkeypatch):
    """watch writes torch's hook tables directly (hook_tables); where they are not as it expects
    (another torch), it registers through torch's methods: the same findings, forward and
    backward, inputs checked too, and no hook left either way."""
    from fpclass.torch import hook_tables
    x = torch.randn(8, 4)
    found = []
    made = hook_tables._torch()
    assert made[0] is not None  # this torch's tables are written directly
    for tables in (made, [None, *made[1:]]):
        monkeypatch.setattr(hook_tables, "_TORCH", tables)
        model = planted()
        with ft.watch(model, raise_on=False, check_inputs=True) as w:
            model(x).sum().backward()
        assert hooks_left(model) == 0
        found.append([(f.module, f.direction, f.tensor) for f in w.findings])
    assert found[0] == found[1]
    assert {f[1] for f in found[0]} == {"forward", "backward"}


class Registering(nn.Module):
    """A module class with register methods of its own (a proxy, a framework's wrapper)."""

    def __init__(self):
        super().__init__()
        self.inner, self.calls = nn.Linear(2, 2), []

    def register_forward_hook(self, hook, **options):
        self.calls.append("forward")
        return super().register_forward_hook(hook, **options)

    def register_forward_pre_hook(self, hook, **options):
        self.calls.append("pre")
        return super().register_forward_pre_hook(hook, **options)

    def forward(self, x):
        return self.inner(x)


def test_a_class_of_its_own_registers_through_its_own_methods():
    """A class that has its own register methods is hooked through them (the tables are written
    directly only for classes that keep torch's); a ScriptModule refuses hooks as it did, with
    torch's error, instead of being watched at its root alone."""
    model = Registering()
    with ft.watch(model, raise_on=False, check_inputs=True) as w:
        model(torch.full((2,), float("nan")))
    assert model.calls == ["pre", "forward", "pre"]  # its input check, its check, the pass start
    assert [f.module for f in w.findings if f.tensor == "output"] == ["inner"]  # (its root's too)
    assert hooks_left(model) == 0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (torch.jit.script's own)
        scripted = torch.jit.script(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    with pytest.raises(RuntimeError, match="not supported on ScriptModules"):
        with ft.watch(scripted):
            pass
    assert hooks_left(scripted) == 0


def test_the_findings_are_torchs_and_no_hook_is_left():
    x = torch.randn(8, 4)
    model = planted()
    with ft.watch(model, raise_on=False) as w:
        model(x).sum().backward()
    forward = [f.module for f in w.findings if f.direction == "forward"]
    assert forward == bad_outputs(planted(), x)
    assert forward[0] == "1.1" and w.findings[0].born_here
    assert hooks_left(model) == 0


def test_a_users_own_forward_hook_runs_before_watch_looks():
    # the user's hook (registered before watch) cleans Log's output: watch sees the clean one
    x = torch.randn(8, 4)
    model = planted()
    cleaned = []
    model[1][1].register_forward_hook(
        lambda m, a, out: cleaned.append(torch.nan_to_num(out)) or cleaned[-1])
    with ft.watch(model, raise_on=False) as w:
        model(x).sum().backward()
    assert cleaned and torch.isfinite(cleaned[-1]).all()
    assert not [f for f in w.findings if f.direction == "forward"]
    truth = planted()
    assert "1.1" in bad_outputs(truth, x)  # without the user's hook, Log's output is not finite


def test_modules_outside_the_model_are_never_reported():
    x = torch.randn(8, 4)
    model, other = nn.Sequential(nn.Linear(4, 4), nn.Tanh()), planted()
    with ft.watch(model, raise_on=False) as w:
        out = other(x)
        model(x).sum().backward()
    assert not torch.isfinite(out).all() and w.findings == []
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(other):
        model(x)
        other(x)
    assert caught.value.module == "1.1"


def test_a_module_called_on_its_own_is_watched():
    model = planted()
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        model[1](torch.full((2, 4), -1.0))
    assert caught.value.module == "1.1" and caught.value.born_here


def test_a_data_parallel_replica_is_watched():
    # nn.parallel.replicate makes each replica by _replicate_for_data_parallel, which copies the
    # module's __dict__, its hooks among them
    model = Log()
    x = torch.full((2, 3), -1.0)
    assert not torch.isfinite(model(x)).all()
    with pytest.raises(ft.NonFiniteError) as caught, ft.watch(model):
        model._replicate_for_data_parallel()(x)
    assert caught.value.module == "" and caught.value.module_type == "Log"


class FailingOptimizer:
    """Has an optimizer's hook method, which fails: the context fails to enter after the
    module and parameter hooks are registered."""

    def register_step_post_hook(self, hook):
        raise RuntimeError("no hooks here")


def test_a_context_that_fails_to_enter_leaves_no_hook():
    model = planted()
    with pytest.raises(RuntimeError, match="no hooks here"):
        with ft.watch(model, optimizer=FailingOptimizer()):
            pass
    assert hooks_left(model) == 0
    model(torch.full((2, 4), -1.0)).sum().backward()  # unwatched: nothing raises


COMPILED_FUNCTION = r"""
import json, math, warnings, torch
import fpclass.torch as ft
nn = torch.nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
fwd = torch.compile(lambda x: model(x), backend="aot_eager")
x = torch.randn(8, 4) * math.nan
truth = []  # torch's answer, eager and unwatched: the children whose output is not finite
hooks = [m.register_forward_hook(lambda m, a, o, n=n: truth.append(n)
                                 if not torch.isfinite(o).all() else None)
         for n, m in model.named_children()]
model(x)
for h in hooks:
    h.remove()
out = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):  # first traced inside the context, then again
        with ft.watch(model, raise_on=False) as w:
            fwd(x).sum().backward()
        out.append([[f.module, f.direction, f.tensor] for f in w.findings])
print(json.dumps({"findings": out, "truth": truth,
                  "warnings": [str(c.message)[:200] for c in caught]}))
"""


def test_a_compiled_function_first_traced_inside_the_context():
    out = run_compiled(COMPILED_FUNCTION)
    assert out["warnings"] == []
    first, second = out["findings"]
    assert first == second
    assert [f[0] for f in first if f[1] == "forward"] == out["truth"]


def test_each_pass_begins_before_any_other_hook_of_the_model():
    """The pass's start is the root's first pre-hook, ahead of the input checks registered
    before it: a NaN input met in each of two passes of one context is each pass's first
    finding, warned of twice."""
    import warnings
    model = planted()
    x = torch.full((2, 4), float("nan"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ft.watch(model, check_inputs=True, action="warn") as w:
            model(x)
            model(x)
    warned = [c for c in caught if issubclass(c.category, ft.NonFiniteWarning)]
    assert len(warned) == 2
    assert [f.tensor for f in w.findings].count("input[0]") == 2


def test_a_hook_met_as_another_thread_removes_it_does_nothing():
    """torch's call of a module snapshots its hooks, then asks each one's kwargs flag: a hook
    another thread's context removes in between is called without its keyword arguments. Left,
    watch's hooks do nothing then (torch's own registration removes the hook first and its flag
    after, as watch's tables do)."""
    model = planted()
    with ft.watch(model, check_inputs=True):
        after = list(model._forward_hooks.values())
        before = list(model._forward_pre_hooks.values())
    x = torch.full((2, 4), float("nan"))
    for hook in after:
        assert hook(model, (x,), x) is None
    for hook in before:
        assert hook(model, (x,)) is None


class Logged(torch.Tensor):
    """A tensor subclass that reroutes torch's functions (and so torch's register methods,
    which call __torch_function__) and logs the hook registrations it meets."""

    met: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if "hook" in name:
            cls.met.append(name)
        return super().__torch_function__(func, types, args, kwargs or {})


class ToLogged(nn.Module):
    def forward(self, x):
        return x.as_subclass(Logged) * 1.0


def test_a_tensor_that_reroutes_torchs_functions_is_hooked_through_torchs_methods():
    """watch writes a tensor's or a parameter's hook table directly only for tensors that leave
    torch's functions alone; a subclass with a __torch_function__ of its own meets torch's
    register methods, as it did before, and the gradient is still checked."""
    model = nn.Sequential(nn.Linear(4, 4), ToLogged(), nn.Linear(4, 1))
    model[2].weight = nn.Parameter(model[2].weight.detach().as_subclass(Logged))
    Logged.met.clear()
    with ft.watch(model, raise_on=False) as w:
        model(torch.randn(2, 4)).sum().backward()
    assert "register_hook" in Logged.met
    assert "register_post_accumulate_grad_hook" in Logged.met
    assert w.findings == []
    assert hooks_left(model) == 0


def _spied_methods(monkeypatch, compiling: bool) -> list:
    """torch's four register methods replaced by spies that log each call, and hook_tables told
    the spies are torch's own (so a direct write stays possible) and whether torch.compile is
    tracing: the log."""
    from fpclass.torch import hook_tables
    made = hook_tables._torch()
    assert made[0] is not None, "this torch's hook tables are not as hook_tables expects"
    methods, calls = dict(made[1]), []
    for owner, name in ((nn.Module, "register_forward_hook"),
                        (nn.Module, "register_forward_pre_hook"),
                        (torch.Tensor, "register_post_accumulate_grad_hook"),
                        (torch.Tensor, "register_hook")):
        def spy(self, *args, _original=getattr(owner, name), _name=name, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(owner, name, spy)
        methods[name] = spy
    monkeypatch.setattr(hook_tables, "_TORCH", [made[0], methods, lambda: compiling, made[3]])
    monkeypatch.setattr(hook_tables, "_OWN", {})
    return calls


@pytest.mark.parametrize("compiling", [False, True])
def test_while_torch_compile_traces_every_hook_goes_through_torchs_methods(monkeypatch,
                                                                            compiling):
    """While torch.compile traces (dynamo writes into its own copy of the tables and knows
    torch's methods), each module's forward hooks, each parameter's hook and each gradient hook
    are registered through torch's methods; else none is. The findings are the same."""
    calls = _spied_methods(monkeypatch, compiling)
    model, x = planted(), torch.randn(8, 4)

    def step(model):  # NaN from Log forward, and from the seed at every gradient backward
        out = model(x)
        out.backward(torch.full_like(out, float("nan")))

    with ft.watch(model, raise_on=False, check_inputs=True) as w:
        step(model)
    assert hooks_left(model) == 0
    modules = len(list(model.modules()))
    if compiling:
        assert calls.count("register_forward_hook") == modules
        assert calls.count("register_forward_pre_hook") == modules + 1  # (the pass's start)
        assert calls.count("register_post_accumulate_grad_hook") == len(list(model.parameters()))
        assert calls.count("register_hook") >= 4  # (each module's output, at least)
    else:
        assert calls == []
    monkeypatch.undo()
    twin = planted()
    with ft.watch(twin, raise_on=False, check_inputs=True) as truth:
        step(twin)
    found = [(f.module, f.tensor) for f in w.findings]
    assert found == [(f.module, f.tensor) for f in truth.findings]
    assert {"output", "gradient of output", "gradient of weight"} <= {t for _, t in found}


class OwnHooks(torch.Tensor):
    """A tensor class with a register method of its own that leaves torch's functions alone."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    met: list = []

    def register_hook(self, hook):
        OwnHooks.met.append("register_hook")
        return super().register_hook(hook)


class OwnParameter(nn.Parameter):
    met: list = []

    def register_post_accumulate_grad_hook(self, hook):
        OwnParameter.met.append("register_post_accumulate_grad_hook")
        return super().register_post_accumulate_grad_hook(hook)


class ToOwn(nn.Module):
    def forward(self, x):
        return (x * 1.0).as_subclass(OwnHooks)


def test_a_tensor_class_with_register_methods_of_its_own_is_hooked_through_them():
    """A tensor or parameter class with its own register method (it may do more than torch's)
    is hooked through it, and its gradients are still checked."""
    model = nn.Sequential(nn.Linear(4, 4), ToOwn(), nn.Linear(4, 1))
    model[2].weight = OwnParameter(model[2].weight.detach())
    OwnHooks.met.clear()
    OwnParameter.met.clear()
    with ft.watch(model, raise_on=False) as w:
        model(torch.randn(2, 4)).sum().backward()
    assert OwnHooks.met == ["register_hook"]
    assert OwnParameter.met == ["register_post_accumulate_grad_hook"]
    assert w.findings == [] and hooks_left(model) == 0
    with ft.watch(model, raise_on=False) as w:
        out = model(torch.randn(2, 4))
        out.backward(torch.full_like(out, float("nan")))
    found = {(f.module, f.tensor) for f in w.findings}  # (NaN everywhere backward, by torch)
    assert {("2", "gradient of input[0]"), ("2", "gradient of weight")} <= found


def test_a_parameter_that_is_no_leaf_gets_torchs_error():
    """A tensor made by autograd in a module's parameter table cannot hold a post-accumulate
    hook: watch fails to enter with torch's own error and leaves no hook."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    model[1]._parameters["weight"] = model[1].weight * 1.0  # (no leaf: made by autograd)
    with pytest.raises(RuntimeError, match="non-leaf"):
        with ft.watch(model):
            pass
    assert hooks_left(model) == 0


@pytest.mark.parametrize("block", [1024, 2])
def test_hook_keys_never_meet_torchs_own(monkeypatch, block):
    """The keys hook_tables writes under come from torch's handle counter, a block at a time:
    hooks added by torch's register_hook in between, and across blocks, get numbers of their
    own, so no entry in the table replaces another and every hook runs."""
    from fpclass.torch import hook_tables
    monkeypatch.setattr(hook_tables, "_BLOCK_SIZE", block)
    monkeypatch.setattr(hook_tables, "_BLOCK", [0, 0, None])
    t = torch.zeros(3, requires_grad=True) * 1
    ran = []

    def hook(tag):
        return lambda g: ran.append(tag)

    ours = [hook_tables.add_tensor_hook(t, hook(("ours", i)))[1] for i in range(3)]
    assert hook_tables._BLOCK[2] is torch.utils.hooks.RemovableHandle  # written directly
    theirs = [t.register_hook(hook(("torch's", i))).id for i in range(3)]
    ours += [hook_tables.add_tensor_hook(t, hook(("ours", i)))[1] for i in range(3, 6)]
    assert len(set(ours) | set(theirs)) == 9
    t.sum().backward()
    assert sorted(ran) == sorted([("ours", i) for i in range(6)]
                                 + [("torch's", i) for i in range(3)])


def test_hook_keys_skip_numbers_a_table_holds(monkeypatch):
    """A handle unpickled from another process may hold a number of the block hook_tables has
    taken (torch's counter only moves past that handle's own number): a number the table holds
    is never used again, for a tensor's table and for a module's."""
    from fpclass.torch import hook_tables
    monkeypatch.setattr(hook_tables, "_BLOCK", [0, 0, None])
    t = torch.zeros(3, requires_grad=True) * 1
    ran = []
    first = hook_tables.add_tensor_hook(t, lambda g: ran.append("ours"))[1]
    for k in (first + 1, first + 2):  # as an unpickled handle's entries
        t._backward_hooks[k] = lambda g, k=k: ran.append(k)
    keys = [hook_tables.add_tensor_hook(t, lambda g: ran.append("ours"))[1] for _ in range(2)]
    assert not {first + 1, first + 2} & set(keys)
    t.sum().backward()
    assert sorted(map(str, ran)) == sorted(["ours"] * 3 + [str(first + 1), str(first + 2)])
    m, added = nn.Linear(2, 2), []
    nxt = hook_tables._BLOCK[0]
    m._forward_hooks[nxt] = lambda *a: None  # (an unpickled module's hook)
    hook_tables.add_module_hook(added, m, lambda *a: None)
    assert len(m._forward_hooks) == 2
    hook_tables.remove(added)
    assert list(m._forward_hooks) == [nxt]


def test_hook_keys_follow_the_counter(monkeypatch):
    """Keys come from the counter hook_tables is given now: another one (a torch whose handle
    class is another), or the same one moved back below the block, starts a block of its own
    and moves past it."""
    from fpclass.torch import hook_tables
    hook_tables.add_tensor_hook(torch.zeros(1, requires_grad=True) * 1, lambda g: None)

    class Counter:
        next_id = 10 ** 9

    monkeypatch.setattr(hook_tables, "_TORCH", [Counter, *hook_tables._torch()[1:]])
    key = hook_tables.add_tensor_hook(torch.zeros(1, requires_grad=True) * 1, lambda g: None)[1]
    assert key == 10 ** 9 and Counter.next_id > key
    Counter.next_id = 5  # moved back below the block (torch would hand out 5, 6, ... again)
    key = hook_tables.add_tensor_hook(torch.zeros(1, requires_grad=True) * 1, lambda g: None)[1]
    assert key == 5 and Counter.next_id > key


def test_threads_taking_keys_at_once_never_get_the_same(monkeypatch):
    """Six threads taking keys for one table at once, the interpreter switching between them as
    often as it can, blocks of 64 numbers: no key is handed out twice (a call between reading
    the block and moving it on, where the interpreter may switch threads, fails this)."""
    from fpclass.torch import hook_tables
    monkeypatch.setattr(hook_tables, "_BLOCK_SIZE", 64)
    counter = hook_tables._torch()[0]
    taken = [[] for _ in range(6)]

    def take(out):
        for _ in range(20000):
            out.append(hook_tables._key(counter, {}))
    run_switching([functools.partial(take, out) for out in taken])
    keys = [k for out in taken for k in out]
    assert len(keys) == 120000 and len(set(keys)) == len(keys)


def test_threads_entering_watches_of_one_model_at_once(monkeypatch):
    """Threads entering watches of one chain at once, the interpreter switching between them as
    often as it can, with blocks of 8 numbers (renewed under contention too): each watch finds
    all its hooks in torch's tables while entered (a chain's: one a layer and the model's two),
    and none is left after."""
    from fpclass.torch import hook_tables
    monkeypatch.setattr(hook_tables, "_BLOCK_SIZE", 8)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    missing = []

    def own(w) -> int:
        return sum(isinstance(h, functools.partial) and h.args[:1] == (w,)
                   for m in model.modules() for h in list(m._forward_hooks.values()))

    def work():
        for _ in range(200):
            with ft.watch(model) as w:
                if own(w) != 7:  # each layer's and the model's two
                    missing.append(own(w))
    run_switching([work] * 6)
    assert missing == []
    assert hooks_left(model) == 0


def test_a_thread_entering_while_another_fills_the_tables(monkeypatch):
    """The first watch of a process fills the rule tables; a thread entering a watch meanwhile
    (held here inside the first thread's filling until the second is done) enters, steps and
    leaves, and so does the first."""
    import time

    from fpclass.torch import watching
    for name, empty in (("_KEEP_FINITE", set()), ("_NORMS", {}), ("_MASKS", {}),
                        ("_LINEAR_MAPS", set()), ("_TORCH_FORWARD", {}), ("_TABLES", {}),
                        ("_TORCH_CONV_FORWARD", {})):
        monkeypatch.setattr(watching, name, empty)
    made, second_done, first_filling = watching.checker, threading.Event(), threading.Event()

    def checker(torch):  # called inside _fill_tables, near its end
        if threading.current_thread().name == "first" and not first_filling.is_set():
            first_filling.set()
            second_done.wait(30)
        return made(torch)
    monkeypatch.setattr(watching, "checker", checker)
    results = {}

    def step(name):
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        try:
            with ft.watch(model):
                model(torch.randn(2, 4)).sum().backward()
            results[name] = "stepped"
        except Exception as error:  # noqa: BLE001 (the test's finding)
            results[name] = f"{type(error).__name__}: {error}"
        finally:
            if name == "second":
                second_done.set()
    first = threading.Thread(target=step, args=("first",), name="first")
    first.start()
    assert first_filling.wait(30)
    second = threading.Thread(target=step, args=("second",), name="second")
    second.start()
    second.join(60)
    first.join(60)
    assert results == {"first": "stepped", "second": "stepped"}
