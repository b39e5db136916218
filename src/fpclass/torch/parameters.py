"""Parameters as watch sees them: the module that owns each one, a hook on each parameter's
gradient once accumulated, and the tensors an optimizer step leaves behind."""

from __future__ import annotations

from . import hook_tables


def owners(modules) -> dict:
    """id(parameter) -> (owning module's name, its class name, the parameter's own name, the
    parameter), from (name, module) pairs in named_modules() order: a parameter shared by
    several modules belongs to the first that holds it."""
    from torch.nn import Module  # the model is torch's: torch is loaded
    named = Module.named_parameters
    out: dict = {}
    for name, module in modules:
        kind = type(module)
        # a module that keeps torch's named_parameters is read from its table: the same pairs,
        # in the same order, without a generator per module (a step's watch reads them all)
        own = (module._parameters.items() if kind.named_parameters is named
               and isinstance(getattr(module, "_parameters", None), dict)
               else module.named_parameters(recurse=False))
        for pname, p in own:
            if p is not None and id(p) not in out:
                out[id(p)] = (name, kind.__name__, pname, p)
    return out


def hooked(owners: dict, selected: dict) -> list:
    """The parameters whose gradients watch hooks (hook_gradients): each of a module in
    `selected` that requires grad."""
    return [p for name, _, _, p in owners.values() if name in selected and p.requires_grad]


def hook_gradients(params: list, hook, handles: list) -> None:
    """`hook(parameter)` run on each of `params` (tensors that require grad), each time
    autograd has accumulated its .grad; the hooks noted in `handles` as they are added (so a
    failure halfway leaves them to the caller to remove: hook_tables.remove)."""
    if params and not hasattr(type(params[0]), "register_post_accumulate_grad_hook"):
        raise RuntimeError("watch(grads=True) needs torch >= 2.1 "
                           "(Tensor.register_post_accumulate_grad_hook); pass grads=False")
    hook_tables.add_post_accumulate_hooks(handles, params, hook)


def step_tensors(optimizer, owners: dict):
    """(tensor, (module, class, parameter name), label, the parameter's grad) for each parameter
    of `optimizer` after its step ("weight after step") and each tensor of its state
    ("exp_avg of weight"); parameters outside the model are named by their place in
    param_groups."""
    for g, group in enumerate(optimizer.param_groups):
        for i, p in enumerate(group["params"]):
            owner = owners.get(id(p))
            if owner is None or owner[3] is not p:
                owner = ("", "?", f"param_groups[{g}].params[{i}]")
            else:
                owner = owner[:3]
            pname = owner[2]
            yield p, owner, f"{pname} after step", p.grad
            for key, value in optimizer.state.get(p, {}).items():
                if hasattr(value, "is_floating_point"):
                    yield value, owner, f"{key} of {pname}", p.grad
