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


class Plan:
    """The chain's layers (`layers`, in order: Linear, ReLU, ..., Linear), their names, each
    layer's place (`position`: id(module) -> index), the dtype of every parameter, and for each
    Linear its weight and bias (`params`), the node its forward makes (`products`), that node's
    gradients' places (`places`: PRODUCTS) and the parameters whose gradients it may claim
    (`claims`: watch's to fill)."""

    __slots__ = ("root", "layers", "names", "position", "dtype", "params", "products", "places",
                 "claims")

    def __init__(self, root, layers: tuple, names: tuple, dtype, params: list):
        self.root, self.layers, self.names, self.dtype = root, layers, names, dtype
        self.position = {id(m): at for at, m in enumerate(layers)}
        self.params = params
        self.products = tuple("MmBackward0" if b is None else "AddmmBackward0"
                              for _, b in params)
        self.places = tuple(PRODUCTS[name] for name in self.products)
        self.claims: list = [(None, None)] * len(params)


class Pass:
    """One chain pass: the next layer expected (`at`; -1 once the pass is no chain's), the last
    Linear's output, its node and its magnitude bound (held for the next Linear's check of its
    input; dropped when the forward ends), and for each Linear the bound on its input
    (`kx`: None, not known), whether its output reached the next Linear through its ReLU alone
    (`linked`), and the bound its node noted for its input's gradient, with the backward it
    was noted in (`grads`); `terms`: the bits of the rows' count, as a sum over them adds;
    `deferred`: a finding on a Linear's input's gradient, held for the next node's hook (the
    backward's graph task, then _found's arguments). No tensor is kept past the forward but a
    deferred finding's: the node hooks hold this."""

    __slots__ = ("plan", "at", "last", "kx", "linked", "grads", "terms", "deferred")

    def __init__(self, plan: Plan):
        self.plan, self.at, self.last, self.terms = plan, 0, None, 0
        self.deferred = None
        count = len(plan.params)
        self.kx: list = [None] * count
        self.linked = [False] * count
        self.grads: list = [None] * count


def plan(torch, model, forwards: dict) -> Plan | None:
    """The chain `model` is (torch's own Sequential, unpatched, holding torch's own Linear and
    ReLU(inplace=False), unpatched, alternating, Linear first and last, with no module of their
    own, every parameter of one floating dtype), or None. `forwards`: class -> torch's own
    forward of it."""
    nn = torch.nn
    sequential, linear, relu = nn.Sequential, nn.Linear, nn.ReLU
    if (type(model) is not sequential or "forward" in model.__dict__
            or forwards.get(sequential) is not sequential.forward
            or forwards.get(linear) is not linear.forward
            or forwards.get(relu) is not relu.forward):
        return None
    layers = tuple(model._modules.values())
    if not len(layers) & 1:
        return None
    for layer in layers[1::2]:
        if (type(layer) is not relu or layer.__dict__.get("inplace", True)
                or "forward" in layer.__dict__ or layer._modules):
            return None
    params, dtype = [], None
    for layer in layers[::2]:
        if type(layer) is not linear or "forward" in layer.__dict__ or layer._modules:
            return None
        own = layer._parameters
        weight, bias = own.get("weight"), own.get("bias")
        dtype = weight.dtype if dtype is None else dtype
        if weight.dtype != dtype or (bias is not None and bias.dtype != dtype):
            return None
        params.append((weight, bias))
    if not dtype.is_floating_point:
        return None
    return Plan(model, layers, tuple(model._modules), dtype, params)


def unhooked(plan: Plan, modules) -> bool:
    """Do the chain's modules hold no hook but watch's (one forward hook each, and the model's
    pre-hook), with no global module hook (`modules`: torch.nn.modules.module)?"""
    if (modules._global_forward_hooks or modules._global_forward_pre_hooks
            or modules._global_backward_hooks or modules._global_backward_pre_hooks):
        return False
    root = plan.root
    if (len(root._forward_hooks) != 1 or len(root._forward_pre_hooks) != 1
            or root._backward_hooks or root._backward_pre_hooks):
        return False
    for layer in plan.layers:
        if (len(layer._forward_hooks) != 1 or layer._forward_pre_hooks or layer._backward_hooks
                or layer._backward_pre_hooks):
            return False
    return True
