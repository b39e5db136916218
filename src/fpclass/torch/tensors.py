"""The tensors watch meets: finding them in a module's arguments and outputs (with the name of the
argument each came in), telling masks from data, and checking one for NaN / Inf."""

from __future__ import annotations

import fnmatch
import inspect
import math

#: Argument names whose tensors are attention masks unless watch(masks=...) says otherwise:
#: nn.MultiheadAttention's attn_mask / key_padding_mask, nn.Transformer's src_mask, tgt_mask,
#: memory_mask and *_key_padding_mask, Hugging Face's attention_mask, and plain `mask`.
DEFAULT_MASKS = ("*mask",)


def mask_selector(masks):
    """A predicate (module name, argument name) -> bool: globs (or one glob) match the argument
    name, a callable is asked as it is, () marks nothing."""
    if masks is None:
        return _default_masks
    if callable(masks):
        return masks
    patterns = [masks] if isinstance(masks, str) else list(masks)
    if not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"masks must be a glob, a list of globs or a predicate (module name, "
                        f"argument name) -> bool, got {masks!r}")
    if not patterns:
        return lambda module, argument: False
    return lambda module, argument: _matches(argument, patterns)


def _matches(argument, patterns) -> bool:
    return argument is not None and any(fnmatch.fnmatchcase(argument, p) for p in patterns)


def _default_masks(module, argument) -> bool:
    """mask_selector(DEFAULT_MASKS), made once."""
    return _matches(argument, DEFAULT_MASKS)


_ARGUMENTS: dict = {}


def argument_names(module) -> tuple:
    """The names of `module.forward`'s positional parameters, in order (() where they cannot be
    read: a builtin, *args first); read once per forward function."""
    forward = module.forward
    key = getattr(forward, "__func__", forward)
    names = _ARGUMENTS.get(key)
    if names is None:
        try:
            params = list(inspect.signature(forward).parameters.values())
        except (TypeError, ValueError):
            params = []
        names = []
        for p in params:
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                break
            names.append(p.name)
        names = _ARGUMENTS[key] = tuple(names)
    return names


def tensors(value, kwargs, label, names=()):
    """(label, tensor, argument name or None) for every tensor in a module's arguments (`value`
    the positional ones, `kwargs`, `names` the positional parameters' names) or output
    (kwargs None), however nested."""
    if kwargs is not None:
        for i, item in enumerate(value):
            yield from _walk(item, f"{label}[{i}]", names[i] if i < len(names) else None)
        for key, item in kwargs.items():
            yield from _walk(item, f"{label}[{key!r}]", key)
        return
    yield from _walk(value, label, None)


#: Labels of the first positional arguments, made once ("input[0]", ...).
_LABELS = tuple(f"input[{i}]" for i in range(16))


def input_tensors(args, kwargs, tensor_type) -> list:
    """tensors(args, kwargs, "input") as a list; a call with positional tensors only (nearly
    every module call) is read without the generic walk."""
    if not kwargs and len(args) <= len(_LABELS):
        out = []
        for i, item in enumerate(args):
            if isinstance(item, tensor_type):
                out.append((_LABELS[i], item, None))
            elif isinstance(item, (tuple, list, dict)) or hasattr(item, "data_ptr"):
                return list(tensors(args, kwargs, "input"))
        return out
    return list(tensors(args, kwargs, "input"))


def _walk(value, label, argument):
    if hasattr(value, "data_ptr") and hasattr(value, "requires_grad"):
        yield label, value, argument
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{label}[{i}]", argument)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{label}[{key!r}]", argument)


def dense(t) -> bool:
    """Do `t`'s elements fill one block of memory from data_ptr() on, in some order of its
    dimensions (channels_last, a transpose)? Then it is read as one buffer, order aside."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


#: The least elements Checker.finite asks torch's sum about first: a tensor torch sums on
#: several threads (its grain is 2^15 elements). Below 2^16 no run showed a gain on the
#: channels_last CNN, whose read tensors are all smaller (docs/benchmarks.md, issue 22,
#: twenty-first round).
SUM_MIN = 1 << 16

_SCREENS: dict = {}
_MAGNITUDES: dict = {}  # torch dtype -> (its magnitude screen, its largest binade) or Nones
#: Checker.magnitude's answer for a finite tensor whose magnitudes it did not bound.
UNBOUNDED = 1 << 30
_CHECKERS: dict = {}


def checker(torch) -> "Checker":
    """The process's Checker for this torch, made once: it keeps nothing of one watch, and a
    watch is entered every step (a new one each time cost tens of microseconds, and a cycle for
    the garbage collector)."""
    made = _CHECKERS.get(id(torch))
    if made is None or made.torch is not torch:
        made = _CHECKERS[id(torch)] = Checker(torch)
    return made


class Checker:
    """Reads tensors for NaN / Inf: CPU tensors in place with fpclass's kernels (one screen per
    dtype, prepared once: operators.buffers.nonfinite_screen), a large one's finiteness first
    from torch's sum where torch has several threads (_summed: a finite sum proves it, anything
    else goes to the screen), others by torch on their device (one bool comes back, no data)."""

    def __init__(self, torch):
        from ..adapters import torch as adapter
        self.torch, self.adapter = torch, adapter
        # read in place: the plain types, whose memory is theirs (a subclass's may be none, as a
        # wrapper subclass's data_ptr() of 0; torch reads those through their dispatch)
        self.plain = (torch.Tensor, torch.nn.Parameter)
        from ..operators.buffers import mark_period
        self.screens = _SCREENS  # one per dtype and process: a watch is entered every step
        self.in_place = self._in_place(torch)
        self.modes_active = self._modes_active(torch)  # (before finite: its sum asks it)
        self.finite = self._screen(torch)
        self.magnitude = self._magnitude(torch)
        # a forward pass begins: the screens time passes to choose how to read large tensors
        self.pass_started = mark_period
        functorch = getattr(torch._C, "_functorch", None)
        self._wrapping = None if functorch is None else (functorch.is_functorch_wrapped_tensor,
                                                         functorch.get_unwrapped)

    def _in_place(self, torch):
        """in_place(t) as a closure: is `t` read in place as one buffer by a prepared screen, a
        plain strided CPU tensor, C- or channels_last-contiguous (nearly every hook's tensor)?"""
        strided, channels_last, plain = torch.strided, torch.channels_last, self.plain

        def in_place(t) -> bool:
            return (type(t) in plain and t.layout is strided and t.is_cpu
                    and (t.is_contiguous() or t.is_contiguous(memory_format=channels_last)))
        return in_place

    def _screen(self, torch):
        """finite() as a closure: a tensor read in place (in_place) of a dtype met before goes
        straight to that dtype's screen (the same words are read as on the general path);
        anything else to the general path."""
        screens, general, in_place = self.screens, self._finite, self.in_place
        summed = self._summed(torch)

        def finite(t) -> bool:
            screen = screens.get(t.dtype)
            if screen is not None and in_place(t):
                try:
                    address = t.data_ptr()
                except RuntimeError:  # no storage of its own (functorch's wrappers)
                    return general(t)
                return summed(t) or not screen(address, t.numel())
            return general(t)
        finite.__doc__ = self._finite.__doc__
        return finite

    @staticmethod
    def _modes_active(torch):
        """modes_active() as a closure: is a torch-function or dispatch mode active (it would
        see, or reroute, the operations torch is asked for)? True on a torch without the mode
        stacks (no telling)."""
        try:
            functions = torch._C._len_torch_function_stack
            dispatches = torch._C._len_torch_dispatch_stack
        except AttributeError:
            return lambda: True
        return lambda: bool(functions() or dispatches())

    def _summed(self, torch):
        """summed(t) as a closure: is torch's own sum of `t`, a real float tensor read in place,
        finite? A NaN or an Inf among the terms makes a float sum NaN or Inf, so a finite one
        proves every element finite; an Inf from finite terms overflowing, or no answer here
        (False), leaves `t` to the screen. torch sums on its own threads, awake in a training
        step: with several, this reads a tensor torch's threads have just written faster than
        the screen does on the calling thread (docs/benchmarks.md, issue 22, twenty-first
        round). Not below SUM_MIN elements, with torch on one thread, for a tensor that would
        record the sum in autograd's graph, or where someone else would see the sum: a
        torch-function or dispatch mode active, torch's profiler recording."""
        # bfloat16 sums in float32 inside and rounds to a format of float32's range; half
        # rounds to its own (65504), so large sums of finite halves would overflow and be read
        # twice: half is screened only (a wider sum dtype copies the tensor first)
        kinds = frozenset((torch.bfloat16, torch.float32, torch.float64))
        try:
            # torch's own sum, whatever a library has put in torch.sum's place
            total, isfinite = torch._C._VariableFunctions.sum, math.isfinite
            threads, grad_on = torch.get_num_threads, torch.is_grad_enabled
            profiling = torch._C._autograd._profiler_enabled
        except AttributeError:  # a torch without one of these: no sum, the screen reads
            return lambda t: False
        modes = self.modes_active

        def summed(t) -> bool:
            if (t.dtype not in kinds or t.numel() < SUM_MIN or threads() < 2
                    or (t.requires_grad and grad_on()) or modes() or profiling()):
                return False
            return isfinite(total(t).item())
        return summed

    def _magnitude(self, torch):
        """magnitude() as a closure, dispatched as finite() is: one prepared function per dtype
        (operators.buffers.magnitude_screen, None for dtypes without bounds)."""
        bounds, finite, in_place = _MAGNITUDES, self.finite, self.in_place

        def magnitude(t):
            """None when `t` holds a NaN or an Inf, else k with every magnitude in it below
            2**k (UNBOUNDED where no bound is read: a dtype or a layout without one)."""
            bound = (bounds.get(t.dtype) or self._bounds(t.dtype))[0]
            if bound is not None and in_place(t):
                try:
                    address = t.data_ptr()
                except RuntimeError:  # no storage of its own (functorch's wrappers)
                    return UNBOUNDED if finite(t) else None
                return bound(address, t.numel())
            return UNBOUNDED if finite(t) else None
        return magnitude

    def _bounds(self, dtype) -> tuple:
        """(operators.buffers.magnitude_screen of torch `dtype`, the least k with every finite
        value of it below 2**k), or (None, None) for dtypes without bounds; made once a dtype."""
        from ..formats import format_of, has_magnitude_bounds, largest_magnitude_exponent
        from ..operators.buffers import magnitude_screen
        np_dtype = self.adapter.numpy_dtype(dtype)
        f = None if np_dtype is None else format_of(np_dtype)
        made = (None, None)
        if f is not None and has_magnitude_bounds(f):
            made = (magnitude_screen(np_dtype), largest_magnitude_exponent(f))
        _MAGNITUDES[dtype] = made
        return made

    def magnitude_limit(self, dtype) -> int | None:
        """The least k with every finite value of torch `dtype` below 2**k (None: not known)."""
        return (_MAGNITUDES.get(dtype) or self._bounds(dtype))[1]

    def _finite(self, t) -> bool:
        """No NaN and no Inf in `t`. The stored words decide, so lazy negation and conjugation
        need no resolving."""
        torch = self.torch
        if not (t.is_floating_point() or t.is_complex()):
            return True
        t = self.physical(t)
        if t.layout is not torch.strided:  # sparse (an Embedding's sparse gradient): its values
            t = t.coalesce().values() if t.layout is torch.sparse_coo else t.values()
        if t.is_cpu and t.layout is torch.strided and type(t) in self.plain:
            if not t.is_contiguous() and 0 in t.stride():  # expanded (sum()'s gradient): each
                t = t.as_strided([1 if st == 0 else n for n, st in zip(t.shape, t.stride())],
                                 t.stride())             # stored element once
            if t.is_contiguous() or dense(t):
                screen = self.screens.get(t.dtype, False)
                if screen is False:
                    screen = self.screens[t.dtype] = self._screen_for(t.dtype)
                if screen is not None:
                    return not screen(t.data_ptr(), t.numel())
            from ..facade import any_nonfinite
            return not any_nonfinite(t)
        if t.is_meta:  # torch would fail inside .item(), naming no tensor and no remedy
            raise TypeError(f"fpclass.torch.watch cannot check a {t.dtype} tensor of shape "
                            f"{tuple(t.shape)} on the meta device: meta tensors hold no data. "
                            "Run the model on cpu or an accelerator to watch it")
        try:
            return bool(torch.isfinite(t).all())
        except (RuntimeError, NotImplementedError):  # no isfinite kernel for this dtype there
            return bool(torch.isfinite(t.float()).all())

    def physical(self, t):
        """`t`, or under torch.func's transforms (vmap, grad) the tensor it wraps, to the
        innermost: its memory, every batch's values in it (a wrapper has no storage of its
        own)."""
        if self._wrapping is None:
            return t
        wrapped, unwrapped = self._wrapping
        while wrapped(t):
            t = unwrapped(t)
        return t

    def _screen_for(self, dtype):
        from ..operators.buffers import nonfinite_screen
        np_dtype = self.adapter.numpy_dtype(dtype)
        return None if np_dtype is None else nonfinite_screen(np_dtype)

    def describe(self, t) -> tuple:
        """(counts, first index) of a non-finite tensor; a complex one's counts are of its
        parts."""
        torch = self.torch
        t = self.physical(t).detach()
        if t.layout is not torch.strided:  # sparse: where it is in the dense tensor (seldom met)
            t = t.to_dense()
        parts = torch.view_as_real(t.resolve_conj()) if t.is_complex() else t
        if t.is_cpu and t.layout is torch.strided and type(t) in self.plain:
            from ..facade import count_inf, count_nan, first_nonfinite
            counts = {"nan": int(count_nan(parts)),
                      "posinf": int(count_inf(parts, detect_negative=False)),
                      "neginf": int(count_inf(parts, detect_positive=False))}
            return counts, first_nonfinite(t)
        wide = parts.float()
        counts = {"nan": int(torch.isnan(wide).sum()), "posinf": int(torch.isposinf(wide).sum()),
                  "neginf": int(torch.isneginf(wide).sum())}
        bad = torch.nonzero(~torch.isfinite(wide))
        return counts, tuple(bad[0].tolist()[:t.dim()]) if len(bad) else None
