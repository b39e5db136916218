"""Atomic operations on an int64 cell shared by the threads of one parallel kernel.

Numba offers none. A plain load of a flag another thread sets may be hoisted out of a loop by
LLVM (a data race is undefined behaviour there); these compile to LLVM's atomic instructions with
monotonic ordering: each cell is coherent on its own, nothing else is ordered by them.
"""

from numba import types
from numba.extending import intrinsic


def _cell(context, builder, sig, args):
    """The address of cells[i] for (cells, i, ...) arguments."""
    data = context.make_array(sig.args[0])(context, builder, args[0]).data
    return builder.gep(data, [context.cast(builder, args[1], sig.args[1], types.intp)])


def _read_modify_write(op: str):
    """The codegen of cells[i] = op(cells[i], value), atomically, returning the old value."""
    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[2], sig.args[2], types.int64)
        return builder.atomic_rmw(op, _cell(context, builder, sig, args), value, "monotonic")
    return codegen


def _int64_cells(cells, i) -> bool:
    return (isinstance(cells, types.Array) and cells.ndim == 1 and cells.dtype == types.int64
            and isinstance(i, types.Integer))


@intrinsic
def fetch_add(typingctx, cells, i, value):
    """cells[i] += value atomically; the value cells[i] held before (cells: a 1-D int64 array)."""
    if not (_int64_cells(cells, i) and isinstance(value, types.Integer)):
        return None
    return types.int64(cells, i, value), _read_modify_write("add")


@intrinsic
def fetch_min(typingctx, cells, i, value):
    """cells[i] = min(cells[i], value) atomically (signed); the value cells[i] held before."""
    if not (_int64_cells(cells, i) and isinstance(value, types.Integer)):
        return None
    return types.int64(cells, i, value), _read_modify_write("min")


@intrinsic
def load(typingctx, cells, i):
    """cells[i], read atomically: never hoisted out of a loop, seeing another thread's store."""
    if not _int64_cells(cells, i):
        return None

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_cell(context, builder, sig, args), "monotonic", 8)

    return types.int64(cells, i), codegen


@intrinsic
def store(typingctx, cells, i, value):
    """cells[i] = value, written atomically (for `load` in other threads)."""
    if not (_int64_cells(cells, i) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        word = context.cast(builder, args[2], sig.args[2], types.int64)
        builder.store_atomic(word, _cell(context, builder, sig, args), "monotonic", 8)
        return context.get_dummy_value()

    return types.none(cells, i, value), codegen
