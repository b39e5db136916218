"""What the scan hands a reader besides the path: the keyword options its registry entry declares
(`Reader.options`). The compressed reader plans the file inside its stream with the scan's own
detection and registry, given here, so that no reader imports detection or the registry (which
import the readers: the import graph stays without a cycle)."""

from __future__ import annotations

from .detect import identify, skip_by_head
from .readers.registry import BY_KIND, planner


def reader_options(kind: str, allow_globals=()) -> dict:
    """The options for the reader of `kind`: those it declares, of those the scan has."""
    offered = {"allow_globals": allow_globals, "identify": identify,
               "skip_by_head": skip_by_head, "planner": planner}
    return {name: offered[name] for name in BY_KIND[kind].options if offered[name]}
