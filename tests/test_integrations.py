"""fpclass.integrations without the training frameworks: the callbacks' policy (guard) on plain
tensors, its argument checks, and the ImportError each callback module raises, naming its extra,
when its framework is missing."""

import importlib
import math

import pytest

from test_extras import forget, hide, install_message

from fpclass.integrations.guard import Guard, NonFiniteTrainingError


def test_importing_the_package_imports_no_framework(monkeypatch):
    hide(monkeypatch, "lightning", "transformers")
    forget(monkeypatch, "fpclass.integrations")
    importlib.import_module("fpclass.integrations")
    importlib.import_module("fpclass.integrations.guard")


@pytest.mark.parametrize("module, framework, extra", [
    ("fpclass.integrations.lightning", "lightning", "lightning"),
    ("fpclass.integrations.transformers", "transformers", "transformers"),
])
def test_each_callback_names_its_extra_when_its_framework_is_missing(monkeypatch, module,
                                                                     framework, extra):
    hide(monkeypatch, framework)
    forget(monkeypatch, module)
    with pytest.raises(ImportError, match=install_message(extra)):
        importlib.import_module(module)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"on_nonfinite": "warn"}, ValueError, "'raise', 'stop', 'skip'"),
    ({"fail_on": "nan,zero"}, ValueError, "unknown --fail-on class 'zero'"),
    ({"ignore": [1]}, TypeError, "ignore must be a glob"),
    ({"max_findings": -1}, ValueError, "max_findings"),
])
def test_bad_arguments_name_what_is_accepted(kwargs, error, message):
    with pytest.raises(error, match=message):
        Guard(**kwargs)


def test_the_guard_names_each_tensor_with_its_classes_counts_and_first_index():
    torch = pytest.importorskip("torch")
    grads = {"a": torch.tensor([1.0, math.nan, math.inf, -math.inf, math.nan]),
             "b.bias": torch.zeros(3), "c": torch.tensor([[0.0, 0.0], [-math.inf, 1.0]]),
             "none": None}
    guard = Guard("stop")
    found = guard.tensors("gradient", grads.items(), 7)
    truth = {k: {"nan": int(torch.isnan(v).sum()), "posinf": int(torch.isposinf(v).sum()),
                 "neginf": int(torch.isneginf(v).sum())}
             for k, v in grads.items() if v is not None and not bool(torch.isfinite(v).all())}
    assert {f.name: f.counts for f in found} == truth
    assert {f.name: f.first for f in found} == {"a": (1,), "c": (1, 0)}
    assert {(f.kind, f.step) for f in found} == {("gradient", 7)} and guard.findings == found
    assert guard.respond(found, can_skip=True) == "stop"
    assert Guard("skip").respond(found, can_skip=True) == "skip"
    assert Guard("skip").respond(found, can_skip=False) == "stop"
    with pytest.raises(NonFiniteTrainingError,
                       match=r"^step 7: gradient 'a' holds 2 NaN, 1 \+Inf, 1 -Inf, first at \[1\] "
                             r"\(and 1 more\)$"):
        Guard().respond(found, can_skip=True)
    assert Guard(fail_on="inf").tensors("g", [("x", torch.tensor([math.nan]))], 1) == []
    assert Guard(ignore=["a", "c*"]).tensors("g", grads.items(), 1) == []
    kept = Guard(max_findings=1)
    assert len(kept.tensors("g", grads.items(), 1)) == 2 and len(kept.findings) == 1


def test_tensors_off_the_host_are_screened_there_and_only_non_finite_ones_copied():
    torch = pytest.importorskip("torch")

    class OnDevice(torch.Tensor):
        """Stands for a tensor on an accelerator (this machine has none): not is_cpu, and
        counting its copies to the host."""
        copies = 0

        @property
        def is_cpu(self):
            return False

        def cpu(self):
            OnDevice.copies += 1
            return self.as_subclass(torch.Tensor)

    bad = torch.tensor([1.0, math.nan, math.inf, math.nan])
    named = [("bad", bad.as_subclass(OnDevice)), ("fine", torch.zeros(5).as_subclass(OnDevice)),
             ("host", torch.tensor([-math.inf]))]
    found = Guard("stop").tensors("gradient", named, 3)
    assert {f.name: (f.counts, f.first) for f in found} == {
        "bad": ({"nan": int(torch.isnan(bad).sum()), "posinf": 1, "neginf": 0}, (1,)),
        "host": ({"nan": 0, "posinf": 0, "neginf": 1}, (0,))}
    assert OnDevice.copies == 2   # the screen's flags, once for all; the one non-finite tensor
