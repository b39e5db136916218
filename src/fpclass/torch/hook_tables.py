"""torch's hook tables, written as torch's own register_*_hook methods write them but without a
RemovableHandle for each hook: a watched step adds and removes some fifty hooks, and making their
handles cost about a third of entering and leaving the context (docs/benchmarks.md, issue 22,
eighteenth round). Every entry is keyed by a number from torch's own handle counter, so it never
meets a key of torch's. Where torch's tables are not as these functions expect (another torch
version), each falls back to torch's method and keeps its handle."""

from __future__ import annotations

import weakref
from collections import OrderedDict

#: torch.utils.hooks.RemovableHandle, once checked (None: torch's methods are used).
_HANDLES: list = []


def _counter():
    """RemovableHandle when torch's tables are as expected, else None (checked once)."""
    if not _HANDLES:
        import torch
        from torch.utils.hooks import RemovableHandle
        module, tensor = torch.nn.Module(), torch.zeros(1, requires_grad=True)
        expected = (isinstance(getattr(RemovableHandle, "next_id", None), int)
                    and all(isinstance(getattr(module, name, None), dict) for name in (
                        "_forward_hooks", "_forward_hooks_with_kwargs",
                        "_forward_pre_hooks",
                        "_forward_pre_hooks_with_kwargs"))
                    and hasattr(tensor, "_post_accumulate_grad_hooks")
                    and hasattr(tensor, "_backward_hooks"))
        _HANDLES.append(RemovableHandle if expected else None)
    return _HANDLES[0]


def _key(counter) -> int:
    key = counter.next_id
    counter.next_id = key + 1
    return key


def add_module_hook(added: list, module, hook, *, pre: bool = False,
                    with_kwargs: bool = False, prepend: bool = False) -> None:
    """module.register_forward_hook(hook, with_kwargs=..., prepend=...), or with `pre`
    register_forward_pre_hook, noted in `added`."""
    counter = _counter()
    if counter is None:
        register = module.register_forward_pre_hook if pre else module.register_forward_hook
        added.append(register(hook, with_kwargs=with_kwargs, prepend=prepend))
        return
    key = _key(counter)
    hooks, flags = ((module._forward_pre_hooks, module._forward_pre_hooks_with_kwargs) if pre
                    else (module._forward_hooks, module._forward_hooks_with_kwargs))
    hooks[key] = hook
    added.append((hooks, key))
    if with_kwargs:
        flags[key] = True
        added.append((flags, key))
    if prepend:
        hooks.move_to_end(key, last=False)


def add_post_accumulate_hook(added: list, parameter, hook) -> None:
    """parameter.register_post_accumulate_grad_hook(hook) (a leaf tensor that requires grad:
    the caller's duty), noted in `added`."""
    counter = _counter()
    if counter is None or _overridden(parameter) or parameter.grad_fn is not None:
        added.append(parameter.register_post_accumulate_grad_hook(hook))  # (or its error)
        return
    hooks = parameter._post_accumulate_grad_hooks
    if hooks is None:  # setting the table is what installs it in autograd
        parameter._post_accumulate_grad_hooks = hooks = OrderedDict()
    key = _key(counter)
    hooks[key] = hook
    added.append((hooks, key))


def add_tensor_hook(tensor, hook):
    """tensor.register_hook(hook) (a tensor that requires grad: the caller's duty), never
    removed: (a weak reference to the tensor's hook table, hook's key in it)."""
    counter = _counter()
    if counter is None or _overridden(tensor):
        handle = tensor.register_hook(hook)
        return handle.hooks_dict_ref, handle.id
    hooks = tensor._backward_hooks
    if hooks is None:  # as torch's method: the table, then its node told of it
        tensor._backward_hooks = hooks = OrderedDict()
        node = tensor.grad_fn
        if node is not None:
            node._register_hook_dict(tensor)
    key = _key(counter)
    hooks[key] = hook
    return weakref.ref(hooks), key


def remove(added: list) -> None:
    """Remove every hook noted in `added` (by the functions above, or any handle with a remove()
    method), and empty it."""
    for entry in added:
        if type(entry) is tuple:
            entry[0].pop(entry[1], None)
        else:
            entry.remove()
    added.clear()


def _overridden(tensor) -> bool:
    """Does `tensor` reroute torch's functions (a subclass's __torch_function__: torch's methods
    then call it)?"""
    from torch.overrides import has_torch_function_unary
    return has_torch_function_unary(tensor)
