"""How many specialisations the kernels compile: numba types a constant that one kernel passes to
another as a literal and compiles the callee again for it (seconds each, and again in every
kernel that links it), so no kernel passes one; and the per-slice kernels' `any` and count
each compile only their own loops (the mode is a type: True or None, not a runtime flag)."""

import ast
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys

import fpclass.kernels
from numba.core.registry import CPUDispatcher

#: The folder the fpclass under test was imported from (src/).
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(fpclass.kernels.__file__))))


def _constant(node) -> bool:
    """A literal number or bool (None is a type numba prunes on: the one-clause tests)."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value is not None \
        and isinstance(node.value, (bool, int, float))


def test_no_kernel_passes_a_constant_to_another():
    found = []
    for info in pkgutil.iter_modules(fpclass.kernels.__path__):
        module = importlib.import_module(f"fpclass.kernels.{info.name}")
        tree = ast.parse(inspect.getsource(module))
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            callee = getattr(module, getattr(call.func, "id", ""), None)
            if not isinstance(callee, CPUDispatcher):
                continue
            args = list(call.args) + [k.value for k in call.keywords]
            if any(_constant(a) for a in args):
                found.append(f"{info.name}.py:{call.lineno} {ast.unparse(call)[:60]}")
    assert found == []


#: Compiles the per-slice kernels for float32 on an empty cache (every callee compiled, none
#: loaded) and prints each one's signatures: the mode and whether any argument is a literal.
_COMPILE = """
import numpy as np
from fpclass.kernels import numpy_bits, slices
numpy_bits.SMALL_BYTES = -1
from fpclass.operators import queries as q
for shape in ((300, 64), (4096, 3)):
    x = np.zeros(shape, np.float32)
    q.any_nan(x, axis=0), q.count_nan(x, axis=0), q.any_nan(x.T, axis=1), q.count_nan(x, axis=1)
for k in (slices.reduce_plan, slices._reduce_rows, slices._add_run, slices._add_four_rows,
          slices._any_rows, slices._all_set):
    print(k.__name__, sorted(str(s[-1]) for s in k.signatures),
          any("Literal" in str(a) for s in k.signatures for a in s))
"""


def test_per_slice_kernels_compile_once_per_mode(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "FPCLASS_COMPILE": "inline",
           "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    both = "['bool', 'none'] False"
    assert lines == {"reduce_plan": both, "_reduce_rows": both, "_add_run": both,
                     "_add_four_rows": both, "_any_rows": "['bool'] False",
                     "_all_set": "['int64'] False"}
