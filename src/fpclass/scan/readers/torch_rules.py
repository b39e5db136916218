"""What each global `torch.load(weights_only=True)` allows does with its arguments, and what BUILD
does to what it built (torch/_weights_only_unpickler.py, torch/_utils.py), done on descriptions:
nothing is imported, called or constructed. The tables RULES, NEW_RULES and CONSTANTS are the
whole grammar; the Python and NumPy objects are in pickle_objects, tensors built from lists in
torch_lists.

A tensor is a `Tensor`: its item (a TensorView of a storage, values from the pickle, or what cannot
be read) and its Python attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .pickle_objects import (BLOCKED_MODULES, COMPANIONS, OBJECT_NEW_RULES, OBJECT_RULES,
                             Companion, Mapping, NumpyArray, Size, build_mapping, companion)
from .pickle_values import Global, PickleError, unkey
from .torch_items import (ELEMENTS, INTEGERS, STORAGE_DTYPES, InlineArray, NoData, Storage,
                          TensorView, Unsupported)
from .torch_lists import values


@dataclass(eq=False)
class Tensor:
    """A tensor as torch would return it: `item` describes its values (None: a sparse tensor,
    whose parts are attributes), `attrs` its Python attributes by name."""

    item: object
    dtype: str
    param: bool = False
    attrs: dict = field(default_factory=dict)
    requires_grad: bool = False


@dataclass(frozen=True)
class DType:
    name: str


@dataclass(frozen=True)
class QScheme:
    name: str


def _count(v) -> bool:
    return type(v) is int and v >= 0


def _ints(v) -> bool:
    return isinstance(v, tuple) and all(type(i) is int for i in v)


def view(storage, offset, size, stride, dtype=None, metadata=None) -> TensorView:
    """The view torch's set_(storage, offset, size, stride) makes, in `dtype` (default the
    storage's): PickleError where torch.load would fail."""
    if not isinstance(storage, Storage):
        raise PickleError("a tensor rebuilt from something that is not a storage")
    dtype = dtype.name if isinstance(dtype, DType) else (dtype or storage.dtype or "uint8")
    size, stride = tuple(size) if isinstance(size, list) else size, \
        tuple(stride) if isinstance(stride, list) else stride
    if not (_count(offset) and _ints(size) and _ints(stride) and len(size) == len(stride)
            and all(s >= 0 for s in size) and all(s >= 0 for s in stride)):
        raise PickleError("malformed tensor view (offset, sizes or strides)")
    if storage.length >= 0 and math.prod(size):   # a legacy storage view: torch bounds it
        last = offset + sum((s - 1) * st for s, st in zip(size, stride))
        if last >= storage.length:
            raise PickleError(f"a view reaches past its storage view of {storage.key}")
    flip = ""
    if isinstance(metadata, dict):
        flip = "neg" if metadata.get("neg") else ("conj" if metadata.get("conj") else "")
    return TensorView(storage, dtype, offset + storage.start, tuple(size), tuple(stride), flip)


def whole(storage: Storage, dtype: str = "") -> TensorView:
    """The 1-D view of a whole storage (a bare storage, set_(storage), torch.Tensor(storage))."""
    numel = storage.length if storage.length >= 0 else storage.numel
    dtype = dtype or storage.dtype or "uint8"
    if not storage.dtype:   # an untyped storage counts bytes
        numel //= ELEMENTS[dtype][1] if dtype in ELEMENTS else INTEGERS.get(dtype, 1)
    return TensorView(storage, dtype, storage.start, (numel,), (1,))


def _hooks(t: Tensor, hooks) -> Tensor:
    """torch sets backward_hooks as the tensor's _backward_hooks (an empty OrderedDict, written
    for compatibility): hooks, not values of the tensor, so not walked."""
    return t


def _rebuild_tensor(args, m):
    v = view(*args[:4])
    return Tensor(v, v.dtype)


def _rebuild_tensor_v2(args, m):
    v = view(*args[:4], metadata=args[6] if len(args) > 6 else None)
    return _hooks(Tensor(v, v.dtype, requires_grad=args[4] is True), args[5])


def _rebuild_tensor_v3(args, m):
    v = view(*args[:4], dtype=args[6], metadata=args[7] if len(args) > 7 else None)
    return _hooks(Tensor(v, v.dtype, requires_grad=args[4] is True), args[5])


def _tensor(x, what) -> Tensor:
    if not isinstance(x, Tensor):
        raise PickleError(f"{what} of something that is not a tensor")
    return x


def _parameter(args, m):
    data = args[0] if args else None
    grad = args[1] is not False if len(args) > 1 else True
    if data is None:
        return Tensor(NoData("tensor", "an empty tensor"), "float32", param=True,
                      requires_grad=grad)
    data = _tensor(data, "a Parameter")   # a new object: attributes stay behind
    return Tensor(data.item, data.dtype, param=True, requires_grad=grad)


def _rebuild_parameter(args, m):
    return _hooks(_parameter(args[:2], m), args[2])


def _rebuild_parameter_with_state(args, m):
    return set_obj_state(_rebuild_parameter(args[:3], m), args[3])


def set_obj_state(t: Tensor, state) -> Tensor:
    """torch._utils._set_obj_state: setattr for each item of the dict (and slots) state."""
    if isinstance(state, tuple):
        if len(state) != 2:
            raise PickleError("invalid serialized tensor state")
        parts = state
    else:
        parts = (state,)
    for part in parts:
        if not part:
            continue
        if not isinstance(part, dict):
            raise PickleError("tensor state is not a dict")
        for k, v in part.items():
            k = unkey(k)
            if type(k) is not str:
                raise PickleError("tensor attribute name is not a string")
            if k == "data":   # setattr(t, "data", v) replaces the tensor's values
                v = _tensor(v, "a tensor's data")
                t.item, t.dtype = v.item, v.dtype
            else:
                t.attrs[k] = v
    return t


def _from_type(args, m):
    """_rebuild_from_type_v2(func, new_type, args, state): func(*args), as new_type, then state."""
    func, new_type, inner, state = args
    rule = m.rules.get(str(func)) if isinstance(func, Global) else None
    if rule is None or not isinstance(inner, tuple):
        raise PickleError("_rebuild_from_type_v2 of something torch does not call")
    t = _tensor(rule(inner, m), "_rebuild_from_type_v2")
    if str(new_type) == "torch.nn.parameter.Parameter" and not t.param:
        t = Tensor(t.item, t.dtype, param=True, requires_grad=t.requires_grad)   # as_subclass
    elif str(new_type) not in ("torch.Tensor", "torch.nn.parameter.Parameter"):
        raise PickleError(f"a tensor of type {new_type} (allowed only by add_safe_globals)")
    return set_obj_state(t, state)


def build_tensor(t: Tensor, state) -> None:
    """BUILD on a tensor: set_(*state) (torch.Tensor); Tensor.__setstate__ for a Parameter."""
    if not isinstance(state, tuple):
        raise PickleError("tensor BUILD state is not a tuple")
    if t.requires_grad and len(state) in (0, 1, 4):
        raise PickleError("set_ on a tensor that requires grad (torch refuses it)")
    if t.param and len(state) == 5:    # legacy Variable: data, then flags and hooks
        data = _tensor(state[0], "a Parameter's data")
        t.item, t.dtype = data.item, data.dtype
        _hooks(t, state[2])
    elif t.param and len(state) == 3:
        t.requires_grad = state[0] is True
        _hooks(t, state[2])
    elif len(state) in (0, 1, 4):
        _set(t, state)
    else:
        raise PickleError("tensor BUILD state of an unexpected length")


def _set(t: Tensor, args) -> None:
    if not args:
        t.item = NoData("tensor", "an empty tensor")
        return
    source = args[0]
    if isinstance(source, Tensor) and len(args) == 1:
        t.item = source.item
        return
    if not isinstance(source, Storage):
        raise PickleError("set_ of something that is not a storage or a tensor")
    if (source.dtype or "uint8") != t.dtype:   # torch.load types an untyped storage uint8
        raise PickleError(f"set_ of a {source.dtype or 'uint8'} storage on a {t.dtype} tensor")
    t.item = whole(source, t.dtype) if len(args) == 1 else view(source, *args[1:4], dtype=t.dtype)


def _qtensor(args, m):
    """_rebuild_qtensor: integer data, with its scale(s) and zero point(s) as attributes."""
    storage, offset, size, stride, params = args[:5]
    v = view(storage, offset, size, stride)
    t = _hooks(Tensor(v, v.dtype), args[6] if len(args) > 6 else None)
    scheme = params[0].name if isinstance(params, tuple) and params and \
        isinstance(params[0], QScheme) else "?"
    if scheme == "per_tensor_affine":
        t.attrs["scale"], t.attrs["zero_point"] = params[1], params[2]
    elif scheme in ("per_channel_affine", "per_channel_affine_float_qparams"):
        scales, zero_points = params[1], params[2]
        floats = scheme.endswith("float_qparams")
        if isinstance(scales, list):   # torch makes them float64 (float32 for float_qparams)
            scales = values(scales, "float32" if floats else "float64")
        if isinstance(zero_points, list):
            zero_points = values(zero_points, "float32" if floats else "int64")
        t.attrs["scales"], t.attrs["zero_points"] = scales, zero_points
    else:
        raise PickleError(f"torch cannot rebuild a quantized tensor of qscheme {scheme}")
    return t


def _sparse(args, m):
    """_rebuild_sparse_tensor(layout, data): its indices and values, as torch holds them."""
    layout, data = args[0], args[1]
    if not isinstance(data, tuple):
        raise PickleError("sparse tensor data is not a tuple")
    roles = ("indices", "values") if layout == "torch.sparse_coo" else \
        ("compressed_indices", "plain_indices", "values")
    t = Tensor(None, "")
    t.attrs.update(zip(roles, data))
    return t


def _device_copy(args, m):
    """_rebuild_device_tensor_from_cpu_tensor / _from_numpy: the data converted to a dtype."""
    data, dtype = args[0], args[1]
    name = dtype.name if isinstance(dtype, DType) else "?"
    if isinstance(data, Tensor) and data.dtype == name:
        return Tensor(data.item, name)
    if isinstance(data, NumpyArray) and isinstance(data.array, InlineArray) \
            and np.dtype(data.array.dtype).name == name:
        return Tensor(data.array, name)
    return Tensor(Unsupported("tensor", f"converted to {name} on load (not read)"), name)


def _unsupported(what):
    return lambda args, m: Tensor(Unsupported(what, f"{what} are not read"), "")


def _meta(args, m):
    return Tensor(NoData("meta tensor", "a meta tensor holds no data"), "")


#: torch's dtype of each tensor class (torch.Tensor: the default dtype, float32).
TENSOR_CLASSES = {"Tensor": "float32", "DoubleTensor": "float64", "FloatTensor": "float32",
                  "HalfTensor": "float16", "BFloat16Tensor": "bfloat16", "LongTensor": "int64",
                  "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
                  "ByteTensor": "uint8", "BoolTensor": "bool"}


def _legacy_constructor(dtype):
    """torch.Tensor(...) / torch.FloatTensor(...): empty, sizes, values, a storage or a tensor."""
    def rule(args, m):
        if not args or (len(args) == 1 and isinstance(args[0], Size) and not args[0]):
            return Tensor(NoData("tensor", "an empty tensor"), dtype)
        first = args[0]
        if len(args) == 1 and isinstance(first, Storage):
            t = Tensor(None, dtype)
            _set(t, (first,))
            return t
        if len(args) == 1 and isinstance(first, Tensor):
            return Tensor(first.item, first.dtype)
        sizes = tuple(first) if len(args) == 1 and isinstance(first, Size) else args
        if all(type(s) is int and s >= 0 for s in sizes):
            if math.prod(sizes) == 0:
                return Tensor(NoData("tensor", "an empty tensor"), dtype)
            return Tensor(Unsupported(dtype, "torch.Tensor(sizes) holds uninitialized memory"),
                          dtype)
        if len(args) == 1 and isinstance(first, (list, tuple)):
            return Tensor(values(first, dtype), dtype)
        raise PickleError("a tensor constructor called with arguments torch does not take")
    return rule


_TENSOR_REBUILDS = {
    "_rebuild_tensor": _rebuild_tensor, "_rebuild_tensor_v2": _rebuild_tensor_v2,
    "_rebuild_tensor_v3": _rebuild_tensor_v3, "_rebuild_parameter": _rebuild_parameter,
    "_rebuild_parameter_with_state": _rebuild_parameter_with_state, "_rebuild_qtensor": _qtensor,
    "_rebuild_sparse_tensor": _sparse,
    "_rebuild_nested_tensor": _unsupported("nested tensors"),
    "_rebuild_wrapper_subclass": _unsupported("tensor subclasses"),
    "_rebuild_device_tensor_from_cpu_tensor": _device_copy,
    "_rebuild_device_tensor_from_numpy": _device_copy,
    "_rebuild_meta_tensor_no_storage": _meta,
}

RULES = {
    **{f"torch._utils.{name}": rule for name, rule in _TENSOR_REBUILDS.items()},
    "torch._tensor._rebuild_from_type_v2": _from_type,
    "torch.nn.parameter.Parameter": _parameter,
    "torch.Size": lambda args, m: Size(args[0] if args else ()),
    "torch.device": lambda args, m: "device",
    "torch.serialization._get_layout": lambda args, m: str(args[0]) if args else "",
    **{f"{module}.{name}": _legacy_constructor(dtype) for name, dtype in TENSOR_CLASSES.items()
       for module in ("torch", "torch.cuda") if not (name == "Tensor" and module == "torch.cuda")},
    **{f"{module}.{name}": _unsupported("sparse tensors") for name in TENSOR_CLASSES
       for module in ("torch.sparse", "torch.cuda.sparse") if name not in ("Tensor", "BoolTensor")},
    **OBJECT_RULES,
}

#: What NEWOBJ (cls.__new__(cls, *args)) gives where it differs from calling the class.
NEW_RULES = OBJECT_NEW_RULES

#: Globals that are values, not calls: dtypes, storage classes, quantization schemes.
CONSTANTS = {
    **{f"torch.{name}": DType(name) for name in (*ELEMENTS, *INTEGERS)},
    **{f"{module}.{name}": Global(module, name) for name in STORAGE_DTYPES
       for module in ("torch", "torch.cuda")},
    "torch.storage.UntypedStorage": Global("torch.storage", "UntypedStorage"),
    "torch.storage.TypedStorage": Global("torch.storage", "TypedStorage"),
    **{f"torch.{name}": QScheme(name) for name in (
        "per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
        "per_channel_symmetric", "per_channel_affine_float_qparams")},
}

def builder(obj, state) -> bool:
    """BUILD as torch's weights-only unpickler does it; False for what it leaves to `obj.build`
    (NumPy objects) or refuses."""
    if isinstance(obj, Tensor):
        build_tensor(obj, state)
    elif isinstance(obj, Mapping):
        build_mapping(obj, state)
    elif isinstance(obj, Companion):
        obj.state = state
    else:
        return False
    return True


def rules_with(allow_globals=(), torchscript: bool = False) -> dict:
    """RULES, with every companion (COMPANIONS and `allow_globals`) walked like a dict; a global
    of a blocked module is never allowed. `torchscript`: with torch.jit's type tags and lists."""
    extra = {name for name in (*COMPANIONS, *allow_globals)
             if name.split(".")[0] not in BLOCKED_MODULES and name not in RULES}
    rules = {**RULES, **{name: companion(name) for name in extra}}
    if torchscript:
        rules.update(TORCHSCRIPT_RULES)
    return rules


def _first_arg(args, m):
    if not args:
        raise PickleError("a torch.jit._pickle helper without arguments")
    return args[0]


#: What torch.jit.load's unpickler also takes in a TorchScript archive: a value with its type
#: tag, lists built by type (the value as it is).
TORCHSCRIPT_RULES = {f"torch.jit._pickle.{name}": _first_arg for name in (
    "restore_type_tag", "build_intlist", "build_tensorlist", "build_doublelist",
    "build_boollist", "build_complexlist")}


def torchscript_rule(full: str):
    """The rule for a TorchScript module class (`__torch__.*`): walked like a dict."""
    return companion(full) if full.startswith("__torch__.") else None
