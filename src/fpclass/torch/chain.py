"""A chain: a model that is torch's own Sequential of Linear and ReLU layers, alternating, Linear
first and last (the README's MLP). In a pass that holds the chain's conditions
(watching.watch._chain_pass) every intermediate tensor is one layer's output and the next
layer's only input, and nothing else can reach it: watch checks such a pass with one forward hook
and one autograd-node hook a Linear and no tensor hook (watching.watch._chain_linear,
_chain_backward)."""

from __future__ import annotations

#: autograd's node of a Linear over a 2-d input -> (where its input's gradient is among the
#: gradients the node makes, where its weight's is): addmm(bias, x, W.t()) with a bias (its
#: first gradient is the bias's), mm(x, W.t()) without.
PRODUCTS = {"AddmmBackward0": (1, 2), "MmBackward0": (0, 1)}
#: autograd's node of relu(x) (not in place).
RELU = "ReluBackward0"
#: The names of a Linear's parameters (its bias None where it has none).
_LINEAR_PARAMETERS = {"weight", "bias"}


class Plan:
    """The chain's layers (`layers`, in order: Linear, ReLU, ..., Linear), their names, the
    dtype of every parameter, torch's own classes with their forwards (`forwards`), and for
    each Linear its weight and bias (`params`), the node its forward makes (`products`), that
    node's gradients' places (`places`: PRODUCTS) and the parameters whose gradients it may
    claim (`claims`: watch's to fill). No reference to the model itself: watch keeps plans by
    model, weakly."""

    __slots__ = ("layers", "names", "dtype", "forwards", "params", "products", "places",
                 "claims")

    def __init__(self, layers: tuple, names: tuple, dtype, forwards: tuple, params: list):
        self.layers, self.names, self.dtype = layers, names, dtype
        self.forwards = forwards
        self.params = params
        self.products = tuple("MmBackward0" if b is None else "AddmmBackward0"
                              for _, b in params)
        self.places = tuple(PRODUCTS[name] for name in self.products)
        self.claims: list = [(None, None)] * len(params)


class Pass:
    """One chain pass: the next layer expected (`at`), whether the pass is still the chain's
    (`live`), the last Linear's output, its node and its magnitude bound (held for the next
    Linear's check of its input; dropped when the forward ends), for each Linear the bound on
    its input (`kx`: None, not known), whether its output reached the next Linear through its
    ReLU alone (`linked`), and the bound its node noted for its input's gradient, with the
    backward it was noted in (`grads`); `terms`: the bits of the rows' count, as a sum over them
    adds; `output`: the model output's gradient as read (a weak reference, its version, its
    bound, the backward); `deferred`: a finding on a Linear's input's gradient, held for the
    next node's hook (the backward's graph task, then _found's arguments); `nodes`: (j, the
    node Linear j's forward made), hooked when the forward ends; `exact`: (a backward's graph
    task, whether no mode and no autocast was on in it). No tensor is kept past the forward but
    a deferred finding's: the node hooks hold this."""

    __slots__ = ("plan", "at", "live", "last", "kx", "linked", "grads", "terms", "output",
                 "deferred", "nodes", "exact")

    def __init__(self, plan: Plan):
        self.plan, self.at, self.live, self.last, self.terms = plan, 0, True, None, 0
        self.output = self.deferred = self.exact = None
        count = len(plan.params)
        self.kx: list = [None] * count
        self.linked = [False] * count
        self.grads: list = [None] * count
        self.nodes: list = []


def plan(torch, model, forwards: dict, plain: tuple, known: Plan | None = None) -> Plan | None:
    """The chain `model` is (torch's own Sequential, unpatched, holding torch's own Linear and
    ReLU(inplace=False), unpatched, alternating, Linear first and last, each once, with no
    module of their own, no parameter but the Linears' weight and bias, every parameter of a
    `plain` type and of one floating dtype), or None. `forwards`: class -> torch's own forward
    of it. `known`, a plan made of `model` before, is returned as it is when it still describes
    the model (the same layers under the same names, the same parameters, the same dtype):
    the same walk, nothing made."""
    nn = torch.nn
    if known is not None:
        return known if _still(nn, model, known, plain) else plan(torch, model, forwards, plain)
    classes = (nn.Sequential, nn.Linear, nn.ReLU)
    own = tuple((cls, forwards.get(cls)) for cls in classes)
    if not _plain_root(nn, model, own):
        return None
    layers = tuple(model._modules.values())
    if not len(layers) & 1 or len(set(map(id, layers))) != len(layers):
        return None
    if not all(_plain_relu(nn, layer) for layer in layers[1::2]):
        return None
    params, dtype = [], None
    for layer in layers[::2]:
        if not _plain_linear(nn, layer):
            return None
        weight, bias = layer._parameters["weight"], layer._parameters["bias"]
        if type(weight) not in plain or (bias is not None and type(bias) not in plain):
            return None
        dtype = weight.dtype if dtype is None else dtype
        if weight.dtype != dtype or (bias is not None and bias.dtype != dtype):
            return None
        params.append((weight, bias))
    if not dtype.is_floating_point:
        return None
    return Plan(layers, tuple(model._modules), dtype, own, params)


def _still(nn, model, known: Plan, plain: tuple) -> bool:
    """Would plan() find in `model` now the chain `known` is: its layers under its names, its
    parameters, of its dtype and `plain` types?"""
    modules = model._modules
    if (not _plain_root(nn, model, known.forwards) or tuple(modules.values()) != known.layers
            or tuple(modules) != known.names):
        return False
    layers, dtype = known.layers, known.dtype
    if not all(_plain_relu(nn, layer) for layer in layers[1::2]):
        return False
    for layer, (weight, bias) in zip(layers[::2], known.params):
        if not _plain_linear(nn, layer):
            return False
        held = layer._parameters
        if (held["weight"] is not weight or held["bias"] is not bias
                or type(weight) not in plain or weight.dtype != dtype
                or (bias is not None and (type(bias) not in plain or bias.dtype != dtype))):
            return False
    return True


def _plain_root(nn, model, own: tuple) -> bool:
    """Is `model` torch's own Sequential, with no parameter of its own, and are the chain's
    classes' forwards those in `own` ((class, torch's own forward) pairs)?"""
    return (type(model) is nn.Sequential and "forward" not in model.__dict__
            and not model._parameters
            and all(cls.forward is forward for cls, forward in own))


def _plain_relu(nn, layer) -> bool:
    """Is `layer` torch's own ReLU, not in place, with no forward, module or parameter of its
    own?"""
    return (type(layer) is nn.ReLU and not layer.__dict__.get("inplace", True)
            and "forward" not in layer.__dict__ and not layer._modules
            and not layer._parameters)


def _plain_linear(nn, layer) -> bool:
    """Is `layer` torch's own Linear with no forward or module of its own and no parameter but
    its weight and bias?"""
    return (type(layer) is nn.Linear and "forward" not in layer.__dict__
            and not layer._modules and layer._parameters.keys() == _LINEAR_PARAMETERS)


def intact(plan: Plan, root, modules) -> bool:
    """Is `root`, the model, still the chain `plan` was made of (the same layers, parameters and
    forwards, no ReLU made in place since), with no hook but watch's on its modules (one
    forward hook each, and the model's pre-hook and two forward hooks) and no global module
    hook (`modules`: torch.nn.modules.module)?"""
    if (modules._global_forward_hooks or modules._global_forward_pre_hooks
            or modules._global_backward_hooks or modules._global_backward_pre_hooks):
        return False
    if (len(root._forward_hooks) != 2 or len(root._forward_pre_hooks) != 1
            or root._backward_hooks or root._backward_pre_hooks or "forward" in root.__dict__
            or tuple(root._modules.values()) != plan.layers
            or any(cls.forward is not forward for cls, forward in plan.forwards)):
        return False
    for layer in plan.layers:
        own = layer.__dict__
        if (len(layer._forward_hooks) != 1 or layer._forward_pre_hooks or layer._backward_hooks
                or layer._backward_pre_hooks or "forward" in own or own.get("inplace")):
            return False
    for layer, (weight, bias) in zip(plan.layers[::2], plan.params):
        held = layer._parameters
        if held.get("weight") is not weight or held.get("bias") is not bias:
            return False
    return True
