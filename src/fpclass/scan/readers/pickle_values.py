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
_ATOM_TYPES = frozenset(_ATOMS)


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
        known, atoms, interned = self.known, _ATOM_TYPES, self.interned
        stack = [root]
        while stack:
            x = stack.pop()
            if id(x) in known:
                continue
            kind = type(x)
            if kind is tuple or kind is frozenset:
                inner = [c for c in x if type(c) not in atoms]
                if not inner:
                    sig = ("t", x)   # flat: hashed as itself
                else:
                    pending = [c for c in inner if id(c) not in known]
                    if pending:      # their signatures first, then this one's again
                        stack.append(x)
                        stack.extend(pending)
                        continue
                    members = [c if type(c) in atoms else known[id(c)][1] for c in x]
                    if kind is tuple:
                        sig = ("T", interned.setdefault(tuple(members), len(interned)))
                    else:
                        sig = ("F", interned.setdefault(frozenset(members), len(interned)))
            elif kind is Key:
                sig = x.sig
            elif kind in atoms:
                continue
            elif isinstance(x, (list, dict, set, bytearray)) or kind.__hash__ is None:
                raise TypeError(f"unhashable type: {kind.__name__!r}")
            else:
                sig = ("O", x)
            known[id(x)] = (x, sig)
        return root if type(root) in atoms else known[id(root)][1]


def _flat(x) -> bool:
    return (type(x) is tuple or type(x) is frozenset) and \
        not any(type(c) not in _ATOM_TYPES for c in x)


def unkey(key):
    """The value a dict key or set member stands for."""
    return key.value if type(key) is Key else key
