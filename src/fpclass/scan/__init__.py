"""fpclass.scan: check checkpoints and array files (safetensors, npy/npz, ONNX, GGUF) for NaN
and ±Inf, tensor by tensor, in bounded memory.

    >>> from fpclass.scan import scan
    >>> report = scan(["model.safetensors"])          # doctest: +SKIP
    >>> report.exit_code, report.summary()["nan"]     # doctest: +SKIP
"""

from .engine import assemble, execute, plan, run_task, scan
from ..results import ExitCode
from ..results.report import SCHEMA, Location, Problem, ScanReport, TensorResult
from .tasks import Task

__all__ = ["SCHEMA", "ExitCode", "Location", "Problem", "ScanReport", "Task", "TensorResult",
           "assemble", "execute", "plan", "run_task", "scan"]
