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
    claim (`claims`: watch's to fill)."""

    __slots__ = ("root", "layers", "names", "dtype", "forwards", "params", "products", "places",
                 "claims")

    def __init__(self, root, layers: tuple, names: tuple, dtype, forwards: tuple, params: list):
        self.root, self.layers, self.names, self.dtype = root, layers, names, dtype
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
    node Linear j's forward made), hooked when the forward ends. No tensor is kept past the
    forward but a deferred finding's: the node hooks hold this."""

    __slots__ = ("plan", "at", "live", "last", "kx", "linked", "grads", "terms", "output",
                 "deferred", "nodes")

    def __init__(self, plan: Plan):
        self.plan, self.at, self.live, self.last, self.terms = plan, 0, True, None, 0
        self.output = self.deferred = None
        count = len(plan.params)
        self.kx: list = [None] * count
        self.linked = [False] * count
        self.grads: list = [None] * count
        self.nodes: list = []


def plan(torch, model, forwards: dict, plain: tuple) -> Plan | None:
    """The chain `model` is (torch's own Sequential, unpatched, holding torch's own Linear and
    ReLU(inplace=False), unpatched, alternating, Linear first and last, each once, with no
    module of their own, no parameter but the Linears' weight and bias, every parameter of a
    `plain` type and of one floating dtype), or None. `forwards`: class -> torch's own forward
    of it."""
    nn = torch.nn
    classes = (nn.Sequential, nn.Linear, nn.ReLU)
    own = tuple((cls, forwards.get(cls)) for cls in classes)
    if (type(model) is not nn.Sequential or "forward" in model.__dict__ or model._parameters
            or any(cls.forward is not forward for cls, forward in own)):
        return None
    layers = tuple(model._modules.values())
    if not len(layers) & 1 or len(set(map(id, layers))) != len(layers):
        return None
    for layer in layers[1::2]:
        if (type(layer) is not nn.ReLU or layer.__dict__.get("inplace", True)
                or "forward" in layer.__dict__ or layer._modules or layer._parameters):
            return None
    params, dtype = [], None
    for layer in layers[::2]:
        held = layer._parameters
        if (type(layer) is not nn.Linear or "forward" in layer.__dict__ or layer._modules
                or held.keys() != _LINEAR_PARAMETERS):
            return None
        weight, bias = held.get("weight"), held.get("bias")
        if type(weight) not in plain or (bias is not None and type(bias) not in plain):
            return None
        dtype = weight.dtype if dtype is None else dtype
        if weight.dtype != dtype or (bias is not None and bias.dtype != dtype):
            return None
        params.append((weight, bias))
    if not dtype.is_floating_point:
        return None
    return Plan(model, layers, tuple(model._modules), dtype, own, params)


def intact(plan: Plan, modules) -> bool:
    """Is the model still the chain `plan` made of (the same layers, parameters and forwards, no
    ReLU made in place since), with no hook but watch's on its modules (one forward hook each,
    and the model's pre-hook and two forward hooks) and no global module hook (`modules`:
    torch.nn.modules.module)?"""
    if (modules._global_forward_hooks or modules._global_forward_pre_hooks
            or modules._global_backward_hooks or modules._global_backward_pre_hooks):
        return False
    root = plan.root
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
