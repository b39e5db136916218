"""The result model of `fpclass scan` and `fpclass.check`: per-tensor results, file problems,
the report with its summary, exit code and JSON document, and its human rendering. Below both
the scan and check, so neither imports the other's internals."""

from .exitcodes import ExitCode
from .report import SCHEMA, Location, Problem, ScanReport, TensorResult

__all__ = ["SCHEMA", "ExitCode", "Location", "Problem", "ScanReport", "TensorResult"]
