"""The version of fpclass, apart from the package so that the result model reads it without
importing the package (no import cycle)."""

__version__ = "0.1.0"
