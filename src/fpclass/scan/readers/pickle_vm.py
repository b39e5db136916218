"""A pickle interpreter that runs nothing: it reads the opcodes of a pickle (protocols 0 to 5) and
builds plain containers and inert descriptions, never importing, calling or constructing anything
the pickle names.

A GLOBAL becomes a `Global(module, name)`, or an inert constant the caller names (a dtype, say).
Calling one (REDUCE, INST, OBJ; NEWOBJ through `new_rules` first, as `cls.__new__` differs from
`cls(...)`) gives the result of a rule in `rules` when the global is on that allow-list (the few
functions torch.save and numpy use to describe tensors and arrays), and an inert `Opaque` otherwise.
Every global outside the allow-list is recorded, so a caller can refuse to trust what the pickle
describes; calling anything else (a constant, a container) is refused.
Dict keys and set members compare as Python compares them without hashing the pickle's tuples
(pickle_values.Keys). The interpreter is a loop over opcodes; nothing in it recurses, so its time
is linear in the pickle's size. The opcodes' handlers are in pickle_opcodes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .pickle_opcodes import HANDLERS, stop
from .pickle_values import (Global, Keys, Opaque, PickleError,  # noqa: F401 (for callers)
                            PickleTruncated)

#: Pickles larger than this are refused (a checkpoint's data.pkl is a few MB).
MAX_PICKLE_BYTES = 256 << 20
#: Most opcodes one pickle may run: each costs about 0.3 us and at most ~100 bytes of objects, so
#: this keeps any pickle within seconds and a few hundred MB. A real checkpoint's data.pkl runs
#: about 30 per tensor.
MAX_OPS = 3_000_000


@dataclass(eq=False)
class Machine:
    """What a run of the interpreter found besides its result."""

    rules: dict                                     # "module.name" -> rule(args, machine)
    constants: dict = field(default_factory=dict)   # "module.name" -> the value loading it gives
    persistent_load: object = None                  # pid -> value
    disallowed: list = field(default_factory=list)  # "module.name" of globals outside the rules
    new_rules: dict = field(default_factory=dict)   # NEWOBJ (cls.__new__) where it differs
    builder: object = None      # build(obj, state) -> True when it handled BUILD on obj
    rename: object = None       # (module, name) -> (module, name), as unpickling maps old names
    fallback: object = None     # "module.name" -> a rule for globals not in `rules`, or None
    keys: Keys = field(default_factory=Keys)


_STRUCTS: dict = {}


def run(data: bytes, machine: Machine, start: int = 0) -> tuple:
    """(the value the pickle at byte `start` of `data` describes, the byte after its STOP), with
    nothing executed. PickleError when malformed or cut short."""
    if len(data) > MAX_PICKLE_BYTES:
        raise PickleError(f"pickle of {len(data)} bytes is over the {MAX_PICKLE_BYTES}-byte limit")
    try:
        vm = _Interpreter(data, machine)
        vm.pos = start
        return vm.run(), vm.pos
    except PickleError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, AttributeError, struct.error,
            UnicodeDecodeError, OverflowError, MemoryError, RecursionError) as e:
        raise PickleError(f"malformed pickle: {type(e).__name__}: {str(e)[:200]}") from None


class _Interpreter:
    def __init__(self, data: bytes, machine: Machine):
        self.data, self.pos, self.machine = data, 0, machine
        self.stack: list = []
        self.marks: list = []
        self.memo: dict = {}

    # -- reading ----------------------------------------------------------------------------
    def read(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PickleTruncated(f"pickle ends inside an opcode argument at byte {self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def line(self) -> bytes:
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            raise PickleTruncated(f"pickle ends inside a text argument at byte {self.pos}")
        out = self.data[self.pos:end]
        self.pos = end + 1
        return out

    def byte(self) -> int:
        pos = self.pos
        if pos >= len(self.data):
            raise PickleTruncated(f"pickle ends inside an opcode argument at byte {pos}")
        self.pos = pos + 1
        return self.data[pos]

    def u(self, fmt: str):
        st = _STRUCTS.get(fmt) or _STRUCTS.setdefault(fmt, struct.Struct(fmt))
        pos = self.pos
        if pos + st.size > len(self.data):
            raise PickleTruncated(f"pickle ends inside an opcode argument at byte {pos}")
        self.pos = pos + st.size
        return st.unpack_from(self.data, pos)[0]

    # -- the stack --------------------------------------------------------------------------
    def pop_mark(self) -> list:
        if not self.marks:
            raise PickleError("MARK expected on the stack")
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    def push(self, value):
        self.stack.append(value)  # handlers on the hot path append to vm.stack directly

    def pop(self):
        if not self.stack or (self.marks and len(self.stack) <= self.marks[-1]):
            raise PickleError(f"stack underflow at byte {self.pos}")
        return self.stack.pop()

    def top(self):
        if not self.stack:
            raise PickleError(f"stack underflow at byte {self.pos}")
        return self.stack[-1]

    # -- calling (never really) -------------------------------------------------------------
    def call(self, callee, args, new=False):
        if not isinstance(callee, Global):
            raise PickleError(f"the pickle calls a {type(callee).__name__}, not a global")
        full = str(callee)
        rule = (new and self.machine.new_rules.get(full)) or self.machine.rules.get(full)
        if rule is None and self.machine.fallback is not None:
            rule = self.machine.fallback(full)
        if rule is None:
            if full not in self.machine.disallowed:
                raise PickleError(f"the pickle calls {full}, which is not callable")
            return Opaque(callee, args)
        if not isinstance(args, tuple):
            if not isinstance(args, list):
                raise PickleError(f"arguments of {full} are not a tuple")
            args = tuple(args)
        return rule(args, self.machine)

    def global_(self, module: str, name: str):
        if self.machine.rename is not None:
            module, name = self.machine.rename(module, name)
        full = f"{module}.{name}"
        if full in self.machine.constants:
            return self.machine.constants[full]
        if full not in self.machine.rules and full not in self.machine.disallowed and not (
                self.machine.fallback is not None and self.machine.fallback(full)):
            self.machine.disallowed.append(full)
        return Global(module, name)

    # -- the loop ---------------------------------------------------------------------------
    def run(self):
        data, size, handlers = self.data, len(self.data), HANDLERS
        for _ in range(MAX_OPS):
            pos = self.pos
            if pos >= size:
                raise PickleTruncated("pickle ends without STOP")
            op = data[pos]
            self.pos = pos + 1
            handler = handlers.get(op)
            if handler is None:
                raise PickleError(f"unknown pickle opcode 0x{op:02x} at byte {pos}")
            if handler is stop:
                if len(self.stack) != 1 or self.marks:
                    raise PickleError("STOP with a stack of other than one value")
                return self.stack[0]
            handler(self)
        raise PickleError(f"the pickle runs over {MAX_OPS} opcodes (the limit)")
