"""fpclass.torch.watch on a torch.compile'd model, as the first fpclass call of a fresh process
(dynamo must not trace into fpclass's kernels): a short training loop entering watch every
step, a NaN gradient planted in a parameter, names as in the uncompiled model, no warnings.
The aot_eager backend runs dynamo and AOTAutograd without a C++ compiler."""

import pytest

from compiled_runs import run_compiled

torch = pytest.importorskip("torch")

SCRIPT = r"""
import json, math, sys, warnings
import torch
nn = torch.nn
import fpclass.torch as ft

class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Parameter(torch.ones(4))
    def forward(self, x):
        return x * self.g.sqrt()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), Scale(), nn.Linear(4, 1))
model[3] = torch.compile(model[3], backend="aot_eager")   # a compiled submodule inside
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)
out = {"steps": 0}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for step in range(4):
        if step == 3:
            with torch.no_grad():
                model[2].g[1] = 0.0        # sqrt's slope at 0: an infinite gradient of g
        try:
            with ft.watch(compiled, optimizer=opt):
                opt.zero_grad()
                compiled(x).square().mean().backward()
                opt.step()
            out["steps"] += 1
        except ft.NonFiniteError as err:
            out["error"] = [err.module, err.module_type, err.direction, err.tensor, err.born_here]
            out["counts"] = err.counts
    with ft.watch(compiled, raise_on=False) as w:
        compiled(x * math.nan)
    out["forward"] = [f.module for f in w.findings]
out["warnings"] = [str(w.message)[:200] for w in caught]
print(json.dumps(out))
"""


def test_watch_is_the_first_fpclass_call_on_a_compiled_model():
    out = run_compiled(SCRIPT)
    assert out["steps"] == 3
    assert out["error"] == ["2", "Scale", "backward", "gradient of g", True]
    assert sum(out["counts"].values()) == 1  # g[1] only
    assert out["forward"] == ["0", "1", "2", "3"]
    assert out["warnings"] == []


BACKWARD_INSIDE = r"""
import json, math, warnings
import torch
nn = torch.nn
import fpclass.torch as ft
PREAMBLE

class Log(nn.Module):
    def forward(self, x):
        return torch.log(x.abs() + 1.0)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4), Log(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the weights stay: each step's truth alike

def train(x):
    opt.zero_grad()
    model(x).sum().backward()

compiled = torch.compile(train, backend="aot_eager")
x = torch.rand(8, 4)
out = {"eager": [], "compiled": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for step in range(12):  # past dynamo's recompile limit (8)
        xi = x * math.nan if step == 5 else (x * math.inf if step == 9 else x)
        for name, run in (("compiled", compiled), ("eager", train)):
            with ft.watch(model, raise_on=False) as w:
                run(xi)
            # (sorted: the compiled backward may accumulate a weight before its bias)
            out[name].append(sorted([f.module, f.direction, f.tensor] for f in w.findings))
out["warnings"] = [str(w.message)[:200] for w in caught]
print(json.dumps(out))
"""


NO_STRATEGIES = """
import torch._dynamo, torch._C._dynamo.eval_frame as frames
def refused(*args):
    raise TypeError("no execution strategies in this torch")
frames.set_code_exec_strategy = refused  # (dynamo, loaded, keeps its own)
"""


@pytest.mark.parametrize("preamble", ["", NO_STRATEGIES], ids=["strategies", "disable"])
def test_a_backward_inside_a_compiled_function_calls_the_hooks_eagerly(preamble):
    """torch.compile around the whole step, backward inside: autograd calls watch's gradient
    hooks with dynamo's frame callback active, which must not trace into fpclass (it did: a
    numba typing error from dynamo's converted arguments). The findings are the eager run's,
    step by step, with no warning: with torch's per-code skip strategy, and with
    torch.compiler.disable's wrapper where torch has none."""
    out = run_compiled(BACKWARD_INSIDE.replace("PREAMBLE", preamble))
    assert out["warnings"] == []
    assert out["compiled"] == out["eager"]
    assert out["eager"][5] and out["eager"][9]  # the planted steps found something
    assert not any(out["eager"][s] for s in (0, 1, 2, 3, 4, 6, 7, 8, 10, 11))
    assert any(f[1] == "backward" for f in out["eager"][5])


WATCH_INSIDE = r"""
import json, math, warnings
import torch
nn = torch.nn
import fpclass.torch as ft

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

STEP

compiled = torch.compile(step, backend="aot_eager")
clean, planted = torch.rand(2, 4), torch.rand(2, 4)
planted[0, 0] = math.nan
out = {"eager": [], "compiled": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for x in (clean, planted, clean, planted):
        out["eager"].append(sorted(step(x)))
        out["compiled"].append(sorted(compiled(x)))
out["left"] = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
out["warnings"] = [str(w.message)[:200] for w in caught]
out["plans"] = sorted(set(PLANS))
print(json.dumps(out))
"""


WATCHED_STEPS = {
    # every module's hooks and inputs' checks, every finding recorded
    "check_inputs": """
PLANS = []

def step(x):
    with ft.watch(model, raise_on=False, check_inputs=True) as w:
        model(x).sum().backward()
    return [[f.module, f.direction, f.tensor] for f in w.findings]
""",
    # the model a chain (fpclass.torch.chain), the first finding raised
    "chain": """
def step(x):
    try:
        with ft.watch(model):
            model(x).sum().backward()
    except ft.NonFiniteError as error:
        return [[error.module, error.direction, error.tensor]]
    return []

PLANS = []
_enter = ft.watch.__enter__
def remembered(self):  # (the plan each entering made: the chain's, or None)
    entered = _enter(self)
    PLANS.append(type(self._plan).__name__)
    return entered
ft.watch.__enter__ = remembered
"""}


@pytest.mark.parametrize("watched", list(WATCHED_STEPS))
def test_a_watch_entered_inside_a_compiled_function(watched):
    """The context entered inside the compiled function: dynamo traces the entering, so its hooks
    go through torch's register methods (dynamo knows them; written into torch's tables
    directly, they went into dynamo's copy: a hook lost, an AttributeError). The findings are
    eager's, and no hook is left; a chain is entered as one."""
    out = run_compiled(WATCH_INSIDE.replace("STEP", WATCHED_STEPS[watched]))
    assert out["plans"] == (["Plan"] if watched == "chain" else [])
    assert out["warnings"] == []
    assert out["compiled"] == out["eager"]
    assert out["eager"][1] and not out["eager"][0]
    assert out["left"] == 0
