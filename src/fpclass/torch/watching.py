"""The watch context: forward hooks on every module, one tensor hook per tensor a module returns or
receives (the gradient flowing back through it; one more per version written in place), a
post-accumulate-grad hook per parameter, and optionally the optimizer's step. Pass state (what
this forward pass has met) lives per thread."""

from __future__ import annotations

import functools
import math
import sys
import threading
import weakref
from typing import NamedTuple

from . import chain, hook_tables, parameters
from .findings import Finding, NonFiniteError, Policy, selector
from .tensors import UNBOUNDED, argument_names, checker, input_tensors, mask_selector, tensors

__all__ = ["watch"]


class watch:
    """Context manager: hook every module of `model` (or those whose qualified names match
    `names`: a glob, a list of globs, or a predicate) and check each output as it is produced,
    and with `backward` each gradient flowing back through a module's outputs and inputs and
    (`grads`) each parameter's gradient once accumulated; with `optimizer`, its states and the
    parameters after each step. `check_inputs` also checks what each module receives, before it
    runs. Attention masks (arguments named by `masks`, default "*mask") may hold -Inf.
    `fail_on` names the classes that count ("nan", "inf", "posinf", "neginf"); findings at
    modules or parameters matching `ignore` are dropped. At the first finding of a pass,
    `action` "raise" raises NonFiniteError ("warn": a NonFiniteWarning; "pdb": the debugger,
    at that module), and the step goes on recording every finding in `.findings` (at most
    `max_findings`); with `collect=True`, "raise" waits for the context's end and raises with
    every finding; `raise_on=False` never raises. Leaving the context removes every hook."""

    def __init__(self, model, *, backward: bool = True, raise_on: bool = True, names=None,
                 check_inputs: bool = False, max_findings: int = 1000, grads: bool = True,
                 optimizer=None, masks=None, fail_on="nan,inf", ignore=None,
                 action: str = "raise", collect: bool = False):
        if not hasattr(model, "named_modules"):
            raise TypeError(f"watch takes a torch.nn.Module, got {type(model).__name__}")
        if optimizer is not None and not hasattr(optimizer, "register_step_post_hook"):
            raise TypeError("optimizer must be a torch.optim.Optimizer (watch hooks its step), "
                            f"got {type(optimizer).__name__}")
        self.model, self.backward, self.raise_on = model, backward, raise_on
        self.check_inputs, self.max_findings = check_inputs, max_findings
        self.grads, self.optimizer, self.collect = grads and backward, optimizer, collect
        self.selected, self._every_module = selector(names), names is None
        self.masked = mask_selector(masks)
        self.policy = Policy(fail_on, ignore, action)
        self.findings: list[Finding] = []
        self._handles: list = []
        self._active = False
        self._local = _UNENTERED  # (entering gives the context a thread-local of its own)
        self._last: _Pass | None = None
        self._holding: set = set()  # the passes holding gradients (_hold), any thread's
        # id(parameter) -> _Claim: its gradient as a Linear's node made it, finite
        # (_parameters_made), and the backward whose end drops them
        self._claims: dict = {}
        self._claims_task = None
        self._claimable: set = set()  # ids of the parameters whose gradients are hooked
        self._owners: dict = {}  # id(parameter) -> its owner as entered (parameters.owners)
        self._plan: chain.Plan | None = None

    # -- the context ---------------------------------------------------------------------------

    def __enter__(self) -> "watch":
        import torch
        if not _KEEP_FINITE:
            _fill_tables(torch)
        self._checker = checker(torch)
        self._finite = self._checker.finite
        self._magnitude = self._checker.magnitude
        self._tensor, self._grad_enabled = torch.Tensor, torch.is_grad_enabled
        # torch.nn.modules.module: its global hook tables, every module's hooks run before its own
        modules = self._module_globals = _TABLES["modules"]
        self._global_hooks = modules._global_forward_hooks
        self._first_of_context = len(self.findings)
        self._active = True
        self._local = threading.local()
        self._modules, self._arguments = {}, {}
        register = self._handles = []  # filled as registered: a failure below removes them
        try:
            self._plan = self._chain_plan(torch)
            self._register(register)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _register(self, register: list) -> None:
        """Registers every hook of the context into `register` as it goes."""
        plan = self._plan
        if plan is not None:
            return self._register_chain(register, plan)
        before, after, last_after = _opaque(watch._before), _opaque(watch._after), None
        root, selected = _unwrap(self.model), self.selected
        every = [(_clean(name), module) for name, module in root.named_modules()
                 if not _is_compiled(module)]
        hooks = []
        for name, module in every:
            if not (self._every_module or selected(name)):
                continue
            kind = type(module).__name__
            self._modules[name] = module
            if self.check_inputs:
                hook_tables.add_module_hook(
                    register, module, functools.partial(before, self, name, kind), pre=True,
                    with_kwargs=True)
            if module is root and last_after is None:  # the root's check also ends the pass:
                last_after = _opaque(watch._last_after)  # one hook less to add, call, remove
                hooks.append((module, functools.partial(last_after, self, name, kind)))
            else:
                hooks.append((module, functools.partial(after, self, name, kind)))
        hook_tables.add_forward_hooks(register, hooks)
        # the model's own hooks bracket each forward pass: a new pass forgets the last one's tensors
        hook_tables.add_module_hook(register, root,
                                    functools.partial(_opaque(watch._start), self), pre=True,
                                    prepend=True)
        if last_after is None:
            hook_tables.add_module_hook(register, root,
                                        functools.partial(_opaque(watch._end), self))
        self._owners = parameters.owners(every)
        self._register_parameters(register, parameters.hooked(self._owners, self._modules)
                                  if self.grads else ())

    def _register_chain(self, register: list, plan) -> None:
        """_register for a chain (`plan`): the same hooks, from the plan, which holds every
        module of the model once and every parameter (chain.plan). A layer's hook is its
        pass's (_chain_after); the pass also ends when the model's forward raises
        (_chain_end)."""
        root, chained = self.model, _opaque(watch._chain_after)
        kind = type(root).__name__
        layers = [(layer, functools.partial(chained, self, at, name, type(layer).__name__))
                  for at, (name, layer) in enumerate(zip(plan.names, plan.layers))]
        hook_tables.add_forward_hooks(register, [
            (root, functools.partial(_opaque(watch._last_after), self, "", kind)), *layers])
        hook_tables.add_module_hook(register, root,
                                    functools.partial(_opaque(watch._start), self), pre=True,
                                    prepend=True)
        hook_tables.add_module_hook(register, root,
                                    functools.partial(_opaque(watch._chain_end), self),
                                    always_call=True)
        derived = self._chain_derived(plan)
        self._modules = {"": root, **derived.layers}
        self._owners = derived.owners
        self._register_parameters(register, derived.hooked)
        self._claimable = derived.claimable

    def _chain_derived(self, plan) -> "_Derived":
        """What the chain `plan` gives entering (its layers by name, the parameters' owners, the
        parameters hooked and their claims), as the last watch on the model with these `grads`
        derived it while the plan is that watch's (chain.plan's `known`) and every parameter
        requires grad and has the shape it had: a watch is entered every step (deriving it again
        cost about 0.7% of the README's MLP step: docs/benchmarks.md, issue 22, thirty-first
        round)."""
        grads = self.grads
        key = tuple((p.requires_grad, p.shape) for pair in plan.params for p in pair
                    if p is not None)
        kept = _DERIVED.get(self.model)
        made = None if kept is None else kept.get(grads)
        if made is not None and made.plan is plan and made.key == key:
            return made
        layers = dict(zip(plan.names, plan.layers))
        owners = parameters.owners(layers.items())  # (the model holds none: chain.plan)
        hooked = parameters.hooked(owners, layers) if grads else []
        made = _Derived(plan, key, layers, owners, hooked, frozenset(map(id, hooked)))
        if grads:
            self._chain_claims(plan, made.claimable)
        _DERIVED.setdefault(self.model, {})[grads] = made
        return made

    def _register_parameters(self, register: list, hooked) -> None:
        """The hooks on the `hooked` parameters' gradients (with `grads`) and on the optimizer's
        step."""
        if self.grads:
            parameters.hook_gradients(
                hooked, functools.partial(_opaque(watch._parameter_gradient), self), register)
            self._claimable = frozenset(map(id, hooked))
        if self.optimizer is not None:
            register.append(self.optimizer.register_step_post_hook(
                functools.partial(_opaque(watch._step), self)))

    def __exit__(self, exc_type, exc, tb) -> None:
        state = getattr(self._local, "state", None)
        try:
            # what backwards that raised held, in any thread's pass: read now (a finding raises
            # unless the context is left by an exception already, which is not replaced)
            if self._active:
                for holding in list(self._holding):
                    self._read_held(holding)
        except NonFiniteError:
            if exc_type is None:
                raise
        finally:
            for holding in self._holding:
                _let_go(holding)
            self._holding.clear()
            self._active = False
            self._claims.clear()
            hook_tables.remove(self._handles)
            if state is not None:
                state.forget()
        new = self.findings[self._first_of_context:]
        if (exc_type is None and new and self.collect and self.raise_on
                and self.policy.action == "raise"):
            raise NonFiniteError(new[0], new)

    def _argument_names(self, name) -> tuple:
        """The names of module `name`'s forward parameters, read when first needed (a finding,
        check_inputs): entering every step does not pay for them."""
        names = self._arguments.get(name)
        if names is None:
            names = self._arguments[name] = argument_names(self._modules[name])
        return names

    # -- pass state ----------------------------------------------------------------------------

    def _pass(self) -> "_Pass":
        state = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = self._last = _Pass()
        return state

    def _start(self, module, args):
        # an earlier pass's tensor hooks stay with its graph, disarmed once the context is left;
        # its tensors go now, had it no end (its forward raised): they hold those hooks
        earlier = getattr(self._local, "state", None)
        if earlier is not None:
            earlier.forget()
        # a backward that raised, or one still running (a checkpoint's forward run again inside
        # it), held gradients for this thread's passes: read them
        thread = threading.get_ident()
        for state in [s for s in self._holding if s.thread == thread]:
            self._read_held(state)
        state = self._local.state = self._last = _Pass()
        state.chain = self._chain_pass(args) if self._plan is not None else None
        if self._claims:  # those of a backward that raised (its end dropped none): their memory
            self._claims.clear()
        self._checker.pass_started()

    def _end(self, module, args, output):
        self._pass().forget()

    def _last_after(self, name, kind, module, args, kwargs, output=None):
        """The root's check, then the pass's end (not reached when the check raises, as when
        they were two hooks)."""
        if not self._active:
            return
        state = getattr(self._local, "state", None) or self._pass()
        passing = state.chain
        if passing is not None:
            state.chain = None
            last, passing.last = passing.last, None
            if passing.nodes:
                self._hook_nodes(state, passing)
            if (passing.live and passing.at == len(passing.plan.layers) and last is not None
                    and output is last[0]):
                # the last Linear's output, checked there: its gradient is read as it arrives,
                # before any hook the caller adds to it
                if self.backward:
                    hook_tables.add_tensor_hook(output, functools.partial(
                        _opaque(watch._chain_output_gradient), self, state, passing))
                state.forget()
                return
        self._after(name, kind, module, args, kwargs, output)
        state.forget()

    # -- a chain (chain.py): one forward hook and one node hook a Linear ----------------------

    def _chain_end(self, module, args, output=None):
        """The model's last forward hook, called when its forward or a hook raised too
        (always_call): a chain pass still open ends there, unchecked (a layer called on its own
        afterwards is checked as any module)."""
        state = getattr(self._local, "state", None)
        passing = None if state is None else state.chain
        if passing is not None:
            state.chain, passing.last = None, None

    def _chain_plan(self, torch):
        """The model's chain.Plan when this watch may check its passes as a chain: it checks
        every module, no input, raises at the first finding of any class and ignores none
        (the chain's hooks find only what they must: the first finding), else None."""
        policy = self.policy
        if (not self._every_module or self.check_inputs or not self.raise_on or self.collect
                or policy.action != "raise" or not policy.everything or policy.ignoring
                or _unwrap(self.model) is not self.model
                or not hasattr(self.model, "_forward_hooks_always_called")):  # (_chain_end's)
            return None
        kept = _DERIVED.get(self.model)
        known = None if kept is None else kept.get(self.grads)
        plan = chain.plan(torch, self.model, _TORCH_FORWARD, self._checker.plain,
                          None if known is None else known.plan)
        if known is not None and plan is not known.plan:  # (it held what the model let go)
            kept.pop(self.grads, None)
        # (a layer named as torch.compile's wrapper: the name watch reports differs)
        return None if plan is None or any(_clean(n) != n for n in plan.names) else plan

    def _chain_claims(self, plan, claimable) -> None:
        """For each of the plan's Linears, the weight and bias whose gradients its node may
        claim (_chain_backward; None: read), as _parameters_backward asks of them (`claimable`:
        the ids of the parameters whose gradients are hooked)."""
        plain, claims = self._checker.plain, []
        for weight, bias in plan.params:
            if not (type(weight) in plain and weight.dim() == 2 and id(weight) in claimable):
                weight = None
            if not (weight is not None and type(bias) in plain
                    and bias.shape == weight.shape[:1] and id(bias) in claimable):
                bias = None
            claims.append((weight, bias))
        plan.claims = claims

    def _chain_pass(self, args):
        """A chain.Pass for the forward pass starting with `args`, or None (a pass as any
        other's): one plain 2-d CPU tensor of the Linears' dtype that requires no grad,
        autograd recording, no mode, autocast or saved-tensor hook to change what the
        operations compute or save, torch's own F.linear, and the model the chain it was when
        entered, with no hook but watch's (chain.intact)."""
        plan = self._plan
        x = args[0] if len(args) == 1 else None
        if (type(x) is not self._tensor or x.dim() != 2 or x.dtype != plan.dtype
                or not x.is_cpu or x.requires_grad or not self._grad_enabled() or _modes()
                or _TABLES["autocast"]() or _TABLES["saved_hooks"](False) is not None
                or not _torch_functions(_LINEAR_ROUTES)
                or not chain.intact(plan, self.model, self._module_globals)):
            return None
        passing = chain.Pass(plan)
        passing.terms = _sum_terms(x.shape[0])
        return passing

    def _chain_after(self, at, name, kind, module, args, kwargs, output=None):
        """The forward hook of the chain's layer `at`. In a chain pass that expects it: a
        ReLU's output is checked at the next Linear, its one consumer (_chain_linear); else
        the module is checked as any other, and so is the rest of the pass."""
        state = getattr(self._local, "state", None)
        passing = None if state is None else state.chain
        if passing is not None and passing.live and passing.at == at:
            if at & 1:  # a ReLU
                passing.at = at + 1
                return
            if self._chain_linear(state, passing, at, name, kind, module, args, kwargs, output):
                return
        if passing is not None:
            passing.live = False
        self._after(name, kind, module, args, kwargs, output)

    def _chain_linear(self, state, passing, at, name, kind, module, args, kwargs,
                      output) -> bool:
        """Linear `at` of a chain pass: its input checked (_chain_link), its output read with a
        bound and its node hooked (_chain_backward); False when its call is not the chain's
        (left to _after, its input checked)."""
        tensor, magnitude = self._tensor, self._magnitude
        x = args[0] if len(args) == 1 and not kwargs else None
        j = at >> 1
        node = getattr(output, "grad_fn", None)
        if (type(x) is not tensor or type(output) is not tensor or type(node).__name__
                != passing.plan.products[j]):
            if at:
                self._chain_link(state, passing, at, x)
            return False
        if at:
            kx = self._chain_link(state, passing, at, x)
        else:  # the model's input: read with a bound when cheaper than the weight's gradient
            weight = passing.plan.claims[0][0]
            kx = magnitude(x) if weight is not None and x.numel() <= weight.numel() else None
        k = magnitude(output)
        if k is None:
            passing.live = False
            self._failed(state, name, kind, module, args, kwargs, "output", output, None,
                         self._checker.describe(output))  # (raises: the plan's policy)
            return True
        passing.at, passing.last = at + 1, (output, node, k)
        passing.kx[j] = kx
        if self.backward:  # hooked at the forward's end (_hook_nodes), all at once
            passing.nodes.append((j, node))
        return True

    def _hook_nodes(self, state, passing) -> None:
        """Hook the node of each Linear the chain pass checked (_chain_backward), at the
        forward's end: one loop, while torch's objects are still warm, instead of one
        registration in each Linear's hook right after its kernel."""
        hook, nodes = _opaque(watch._chain_backward), passing.nodes
        passing.nodes = []
        for j, node in nodes:
            node.register_hook(functools.partial(hook, self, state, passing, j))

    def _chain_link(self, state, passing, at, x):
        """Linear `at`'s input `x` in a chain pass: the ReLU before it made x from the last
        Linear's output, read finite, when autograd's edge says x is relu of exactly that
        tensor, neither written since: then finite under the same bound, and the ReLU's
        backward is the one use of that output's gradient (the chain's `linked`). Else x is
        read, as the ReLU's output. The bound (None: not finite, or not known)."""
        last = passing.last
        node = getattr(x, "grad_fn", None)
        if (type(node).__name__ == chain.RELU and last is not None and not x._version
                and not last[0]._version and node.next_functions[0][0] is last[1]):
            passing.linked[(at >> 1) - 1] = True
            return last[2]
        if not isinstance(x, self._tensor) or last is None:
            return None
        kx = self._magnitude(x)  # (a subclass too: the ReLU's output is never left unread)
        if kx is None:
            passing.live = False
            plan = passing.plan
            relu = plan.layers[at - 1]
            self._failed(state, plan.names[at - 1], type(relu).__name__, relu, (last[0],), {},
                         "output", x, None, self._checker.describe(x))
        return kx

    def _chain_output_gradient(self, state, passing, grad) -> None:
        """The model output's gradient hook in a chain pass: `grad` read with its bound, noted
        for the last Linear's node (_chain_backward), as it arrives (before any hook the caller
        added to the output)."""
        if not self._active or grad is None:
            return
        k = self._magnitude(grad)
        if k is None:
            plan = passing.plan
            module = plan.layers[-1]
            self._found(state, Finding(plan.names[-1], type(module).__name__, "backward",
                                       "gradient of output", *self._checker.describe(grad),
                                       True), module, grad)
            return
        passing.output = (weakref.ref(grad), grad._version, k, _TABLES["task"]())

    def _chain_backward(self, state, passing, j, grad_inputs, grad_outputs) -> None:
        """The post-hook of chain Linear j's node. g, the gradient of its output, is finite
        under the bound the next Linear's node noted for its input's gradient when the ReLU
        between made g from exactly that (a mask: each element that gradient's or 0), else
        read; the last Linear's is the model output's, read by its own hook. Its input's
        gradient is read, its bound noted for the Linear before; its parameters' gradients are
        claimed finite from those bounds (_claims_made)."""
        if not self._active or not grad_outputs:
            return
        plan, magnitude = passing.plan, self._magnitude
        task, exact = _TABLES["task"](), passing.exact
        if exact is None or exact[0] != task:
            # each node of a backward runs under the thread-local state autograd took when the
            # backward began (modes, autocast): asked once a backward (two calls into torch,
            # cold after its kernels, cost about 6 us a node)
            exact = passing.exact = (task, not (_modes() or _TABLES["autocast"]()))
        exact = exact[1]
        deferred = passing.deferred
        if deferred is not None:
            passing.deferred = None
            if deferred[0] == task:
                self._found(state, *deferred[1:])
        g, kg = grad_outputs[0], None
        if j == len(passing.kx) - 1:  # as the output's hook read it, unchanged since
            read = passing.output
            if (read is not None and read[0]() is g and read[1] == g._version
                    and read[3] == task):
                kg = read[2]
        else:
            if exact and passing.linked[j]:
                noted = passing.grads[j + 1]
                if noted is not None and noted[1] == task:
                    kg = noted[0]
            if kg is None and g is not None:  # (read whatever its type: nothing passes unread)
                kg = magnitude(g)
                if kg is None:  # the ReLU after it took it
                    module = plan.layers[2 * j + 1]
                    self._found(state, Finding(
                        plan.names[2 * j + 1], type(module).__name__, "backward",
                        "gradient of input[0]", *self._checker.describe(g), False), module, g)
                    return
        places = plan.places[j]
        made = grad_inputs[places[0]] if places[0] < len(grad_inputs) else None
        if made is not None:
            ki = magnitude(made)
            if ki is None:
                # reported where watch's hook on the ReLU's output would have read it: after
                # this Linear's parameters' gradients are accumulated, as the next node runs
                module = plan.layers[2 * j]
                passing.deferred = (task, Finding(
                    plan.names[2 * j], type(module).__name__, "backward", "gradient of input[0]",
                    *self._checker.describe(made), False), module, made)
            else:
                passing.grads[j] = (ki, task)
        if kg is not None and exact:  # (an unbounded k claims nothing: _claims_made)
            weight, bias = plan.claims[j]
            self._claims_made(task, grad_inputs, _linear_claims(
                weight, bias, places[1], passing.kx[j], kg, passing.terms))

    # -- forward -------------------------------------------------------------------------------

    def _known(self, state, t):
        """(counts or None when finite, first time?) for a tensor of this forward pass: a
        container returns its last child's output, which is then neither checked nor reported
        twice. A tensor written in place since (its version moved: `x.log_()`) is checked
        again."""
        known = state.checked.get(id(t))
        if known is not None and known[0] is t and known[2] == _version(t):
            return known[1], False
        node = t.grad_fn
        if type(node).__name__ in _KEEP_FINITE_NODES:
            made = self._made_finite(state, t, node)
            if made is not _UNPROVEN:  # finite in, finite out: known without a read
                _remember(state, t, None, made)
                return None, True
        bound = self._magnitude(t)  # the same read, and a bound on what it found finite
        described = None if bound is not None else self._checker.describe(t)
        _remember(state, t, described, bound)
        return described, True

    def _made_finite(self, state, t, node):
        """Is `t` finite because the operation that made it (autograd's `node`, of
        _KEEP_FINITE_NODES: a functional activation such as the F.relu inside a layer's
        forward) keeps a finite input finite, and its one input is a tensor known finite in
        this pass, never written in place (as it was when the operation ran)? Then `t`'s
        magnitude bound under the node's rule (None: not known), else _UNPROVEN. Autograd's
        edge from the node names that input: the tensor whose node and output number it is (a
        tensor written in place since the operation, with autograd on, has another node)."""
        edges = node.next_functions
        if (not edges or _version(t) or type(t) is not self._tensor or not t.is_floating_point()
                or _modes()):
            return _UNPROVEN
        source, number = edges[0]
        if source is None:
            return _UNPROVEN
        for u, described, version, bound in state.checked.values():
            # the input never written in place (version 0): a write under no_grad or through
            # detach() since the operation keeps its node and edge but changes its values
            if (u.grad_fn is source and u.output_nr == number and described is None
                    and type(u) is self._tensor and u.dtype == t.dtype
                    and version == 0 and u._version == 0):
                return _kept_bound(_NODE_BOUNDS.get(type(node).__name__), bound)
        return _UNPROVEN

    def _checked(self, state, t) -> bool:
        """Was `t` checked in this pass as it is now?"""
        known = state.checked.get(id(t))
        return known is not None and known[0] is t and known[2] == _version(t)

    def _failing(self, state, name, t, argument, received=None) -> tuple | None:
        """(counts, first) when `t` holds a failing class (a mask's -Inf never does), else None;
        `t` as `received` says (its entry before the module wrote into it) when that is `t` and
        at most one write behind it (more: others may have written too; read as it is now)."""
        if received is not None and received[0] is t and (
                received[2] is None or t._version - received[2] <= 1):
            described = received[1]
        else:
            described, _ = self._known(state, t)
        if described is None:
            return None
        mask = argument is not None and self.masked(name, argument)
        return described if self.policy.failing(described[0], mask) else None

    def _before(self, name, kind, module, args, kwargs=None):
        # (kwargs missing: another thread's call met this hook as it was being removed, after
        # its kwargs flag, and the context has been left)
        if not self._active:
            return
        state = self._pass()
        for label, t, argument in tensors(args, kwargs, "input", self._argument_names(name)):
            first = not self._checked(state, t)
            bad = self._failing(state, name, t, argument)
            if bad is not None and first:
                self._found(state, Finding(name, kind, "forward", label, *bad, True), module, t)

    def _after(self, name, kind, module, args, kwargs, output=None):
        if not self._active:  # (output missing: as _before's kwargs)
            return
        state = getattr(self._local, "state", None) or self._pass()
        tensor = self._tensor
        single = isinstance(output, tensor)  # most modules: one tensor out, read without a walk
        outputs = (("output", output, None),) if single else list(tensors(output, None, "output"))
        # torch's own module of a class that keeps finite input finite, computing what its
        # class says: the rules below may apply
        trusted = (type(module) in _KEEP_FINITE and self._as_torch_computes(module)
                   and _holds_for(module))
        if self.backward:
            role = self._role
            # inputs first: one the module wrote in place and returned (ReLU(inplace=True)) it
            # received as last met, and its output role then hooks the version it wrote
            if not kwargs and len(args) == 1 and type(args[0]) is tensor:  # nearly every call
                t = args[0]
                if t.requires_grad:
                    role(state, t, ("input", name, kind, "input[0]"),
                         t is output if single else any(t is o for _, o, _ in outputs))
            else:
                for label, t, _ in input_tensors(args, kwargs, tensor):
                    role(state, t, ("input", name, kind, label),
                         any(t is o for _, o, _ in outputs))
            input_seen = state.seen.get(id(args[0])) if trusted and len(args) == 1 else None
            for label, t, _ in outputs:
                role(state, t, ("output", name, kind, label))
            node = type(getattr(output, "grad_fn", None)).__name__ if single else None
            if (node in _SUMS or node in _RESHAPES) and output.numel() >= SUM_MIN:
                self._sum_backward(state, output, output.grad_fn)
            if (input_seen is not None and type(module) in _MASKS
                    and args[0].numel() >= MASK_MIN and _apart(module)):
                self._mask_backward(state, module, args[0], output, input_seen)
            if ((node in _PRODUCTS or node in _FLATTENED) and self.grads
                    and type(module) in _LINEAR_MAPS):
                self._parameters_backward(state, module, args, kwargs, output, node)
        checked = state.checked
        if trusted and self._keeps_finite(state, args, output):
            # finite in, finite out: known without a read, and bounded as the class says (the
            # input's entry, as read: _keeps_finite found it)
            received = state.checked[id(args[0])][3]
            _remember(state, output, None, _kept_bound(_module_bound(module), received))
            return
        if single and type(module) in _NORMS and output.numel() >= NORM_MIN:
            bound = self._normalized_bound(state, module, output)
            if bound is not None:  # bounded in, bounded out: known without a read
                _remember(state, output, None, bound)
                return
        if single and type(module) in _LINEAR_MAPS and output.numel() >= LINEAR_MIN:
            bound = self._linear_bound(state, module, args, kwargs, output)
            if bound is not None:  # bounded in, bounded out: known without a read
                _remember(state, output, None, bound)
                return
        for label, t, _ in outputs:
            received = checked.get(id(t))  # an input written in place: as it came in
            described, first = self._known(state, t)
            if described is not None and first:
                self._failed(state, name, kind, module, args, kwargs, label, t, received,
                             described)

    def _failed(self, state, name, kind, module, args, kwargs, label, t, received,
                described) -> None:
        """Report output `t` of module `name`, first read non-finite in this pass
        (`described`; `received`: its entry before, when it came in as an input), when it holds
        a failing class; born here unless an input, as it came in, held one too."""
        if not self.policy.failing(described[0]):
            return
        checked = state.checked
        # each input as it came in (an input the module wrote into and returned a view of)
        inputs = any(self._failing(state, name, i, argument,
                                   received if i is t else checked.get(id(i))) is not None
                     for _, i, argument in tensors(args, kwargs, "input",
                                                   self._argument_names(name)))
        self._found(state, Finding(name, kind, "forward", label, *described, inputs), module, t)

    def _keeps_finite(self, state, args, output) -> bool:
        """Is `output` of a _KEEP_FINITE module (torch's own, _as_torch_computes, and one the
        rule holds for, _holds_for: the caller's duty) finite because its one input, a plain
        real floating tensor with a version counter, was known finite in this pass as it is now
        (or, when the module wrote it in place and returned it, one write before)?"""
        if len(args) != 1 or type(args[0]) is not self._tensor or type(output) is not self._tensor:
            return False
        received = args[0]
        if (not received.is_floating_point() or output.dtype != received.dtype
                or received.is_inference()):
            return False
        known = state.checked.get(id(received))
        if known is None or known[0] is not received or known[1] is not None:
            return False
        if output is received:  # ReLU(inplace=True): this write, and only it, since it was read
            return known[2] + 1 == received._version
        return known[2] == received._version and id(output) not in state.checked

    def _as_torch_computes(self, module) -> bool:
        """Does `module`'s output come from torch's own forward of its class alone: that
        forward unpatched, no forward of the instance's own (accelerate's wrappers replace
        it), no forward hook but this watch's (a hook may replace an output), no global forward
        hook, no torch-function or dispatch mode that could reroute the operations? (torch's
        own functions that forward calls, patched in their modules, are not looked at.)"""
        return (type(module).forward is _TORCH_FORWARD[type(module)]
                and "forward" not in module.__dict__ and len(module._forward_hooks) == 1
                and not self._global_hooks and not _modes())

    def _normalized_bound(self, state, module, output) -> int | None:
        """k with every magnitude of `output`, a _NORMS module's (torch's own class), below
        2**k, proven without reading it, or None. The node that made it computes
        (x - mean) * invstd * weight + bias from its input x, the statistics it saved (per
        channel, row or group) and the module's parameters; with x read finite in this pass
        (as it is now) below 2**kx and each of the others read finite with its bound, no
        intermediate of that formula, in any order of its operations, reaches 2**k, k from
        those bounds; k below the output format's largest finite binade leaves no room for an
        Inf, and no NaN can come from finite operands of +, - and *."""
        node = output.grad_fn
        if (node is None or type(node).__name__ != _NORMS[type(module)] or not output.is_cpu
                or not self._as_torch_computes(module)  # (elsewhere its reads cost more)
                or _TABLES["saved_hooks"](False) is not None):
            return None  # (saved-tensor hooks, as checkpoint's: unpacking would run them)
        x = node._saved_input
        kx = _known_bound(state, x)
        if kx is None:
            return None
        if getattr(node, "_saved_training", True) is not True:  # a batch norm in eval mode
            return None  # uses its running statistics: not saved, not bounded here
        # what torch's forward of the class passes on: parameters, buffers, plain attributes
        # (weight_norm's), as its pre-hooks left them; each of a plain type (a subclass's torch
        # function may reroute the norm, a wrapper subclass has no memory to read)
        weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
        plain = self._checker.plain
        if any(type(t) not in plain for t in (
                x, weight, bias, getattr(module, "running_mean", None),
                getattr(module, "running_var", None)) if t is not None):
            return None
        magnitude = self._magnitude
        # the saved statistics may be stored rounded from what the kernel used: one binade up
        saved = node._saved_result2  # invstd (unpacking makes a new tensor each time: once)
        bounds = [magnitude(node._saved_result1), magnitude(saved)]
        bounds += [magnitude(p) for p in (weight, bias) if p is not None]
        if None in bounds:
            return None
        mean, invstd, *affine = bounds
        scale = affine.pop(0) if weight is not None else 0
        shift = affine.pop(0) if bias is not None else -UNBOUNDED
        # every product of x or mean, invstd and weight (any subset: each factor below
        # 2**max(k, 0)) stays below 2**products; every intermediate is a sum of three such
        # products and the bias at most, below 2**k; k + 1 leaves each operation's rounding
        # (a factor below 1.05 over the few of them) inside the output's largest binade
        products = max(kx, mean + 1, 0) + max(invstd + 1, 0) + max(scale, 0)
        k = max(products, shift) + 2
        limit = self._checker.magnitude_limit(output.dtype)
        record = _summed_record(state, output)
        if (record is not None and limit is not None
                and _NORM_NODES[type(module).__name__] == _BATCH_NORM_NODE):
            # its backward, from a bounded gradient of `output` (_batch_norm_rule), reads the
            # saved statistics themselves: no binade for their rounding; and the least invstd
            # (one word a channel; 0 where the kernel's variance overflowed)
            per_channel = output.numel() // output.shape[1] if output.shape[1] else 0
            least = _least(saved)
            floor = math.frexp(least)[1] - 1 if 0.0 < least < math.inf else None
            record.chain = functools.partial(
                _batch_norm_rule, max(kx, mean) + 1, invstd, floor,
                scale if weight is not None else 1, per_channel, limit, magnitude)
        return k if limit is not None and k < limit else None

    def _linear_bound(self, state, module, args, kwargs, output) -> int | None:
        """k with every magnitude of `output`, a _LINEAR_MAPS module's (torch's own Linear or
        convolution, computing as torch does), below 2**k, proven from bounds on its one input,
        its weight and its bias instead of a read of the output, or None. Each output element
        is the bias plus a sum of fan_in products of an input element (or a padding's 0 or
        copy) and a weight: below 2**(kx + kw + ceil(log2 fan_in)) + 2**kb. Worth it only when
        the weight and bias (and the input, read here when this pass has not bounded it) are
        a small part of the output's size. Every operand in the output's dtype (autocast's
        casts can overflow: no bound then), and the bound covers each operand alone too (a
        kernel that transforms an operand, or rounds it to bfloat16, before multiplying)."""
        if kwargs or len(args) != 1:
            return None
        x, tensor = args[0], self._tensor
        weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
        plain = self._checker.plain
        if (type(x) is not tensor or not output.is_cpu or x.dtype != output.dtype
                or type(weight) not in plain or weight.dim() < 2 or weight.dtype != output.dtype
                or weight.numel() * LINEAR_SHARE > output.numel()  # the output is cheaper
                or (bias is not None and (type(bias) not in plain
                                          or bias.dtype != output.dtype))
                or not self._as_torch_computes(module) or not _torch_functions()
                or module.__dict__.get("_conv_forward") is not None
                or getattr(type(module), "_conv_forward", None) is not _TORCH_CONV_FORWARD.get(
                    type(module))):
            return None
        limit = self._checker.magnitude_limit(output.dtype)
        kx = _known_bound(state, x)
        if kx is None and type(x.grad_fn).__name__ in _KEEP_FINITE_NODES:  # F.relu(...) in
            made = self._made_finite(state, x, x.grad_fn)                # the caller's code
            kx = None if made is _UNPROVEN else made
        cost = (x.numel() if kx is None else 0) + weight.numel() + (
            0 if bias is None else bias.numel())
        if limit is None or cost * LINEAR_SHARE > output.numel():
            return None
        magnitude = self._magnitude
        if kx is None:
            kx = magnitude(x)
            if kx is None:
                return None
            _remember(state, x, None, kx)
        kw = magnitude(weight)
        kb = -UNBOUNDED if bias is None else magnitude(bias)
        if kw is None or kb is None:
            return None
        fan_in = weight.numel() // weight.shape[0] if weight.shape[0] else 0
        k = max(kx + kw + (fan_in - 1).bit_length(), kx, kw, kb) + LINEAR_MARGIN
        record = _summed_record(state, output)
        if (record is not None and weight.dim() > 2
                and module.__dict__.get("padding_mode") == "zeros"
                and _TABLES["saved_hooks"](False) is None):
            # its backward, from a bounded gradient of `output`, makes its input's: each element
            # a sum of (out channels / groups) x kernel products of a weight and that gradient
            # (the weight as saved: no saved-tensor hook may unpack another)
            terms = fan_in // max(weight.shape[1], 1) * (weight.shape[0] // module.groups)
            record.chain = functools.partial(_convolution_rule, kw, terms)
        return k if k < limit else None

    def _parameters_backward(self, state, module, args, kwargs, output, node) -> None:
        """`output` of torch's own Linear (computing as torch does) is addmm(bias, x, W.t()) or,
        without a bias, mm(x, W.t()) of its one input x, made by autograd's `node` (_PRODUCTS;
        over more dimensions, a view of that of x's rows flattened, `node` the view's:
        _FLATTENED): its backward makes W's gradient as x.t() @ g and the bias's (one element
        per output column) as g summed over x's n rows, from g, the gradient of `output`. With
        x bounded in this pass (read here when it is a small part of W) and g read with a bound
        when it arrives, each element of those two gradients is a sum of n terms under a bound,
        below its format's largest binade: finite unread. The node's post-hook
        (_parameters_made) notes them; the parameters' own hooks take them when each .grad is
        exactly what the node made (_claimed). Like every proof here it rests on version
        counters: a write they do not see (through .data, NumPy) passes unseen."""
        weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
        plain = self._checker.plain
        if kwargs or len(args) != 1 or type(weight) not in plain or weight.dim() != 2:
            return
        x, view = args[0], None
        if type(x) is not self._tensor:
            return
        if node in _FLATTENED:  # the product's gradient is g reshaped (a post-hook notes it)
            view, product = output.grad_fn, output.grad_fn.next_functions
            node = type(product[0][0]).__name__ if len(product) == 1 else None
            if node not in _PRODUCTS or x.dim() < 3:
                return
        if ((view is None and x.dim() != 2) or not output.is_cpu
                or weight.numel() < max(PARAMETER_MIN, PARAMETER_SHARE * output.numel())
                or not weight.requires_grad
                or x.dtype != output.dtype or weight.dtype != output.dtype
                or (bias is None) != (node == _MM)  # (mm's first gradient is x's)
                or (bias is not None and (type(bias) not in plain or bias.dtype != output.dtype
                                          or bias.shape != weight.shape[:1]))  # (a broadcast
                or x.is_inference() or id(weight) not in self._claimable  # bias sums more)
                or not self._as_torch_computes(module) or not _torch_functions()
                or _TABLES["saved_hooks"](False) is not None):  # (the node unpacks x)
            return
        made = state.seen.get(id(output))
        if made is None or made.tensor is not output or made.version != _version(output):
            return
        kx = _known_bound(state, x)
        if kx is None and x.numel() * LINEAR_SHARE <= weight.numel():  # read: cheaper than W's
            kx = self._magnitude(x)
            if kx is None:
                return
            _remember(state, x, None, kx)
        if kx is None or kx >= UNBOUNDED:
            return
        made.gradient.wanted = True  # g read with its bound (not held for a sum: _gradient)
        product = output.grad_fn
        if view is not None:
            view.register_hook(functools.partial(  # (a reshape: g's bound, kept)
                _opaque(_bounded_backward), state, _same_bound, 0, self._checker.magnitude_limit))
            product = view.next_functions[0][0]
        product.register_hook(functools.partial(
            _opaque(watch._parameters_made), self, state, made.gradient, kx,
            math.prod(x.shape[:-1]), weight,
            bias if bias is not None and id(bias) in self._claimable else None,
            _PRODUCTS[node][1]))

    def _parameters_made(self, state, record, kx, rows, weight, bias, index, grad_inputs,
                         grad_outputs) -> None:
        """The post-hook of a Linear's node (_parameters_backward; `record`: its output's
        gradient record): from g (`grad_outputs[0]`), read with a bound in this backward by
        watch's hook, the last of the output's (or g reshaped: _same_bound), and unwritten
        since, the weight's and the bias's gradients the node made are claimed
        (_linear_claims, _claims_made)."""
        if not self._active or not grad_outputs or _modes() or _TABLES["autocast"]():
            return  # (a mode, or autocast, active in the backward may compute them otherwise:
        kg = _bound_of(state, grad_outputs[0])  # mm in float16, then cast back)
        if kg is None or kg >= UNBOUNDED or not _last_hook(record):
            return
        self._claims_made(_TABLES["task"](), grad_inputs, _linear_claims(
            weight, bias, index, kx, kg, _sum_terms(rows)))

    def _claims_made(self, task, grad_inputs, made_below) -> None:
        """Claim finite, until the end of this backward (`task`), each parameter's gradient
        `grad_inputs[at]` with every element below 2**k (plus LINEAR_MARGIN for rounding),
        below its format's largest binade, for each (parameter or None, at, k) of
        `made_below`. A claim holds the gradient's memory, never the tensor (the parameter's
        node may take it as .grad): _claimed checks that .grad is that memory, all of it."""
        limit_of, tensor, claims = self._checker.magnitude_limit, _TABLES["tensor"], self._claims
        for param, at, k in made_below:
            made = grad_inputs[at] if param is not None and at < len(grad_inputs) else None
            if type(made) is not tensor:
                continue
            limit = limit_of(made.dtype)
            if limit is None or k + LINEAR_MARGIN >= limit:
                continue
            if task != self._claims_task:  # the first claim of this backward: its end drops
                try:                        # those never taken (autograd.grad) and their memory
                    _TABLES["queue"](claims.clear)
                except RuntimeError:  # not in a backward of autograd's engine
                    return
                self._claims_task = task
            claims[id(param)] = _Claim(param, made.untyped_storage(), made.data_ptr(),
                                       made.numel(), made.dtype, made._version)

    def _claimed(self, param, grad) -> bool:
        """Is `grad`, param's .grad, exactly the finite gradient a Linear's node made for it in
        this backward (_parameters_made): that memory, all of it, unwritten since, with no
        hook of anyone else's on the parameter that could have written it unseen?"""
        claim = self._claims.pop(id(param), None)
        if (claim is None or claim.param is not param or type(grad) is not self._tensor
                or grad.layout is not _TABLES["strided"] or param._backward_hooks
                or len(param._post_accumulate_grad_hooks or ()) != 1):
            return False
        return (grad.data_ptr() == claim.address and grad.numel() == claim.numel
                and grad.dtype == claim.dtype and grad._version == claim.version
                and grad.is_contiguous())

    def _mask_backward(self, state, module, received, output, seen) -> None:
        """A _MASKS module (torch's own, one the rules hold for: _holds_for and _apart, the
        caller's duty) made `output` from `received`, met as `seen`: its backward will write
        to each element of `received`'s gradient one element of `output`'s gradient or 0. When
        that gradient reads finite, what the backward makes from it is finite too, and the
        gradient of `received` is not read again if it is exactly that (no other use of
        `received` added to it)."""
        node = getattr(output, "grad_fn", None)
        if not (type(output) is self._tensor and type(received) is self._tensor
                and seen.tensor is received and node is not None
                and type(node).__name__ in _MASKS[type(module)]
                and received.is_floating_point()):
            return
        if seen.version != received._version - (output is received):  # not as it came in
            return
        made = state.seen.get(id(output))
        if made is None or made.tensor is not output or made.version != output._version:
            return
        made.gradient.keep = True
        # a bound passes through only where the node unpacks what it saved (a max pool's
        # indices) with no saved-tensor hook between
        bounds = state if _TABLES["saved_hooks"](False) is None else None
        node.register_hook(functools.partial(_opaque(_mask_backward_ran), bounds, made.gradient,
                                             seen.gradient))

    def _sum_backward(self, state, output, node) -> None:
        """`output` was made by an autograd node that sums its gradient into a bias's (a
        _SUMS node: a convolution's, a Linear's addmm, a norm's): a NaN or Inf anywhere in the
        gradient makes that sum NaN or Inf. The gradient of `output` as it is now is then not
        read when it arrives but held (_hold), and read only when the node's sum is not finite
        or the node never uses it (_summed_ran, _ended)."""
        if type(output) is not self._tensor or output.output_nr != 0:  # the gradient summed
            return
        made = state.seen.get(id(output))
        if made is None or made.tensor is not output or made.version != output._version:
            return
        record = made.gradient
        if record.summed is not None:  # a container returning its child's output: hooked once
            return
        reshape = None
        if type(node).__name__ in _RESHAPES:  # a Linear over more than 2 dimensions: the
            reshape, node = node, node.next_functions[0][0]  # addmm of a 2-d view
            if type(node).__name__ not in _SUMS:
                return
        record.summed = _SUMS[type(node).__name__]
        if reshape is not None:
            reshape.register_hook(functools.partial(_opaque(watch._reshaped_ran), self, record))
        node.register_hook(functools.partial(_opaque(watch._summed_ran), self, state, record))

    # -- backward ------------------------------------------------------------------------------

    def _role(self, state, t, role, received: bool = False) -> None:
        """Note what `t` is to a module. Its first role in this pass, or its first since it was
        written in place (a new node in autograd's graph, with a gradient of its own), hooks the
        gradient of `t` as it is now. A `received` role (an input the module wrote in place and
        returned) goes to the version last met (before the module's write, where one was met);
        an input written in place since it was last met (by the module, or by its caller before
        the call) is noted at both versions."""
        if not t.requires_grad:
            return
        seen = state.seen.get(id(t))
        older = None
        if seen is not None and seen.tensor is t:
            if received or seen.version == _version(t):
                seen.gradient.roles.append(role)
                return
            if role[0] == "input":
                seen.gradient.roles.append(role)
            older = seen.gradient
        elif len(state.seen) >= _ROLES:  # submodules called on their own: no pass to end
            del state.seen[next(iter(state.seen))]
        seen = state.seen[id(t)] = _Seen(t)
        if older is not None:
            older.newer = seen.gradient
        # the pass is bound here, not looked up: a device's backward runs on torch's threads;
        # the hook holds the gradient's record, never the tensor (that would keep the graph alive)
        seen.gradient.handle = hook_tables.add_tensor_hook(
            t, functools.partial(_opaque(watch._gradient), self, state, seen.gradient))
        seen.gradient.roles.append(role)

    def _gradient(self, state, record, grad):
        """A tensor version's gradient hook (`record`: its _Gradient): reports `grad` when it
        holds a failing class, at the module that computed it; a gradient a mask's backward
        made from one read finite (_mask_backward) is finite unread, and one a node will sum
        (_sum_backward) is held for that node's sum."""
        if not self._active or grad is None:
            return
        proven, record.proven = record.proven, None
        if proven is not None and proven[0]() is grad and proven[1] == grad._version:
            self._finite_gradient(record, grad)
        elif state.bounds and _bound_of(state, grad) is not None:  # a node made it bounded
            self._finite_gradient(record, grad)
        elif record.summed is None or record.wanted or not self._hold(state, record, grad):
            self._check_gradient(state, record, grad)

    def _finite_gradient(self, record, grad) -> None:
        """Note `grad`, the gradient of `record`'s tensor version, as finite."""
        # a retained graph's next backward may find it so after this one did not
        record.bad = False
        # kept for the mask's backward that uses it next (_mask_backward_ran), weakly: that
        # backward may never run (autograd.grad taken at the mask's output)
        if record.keep and not grad.is_inference():
            record.finite = (weakref.ref(grad), grad._version)

    def _hold(self, state, record, grad) -> bool:
        """Hold `grad` for the summing node's post-hook (_summed_ran) instead of reading it now,
        when no other tensor hook can replace it or write into it before that node runs (this
        hook is the tensor's last) and it carries no graph of its own to keep alive; the end
        of this backward reads it should that node not run (_ended)."""
        if (not _last_hook(record) or type(grad) is not self._tensor
                or grad.grad_fn is not None):
            return False
        if record.held is not None:  # a retained graph's backward again, the last one having
            self._read_held(state, record)  # raised before the node ran: that gradient first
        task = _TABLES["task"]()
        if task != state.task:  # the first held in this backward: its end reads what is left
            try:
                _TABLES["queue"](functools.partial(_opaque(watch._ended), self, state))
            except RuntimeError:  # not in a backward of autograd's engine
                return False
            state.task = task
        record.held = (grad, grad)  # the gradient, and the tensor the node is to use
        state.pending.append(record)
        self._holding.add(state)
        return True

    def _summed_ran(self, state, record, grad_inputs, grad_outputs) -> None:
        """A _SUMS node's post-hook: the gradient held for it (_hold) is finite when the node
        used exactly it and the sum it made into the bias is finite; else it is read (after
        those held before it: findings keep the order of the gradients' arrival)."""
        if record.chain is not None and self._active:
            _bounded_backward(state, record.chain, 0, self._checker.magnitude_limit,
                              grad_inputs, grad_outputs)
        held = record.held
        if held is None or not self._active:
            return
        index = record.summed
        total = grad_inputs[index] if index < len(grad_inputs) else None
        if (grad_outputs and grad_outputs[0] is held[1] and type(total) is self._tensor
                and not _modes() and self._finite(total)):
            record.held = None
            self._finite_gradient(record, held[0])
        else:
            self._read_held(state, record)

    def _reshaped_ran(self, record, grad_inputs, grad_outputs) -> None:
        """A _RESHAPES node's post-hook (between a Linear's output and its addmm): what it made
        from exactly the gradient held for the sum, reshaped, is what the summing node is to
        use."""
        held = record.held
        if held is None or not self._active or not grad_inputs:
            return
        made = grad_inputs[0]
        if (grad_outputs and grad_outputs[0] is held[0] and type(made) is self._tensor
                and made.numel() == held[0].numel() and not _modes()):
            record.held = (held[0], made)

    def _ended(self, state) -> None:
        """The end of a backward (autograd's final callback): read each gradient still held,
        its node never having run (autograd.grad stopping at its tensor)."""
        if self._active:
            self._read_held(state)
        else:
            _let_go(state)

    def _read_held(self, state, upto=None) -> None:
        """Read the gradients `state` holds, in the order they arrived: every one, or those up
        to record `upto`. A read that raises lets the later ones go unread."""
        pending = state.pending
        try:
            while pending:
                record = pending.pop(0)
                held, record.held = record.held, None
                if held is not None:
                    self._check_gradient(state, record, held[0], arrived=False)
                if record is upto:
                    return
        except BaseException:
            # a raise ends the backward: the gradients held after this one would not have
            # arrived had each been read as it came
            _let_go(state)
            raise
        finally:
            if not pending:
                self._holding.discard(state)

    def _check_gradient(self, state, record, grad, arrived: bool = True) -> None:
        """Read `grad`, the gradient of `record`'s tensor version, and report it when it holds
        a failing class (a gradient that has just `arrived` after the ones held: those first).
        A finite one's bound is noted where the node that uses it next carries bounds (a
        convolution's or a norm's chain, a mask: _bounded_backward, _mask_backward_ran)."""
        if record.chain is None and not record.keep and not record.wanted:  # no bound wanted
            finite = self._finite(grad)
        else:
            bound = self._magnitude(grad)
            finite = bound is not None
            if finite and bound < UNBOUNDED:
                _note_bound(state, grad, bound)
        if finite:
            self._finite_gradient(record, grad)
            return
        roles = record.roles
        described = self._checker.describe(grad)
        if not self.policy.failing(described[0]):
            return
        if arrived and state.pending:
            self._read_held(state)
        record.bad = True
        for r in roles:
            if r[0] == "output":
                state.bad_outputs.add(r[1])
        # a module whose whole output is this version took it and returned it as it was
        passed = {r[1] for r in roles if r[0] == "output" and r[3] == "output"}
        consumers = ([r for r in roles if r[0] == "input" and r[1] not in passed]
                     or [r for r in roles if r[0] == "input"])
        if consumers:  # computed by the backward of the innermost module that took it
            _, name, kind, label = max(consumers, key=_depth)
            # the version written in place after this one was non-finite already: the write's
            # backward passed it on
            inputs = name in state.bad_outputs or (record.newer is not None and record.newer.bad)
        else:          # arrived from outside the watched modules
            _, name, kind, label = max(roles, key=_depth)
            inputs = True
        self._found(state, Finding(name, kind, "backward", f"gradient of {label}", *described,
                                   inputs), self._modules.get(name), grad)

    def _parameter_gradient(self, param):
        grad = param.grad
        if not self._active or grad is None:
            return
        if (self._claims and self._claimed(param, grad)) or self._finite(grad):
            return
        described = self._checker.describe(grad)
        if not self.policy.failing(described[0]):
            return
        state = getattr(self._local, "state", None) or self._last or self._pass()
        if state.pending:  # gradients that arrived before it are reported before it
            self._read_held(state)
        name, kind, pname, _ = self._owners[id(param)]
        inputs = name in state.bad_outputs  # the module's output gradient was non-finite
        self._found(state, Finding(name, kind, "backward", f"gradient of {pname}", *described,
                                   inputs), self._modules.get(name), grad,
                    parameter=_join(name, pname))

    def _step(self, optimizer, args, kwargs):
        if not self._active:
            return
        state = getattr(self._local, "state", None) or self._last or self._pass()
        for t, owner, label, grad in parameters.step_tensors(optimizer, self._owners):
            if self._checker.finite(t):
                continue
            described = self._checker.describe(t)
            if not self.policy.failing(described[0]):
                continue
            name, kind, pname = owner
            inputs = grad is not None and not self._checker.finite(grad)
            self._found(state, Finding(name, kind, "step", label, *described, inputs),
                        self._modules.get(name), t, parameter=_join(name, pname))

    # -- findings ------------------------------------------------------------------------------

    def _found(self, state, finding: Finding, module, tensor, parameter=None) -> None:
        policy = self.policy
        if policy.ignored(finding.module) or (parameter is not None and policy.ignored(parameter)):
            return
        finding = _with_thread(finding)
        first, state.reported = not state.reported, True
        with _FINDINGS:
            if len(self.findings) < self.max_findings:
                self.findings.append(finding)
        if not first:
            return
        if policy.action == "raise":
            if self.raise_on and not self.collect:
                raise NonFiniteError(finding)
        else:
            policy.act(finding, module, tensor)


#: How many recently checked tensors a forward pass remembers (a container's output is its last
#: child's, checked just before).
_RECENT = 16
#: torch's modules whose one output is finite whenever their one input is (every finite input
#: of float16, bfloat16, float32, float64: tests/test_torch_watch_keep_finite.py): clamps with
#: finite bounds (in place too), max pools whose windows always hold an element (dilation 1:
#: _holds_for), views, bounded functions. By their exact classes (a subclass may compute
#: something else), filled when a watch is first entered (torch is loaded).
KEEP_FINITE_NAMES = ("ReLU", "ReLU6", "Hardtanh", "MaxPool1d", "MaxPool2d", "MaxPool3d",
                     "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Flatten",
                     "Unflatten", "Tanh", "Sigmoid", "Softmax")
_KEEP_FINITE: set = set()
#: autograd's nodes of operations that make a finite output of every finite input of float16,
#: bfloat16, float32 and float64, elementwise or over a dimension (relu, tanh, sigmoid, softmax,
#: SiLU: tests/test_torch_watch_keep_finite.py runs them over every such value): an output such
#: a node made from a tensor known finite is known finite unread (watch._made_finite), as the
#: functional activation inside a transformer layer's forward. Not GELU: torch's exact form
#: overflows near the largest values (x * (1 + erf) before halving), nor log_softmax.
_KEEP_FINITE_NODES = frozenset({"ReluBackward0", "TanhBackward0", "SigmoidBackward0",
                                "SoftmaxBackward0", "SiluBackward0"})
#: class -> torch's own forward of it (a class patched later gets no rule).
_TORCH_FORWARD: dict = {}
#: torch.Tensor and the checker's modes_active, for the autograd node hooks.
_TABLES: dict = {}
#: torch's modules whose backward writes to each element of the input's gradient one element
#: of the output's gradient or 0 (finite from finite): clamps pass it on where the input was
#: kept (where(mask, grad, 0)); max pools whose windows do not overlap (_apart) scatter it to
#: each window's maximum. Class name -> the autograd nodes its forward makes (in place or not).
_MASK_NODES = {"ReLU": ("ReluBackward0",), "ReLU6": ("HardtanhBackward0",),
               "Hardtanh": ("HardtanhBackward0",), "MaxPool2d": ("MaxPool2DWithIndicesBackward0",),
               "MaxPool3d": ("MaxPool3DWithIndicesBackward0",)}
#: class -> frozenset of its node names: by exact class, filled when a watch is first entered.
_MASKS: dict = {}
#: The least elements a mask's input needs for the proof: below it, reading the gradient into
#: its input costs no more than the hooks the proof adds (measured on the README's MLP: the
#: proof's hooks cost 7.5-8.4 us a ReLU; a read of 2^16 words just written, 4.4-6.9 us:
#: docs/benchmarks.md, issue 22, eighth round).
MASK_MIN = 1 << 17
#: autograd's nodes that sum the gradient of their output (output 0) into a bias's, by name: that
#: gradient's place among the gradients the node makes. A convolution's bias gradient is its
#: output's gradient summed over every dimension but the channels; a Linear's (addmm's `self`,
#: reduced to the bias's shape before the node's post-hooks see it) over the batch; a norm's
#: over all but its channels (batch, group) or its normalized dimensions (layer). A NaN or an
#: Inf anywhere in the gradient makes that sum NaN or Inf.
_SUMS = {"ConvolutionBackward0": 2, "AddmmBackward0": 0, "NativeBatchNormBackward0": 2,
         "NativeLayerNormBackward0": 2, "NativeGroupNormBackward0": 2}
#: The least elements an output needs for its gradient to be held for a node's sum: the same
#: trade as MASK_MIN (a node hook against a read).
SUM_MIN = MASK_MIN
#: autograd's nodes whose backward reshapes their output's gradient to their input's shape (every
#: element kept): a Linear's output over more than two dimensions is such a view of its addmm's.
_RESHAPES = frozenset({"ViewBackward0"})
#: The batch norm's autograd node (its backward's rule: _batch_norm_rule).
_BATCH_NORM_NODE = "NativeBatchNormBackward0"
#: Binades _batch_norm_rule adds to the product of its terms' bounds: 2 for the sum of three
#: terms (a kernel that regroups the formula, as dy * a - x * b + c, sums terms of the same
#: factors) and 1 for rounding.
BATCH_NORM_MARGIN = 3
#: torch's normalizations whose output is an affine map of their input by the statistics their
#: autograd node saves and their own parameters (watch._normalized_bound): class name -> that
#: node. By exact class, filled when a watch is first entered.
_NORM_NODES = {"BatchNorm1d": "NativeBatchNormBackward0", "BatchNorm2d": "NativeBatchNormBackward0",
               "BatchNorm3d": "NativeBatchNormBackward0", "LayerNorm": "NativeLayerNormBackward0",
               "GroupNorm": "NativeGroupNormBackward0"}
_NORMS: dict = {}
#: The least elements a normalization's output needs for its bound instead of a read: the
#: bound reads its statistics and parameters (four small reads and the node's saved tensors).
NORM_MIN = 1 << 17
#: torch's modules whose output is a bias plus sums of products of input elements and weights
#: (watch._linear_bound): class names; by exact class, filled when a watch is first entered.
_LINEAR_MAP_NAMES = ("Linear", "Conv1d", "Conv2d", "Conv3d")
_LINEAR_MAPS: set = set()
#: class -> torch's own _conv_forward of it (the convolutions' forward calls it).
_TORCH_CONV_FORWARD: dict = {}
#: autograd's nodes of torch's Linear over a 2-d input (addmm with a bias, mm without) -> where
#: its input's and weight's gradients are among the gradients the node makes (chain.PRODUCTS).
_MM = "MmBackward0"
_PRODUCTS = chain.PRODUCTS
#: autograd's nodes of the view torch's Linear returns over a contiguous input of more than 2
#: dimensions: the product (addmm's, or mm's without a bias) of its rows flattened, reshaped.
_FLATTENED = frozenset({"ViewBackward0", "UnsafeViewBackward0"})
#: The least elements a Linear's weight needs for its gradients' proof instead of their reads
#: (watch._parameters_backward): the proof's node hook and checks cost more than the read of a
#: 2^18-element weight in a step, less than a 2^20-element one's; and how many times the output
#: it must be, the output's gradient being read with its bound then (fpclass's screen on one
#: thread, about 3.6 times torch's sum on two once past the caches, where that gradient would
#: have been read by torch's sum or not at all, held for its bias's sum): docs/benchmarks.md,
#: issue 22, twenty-fifth round.
PARAMETER_MIN = 1 << 20
PARAMETER_SHARE = 4
#: The least elements a Linear's or convolution's output needs for its bound instead of a read,
#: and how many times larger than what the bound reads (weight, bias, an unbounded input) it
#: must be: a read of the output is the same pass over memory.
LINEAR_MIN = NORM_MIN
LINEAR_SHARE = 3
#: Binades the bound adds to the plain sum's (and to each operand's own bound): 1 for the bias's
#: addition, 1 for rounding in any order of the sums (below a factor 1.07 over 2**20 terms of
#: float32), and 6 for kernels that transform their operands before summing (Winograd's and
#: NNPACK's transforms scale an operand alone by small constants).
LINEAR_MARGIN = 8
#: torch.nn.functional's functions the maps' forwards call.
_LINEAR_FUNCTIONS = ("linear", "conv1d", "conv2d", "conv3d", "pad")
#: What those calls go through, as torch made it: (a module, a name in it, what it held when a
#: watch was first entered; None where that was not torch's own) for each of those functions,
#: the `F` torch's linear and convolution modules call by, and the builtin beneath F.pad's
#: Python wrapper (torch._C._nn.pad). A patch of any, as apex's casts, leaves every map read.
_TORCH_FUNCTIONS: list = []
#: Those a Linear's forward goes through (F.linear, and the F of torch.nn.modules.linear): a
#: chain pass asks only them (asking all eight cost 7 us a pass).
_LINEAR_ROUTES: list = []
#: A watch's thread-local until it is first entered: never written (every hook that writes one
#: is registered by entering, which replaces it).
_UNENTERED = threading.local()
#: Held while a finding is added to a watch's list (any watch's: findings are rare).
_FINDINGS = threading.Lock()
#: model -> {grads: _Derived}: what the last watch entered on a chain derived from its plan
#: (watch._chain_derived). Weak: a record holds the model's layers and parameters as they were
#: when a watch was last entered on it, never the model; the next entering that finds them
#: changed drops it.
_DERIVED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: How many tensors' roles a forward pass remembers (a tensor is met as one module's output and
#: the next one's input; the bound only matters when submodules are called outside the model).
_ROLES = 4096


class _Pass:
    """One thread's forward pass (and the backward and step that follow it): the tensors met,
    those checked lately, the modules whose output gradients were non-finite, and whether a
    finding was reported yet."""

    __slots__ = ("seen", "checked", "bad_outputs", "reported", "pending", "task", "thread",
                 "bounds", "chain")

    def __init__(self):
        self.seen: dict = {}         # id(tensor) -> _Seen
        # id(gradient) -> (a weak reference to it, its version, k with its magnitudes below
        # 2**k, the backward's graph task): gradients read finite or made bounded in this
        # pass's backward (_note_bound)
        self.bounds: dict = {}
        self.checked: dict = {}      # id(tensor) -> (tensor, (counts, first) or None, version)
        self.bad_outputs: set = set()
        self.reported = False
        self.pending: list = []      # _Gradient records holding a gradient (watch._hold)
        self.task = None             # the backward whose end reads them (autograd's graph task)
        self.thread = threading.get_ident()
        self.chain = None            # chain.Pass, while this forward is a chain's (_chain_pass)

    def forget(self) -> None:
        """Drop the forward pass's tensors (their gradient hooks hold what they need)."""
        self.seen.clear()
        self.checked.clear()
        if self.chain is not None:  # (a forward ended by a BaseException: no _chain_end ran)
            self.chain.last, self.chain.nodes = None, []


class _Seen:
    """A tensor met in this forward pass, the version its gradient hook was registered for, and
    the record that hook keeps (`gradient`)."""

    __slots__ = ("tensor", "version", "gradient")

    def __init__(self, tensor):
        self.tensor, self.version, self.gradient = tensor, _version(tensor), _Gradient()


class _Gradient:
    """What a gradient hook of one tensor version keeps: the version's roles ("output" |
    "input", module name, module class, label) and, for a mask's backward (_mask_backward),
    `keep` (a mask made it: its gradient, read finite, is kept in `finite` until the mask's
    backward has used it) and `proven` (the gradient a mask's backward made for it from a finite
    one); both weak references, with the version; for a summing node (watch._sum_backward),
    `summed` (where the node's sum is among its gradients) and `held` (the gradient and the
    tensor the node is to use, until that node has run), and `chain` (that node's rule for
    bounding its input's gradient, _bounded_backward). It holds no tensor of the forward
    pass: autograd keeps the hook as long as the graph, and such a tensor held here would keep
    the graph alive in turn."""

    __slots__ = ("roles", "keep", "finite", "proven", "newer", "bad", "handle", "summed", "held",
                 "chain", "wanted")

    def __init__(self):
        self.roles: list = []
        self.keep, self.finite, self.proven = False, None, None
        # handle: (a weak reference to the tensor's hook table, this version's hook's key in it)
        self.handle = self.summed = self.held = None
        self.newer = None   # the record of the version written in place after this one
        self.bad = False    # its gradient was found non-finite
        self.chain = None   # the summing node's rule: a bound on its input's gradient from one
                            # on this version's (_bounded_backward)
        self.wanted = False  # its bound is noted for a Linear's parameters (_parameters_made)


class _Derived(NamedTuple):
    """What entering a watch derives from a chain's plan (watch._chain_derived): the plan, each
    parameter's (requires_grad, shape) when derived, the layers by name, the parameters'
    owners (parameters.owners), those whose gradients are hooked and their ids."""

    plan: object
    key: tuple
    layers: dict
    owners: dict
    hooked: list
    claimable: frozenset


class _Claim(NamedTuple):
    """A parameter's gradient as a Linear's node made it, proven finite (watch._parameters_made):
    its storage (held, so no other tensor takes its address), address, size, dtype, version."""

    param: object
    storage: object
    address: int
    numel: int
    dtype: object
    version: int


def _sum_terms(rows: int) -> int:
    """The binades a sum of `rows` terms adds to the largest term's bound: ceil(log2 rows)."""
    return max(rows - 1, 0).bit_length()


def _linear_claims(weight, bias, index, kx, kg, terms) -> tuple:
    """What a Linear's node made, as _claims_made takes it: the weight's gradient
    (`grad_inputs[index]`, x.t() @ g) and the bias's (`grad_inputs[0]`, g summed over the
    rows), from x below 2**kx (None: not bounded, the weight's not claimed) and g below 2**kg,
    each element a sum over rows adding `terms` binades (_sum_terms)."""
    return ((weight if kx is not None else None, index,
             0 if kx is None else max(kx + kg + terms, kx, kg)),
            (bias, 0, kg + terms))


def _same_bound(bound, _made):
    """A view's backward (a Linear's output over more than 2 dimensions) reshapes its output's
    gradient, every element kept: the same bound (_bounded_backward's rule)."""
    return bound


def _last_hook(record) -> bool:
    """Is the gradient hook of `record` (a _Gradient) the last one its tensor has (no later hook
    of anyone else's could replace or write the gradient it read)?"""
    table, key = record.handle
    hooks = table()
    return hooks is not None and next(reversed(hooks), None) == key


def _mask_backward_ran(state, made, received, grad_inputs, grad_outputs) -> None:
    """A mask's backward has run (an autograd node's post-hook): when the gradient it used is the
    one watch read finite (`made`'s), unchanged since, what it made for its input is finite (a
    gradient value or 0 at each place), and is noted for the input's own gradient hook
    (`received`); with a bound of the one it used in pass `state` (None: none passes), under
    the same bound (_note_bound)."""
    finite, made.finite = made.finite, None
    if finite is None or not grad_outputs or not grad_inputs or _modes():
        return  # a mode active in the backward may compute it otherwise
    used, plain = grad_outputs[0], _TABLES["tensor"]
    if (used is finite[0]() and used._version == finite[1] and type(used) is plain
            and type(grad_inputs[0]) is plain):
        received.proven = (weakref.ref(grad_inputs[0]), grad_inputs[0]._version)
        bound = None if state is None else _bound_of(state, used)
        if bound is not None:
            _note_bound(state, grad_inputs[0], bound)


def _bounded_backward(state, rule, index, limit_of, grad_inputs, grad_outputs) -> None:
    """A node's post-hook: its backward made the gradient of its input (`grad_inputs[index]`)
    from that of its one output (`grad_outputs[0]`) such that `rule` bounds the one from the
    other (k from k, and the node's other gradients). When the gradient it used has a bound in
    this pass (read, or made by such a node), unwritten since, what it made is noted with the
    rule's bound (below its format's largest binade: finite) for the input's gradient hook and
    the node that uses it next."""
    if not grad_outputs or index >= len(grad_inputs) or _modes():
        return  # (a mode active in the backward may compute it otherwise)
    for other in grad_outputs[1:]:  # a gradient of another output (a batch norm's saved
        if other is not None:       # statistics, used by the caller) joins in
            return
    made = grad_inputs[index]
    if type(made) is not _TABLES["tensor"] or type(grad_outputs[0]) is not _TABLES["tensor"]:
        return
    bound = _bound_of(state, grad_outputs[0])
    if bound is None:
        return
    k, limit = rule(bound, grad_inputs), limit_of(made.dtype)
    if k is not None and limit is not None and k < limit:
        _note_bound(state, made, k)


def _note_bound(state, grad, k) -> None:
    """Note gradient `grad`, as it is now, as having every magnitude below 2**k, for this
    backward (autograd's graph task) only: a tensor met again in a later backward (the caller's
    own gradient, refilled through NumPy between two backwards of a retained graph) is read
    again. Not an inference tensor: it keeps no version to tell a later write."""
    if grad.is_inference():
        return
    bounds = state.bounds
    if len(bounds) >= _ROLES:  # a retained graph's backwards, run again and again
        del bounds[next(iter(bounds))]
    bounds[id(grad)] = (weakref.ref(grad), grad._version, k, _TABLES["task"]())


def _bound_of(state, grad):
    """k with every magnitude of gradient `grad` below 2**k, as noted in this backward and
    unwritten since; None when not noted."""
    known = state.bounds.get(id(grad))
    if (known is None or known[0]() is not grad or known[1] != grad._version
            or known[3] != _TABLES["task"]()):
        return None
    return known[2]


def _summed_record(state, output):
    """The gradient record of `output` as it is now when a summing node is hooked for it
    (watch._sum_backward): its `chain` gives that node a rule for bounding its input's gradient
    from a bound on `output`'s (_bounded_backward); else None."""
    made = state.seen.get(id(output))
    if (made is not None and made.tensor is output and made.version == output._version
            and made.gradient.summed is not None):
        return made.gradient
    return None


def _least(t) -> float:
    """The least value of `t`, a CPU tensor read finite, as a Python float (0.0 when empty). A
    batch norm's invstd, one word a channel: Python's min of its list (exact: no NaN to
    order) took the norm's bound from 70 to 60 us a call inside the CNN's step, against
    torch's min().item() (docs/benchmarks.md, issue 22, thirty-second round); torch's min
    beyond _LEAST_LISTED words."""
    count = t.numel()
    if not count:
        return 0.0
    if count <= _LEAST_LISTED and t.dim() == 1:
        return min(t.tolist())
    return t.min().item()


#: The most words _least reads as a Python list.
_LEAST_LISTED = 1024


def _convolution_rule(kw, terms, bound, _made):
    """A convolution's backward (zero padding): each element of its input's gradient is a sum of
    `terms` products of a weight (below 2**kw) and an element of its output's gradient (below
    2**bound), rounded as the forward's sums are (LINEAR_MARGIN)."""
    return max(bound + kw + (terms - 1).bit_length(), bound, kw) + LINEAR_MARGIN


def _batch_norm_rule(m, s, least, kw, count, limit, magnitude, bound, made):
    """A batch norm's backward in training: dx = (dy - mean(dy) - (x - mean) * k) * invstd * w,
    k = dot * invstd**2 / n, dot = sum((x - mean) * dy) over the n (`count`) elements of a
    channel, with x and the mean below 2**m, invstd below 2**s, w below 2**kw and dy below
    2**bound. Every term, in any order or grouping of the kernel's operations, is a product of
    dy, (x - mean) or x or the mean at most twice, invstd at most three times and w, summed
    three at a time, then rounded. Tighter where the node's weight gradient (`made[1]`,
    dot * invstd: torch's kernel makes it and k from one dot) reads below 2**g: then
    |(x - mean) * k| < 2**(m + g + s + 1 - log2 n), one factor (x - mean) fewer. None where a
    sum over a channel (n dy, n products) may reach `limit` before the division by n, or the dot
    itself: torch's float32 kernels sum it in double and round it to float32 for k, and
    |dot| = |dot * invstd| / invstd < 2**(g + 1 - least), every invstd being at least
    2**least (read; None, no such bound, where one is 0: a variance that overflowed in the
    kernel makes invstd 0, the weight gradient 0 and k = Inf * 0)."""
    floor, counted = count.bit_length() - 1, count.bit_length()  # 2**floor <= n < 2**counted
    k = bound + 2 * max(m, 0) + 3 * max(s, 0) + max(kw, 0) + BATCH_NORM_MARGIN
    sums = bound + max(m, 0) + 3 * max(s, 0) + counted  # the dot and sum, times invstd**2
    weight_grad = made[1] if len(made) > 1 else None
    if least is not None and type(weight_grad) is _TABLES["tensor"] and weight_grad.numel():
        g = magnitude(weight_grad)  # (a few words: one a channel)
        if g is not None and g < UNBOUNDED:
            # dot * invstd rounds to the weight gradient (below 2**(g + 1) before it); k is that
            # times invstd over n; dy - mean(dy) is below 2**(bound + 2) (the mean rounded)
            inner = max(bound + 2, m + g + s + 2 - floor) + 1
            k = min(k, inner + max(s, 0) + max(kw, 0) + BATCH_NORM_MARGIN)
            sums = max(bound + counted, g + 1 + 2 * max(s, 0), g + 2 - least)
    return k if max(k, sums) < limit else None


_OPAQUE: dict = {}


def _let_go(state: _Pass) -> None:
    """Drop the gradients `state` holds, unread."""
    for record in state.pending:
        record.held = None
    state.pending.clear()


def _opaque(function):
    """`function` made opaque to dynamo (once per process) when torch._dynamo is loaded: under
    torch.compile dynamo inlines module hooks, and a backward run inside a compiled function
    calls every hook with dynamo's frame callback active; neither may trace into fpclass's
    kernels (numba's dispatcher). torch.compile and torch.optim load torch._dynamo; before it is
    loaded nothing can be compiling, and the hooks stay as they are. Opaque is `function`
    itself, marked as torch.compiler.disable marks what it wraps (dynamo's tracer calls it
    eagerly, with a graph break) and with its code skipped by dynamo's frame callback, that
    frame and every frame it calls (torch's own execution strategy for a code object): no
    wrapper to call through. Where torch has no such strategies, torch.compiler.disable's
    wrapper."""
    made = _OPAQUE.get(function)
    if made is None:
        if "torch._dynamo" not in sys.modules:
            return function
        made = _OPAQUE[function] = _skipped(function)
    return made


def _skipped(function):
    """`function`, skipped by dynamo as _opaque says."""
    import torch
    try:
        from torch._C._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
        set_code_exec_strategy(function.__code__,
                               FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))
    except (ImportError, AttributeError, TypeError, RuntimeError):
        return torch.compiler.disable(function)
    function._torchdynamo_disable = True
    return function


def _version(t):
    """`t`'s version counter (None for an inference tensor, which keeps none)."""
    return None if t.is_inference() else t._version


def _holds_for(module) -> bool:
    """Does the keep-finite or mask rule hold for this instance of its class: max pools that
    skip no element (dilation 1: every window then holds an element of the input), clamps
    with finite bounds (a NaN bound makes NaN)?"""
    own = module.__dict__  # plain attributes: Module.__getattr__ is slow to miss
    if not _undilated(own):
        return False
    return math.isfinite(own.get("min_val", 0.0)) and math.isfinite(own.get("max_val", 0.0))


#: What a keep-finite rule says of its output's magnitudes: _SAME (each output element is an input
#: element, 0, or a value between 0 and one: below the input's bound) or k (below 2**k whatever
#: the input: tanh, sigmoid and softmax lie in [-1, 1]).
_SAME = "same"
_MODULE_BOUNDS = {"ReLU": _SAME, "MaxPool1d": _SAME, "MaxPool2d": _SAME, "MaxPool3d": _SAME,
                  "AdaptiveMaxPool1d": _SAME, "AdaptiveMaxPool2d": _SAME,
                  "AdaptiveMaxPool3d": _SAME, "Flatten": _SAME, "Unflatten": _SAME,
                  "Tanh": 1, "Sigmoid": 1, "Softmax": 1}
#: The same for _KEEP_FINITE_NODES: SiLU's x * sigmoid(x) lies between 0 and x.
_NODE_BOUNDS = {"ReluBackward0": _SAME, "SiluBackward0": _SAME, "TanhBackward0": 1,
                "SigmoidBackward0": 1, "SoftmaxBackward0": 1}
#: _made_finite's answer when the rule does not apply.
_UNPROVEN = object()


def _module_bound(module):
    """What module's keep-finite rule says of its output's magnitudes (_MODULE_BOUNDS), None
    where it says nothing: a clamp (ReLU6, Hardtanh) keeps every magnitude only when its range
    holds 0 (clamp(0.5, 2, 3) is 2)."""
    name = type(module).__name__
    if name in ("ReLU6", "Hardtanh"):
        own = module.__dict__
        return _SAME if own.get("min_val", 0.0) <= 0.0 <= own.get("max_val", 0.0) else None
    return _MODULE_BOUNDS.get(name)


def _known_bound(state: _Pass, t):
    """k with every magnitude of `t` below 2**k, as read or proven in this pass with `t` unwritten
    since; None when not known (not met, written since, read non-finite, no bound kept, or an
    inference tensor: it keeps no version, so its entry may be stale)."""
    known = state.checked.get(id(t))
    if known is None or known[0] is not t or t.is_inference() or known[2] != t._version:
        return None
    return known[3]


def _kept_bound(rule, received):
    """The output's magnitude bound under `rule` (None, _SAME or k) from its input's
    (`received`: k or None, not known)."""
    return received if rule is _SAME else rule


def _undilated(own: dict) -> bool:
    """Is a module's `dilation` (from its __dict__: none, an int, a tuple or list) 1 in every
    dimension?"""
    dilation = own.get("dilation", 1)
    if dilation == 1:  # (most modules have none)
        return True
    return all(d == 1 for d in (dilation if isinstance(dilation, (tuple, list)) else (dilation,)))


def _apart(module) -> bool:
    """Does each element of the input lie in one window at most (max pools: dilation 1 and a
    stride at least the kernel in every dimension), so that the backward writes one gradient
    value or 0 to it? True for modules without windows (clamps)."""
    own = module.__dict__
    kernel = own.get("kernel_size")
    if kernel is None:
        return True
    if not _undilated(own):  # windows k apart with gaps interleave
        return False
    stride = own.get("stride")
    stride = kernel if stride is None else stride  # torch's default: the kernel
    kernel = tuple(kernel) if isinstance(kernel, (tuple, list)) else (kernel,)
    stride = tuple(stride) if isinstance(stride, (tuple, list)) else (stride,)
    n = max(len(kernel), len(stride))
    if {len(kernel), len(stride)} - {1, n}:
        return False
    kernel, stride = kernel * (n // len(kernel)), stride * (n // len(stride))  # an int: each
    return all(isinstance(k, int) and isinstance(st, int) and st >= k
               for k, st in zip(kernel, stride))


def _fill_tables(torch) -> None:
    """The rules' classes, torch's own forward of each, and what the node hooks need: made when
    a watch is first entered (torch is loaded)."""
    import inspect
    import os
    keep_finite = {getattr(torch.nn, name) for name in KEEP_FINITE_NAMES}
    _NORMS.update((getattr(torch.nn, name), node) for name, node in _NORM_NODES.items())
    _MASKS.update((getattr(torch.nn, name), frozenset(nodes))
                  for name, nodes in _MASK_NODES.items())
    home = os.path.dirname(torch.nn.modules.__file__)
    _LINEAR_MAPS.update(getattr(torch.nn, name) for name in _LINEAR_MAP_NAMES)
    functional, routes = torch.nn.functional, []
    for name in _LINEAR_FUNCTIONS:
        function = getattr(functional, name)
        code = getattr(function, "__code__", None)
        # torch's own: a builtin, or a function of torch.nn.functional itself (pad), unwrapped
        ours = (code is None and type(function).__name__ == "builtin_function_or_method") or (
            code is not None and inspect.unwrap(function) is function
            and code.co_filename == getattr(functional, "__file__", None))
        routes.append((functional, name, function if ours else None))
    builtin = getattr(torch._C._nn, "pad", None)
    routes += [(torch.nn.modules.linear, "F", functional),
               (torch.nn.modules.conv, "F", functional),
               (torch._C._nn, "pad",
                builtin if type(builtin).__name__ == "builtin_function_or_method" else None)]
    _TORCH_FUNCTIONS[:] = routes
    linear = ((functional, "linear"), (torch.nn.modules.linear, "F"))
    _LINEAR_ROUTES[:] = [route for route in routes if route[:2] in linear]
    for cls in _LINEAR_MAPS:
        own = getattr(cls, "_conv_forward", None)
        code = getattr(own, "__code__", None)
        if own is not None and code is not None and os.path.dirname(code.co_filename) == home:
            _TORCH_CONV_FORWARD[cls] = own
    for cls in (*keep_finite, *_NORMS, *_LINEAR_MAPS, torch.nn.Sequential):
        forward = getattr(cls, "forward", None)  # ReLU6's is Hardtanh's
        code = getattr(forward, "__code__", None)
        # replaced before now (a wrapper copies torch's names, not its code): no rule for it
        ours = (code is not None and inspect.unwrap(forward) is forward
                and os.path.dirname(code.co_filename) == home)
        _TORCH_FORWARD[cls] = forward if ours else None
    saved_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    _TABLES.update(modules=torch.nn.modules.module, tensor=torch.Tensor,
                   modes=checker(torch).modes_active,
                   saved_hooks=saved_hooks or (lambda ignore_tracing: "unknown"),
                   queue=torch.autograd.Variable._execution_engine.queue_callback,
                   task=torch._C._current_graph_task_id, strided=torch.strided,
                   autocast=_autocast_on(torch))
    # last: a filled _KEEP_FINITE says every table is (a thread entering meanwhile fills them
    # too, with the same values)
    _KEEP_FINITE.update(keep_finite)


def _autocast_on(torch):
    """A function telling whether autocast is on for the CPU in this thread (True always where
    torch cannot tell)."""
    enabled = getattr(torch, "is_autocast_enabled", None)
    try:
        enabled("cpu")
    except (TypeError, RuntimeError):
        cpu = getattr(torch, "is_autocast_cpu_enabled", None)
        return cpu if cpu is not None else (lambda: True)
    return functools.partial(enabled, "cpu")


def _torch_functions(routes: list = _TORCH_FUNCTIONS) -> bool:
    """Are the functions torch's Linear and convolutions call (F.linear, F.conv*d, F.pad, and
    the builtin pad beneath F.pad, through the `F` of their modules) those torch made,
    unpatched since the first watch? `routes`: some of them only (_LINEAR_ROUTES)."""
    for home, name, held in routes:
        if held is None or getattr(home, name, None) is not held:
            return False
    return True


def _modes() -> bool:
    """Is a torch-function or dispatch mode active (it could reroute torch's operations)?"""
    return _TABLES["modes"]()


def _remember(state: _Pass, t, described, bound=None) -> None:
    """Note `t` as checked in this pass, as it is now (described: None when finite; bound: k
    with every magnitude in `t` below 2**k, None when not known)."""
    checked = state.checked
    if len(checked) >= _RECENT:  # bounded: in inference, activations are freed as the pass goes
        del checked[next(iter(checked))]  # on; keep only the recent ones
    checked[id(t)] = (t, described, _version(t), bound)


def _depth(role) -> int:
    name = role[1]
    return name.count(".") + 1 if name else 0


def _join(module: str, parameter: str) -> str:
    return f"{module}.{parameter}" if module else parameter


def _with_thread(finding: Finding) -> Finding:
    from dataclasses import replace
    return replace(finding, thread=threading.get_ident())


def _is_compiled(module) -> bool:
    """torch.compile's wrapper (OptimizedModule): its `_orig_mod` is the module that runs."""
    return type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod")


def _unwrap(model):
    while _is_compiled(model):
        model = model._orig_mod
    return model


def _clean(name: str) -> str:
    """A module's name as the user wrote the model: without torch.compile's `_orig_mod`."""
    if "_orig_mod" not in name:
        return name
    return ".".join(part for part in name.split(".") if part != "_orig_mod")
