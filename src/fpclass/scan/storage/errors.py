"""The one error type for stored bytes that cannot be read as described."""


class SourceError(Exception):
    """The bytes of a task cannot be read as described; the message is the one-line reason."""
