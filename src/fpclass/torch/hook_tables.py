"""torch's hook tables, written as torch's own register_*_hook methods write them but without a
RemovableHandle for each hook: a watched step adds and removes some fifty hooks, and making their
handles cost about a third of entering and leaving the context (docs/benchmarks.md, issue 22,
eighteenth round). Every entry is keyed by a number from torch's own handle counter, taken a
block at a time (_key), so it never meets a key of torch's. torch's method is called instead,
its handle kept, where the tables are not as these functions expect (another torch version),
where the object's class has a method of its own (a ScriptModule refuses hooks; a subclass may
do more), for a tensor that reroutes torch's functions, and while torch.compile traces the call
(dynamo writes into its own copy of the tables, and knows torch's methods)."""

from __future__ import annotations

import weakref
from collections import OrderedDict

#: [torch.utils.hooks.RemovableHandle or None (torch's tables are not as expected), torch's
#: register methods by name, torch.compiler.is_compiling, has_torch_function_unary], once made.
_TORCH: list = []
#: (class, register method's name) -> does the class keep torch's own method?
_OWN: dict = {}


def _torch() -> list:
    if not _TORCH:
        import torch
        from torch.overrides import has_torch_function_unary
        from torch.utils.hooks import RemovableHandle
        module, tensor = torch.nn.Module(), torch.zeros(1, requires_grad=True)
        expected = (isinstance(getattr(RemovableHandle, "next_id", None), int)
                    and all(isinstance(getattr(module, name, None), OrderedDict) for name in (
                        "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_pre_hooks",
                        "_forward_pre_hooks_with_kwargs"))
                    and hasattr(tensor, "_post_accumulate_grad_hooks")
                    and hasattr(tensor, "_backward_hooks"))
        methods = {"register_forward_hook": torch.nn.Module.register_forward_hook,
                   "register_forward_pre_hook": torch.nn.Module.register_forward_pre_hook,
                   "register_post_accumulate_grad_hook":
                       torch.Tensor.register_post_accumulate_grad_hook,
                   "register_hook": torch.Tensor.register_hook}
        _TORCH[:] = [RemovableHandle if expected else None, methods,
                     torch.compiler.is_compiling, has_torch_function_unary]
    return _TORCH


def _direct(owner, method: str):
    """torch's handle counter when `owner`'s table for `method` is written here, else None (see
    the module's docstring; a tensor's own rerouting is its adder's to check: _plain)."""
    return _written(owner, method, _counter_now())


def _written(owner, method: str, counter):
    """`counter` (_counter_now's, None passed on) when `owner`'s class keeps torch's own register
    `method` (noted in _OWN), else None."""
    if counter is None:
        return None
    key = (type(owner), method)
    own = _OWN.get(key)
    if own is None:
        own = _OWN[key] = getattr(key[0], method, None) is (_TORCH or _torch())[1][method]
    return counter if own else None


def _counter_now():
    """torch's handle counter when torch's tables may be written here now (as torch expects
    them, and torch.compile not tracing), else None."""
    counter, _, compiling, _ = _TORCH or _torch()
    return None if counter is None or compiling() else counter


def _plain(tensor) -> bool:
    """Does `tensor` leave torch's functions alone (no __torch_function__ of a subclass, which
    torch's register methods call)?"""
    return not (_TORCH or _torch())[3](tensor)


#: [the next key, the end] of the block of torch's handle numbers taken here, and the counter
#: they were taken from.
_BLOCK: list = [0, 0, None]
#: Keys taken from torch's counter at a time: each take writes a class attribute, which
#: invalidates the class's caches (a hook added inside a step paid about 1 us for it).
_BLOCK_SIZE = 1024


def _key(counter, table) -> int:
    """A number from torch's handle counter for a new entry of `table`: one no entry of it has
    and no handle torch makes from now on will have. Numbers are taken a block at a time, the
    counter moved past the whole block (a new block where it was moved back below it); a handle
    unpickled from another process may hold one of the block's numbers, hence the table's
    check. No other call here returns the same number, in any thread: between reading the
    block and moving it on there is no call, so under the GIL no other thread runs."""
    block = _BLOCK
    while True:
        key = block[0]
        if key >= block[1] or block[2] is not counter or counter.next_id < block[1]:
            key = counter.next_id
            counter.next_id = key + _BLOCK_SIZE
            block[1], block[2] = key + _BLOCK_SIZE, counter
        block[0] = key + 1
        if key not in table:
            return key


def add_module_hook(added: list, module, hook, *, pre: bool = False,
                    with_kwargs: bool = False, prepend: bool = False,
                    always_call: bool = False) -> None:
    """module.register_forward_hook(hook, with_kwargs=..., prepend=..., always_call=...), or
    with `pre` register_forward_pre_hook (no always_call), noted in `added`."""
    method = "register_forward_pre_hook" if pre else "register_forward_hook"
    counter = _direct(module, method)
    if counter is None:
        options = {"always_call": True} if always_call else {}
        added.append(getattr(module, method)(hook, with_kwargs=with_kwargs, prepend=prepend,
                                             **options))
        return
    hooks, flags = ((module._forward_pre_hooks, module._forward_pre_hooks_with_kwargs) if pre
                    else (module._forward_hooks, module._forward_hooks_with_kwargs))
    key = _key(counter, hooks)  # (a flag's key is its hook's)
    # the flags first: another thread's call never meets the hook without them
    marks = [flags] * with_kwargs + [module._forward_hooks_always_called] * always_call
    for table in marks:
        table[key] = True
    hooks[key] = hook
    added.append((hooks, key))  # (removed in this order: the hook before its flags)
    added += [(table, key) for table in marks]
    if prepend:
        hooks.move_to_end(key, last=False)


def add_forward_hooks(added: list, module_hooks) -> None:
    """add_module_hook(added, module, hook, with_kwargs=True) for each (module, hook) of
    `module_hooks`, torch's state (its tables, whether torch.compile traces) asked once for
    them all: entering a watch adds one a module."""
    # (its own loop, not add_module_hook's body as a shared helper: with that helper, a watch
    # entered while dynamo traced lost its layers' hooks: test_torch_watch_compile)
    counter = _counter_now()
    for module, hook in module_hooks:
        direct = _written(module, "register_forward_hook", counter)
        if direct is None:
            added.append(module.register_forward_hook(hook, with_kwargs=True))
            continue
        hooks, flags = module._forward_hooks, module._forward_hooks_with_kwargs
        key = _key(direct, hooks)
        flags[key] = True  # (first: another thread's call never meets the hook without it)
        hooks[key] = hook
        added += ((hooks, key), (flags, key))


def add_post_accumulate_hooks(added: list, parameters, hook) -> None:
    """parameter.register_post_accumulate_grad_hook(hook) for each of `parameters` (tensors
    that require grad: the caller's duty), noted in `added`, torch's state asked once for them
    all."""
    counter, method = _counter_now(), "register_post_accumulate_grad_hook"
    rerouted = (_TORCH or _torch())[3]
    for parameter in parameters:
        direct = _written(parameter, method, counter)
        if direct is None or rerouted(parameter) or parameter.grad_fn is not None:
            added.append(parameter.register_post_accumulate_grad_hook(hook))  # (or its error)
            continue
        hooks = parameter._post_accumulate_grad_hooks
        if hooks is None:  # setting the table is what installs it in autograd
            parameter._post_accumulate_grad_hooks = hooks = OrderedDict()
        key = _key(direct, hooks)
        hooks[key] = hook
        added.append((hooks, key))


def add_tensor_hook(tensor, hook):
    """tensor.register_hook(hook) (a tensor that requires grad: the caller's duty), never
    removed: (a weak reference to the tensor's hook table, hook's key in it)."""
    counter = _direct(tensor, "register_hook")
    if counter is None or not _plain(tensor):
        handle = tensor.register_hook(hook)
        return handle.hooks_dict_ref, handle.id
    hooks = tensor._backward_hooks
    if hooks is None:  # as torch's method: the table, then its node told of it
        tensor._backward_hooks = hooks = OrderedDict()
        node = tensor.grad_fn
        if node is not None:
            node._register_hook_dict(tensor)
    key = _key(counter, hooks)
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
