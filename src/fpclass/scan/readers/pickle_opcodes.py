"""The opcodes of the pickle interpreter (pickle_vm): one handler per opcode, each a function of
the interpreter `vm` that reads its argument, changes the stack, memo or marks, and builds only
plain containers and inert values (a call goes to `vm.call`, which applies the allow-list).
`HANDLERS` maps each opcode byte to its handler; `stop` is STOP's, which the loop itself ends on."""

from __future__ import annotations

from .pickle_values import Opaque, PickleError

#: Deepest nesting of MARKs accepted (the stack is a list; this bounds only hostile input).
MAX_MARKS = 100_000
_UNSET = object()


def stop(vm):
    pass


def _proto(vm):
    if vm.read(1)[0] > 5:
        raise PickleError("pickle protocol above 5")


def _frame(vm):
    vm.read(8)


def _mark(vm):
    if len(vm.marks) >= MAX_MARKS:
        raise PickleError("MARKs nested too deeply")
    vm.marks.append(len(vm.stack))


def _text_int(vm):
    text = vm.line().rstrip(b"L")
    if text == b"00":
        vm.push(False)
    elif text == b"01":
        vm.push(True)
    else:
        vm.push(int(text))


def _text_string(vm):
    text = vm.line()
    if len(text) < 2 or text[:1] != text[-1:] or text[:1] not in b"'\"":
        raise PickleError("STRING argument is not quoted")
    vm.push(_unescape(text[1:-1]).decode("latin-1"))


def _unescape(raw: bytes) -> bytes:
    return raw.decode("unicode_escape").encode("latin-1") if b"\\" in raw else raw


def _text_unicode(vm):
    vm.push(vm.line().decode("raw_unicode_escape"))


def _text_float(vm):
    vm.push(float(vm.line()))


def _persid_text(vm):
    vm.push(_persistent(vm, vm.line().decode("ascii")))


def _binpersid(vm):
    vm.push(_persistent(vm, vm.pop()))


def _persistent(vm, pid):
    load = vm.machine.persistent_load
    if load is None:
        raise PickleError("persistent id in a pickle that may hold none")
    return load(pid)


def _reduce(vm):
    args = vm.pop()
    callee = vm.pop()
    if not isinstance(args, tuple):
        raise PickleError("REDUCE arguments are not a tuple")
    vm.push(vm.call(callee, args))


def _newobj(vm):
    args = vm.pop()
    cls = vm.pop()
    vm.push(vm.call(cls, args, new=True))


def _newobj_ex(vm):
    kwargs = vm.pop()
    args = vm.pop()
    cls = vm.pop()
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        raise PickleError("NEWOBJ_EX arguments are not a tuple and a dict")
    vm.push(vm.call(cls, args + ((kwargs,) if kwargs else ()), new=True))


def _build(vm):
    state = vm.pop()
    obj = vm.top()
    if isinstance(obj, Opaque):
        obj.state = state
    elif vm.machine.builder is not None and vm.machine.builder(obj, state):
        pass
    elif hasattr(obj, "build"):
        obj.build(state)
    else:  # what no __setstate__ or __dict__ takes: torch's weights-only load refuses it too
        raise PickleError(f"BUILD on a {type(obj).__name__}, which takes no state")


def _inst(vm):
    module = vm.line().decode("utf-8")
    name = vm.line().decode("utf-8")
    vm.push(vm.call(vm.global_(module, name), tuple(vm.pop_mark())))


def _obj(vm):
    items = vm.pop_mark()
    if not items:
        raise PickleError("OBJ without a class")
    vm.push(vm.call(items[0], tuple(items[1:])))


def _global(vm):
    module = vm.line().decode("utf-8")
    name = vm.line().decode("utf-8")
    vm.push(vm.global_(module, name))


def _stack_global(vm):
    name = vm.pop()
    module = vm.pop()
    if not isinstance(module, str) or not isinstance(name, str):
        raise PickleError("STACK_GLOBAL needs two strings")
    vm.push(vm.global_(module, name))


def _ext(size):
    def handler(vm):
        code = int.from_bytes(vm.read(size), "little")
        vm.push(vm.global_("copyreg", f"extension {code}"))
    return handler


def _append(vm):
    value = vm.pop()
    target = vm.top()
    if not isinstance(target, list):
        raise PickleError("APPEND to something that is not a list")
    target.append(value)


def _appends(vm):
    items = vm.pop_mark()
    target = vm.top()
    if not isinstance(target, list):
        raise PickleError("APPENDS to something that is not a list")
    target.extend(items)


def _setitem(vm):
    value = vm.pop()
    key = vm.pop()
    target = vm.top()
    if not isinstance(target, dict):
        raise PickleError("SETITEM on something that is not a dict")
    target[_key(vm, key)] = value


def _setitems(vm):
    items = vm.pop_mark()
    target = vm.top()
    if not isinstance(target, dict) or len(items) % 2:
        raise PickleError("SETITEMS on something that is not a dict, or an odd item count")
    for i in range(0, len(items), 2):
        target[_key(vm, items[i])] = items[i + 1]


def _key(vm, key):
    try:
        return vm.machine.keys.key(key)
    except TypeError:
        raise PickleError(f"unhashable dict key or set member: a {type(key).__name__}") from None


def _additems(vm):
    items = vm.pop_mark()
    target = vm.top()
    if not isinstance(target, set):
        raise PickleError("ADDITEMS on something that is not a set")
    target.update(_key(vm, i) for i in items)


def _dict(vm):
    items = vm.pop_mark()
    if len(items) % 2:
        raise PickleError("DICT with an odd item count")
    vm.push({_key(vm, items[i]): items[i + 1] for i in range(0, len(items), 2)})


def _get(key_of):
    def handler(vm):
        key = key_of(vm)
        value = vm.memo.get(key, _UNSET)
        if value is _UNSET:
            raise PickleError(f"memo key {key} read before it was written")
        vm.stack.append(value)
    return handler


def _put(key_of):
    def handler(vm):
        key = key_of(vm)
        if not vm.stack:
            raise PickleError(f"stack underflow at byte {vm.pos}")
        vm.memo[key] = vm.stack[-1]
    return handler


def _memoize(vm):
    vm.memo[len(vm.memo)] = vm.top()


def _pop(vm):
    if vm.marks and len(vm.stack) == vm.marks[-1]:
        vm.marks.pop()  # POP of a MARK
    else:
        vm.pop()


def _dup(vm):
    vm.push(vm.top())


def _buffer(vm):
    raise PickleError("the pickle takes an out-of-band buffer (NEXT_BUFFER): its data is not in "
                      "the file, and torch.load cannot read it")


def _readonly(vm):
    pass


def _push(value):
    return lambda vm: vm.push(value)


def _push_new(factory):
    return lambda vm: vm.push(factory())


#: The handler of each opcode, by its byte.
HANDLERS = {
    0x80: _proto, 0x95: _frame, ord("."): stop, ord("("): _mark, ord("1"): lambda vm: vm.pop_mark(),
    ord("0"): _pop, ord("2"): _dup,
    ord("I"): _text_int, ord("L"): _text_int, ord("F"): _text_float,
    ord("J"): lambda vm: vm.stack.append(vm.u("<i")),
    ord("K"): lambda vm: vm.stack.append(vm.byte()),
    ord("M"): lambda vm: vm.stack.append(vm.u("<H")),
    0x8a: lambda vm: vm.push(int.from_bytes(vm.read(vm.read(1)[0]), "little", signed=True)),
    0x8b: lambda vm: vm.push(int.from_bytes(vm.read(vm.u("<i")), "little", signed=True)),
    ord("G"): lambda vm: vm.stack.append(vm.u(">d")),
    ord("N"): _push(None), 0x88: _push(True), 0x89: _push(False),
    ord("S"): _text_string, ord("V"): _text_unicode,
    # Python 2 strings: torch.load decodes them as UTF-8 (its default encoding), strictly
    ord("T"): lambda vm: vm.push(vm.read(vm.u("<i")).decode("utf-8")),
    ord("U"): lambda vm: vm.push(vm.read(vm.read(1)[0]).decode("utf-8")),
    ord("X"): lambda vm: vm.push(vm.read(vm.u("<I")).decode("utf-8", "surrogatepass")),
    0x8c: lambda vm: vm.push(vm.read(vm.read(1)[0]).decode("utf-8", "surrogatepass")),
    0x8d: lambda vm: vm.push(vm.read(vm.u("<Q")).decode("utf-8", "surrogatepass")),
    ord("B"): lambda vm: vm.push(vm.read(vm.u("<I"))),
    ord("C"): lambda vm: vm.push(vm.read(vm.read(1)[0])),
    0x8e: lambda vm: vm.push(vm.read(vm.u("<Q"))),
    0x96: lambda vm: vm.push(bytearray(vm.read(vm.u("<Q")))),
    0x97: _buffer, 0x98: _readonly,
    ord("P"): _persid_text, ord("Q"): _binpersid,
    ord("R"): _reduce, 0x81: _newobj, 0x92: _newobj_ex, ord("b"): _build,
    ord("i"): _inst, ord("o"): _obj, ord("c"): _global, 0x93: _stack_global,
    0x82: _ext(1), 0x83: _ext(2), 0x84: _ext(4),
    ord("a"): _append, ord("e"): _appends, ord("s"): _setitem, ord("u"): _setitems,
    0x90: _additems, ord("d"): _dict,
    ord("}"): _push_new(dict), ord("]"): _push_new(list), ord(")"): _push(()),
    0x8f: _push_new(set),
    ord("l"): lambda vm: vm.push(vm.pop_mark()),
    ord("t"): lambda vm: vm.push(tuple(vm.pop_mark())),
    0x91: lambda vm: vm.push(frozenset(_key(vm, i) for i in vm.pop_mark())),
    0x85: lambda vm: vm.push((vm.pop(),)),
    0x86: lambda vm: vm.push(tuple(reversed([vm.pop(), vm.pop()]))),
    0x87: lambda vm: vm.push(tuple(reversed([vm.pop(), vm.pop(), vm.pop()]))),
    ord("g"): _get(lambda vm: int(vm.line())), ord("h"): _get(lambda vm: vm.byte()),
    ord("j"): _get(lambda vm: vm.u("<I")),
    ord("p"): _put(lambda vm: int(vm.line())), ord("q"): _put(lambda vm: vm.byte()),
    ord("r"): _put(lambda vm: vm.u("<I")), 0x94: _memoize,
}
