"""One wording for an OSError inside fpclass's messages: the C library's text (`strerror`),
starting lower-case as every other message does ("no such file or directory", "permission
denied"), or the exception's own text when it has none."""

from __future__ import annotations


def describe(e: OSError) -> str:
    """`e` as the end of a message: its strerror with a lower-case first letter, else str(e)."""
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return text[:1].lower() + text[1:] if text[1:2].islower() else text
