"""What a PyTorch checkpoint's pickle describes, read without running it: every tensor as a view
(storage key, dtype, offset, sizes, strides) and every NumPy array pickled inline, found anywhere in
the structure, with the path of keys that leads to it.

Only the globals torch.save and numpy write for tensors, arrays and containers have rules here
(torch's weights-only unpickler allows much the same set); any other global is recorded and never
called (see pickle_vm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .pickle_vm import Global, Machine, Opaque, PickleError, run

#: torch storage class name -> torch dtype name (legacy typed storages name their dtype).
STORAGE_DTYPES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
#: torch dtype name -> (NumPy/ml_dtypes element name, bytes per element); None: not a float.
ELEMENTS = {
    "float64": ("f8", 8), "float32": ("f4", 4), "float16": ("f2", 2), "bfloat16": ("bfloat16", 2),
    "complex128": ("c16", 16), "complex64": ("c8", 8), "complex32": ("c4", 4),
    "float8_e4m3fn": ("float8_e4m3fn", 1), "float8_e5m2": ("float8_e5m2", 1),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", 1), "float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "float8_e8m0fnu": ("float8_e8m0fnu", 1), "float4_e2m1fn_x2": ("float4_e2m1fn", 1),
}
#: Integer and bool dtypes (cannot hold NaN/Inf) with their bytes per element.
INTEGERS = {"int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4,
            "uint64": 8, "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1,
            "quint2x4": 1, **{f"int{b}": 1 for b in range(1, 8)},
            **{f"uint{b}": 1 for b in range(1, 8)}}


@dataclass(frozen=True)
class Storage:
    """A storage the pickle points at: zip member `data/<key>`, `numel` elements of `dtype`."""

    key: str
    dtype: str        # torch dtype name; "" for an untyped storage (bytes)
    numel: int
    start: int = 0    # a legacy storage view: elements [start, start + length) (length -1: all)
    length: int = -1


@dataclass(frozen=True)
class TensorView:
    """A tensor: `size`/`stride` (in elements) from element `offset` of a storage, in `dtype`.
    `flip`: "neg" when torch's lazy negation bit is set, "conj" for the lazy conjugate."""

    storage: Storage
    dtype: str
    offset: int
    size: tuple
    stride: tuple
    flip: str = ""


@dataclass(frozen=True)
class InlineArray:
    """A NumPy array (or scalar) whose bytes are in the pickle itself."""

    dtype: str        # NumPy dtype string, e.g. "<f8"
    shape: tuple
    fortran: bool
    data: bytes


@dataclass(frozen=True)
class Unsupported:
    """A tensor the pickle describes in a way that is not read (sparse, quantized, nested...)."""

    what: str
    reason: str


@dataclass
class Description:
    """Everything found: (name, TensorView | InlineArray | Unsupported) in pickle order, and the
    globals outside the allow-list."""

    items: list = field(default_factory=list)
    disallowed: list = field(default_factory=list)
    #: key -> the Storage of the first reference to it (torch's dtype and size for the key).
    storages: dict = field(default_factory=dict)


def describe(data: bytes, start: int = 0, torchscript: bool = False) -> tuple:
    """(Description of the tensors and arrays the pickle at byte `start` of `data` describes,
    the byte after it). PickleError when the pickle is malformed or describes a tensor
    impossibly. `torchscript`: the pickle is one of a TorchScript archive's (not used here)."""
    storages: dict = {}

    def load(pid):
        storage = _storage(pid)
        storages.setdefault(storage.key, replace(storage, start=0, length=-1))
        return storage

    machine = Machine(rules=RULES, constants=CONSTANTS, persistent_load=load)
    root, end = run(data, machine, start)
    out = Description(disallowed=list(machine.disallowed), storages=storages)
    _collect(root, out.items)
    return out, end


def plain_value(data: bytes, start: int = 0) -> tuple:
    """(the value of a pickle that may reference no storage and call no global, the byte after
    it): the small header pickles of torch's legacy format. PickleError otherwise."""
    machine = Machine(rules={})
    value, end = run(data, machine, start)
    if machine.disallowed:
        raise PickleError(f"unexpected global {machine.disallowed[0]} in a header pickle")
    return value, end


def _storage(pid):
    """torch.save's persistent id: ("storage", storage type, key, location, numel)."""
    if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
        raise PickleError(f"unexpected persistent id {pid!r:.80}")
    kind, key, numel = pid[1], pid[2], pid[4]
    if not isinstance(key, str) or not _count(numel):
        raise PickleError(f"malformed storage reference {pid!r:.80}")
    if isinstance(kind, _DType):
        dtype = kind.name
    elif isinstance(kind, Global) and kind.name in STORAGE_DTYPES:
        dtype = STORAGE_DTYPES[kind.name]
    elif isinstance(kind, Global) and kind.name == "UntypedStorage":
        dtype = ""
    else:
        raise PickleError(f"unknown storage type {kind!s:.80}")
    view = pid[5] if len(pid) > 5 else None
    if view is None:
        return Storage(key, dtype, numel)
    if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str)
            and _count(view[1]) and _count(view[2])):
        raise PickleError(f"malformed storage view {view!r:.80}")
    if view[1] + view[2] > numel:
        raise PickleError(f"a storage view reaches past storage {key}")
    return Storage(key, dtype, numel, view[1], view[2])


@dataclass(frozen=True)
class _DType:
    name: str


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _ints(v) -> bool:
    return isinstance(v, tuple) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


def _view(storage, offset, size, stride, dtype=None, metadata=None):
    if not isinstance(storage, Storage):
        raise PickleError("a tensor rebuilt from something that is not a storage")
    dtype = dtype.name if isinstance(dtype, _DType) else storage.dtype
    if isinstance(size, list):
        size = tuple(size)
    if isinstance(stride, list):
        stride = tuple(stride)
    if not (_count(offset) and _ints(size) and _ints(stride) and len(size) == len(stride)
            and all(s >= 0 for s in size) and all(s >= 0 for s in stride)):
        raise PickleError(f"malformed tensor view: offset {offset!r:.40}, size {size!r:.60}, "
                          f"stride {stride!r:.60}")
    flip = ""
    if isinstance(metadata, dict):
        flip = "neg" if metadata.get("neg") else ("conj" if metadata.get("conj") else "")
    if storage.length >= 0 and math.prod(size):  # a legacy storage view: torch bounds it
        last = offset + sum((n - 1) * st for n, st in zip(size, stride))
        if last >= storage.length:
            raise PickleError("a tensor reaches past the legacy storage view it is built on")
    return TensorView(storage, dtype, offset + storage.start, size, stride, flip)


def _rebuild_tensor(args, m):
    return _view(*args[:4])


def _rebuild_tensor_v2(args, m):
    return _view(*args[:4], metadata=args[6] if len(args) > 6 else None)


def _rebuild_tensor_v3(args, m):
    return _view(*args[:4], dtype=args[6], metadata=args[7] if len(args) > 7 else None)


def _first(args, m):
    return args[0]


def _from_type(args, m):
    func, _new_type, inner = args[0], args[1], args[2]
    if isinstance(func, Global) and str(func) in _TENSOR_REBUILDS and isinstance(inner, tuple):
        return RULES[str(func)](inner, m)
    return Opaque(func if isinstance(func, Global) else Global("?", "?"), inner)


def _unsupported(what):
    return lambda args, m: Unsupported(what, f"{what} are not read")


def _no_data(args, m):
    return Unsupported("meta tensor", "a meta tensor holds no data")


def _ordered_dict(args, m):
    return dict(args[0]) if args and isinstance(args[0], (list, tuple)) else {}


def _encode(args, m):
    text, encoding = args[0], args[1] if len(args) > 1 else "utf-8"
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise PickleError("_codecs.encode used for something other than bytes")
    return text.encode("latin-1")


class _NumpyArray:
    """numpy.ndarray under reconstruction: BUILD gives it (version, shape, dtype, fortran, data)."""

    def __init__(self):
        self.array = None

    def build(self, state):
        if not (isinstance(state, tuple) and len(state) == 5):
            raise PickleError("unexpected numpy array state")
        _, shape, dtype, fortran, raw = state
        if not isinstance(dtype, _NumpyDType) or not _ints(tuple(shape)):
            raise PickleError("unexpected numpy array state")
        self.array = InlineArray(dtype.str(), tuple(shape), bool(fortran), _bytes(raw))


class _NumpyDType:
    def __init__(self, code):
        self.code, self.order = code, "|"

    def build(self, state):
        if isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "="):
            self.order = state[1]
        if isinstance(state, tuple) and len(state) >= 4 and state[3] is not None:
            self.code = "V"  # a structured dtype: fields are not read

    def str(self) -> str:
        return ("|" if self.order == "|" else self.order) + self.code


def _bytes(raw) -> bytes:
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    if isinstance(raw, str):  # protocol 2 writes bytes as latin-1 text
        return raw.encode("latin-1")
    raise PickleError("numpy array data is not bytes (object arrays are not read)")


def _np_reconstruct(args, m):
    return _NumpyArray()


def _np_dtype(args, m):
    if not args or not isinstance(args[0], str):
        raise PickleError("numpy dtype without a type code")
    return _NumpyDType(args[0])


def _np_scalar(args, m):
    if len(args) != 2 or not isinstance(args[0], _NumpyDType):
        raise PickleError("unexpected numpy scalar")
    return InlineArray(args[0].str(), (), False, _bytes(args[1]))


def _hashables(args) -> list:
    items = list(args[0]) if args and isinstance(args[0], (list, tuple, set, frozenset)) else []
    for item in items:
        hash(item)  # TypeError (a malformed pickle) for lists and dicts
    return items


#: Built-ins protocol 2 pickles call for bytes, sets and complex numbers (Python 2 names them
#: __builtin__); each is applied to inert values only.
_BUILTINS = {
    "set": lambda args, m: set(_hashables(args)),
    "frozenset": lambda args, m: frozenset(_hashables(args)),
    "bytearray": lambda args, m: bytearray(args[0] if args and isinstance(args[0], bytes)
                                           else _encode(args, m) if args else b""),
    "complex": lambda args, m: complex(*[a for a in args if isinstance(a, (int, float))][:2]),
    "slice": lambda args, m: "slice",
}

_TENSOR_REBUILDS = {
    "torch._utils._rebuild_tensor": _rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": _first,
    "torch._utils._rebuild_parameter_with_state": _first,
    "torch._utils._rebuild_qtensor": _unsupported("quantized tensors"),
    "torch._utils._rebuild_sparse_tensor": _unsupported("sparse tensors"),
    "torch._utils._rebuild_nested_tensor": _unsupported("nested tensors"),
    "torch._utils._rebuild_wrapper_subclass": _unsupported("tensor subclasses"),
    "torch._utils._rebuild_device_tensor_from_cpu_tensor": _unsupported("device tensors"),
    "torch._utils._rebuild_device_tensor_from_numpy": _unsupported("device tensors"),
    "torch._utils._rebuild_meta_tensor_no_storage": _no_data,
}

RULES = {
    **_TENSOR_REBUILDS,
    "torch._tensor._rebuild_from_type_v2": _from_type,
    "torch.nn.parameter.Parameter": _first,
    "torch.Size": lambda args, m: tuple(args[0]) if args else (),
    "torch.device": lambda args, m: "device",
    "torch.serialization._get_layout": lambda args, m: "layout",
    "collections.OrderedDict": _ordered_dict,
    **{f"{module}.{name}": rule for module in ("builtins", "__builtin__")
       for name, rule in _BUILTINS.items()},
    "_codecs.encode": _encode,
    "numpy.core.multiarray._reconstruct": _np_reconstruct,
    "numpy._core.multiarray._reconstruct": _np_reconstruct,
    "numpy.ndarray": lambda args, m: "ndarray",
    "numpy.dtype": _np_dtype,
    "numpy.core.multiarray.scalar": _np_scalar,
    "numpy._core.multiarray.scalar": _np_scalar,
}


#: Globals that are values, not calls: dtypes and storage classes.
CONSTANTS = {
    **{f"torch.{name}": _DType(name) for name in (*ELEMENTS, *INTEGERS)},
    **{f"torch.{name}": Global("torch", name) for name in STORAGE_DTYPES},
    "torch.storage.UntypedStorage": Global("torch.storage", "UntypedStorage"),
}


def _collect(root, items: list) -> None:
    """(name, item) for every TensorView, InlineArray and Unsupported under `root`, depth first
    in pickle order, named by the keys and indices leading to it joined with '.'."""
    stack = [("", root)]
    seen: set = set()
    while stack:
        name, obj = stack.pop()
        if isinstance(obj, (TensorView, Unsupported)):
            items.append((name, obj))
        elif isinstance(obj, _NumpyArray):
            if obj.array is not None:
                items.append((name, obj.array))
        elif isinstance(obj, InlineArray):
            items.append((name, obj))
        elif isinstance(obj, (dict, list, tuple, set, frozenset, Opaque)):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            children = _children(obj)
            for key, child in reversed(children):
                stack.append((f"{name}.{key}" if name else str(key), child))


def _children(obj) -> list:
    if isinstance(obj, dict):
        return list(obj.items())
    if isinstance(obj, (list, tuple)):
        return list(enumerate(obj))
    if isinstance(obj, Opaque):
        return [("args", obj.args), ("state", obj.state)]
    return []  # sets hold only hashable values: no tensors


__all__ = ["Description", "InlineArray", "PickleError", "Storage", "TensorView", "Unsupported",
           "describe"]
