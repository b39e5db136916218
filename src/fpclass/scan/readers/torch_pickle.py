"""What a PyTorch checkpoint's pickle describes, read without running it: every tensor as a view
(storage key, dtype, offset, sizes, strides), every NumPy array pickled inline, every Python float
or complex value, found anywhere in the structure torch.load(weights_only=True) would return (dict
keys, sets and tensor attributes included), with the path of keys that leads to it.

The globals torch's weights-only unpickler allows do here what they do there (torch_rules);
any other global is recorded and never called (see pickle_vm), except the companions walked like
a dict (torch_rules.COMPANIONS and the caller's `allow_globals`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bounds import MAX_TENSORS
from .pickle_values import Global, Opaque, PickleError, unkey
from .pickle_vm import Machine, run
from .torch_items import (ELEMENTS, INTEGERS, STORAGE_DTYPES, InlineArray, NoData, Storage,
                          TensorView, Unsupported, Values)
from .pickle_objects import Companion, Mapping, NumpyArray, rename
from .torch_rules import (CONSTANTS, NEW_RULES, DType, Tensor, builder, rules_with,
                          torchscript_rule, whole)

#: Python float and complex scalars reported one by one; past this many, the rest are reported
#: together (one task per type), so a hostile pickle of millions of floats stays cheap.
SCALARS_ONE_BY_ONE = 2000
#: Names longer than this keep their first characters and the last key only.
NAME_LIMIT = 240


@dataclass
class Description:
    """Everything found: (name, TensorView | InlineArray | Values | Unsupported | NoData) in
    pickle order, and the globals outside the allow-list."""

    items: list = field(default_factory=list)
    disallowed: list = field(default_factory=list)
    storages: dict = field(default_factory=dict)   # key -> its first reference (root) Storage


def describe(data: bytes, start: int = 0, allow_globals=(), torchscript: bool = False) -> tuple:
    """(Description of the tensors, arrays and values the pickle at byte `start` of `data`
    describes, the byte after it). PickleError when the pickle is malformed or describes what
    torch.load(weights_only=True) would refuse to build. `torchscript`: a pickle of a TorchScript
    archive, where torch.jit.load also takes its module classes (`__torch__.*`, walked like a
    dict) and type tags (torch.jit._pickle)."""
    roots: dict = {}
    machine = Machine(rules=rules_with(allow_globals, torchscript), constants=CONSTANTS,
                      persistent_load=_storages(roots), new_rules=NEW_RULES, builder=builder,
                      rename=rename, fallback=torchscript_rule if torchscript else None)
    root, end = run(data, machine, start)
    out = Description(disallowed=list(machine.disallowed), storages=roots)
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


def _storages(roots: dict):
    """torch.save's persistent ids, ("storage", storage type, key, location, numel) and the
    legacy format's with a sixth element, view_metadata (view key, offset, size) or None. As
    torch.load, the first reference to a key fixes its storage's dtype and size."""
    views: dict = {}

    def load(pid):
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise PickleError("unexpected persistent id (not a storage)")
        kind, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise PickleError("malformed storage reference")
        if isinstance(kind, DType):
            dtype = kind.name
        elif isinstance(kind, Global) and kind.name in STORAGE_DTYPES:
            dtype = STORAGE_DTYPES[kind.name]
        elif isinstance(kind, Global) and kind.name == "UntypedStorage":
            dtype = ""
        else:
            raise PickleError(f"unknown storage type {kind if isinstance(kind, Global) else '?'}")
        root = roots.setdefault(key, Storage(key, dtype, numel))
        meta = pid[5] if len(pid) == 6 else None
        if meta is None:
            return root
        if not (isinstance(meta, tuple) and len(meta) == 3 and isinstance(meta[0], str)
                and all(type(v) is int and v >= 0 for v in meta[1:])):
            raise PickleError("malformed storage view metadata")
        view_key, offset, size = meta   # in elements of this reference's dtype, as torch reads
        numel = root.numel * _itemsize(root.dtype) // _itemsize(dtype)
        if view_key not in views:
            if offset + size > numel:
                raise PickleError(f"a storage view reaches past storage {key}")
            views[view_key] = Storage(key, dtype, numel, offset, size)
        return views[view_key]
    return load


#: Values that hold no float and nothing below them.
_LEAVES = frozenset({int, bool, str, bytes, bytearray, type(None), DType, Global})


def _itemsize(dtype: str) -> int:
    return ELEMENTS[dtype][1] if dtype in ELEMENTS else INTEGERS.get(dtype, 1)


def _collect(root, items: list) -> None:
    """(name, item) for every tensor, array and float value under `root`, depth first in pickle
    order, named by the keys and indices leading to it joined with '.' ('@' before a tensor's or
    mapping's attribute). Iterative; each object is visited once, leaves from their parent."""
    stack = [("", "", root)]   # (the name of the parent, this one's key, the object)
    seen: set = set()
    scalars = _Scalars(items)
    while stack:
        if len(items) > MAX_TENSORS:
            raise PickleError(f"the pickle holds over {MAX_TENSORS} tensors and values")
        parent, key, obj = stack.pop()
        kind = type(obj)
        if kind is float or kind is complex:
            scalars.add(parent, key, obj)
            continue
        if kind in _LEAVES or id(obj) in seen:
            continue
        seen.add(id(obj))
        name = _name(parent, key)
        below = name if len(name) <= NAME_LIMIT else \
            (parent if len(parent) > NAME_LIMIT else name[:NAME_LIMIT] + "…")
        if kind is list or kind is tuple:
            if obj and type(obj[0]) is float and all(type(x) is float for x in obj):   # one item
                items.append((name, Values("float", (len(obj),), np.array(obj, np.float64))))
                continue
            pairs = zip(range(len(obj) - 1, -1, -1), reversed(obj))   # no pair list: lists
        elif isinstance(obj, dict):   # lists and dicts may be huge: no list of pairs
            pairs = _dict_pairs(obj)
        else:
            pairs = reversed(_children(obj, name, items))
        floats = None
        for k, child in pairs:
            kind = type(child)
            if kind is float or kind is complex:
                floats = floats or []
                floats.append((k, child))
            elif kind not in _LEAVES and (kind not in _EMPTIABLE or child):
                stack.append((below, k, child))
        for k, child in reversed(floats or ()):   # in pickle order
            scalars.add(below, k, child)
    scalars.finish()


def _dict_pairs(obj):
    """(name, child) of a dict's attributes, values and keys that are not plain names, last first
    (the walk pushes them on a stack); a key that holds values (a tensor, a tuple, a float) is
    walked as `<key i>`, and its value named `<value i>`."""
    if isinstance(obj, Mapping):
        yield from reversed([(f"@{k}", v) for k, v in obj.attrs.items()])
    i = len(obj)
    for k, v in reversed(obj.items()):
        i -= 1
        k = unkey(k)
        if type(k) in _NAMES:
            yield _key_name(k), v
        else:
            yield f"<value {i}>", v
            yield f"<key {i}>", k


_NAMES = frozenset({str, int, bool, type(None), bytes})


def _key_name(k):
    """The name of a dict key that is an atom (str, int, float, bool, None, bytes)."""
    return k if type(k) is str and len(k) <= 100 else str(k)[:100]


_EMPTIABLE = frozenset({list, tuple, dict, set, frozenset})


def _name(parent: str, key) -> str:
    key = key if type(key) is str else str(key)
    if not parent:
        return key
    if key.startswith("@"):
        return parent + key
    return parent + "." + key


def _children(obj, name, items) -> list:
    """The (key, child) pairs to walk under `obj`; emits `obj`'s own item into `items`."""
    if isinstance(obj, (set, frozenset)):
        return [(f"<member {i}>", unkey(x)) for i, x in enumerate(obj)]
    if isinstance(obj, Tensor):
        if obj.item is not None:
            items.append((name, obj.item))
        return [(f"@{k}", v) for k, v in obj.attrs.items()]
    if isinstance(obj, Storage):   # saved bare: its elements as a 1-D tensor of its dtype
        items.append((name, whole(obj)))
    elif isinstance(obj, NumpyArray):
        if obj.array is not None:
            items.append((name, obj.array))
    elif isinstance(obj, (TensorView, InlineArray, Values, Unsupported, NoData)):
        items.append((name, obj))
    elif isinstance(obj, Companion):
        children = [(f"args.{i}", a) for i, a in enumerate(obj.args)] + _state(obj.state)
        for _, child in children:   # bytes a companion holds could be an array's: not known
            inner = child if type(child) in (tuple, list) else (child,)
            if any(type(x) in (bytes, bytearray) and x for x in inner):
                items.append((name, Unsupported(obj.callee, f"{obj.callee} holds raw bytes, "
                                                "which are not interpreted")))
                break
        return children
    elif isinstance(obj, Opaque):
        return [("args", obj.args), ("state", obj.state)]
    return []


def _state(state) -> list:
    """A companion's state, walked like a dict: its __dict__ (and slots) keys as names."""
    parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
    out = []
    for part in parts:
        if isinstance(part, dict):
            out += [(str(unkey(k))[:100], v) for k, v in part.items()]
        elif part is not None:
            out.append(("state", part))
    return out


class _Scalars:
    """Python floats and complex numbers, reported each as a value with its name; past
    SCALARS_ONE_BY_ONE, pooled (one item per type, named after the first)."""

    def __init__(self, items):
        self.items, self.count, self.pools = items, 0, {}

    def add(self, parent, key, value):
        self.count += 1
        label = "float" if type(value) is float else "complex"
        if self.count <= SCALARS_ONE_BY_ONE:
            self.items.append((_name(parent, key), Values(label, (), np.array(value))))
        elif label in self.pools:
            self.pools[label][1].append(value)
        else:
            self.pools[label] = (_name(parent, key), [value])

    def finish(self):
        for label, (first, vals) in self.pools.items():
            self.items.append((f"{first} and {len(vals) - 1} more Python {label} values",
                               Values(label, (len(vals),), np.array(vals))))


__all__ = ["Description", "ELEMENTS", "INTEGERS", "InlineArray", "NoData", "PickleError",
           "Storage", "TensorView", "Unsupported", "Values", "describe", "plain_value"]
