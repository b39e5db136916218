"""What the pickle interpreter (pickle_vm) builds besides plain containers: globals, the inert
result of calling one outside the allow-list, and dict keys and set members compared as Python
compares them without hashing the pickle's own tuples (a hostile key nested a million deep would
overflow the C stack in `hash`, and a tuple shared through the memo at every level would take
exponential time)."""

from __future__ import annotations

from dataclasses import dataclass


class PickleError(Exception):
    """The pickle is malformed or uses something this interpreter does not accept."""


class PickleTruncated(PickleError):
    """The data ends before the pickle does."""


@dataclass(frozen=True)
class Global:
    """A global the pickle names (never imported)."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class Opaque:
    """The result of calling a global that is not on the allow-list: nothing was called."""

    callee: Global
    args: object = None
    state: object = None


_ATOMS = (str, bytes, int, float, complex, bool, type(None))


class Key:
    """A dict key or set member that is not a plain atom (a tuple, a tensor): compared by `sig`,
    a flat value equal for two keys exactly when Python finds the keys equal."""

    __slots__ = ("sig", "value")

    def __init__(self, sig, value):
        self.sig, self.value = sig, value

    def __hash__(self):
        return hash(self.sig)

    def __eq__(self, other):
        return isinstance(other, Key) and self.sig == other.sig


class Keys:
    """Signatures of a run's keys. A tuple (or frozenset) of atoms is flat: Python hashes it
    without recursing, so it is its own key, and ("t", tuple) its signature as a member. Any other
    tuple's signature is ("T", n), n numbering the distinct tuples of signatures of its members
    (an atom is its own signature; an object hashed by identity, like a tensor, is ("O", object));
    computed bottom-up without recursion, once per tuple, so deep and shared tuples cost their
    size."""

    def __init__(self):
        self.interned: dict = {}
        self.known: dict = {}   # id(value) -> (value, signature)

    def key(self, value):
        """`value` as a dict key: itself if an atom, else a Key. TypeError if unhashable."""
        if type(value) in _ATOMS:
            return value
        if type(value) is Key or _flat(value):
            return value
        return Key(self.sig(value), value)

    def sig(self, root):
        known = self.known
        stack = [root]
        while stack:
            x = stack[-1]
            if type(x) in _ATOMS or id(x) in known:
                stack.pop()
                continue
            if _flat(x):
                sig = ("t", x)
            elif type(x) in (tuple, frozenset):
                pending = [c for c in x if type(c) not in _ATOMS and id(c) not in known]
                if pending:
                    stack.extend(pending)
                    continue
                members = [c if type(c) in _ATOMS else known[id(c)][1] for c in x]
                if type(x) is tuple:
                    sig = ("T", self.interned.setdefault(tuple(members), len(self.interned)))
                else:
                    sig = ("F", self.interned.setdefault(frozenset(members), len(self.interned)))
            elif type(x) is Key:
                sig = x.sig
            elif isinstance(x, (list, dict, set, bytearray)) or type(x).__hash__ is None:
                raise TypeError(f"unhashable type: {type(x).__name__!r}")
            else:
                sig = ("O", x)
            known[id(x)] = (x, sig)
            stack.pop()
        return root if type(root) in _ATOMS else known[id(root)][1]


def _flat(x) -> bool:
    return (type(x) is tuple or type(x) is frozenset) and all(type(c) in _ATOMS for c in x)


def unkey(key):
    """The value a dict key or set member stands for."""
    return key.value if type(key) is Key else key
