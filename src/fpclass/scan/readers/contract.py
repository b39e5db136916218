"""The reader contract: what every reader declares (its kind, the names, magic numbers, header test
and directory markers it claims, the extra that installs its library, a line for the docs) and the
one thing it does, `plan(path, **options) -> list[Task]` (headers only; ReaderError with a
one-line reason when the file as a whole cannot be read). The declarations live in the registry
(readers/registry.py), so that detection, the directory walk, the CLI help and the docs read them
without importing a reader; a reader's module (and its library) is imported when a file of its
kind is planned."""

from __future__ import annotations

from typing import Callable, NamedTuple, Protocol


class Plan(Protocol):
    """A reader's plan function: the tasks of the file at `path`."""

    def __call__(self, path: str, /, **options) -> list: ...


class Reader(NamedTuple):
    """One kind of file fpclass reads (a named tuple: a dataclass would cost every `import
    fpclass.scan` 0.6 ms more).

    `load` returns the plan function (importing the reader's module: a function with an import
    statement in the registry, so static tools see every reader). `extensions`: a file so named
    goes to this reader even when its content is not recognised (the reader then names the
    damage); `known_names`: other names it comes under, read only when the content says so.
    `magic`: prefixes of the first bytes that identify it; `content(head, size)`: a header test
    where a prefix is not enough. `markers`: entries that make a directory one store of this kind;
    `directories`: name endings that do. `extra`: the fpclass extra that installs its library
    (`fpclass[extra]`, the name `_optional.require` gives). `options`: the keyword options of
    `plan` the scan passes it (`allow_globals`). `format`: its name for people (help, problem
    messages, the docs' table); `detected`: how detect.py tells it apart where neither magic nor
    `content` does (a zip's members, a protobuf's fields), for the docs."""

    kind: str
    format: str
    load: Callable[[], Plan]
    extensions: tuple = ()
    known_names: tuple = ()
    magic: tuple = ()
    content: Callable[[bytes, int], bool] | None = None
    markers: tuple = ()
    directories: tuple = ()
    extra: str = ""
    options: tuple = ()
    detected: str = ""

    def plan(self, path: str, **options) -> list:
        """The tasks of the file at `path` (options this reader does not take are dropped)."""
        taken = {k: v for k, v in options.items() if k in self.options}
        return self.load()(path, **taken)

    def recognizes(self, head: bytes, size: int) -> bool:
        """Whether a file of `size` bytes starting with `head` is of this kind by its content."""
        return head.startswith(self.magic) or \
            (self.content is not None and self.content(head, size))
