"""OpenVINO partial shapes: static dims, dynamic dims (`?`, `-1`), intervals (`2..4`, `..4`, `2..`)
and dynamic rank (`...`), as written in a Parameter's `shape` attribute.

    >>> PartialShape.parse("2,?,2..4").accepts((2, 7, 3))
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import IRError


@dataclass(frozen=True)
class Dimension:
    """The sizes one axis may take: `low..high`, `high` None when unbounded."""

    low: int = 0
    high: int | None = None

    @property
    def is_static(self) -> bool:
        return self.high == self.low

    def accepts(self, size: int) -> bool:
        return self.low <= size and (self.high is None or size <= self.high)

    @property
    def port_dim(self) -> int:
        """How IR ports write this axis: its size when static, -1 otherwise."""
        return self.low if self.is_static else -1

    def __str__(self) -> str:
        if self.is_static:
            return str(self.low)
        if self.low == 0 and self.high is None:
            return "?"
        return f"{self.low if self.low else ''}..{'' if self.high is None else self.high}"


def _size(text: str, where: str) -> int:
    if not text.isdigit():
        raise IRError(f"{where}: {text!r} is not a dimension size (a non-negative integer)")
    return int(text)


def parse_dimension(text: str, where: str) -> Dimension:
    """One axis: `n`, `?` or `-1`, `a..b`, `..b`, `a..`. IRError naming `where` otherwise."""
    text = text.strip()
    if text in ("?", "-1"):
        return Dimension()
    if ".." in text:
        low, _, high = text.partition("..")
        lo = _size(low, where) if low else 0
        hi = _size(high, where) if high else None
        if hi is not None and hi < lo:
            raise IRError(f"{where}: empty interval {text!r}")
        return Dimension(lo, hi)
    n = _size(text, where)
    return Dimension(n, n)


@dataclass(frozen=True)
class PartialShape:
    """A shape whose axes may be dynamic; `dims` None means the rank itself is dynamic."""

    dims: tuple[Dimension, ...] | None

    @classmethod
    def parse(cls, text: str, where: str = "shape") -> "PartialShape":
        """From IR text: `...` is dynamic rank, the empty string a scalar, else comma-separated axes."""
        text = text.strip()
        if text == "...":
            return cls(None)
        if text == "":
            return cls(())
        return cls(tuple(parse_dimension(t, where) for t in text.split(",")))

    @classmethod
    def of(cls, spec, where: str = "shape") -> "PartialShape":
        """From Python: a PartialShape, IR text, None (dynamic rank) or a sequence whose items are
        ints (-1 dynamic), None (dynamic), `(low, high)` intervals or IR text."""
        if isinstance(spec, PartialShape):
            return spec
        if spec is None:
            return cls(None)
        if isinstance(spec, str):
            return cls.parse(spec, where)
        dims = []
        for item in spec:
            if item is None:
                dims.append(Dimension())
            elif isinstance(item, tuple) and len(item) == 2:
                dims.append(parse_dimension(f"{item[0] or ''}..{'' if item[1] is None else item[1]}",
                                            where))
            else:
                dims.append(parse_dimension(str(item), where))
        return cls(tuple(dims))

    def port_dims(self) -> tuple[int, ...]:
        """The `<dim>` list of a port of this shape (none for dynamic rank, -1 for dynamic axes)."""
        return () if self.dims is None else tuple(d.port_dim for d in self.dims)

    def agrees_with_port(self, port_dims: tuple[int, ...]) -> bool:
        """Whether a port's `<dim>` list describes this shape (as OpenVINO writes it)."""
        return self.dims is None and not port_dims or self.port_dims() == tuple(port_dims)

    def accepts(self, shape: tuple[int, ...]) -> bool:
        """Whether a concrete array shape is one this partial shape allows."""
        if self.dims is None:
            return True
        return len(shape) == len(self.dims) and all(d.accepts(n) for d, n in zip(self.dims, shape))

    def __str__(self) -> str:
        return "..." if self.dims is None else ",".join(map(str, self.dims))
