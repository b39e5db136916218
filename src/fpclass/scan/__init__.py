"""fpclass.scan: check checkpoints and array files for NaN and ±Inf, tensor by tensor, in bounded
memory. The formats read are listed below (from readers/registry.py).

    >>> from fpclass.scan import scan
    >>> report = scan(["model.safetensors"])          # doctest: +SKIP
    >>> report.exit_code, report.summary()["nan"]     # doctest: +SKIP
"""

from .engine import assemble, execute, plan, run_task, scan
from ..results import ExitCode
from ..results.report import SCHEMA, Location, Problem, ScanReport, TensorResult
from .tasks import Task
from .readers.registry import accepted

if __doc__:   # None under python -OO
    __doc__ += f"\nFormats read: {accepted()}.\n"

__all__ = ["SCHEMA", "ExitCode", "Location", "Problem", "ScanReport", "Task", "TensorResult",
           "assemble", "execute", "plan", "run_task", "scan"]
