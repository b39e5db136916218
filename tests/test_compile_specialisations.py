"""How many specialisations the kernels compile: numba types a constant that one kernel passes to
another as a literal and compiles the callee again for it (seconds each, and again in every
kernel that links it), so no kernel passes one; and the per-slice kernels' `any` and count
each compile only their own loops (the mode is a type: True or None, not a runtime flag); and
no code outside the kernels reaches a kernel compiled without numba's Python wrapper."""

import ast
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys

import fpclass
import fpclass.kernels
from numba.core.registry import CPUDispatcher

#: The folder the fpclass under test was imported from (src/).
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(fpclass.kernels.__file__))))


def _kernel_calls(module):
    """(line, text, callee, arguments) of each call from a kernel of `module` to a kernel."""
    tree = ast.parse(inspect.getsource(module))
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if not isinstance(getattr(module, fn.name, None), CPUDispatcher):
            continue  # a Python function: what it passes is typed as a plain value
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                callee = getattr(getattr(module, func.value.id, None), func.attr, None)
            else:
                callee = getattr(module, getattr(func, "id", ""), None)
            if isinstance(callee, CPUDispatcher):
                yield call.lineno, ast.unparse(call)[:60], list(call.args) + [k.value for k in call.keywords]


def _literal(node, module) -> bool:
    """A number or bool written in the call, or a module-level one (numba freezes globals as
    constants); None is a type numba prunes on (the one-clause tests), not a literal."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.Constant):
        value = node.value
    elif isinstance(node, ast.Name) and node.id.isupper() and hasattr(module, node.id):
        value = getattr(module, node.id)
    else:
        return False
    return isinstance(value, (bool, int, float)) and value is not None


def test_no_kernel_passes_a_constant_to_another():
    found = []
    for info in pkgutil.iter_modules(fpclass.kernels.__path__):
        module = importlib.import_module(f"fpclass.kernels.{info.name}")
        found += [f"{info.name}.py:{line} {text}" for line, text, args in _kernel_calls(module)
                  if any(_literal(a, module) for a in args)]
    assert found == []


def _jitted(fn) -> bool:
    return any("njit" in ast.unparse(d) for d in fn.decorator_list)


def _python_uses(module):
    """(line, text, object) of each global name or `name.attribute` that code of `module`
    outside its kernels loads: what Python calls or passes on."""
    tree = ast.parse(inspect.getsource(module))

    def visit(node, in_kernel):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_kernel = in_kernel or _jitted(node)
        elif not in_kernel and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            yield node.lineno, node.id, getattr(module, node.id, None)
        elif (not in_kernel and isinstance(node, ast.Attribute)
              and isinstance(node.value, ast.Name)):
            owner = getattr(module, node.value.id, None)
            yield node.lineno, ast.unparse(node), getattr(owner, node.attr, None)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, in_kernel)
    yield from visit(tree, False)


def test_kernels_without_a_python_wrapper_are_called_by_kernels_only():
    # a kernel compiled without numba's Python wrapper (walk.INNER) crashes the process when
    # Python calls it: no code outside the kernels may reach one
    found, inner = [], set()
    for info in pkgutil.walk_packages(fpclass.__path__, "fpclass."):
        module = importlib.import_module(info.name)
        inner |= {name for name, k in vars(module).items() if isinstance(k, CPUDispatcher)
                  and k.targetoptions.get("no_cpython_wrapper")}
        found += [f"{info.name}:{line} {text}" for line, text, k in _python_uses(module)
                  if isinstance(k, CPUDispatcher) and k.targetoptions.get("no_cpython_wrapper")]
    assert found == []
    assert {"any_range", "count_run", "word_at", "_reduce_rows"} <= inner


#: On an empty cache (every callee compiled, none loaded): per-slice counts first, then `any`,
#: then the density maps' unit; prints what was compiled as JSON.
_COMPILE = """
import gc, json
import numpy as np
from numba.core.registry import CPUDispatcher
from fpclass.kernels import numpy_bits, slices
from fpclass.operators import queries as q, warmup
numpy_bits.SMALL_BYTES = -1
shapes = ((300, 64), (4096, 3))
for x in (np.zeros(s, np.float32) for s in shapes):
    q.count_nan(x, axis=0), q.count_nan(x, axis=1), q.count_nan(x.T, axis=1)
out = {"any kernels after counts": [k.__name__ for k in (slices._any_rows, slices.any_run,
                                    slices._any_narrow_rows) if k.signatures]}
for x in (np.zeros(s, np.float32) for s in shapes):
    q.any_nan(x, axis=0), q.any_nan(x, axis=1), q.any_nan(x.T, axis=1)
warmup.compile_unit("density", "serial")
out["modes"] = {k.__name__: sorted(str(s[-1]) for s in k.signatures)
                for k in (slices.reduce_plan, slices._reduce_rows, slices._add_run,
                          slices._add_four_rows)}
out["literal"] = sorted({d.py_func.__qualname__ for d in gc.get_objects()
                         if isinstance(d, CPUDispatcher)
                         and d.py_func.__module__.startswith("fpclass.kernels")
                         for s in d.signatures if any("Literal" in str(a) for a in s)})
print(json.dumps(out))
"""


def test_compiled_kernels_have_no_literal_and_one_mode_each(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "FPCLASS_COMPILE": "inline",
           "PYTHONPATH": SRC}
    run = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["any kernels after counts"] == []   # counts compile none of any's loops
    for kernel, modes in out["modes"].items():     # each mode once (one word and cell type)
        assert modes == ["bool", "none"], kernel
    assert out["literal"] == []
