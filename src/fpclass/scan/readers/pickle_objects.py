"""Python and NumPy objects a PyTorch pickle may hold besides tensors, as torch.load(weights_only=
True) builds them, done on descriptions (nothing imported or called): OrderedDict and Counter (a
`Mapping`: a dict with attributes), sets, bytes, complex numbers, torch.Size, NumPy's own array,
dtype and scalar reductions (torch takes them with `add_safe_globals`), and the companions
checkpoints carry (see COMPANIONS), kept with their arguments and state to be walked like a dict.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pickle_values import PickleError, unkey
from .torch_items import InlineArray, Unsupported

#: The modules torch never lets a pickle name, even when a user allows one of their globals.
BLOCKED_MODULES = ("sys", "os", "posix", "nt")

#: Non-tensor objects checkpoints carry beside their tensors, not on torch's allow-list: their
#: arguments and state are walked like a dict (floats inside are checked); nothing is called.
#: `--allow-global module.Name` adds to it.
COMPANIONS = frozenset({
    "argparse.Namespace",
    "pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath", "pathlib.PurePath",
    "pathlib.PurePosixPath", "pathlib.PureWindowsPath",
    "transformers.training_args.TrainingArguments",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    "transformers.training_args.OptimizerNames",
    "transformers.trainer_utils.IntervalStrategy", "transformers.trainer_utils.SaveStrategy",
    "transformers.trainer_utils.HubStrategy", "transformers.trainer_utils.SchedulerType",
    "transformers.trainer_utils.EvaluationStrategy", "transformers.trainer_utils.FSDPOption",
    "transformers.debug_utils.DebugOption", "transformers.trainer_pt_utils.AcceleratorConfig",
    "accelerate.utils.dataclasses.DistributedType", "accelerate.state.PartialState",
    "torch.torch_version.TorchVersion",
})


class Mapping(dict):
    """collections.OrderedDict or Counter: a dict, plus the attributes BUILD gives it."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind, self.attrs = kind, {}


class Size(tuple):
    """torch.Size: sizes, where a plain tuple given to torch.Tensor would be values."""


@dataclass(eq=False)
class Companion:
    """A companion object (see COMPANIONS): what it was called with and the state BUILD gave."""

    callee: str
    args: tuple
    state: object = None


def _ints(v) -> bool:
    return isinstance(v, tuple) and all(type(i) is int for i in v)


def _ordered_dict(kind):
    def rule(args, m):
        out = Mapping(kind)
        source = args[0] if args else None
        if isinstance(source, dict):
            out.update(source)
        elif isinstance(source, (list, tuple)) and kind == "OrderedDict":
            for pair in source:
                if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                    raise PickleError("OrderedDict built from something other than pairs")
                out[m.keys.key(pair[0])] = pair[1]
        elif isinstance(source, (list, tuple, str)) and kind == "Counter":   # counts members
            for x in source:
                k = m.keys.key(x)
                out[k] = out.get(k, 0) + 1
        elif source is not None:
            raise PickleError(f"{kind} built from a {type(source).__name__}")
        return out
    return rule


def build_mapping(obj: Mapping, state) -> None:
    """BUILD on an OrderedDict or Counter: its __dict__ takes the state (attributes)."""
    if isinstance(state, tuple) and len(state) == 2 and obj.kind == "Counter":
        state = {**(state[0] or {}), **(state[1] or {})}
    if not isinstance(state, dict):
        raise PickleError(f"{obj.kind} BUILD state is not a dict")
    for k, v in state.items():
        if type(unkey(k)) is not str:
            raise PickleError("attribute name is not a string")
        obj.attrs[unkey(k)] = v


def _encode(args, m):
    text, encoding = args[0], args[1] if len(args) > 1 else "utf-8"
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise PickleError("_codecs.encode used for something other than bytes")
    return text.encode("latin-1")


def _set_of(args, m):
    source = args[0] if args else ()
    if not isinstance(source, (list, tuple, set, frozenset, str, dict)):
        raise PickleError(f"a set built from a {type(source).__name__}")
    return {m.keys.key(unkey(x)) for x in source}


def _bytearray(args, m):
    if not args:
        return bytearray()
    if isinstance(args[0], (bytes, bytearray)):
        return bytearray(args[0])
    return bytearray(_encode(args, m))


def _complex(args, m):
    if not all(type(a) in (int, float, bool, complex) for a in args) or len(args) > 2:
        raise PickleError("complex() of something that is not a number")
    return complex(*args)


class NumpyArray:
    """numpy.ndarray under reconstruction: BUILD gives it (version, shape, dtype, fortran, data)."""

    __hash__ = None   # ndarrays are unhashable

    def __init__(self):
        self.array = None

    def build(self, state):
        if isinstance(state, tuple) and len(state) == 4:
            state = (1, *state)
        if not (isinstance(state, tuple) and len(state) == 5):
            raise PickleError("unexpected numpy array state")
        _, shape, dtype, fortran, raw = state
        if not isinstance(dtype, NumpyDType) or not _ints(tuple(shape)):
            raise PickleError("unexpected numpy array state")
        if isinstance(raw, list):
            self.array = Unsupported(dtype.str(), "NumPy object arrays are not read")
        else:
            self.array = InlineArray(dtype.str(), tuple(shape), bool(fortran), _bytes(raw))


class NumpyDType:
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
    raise PickleError("numpy array data is not bytes")


def _np_dtype(args, m):
    if not args or not isinstance(args[0], str):
        raise PickleError("numpy dtype without a type code")
    return NumpyDType(args[0])


def _np_scalar(args, m):
    if len(args) != 2 or not isinstance(args[0], NumpyDType):
        raise PickleError("unexpected numpy scalar")
    return InlineArray(args[0].str(), (), False, _bytes(args[1]))


def _np_frombuffer(args, m):
    """numpy's protocol-5 reduction: _frombuffer(buffer, dtype, shape, order)."""
    buf, dtype, shape, order = args
    if not isinstance(dtype, NumpyDType) or not _ints(tuple(shape)):
        raise PickleError("unexpected numpy buffer")
    out = NumpyArray()
    out.array = InlineArray(dtype.str(), tuple(shape), order == "F", _bytes(buf))
    return out


def companion(name):
    """The rule of a companion global `name`: kept with its arguments (BUILD adds the state)."""
    return lambda args, m: Companion(name, args)


# torch/_utils.py IMPORT_MAPPING and NAME_MAPPING (from Python's _compat_pickle): the names
# Python 2 pickles use, as torch's weights-only unpickler maps them.
_IMPORT_MAPPING = {"__builtin__": "builtins", "copy_reg": "copyreg", "Queue": "queue",
                   "repr": "reprlib", "_abcoll": "collections.abc", "UserDict": "collections",
                   "UserList": "collections", "UserString": "collections", "whichdb": "dbm",
                   "StringIO": "io", "cStringIO": "io"}
_NAME_MAPPING = {("__builtin__", "xrange"): ("builtins", "range"),
                 ("__builtin__", "reduce"): ("functools", "reduce"),
                 ("__builtin__", "intern"): ("sys", "intern"),
                 ("__builtin__", "unichr"): ("builtins", "chr"),
                 ("__builtin__", "unicode"): ("builtins", "str"),
                 ("__builtin__", "long"): ("builtins", "int"),
                 ("__builtin__", "basestring"): ("builtins", "str")}


def rename(module: str, name: str) -> tuple:
    if (module, name) in _NAME_MAPPING:
        return _NAME_MAPPING[(module, name)]
    return _IMPORT_MAPPING.get(module, module), name


#: The rules of these objects' globals, by "module.name".
OBJECT_RULES = {
    "collections.OrderedDict": _ordered_dict("OrderedDict"),
    "collections.Counter": _ordered_dict("Counter"),
    "builtins.set": _set_of, "builtins.bytearray": _bytearray, "builtins.complex": _complex,
    "_codecs.encode": _encode,
    # NumPy's own reductions (torch takes them only with add_safe_globals)
    **{f"numpy{core}.multiarray._reconstruct": lambda args, m: NumpyArray()
       for core in (".core", "._core")},
    **{f"numpy{core}.multiarray.scalar": _np_scalar for core in (".core", "._core")},
    **{f"numpy{core}.numeric._frombuffer": _np_frombuffer for core in (".core", "._core")},
    "numpy.ndarray": lambda args, m: "ndarray",
    "numpy.dtype": _np_dtype,
}

#: What NEWOBJ (cls.__new__(cls, *args)) gives where it differs from calling the class.
OBJECT_NEW_RULES = {
    "collections.OrderedDict": lambda args, m: Mapping("OrderedDict"),
    "collections.Counter": lambda args, m: Mapping("Counter"),
    "builtins.set": lambda args, m: set(),
    "builtins.bytearray": lambda args, m: bytearray(),
}
