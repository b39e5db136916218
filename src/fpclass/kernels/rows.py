"""Short rows reduced along their own axis: 16 rows of 2..8 contiguous words answered per step.

Counting a row of 4 words with a loop of its own costs more than reading it (measured: 2-18% of
read bandwidth). Here 16 consecutive rows are one vector load and one vector compare; each of the
`width` elements of a row is gathered across the 16 rows by a constant shuffle of the hits as
bytes, the shuffles add up to 16 counts (or "has one") that go to 16 consecutive cells in one
store; rows of 8 are counted by a popcount of each byte of the hits' bit mask instead. The width
must be a compile-time constant for the shuffles, so each width is its own branch.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .walk import JIT

#: Rows per step.
ROWS = 16
#: The row widths with a branch of their own (NARROWEST..WIDEST; wider rows are counted by
#: slices.py's loops).
NARROWEST, WIDEST = 2, 8
#: Each step asks for the cache lines this many bytes ahead of its own (a prefetch, which never
#: faults): a step's compare and shuffles leave too few loads in flight for the hardware
#: prefetcher to keep up with memory (measured, one thread, 256 MiB of float32 rows of 4:
#: 28.0 ms without, 16.2 ms 1 or 2 KiB ahead, 19.8 ms 4 KiB ahead, against 14.3 ms for numpy's
#: sum of the same bytes; docs/benchmarks.md, issue 22, nineteenth round).
PREFETCH_BYTES = 1536
_LINE = 64


def _load_padded(builder, pointer, word, n):
    """The n words at `pointer` as a vector of the next power-of-two lanes (the top ones
    undefined), loaded in power-of-two pieces: LLVM splits a 96-lane vector into pieces that its
    shuffles then cross badly (measured: 2.2 GB/s on 16-bit rows of 6, 26 GB/s for rows of 8)."""
    lanes = 1 << (n - 1).bit_length()
    base = builder.bitcast(pointer, word.as_pointer())
    whole, filled = None, 0
    for bit in reversed(range(lanes.bit_length())):
        size = 1 << bit
        if not n - filled & size:
            continue
        piece_type = ir.VectorType(word, size)
        at = builder.bitcast(builder.gep(base, [ir.Constant(ir.IntType(64), filled)]),
                             piece_type.as_pointer())
        piece = builder.load(at, align=1)
        spread = builder.shuffle_vector(piece, ir.Constant(piece_type, ir.Undefined),
                                        ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                    [i if i < size else size for i in range(lanes)]))
        if whole is None:
            whole = spread
        else:
            # lanes past the words come from the pieces' undefined lanes (llvmlite takes no undef)
            mask = [i if i < filled else lanes + i - filled if i < filled + size else lanes + size
                    for i in range(lanes)]
            whole = builder.shuffle_vector(whole, spread,
                                           ir.Constant(ir.VectorType(ir.IntType(32), lanes), mask))
        filled += size
    return whole


def _prefetch_ahead(builder, pointer, step_bytes: int) -> None:
    """Prefetch (for reading, into every cache level) each cache line of the `step_bytes` bytes
    PREFETCH_BYTES past `pointer`: one request per line, at least one a step."""
    i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
    prefetch = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8")
    start = builder.bitcast(pointer, i8p)
    for line in range(0, max(step_bytes, 1), _LINE):
        # (a plain getelementptr: past the buffer's end it is an address never read)
        at = builder.gep(start, [ir.Constant(ir.IntType(64), PREFETCH_BYTES + line)])
        builder.call(prefetch, [at, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])


@intrinsic(prefer_literal=True)
def add_rows(typingctx, src, start, width, m, v, m2, v2, cells, at, cell_bytes, any_mode):
    """Cell at + i = how many of the `width` words src[start + i*width + j] (j < width) pass
    (w & m) == v and (w & m2) != v2, for i < 16 (any_mode: 1 if one does, else 0): stored, not
    added, so the cells need no zeros first (an answer as large as the input costs a pass less). `width` is a
    literal int. `cells` is a uint8 array holding cells of `cell_bytes` (1, 2, 4 or 8) bytes,
    little or native unsigned integers: the cell width is chosen at run time, at the store,
    so that the shuffles are compiled once per word type, not once per cell type. src and cells
    are 1-D C-contiguous and hold the 16 * width words and 16 cells (the caller's duty)."""
    if not (isinstance(width, types.IntegerLiteral) and isinstance(src, types.Array)
            and isinstance(cells, types.Array) and src.layout == "C" and cells.layout == "C"
            and cells.dtype == types.uint8):
        return None
    n = ROWS * width.literal_value
    k = width.literal_value

    def codegen(context, builder, sig, args):
        word = context.get_value_type(sig.args[0].dtype)
        vector_type = ir.VectorType(word, n)
        i64 = ir.IntType(64)

        def splat(i):
            value = context.cast(builder, args[i], sig.args[i], sig.args[0].dtype)
            one = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value,
                                         ir.Constant(ir.IntType(32), 0))
            zeros = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.count), [0] * vector_type.count)
            return builder.shuffle_vector(one, ir.Constant(vector_type, ir.Undefined), zeros)

        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        offset = context.cast(builder, args[1], sig.args[1], types.intp)
        _prefetch_ahead(builder, builder.gep(data, [offset]), n * word.width // 8)
        words = _load_padded(builder, builder.gep(data, [offset]), word, n)
        vector_type = words.type
        hits = builder.icmp_unsigned("==", builder.and_(words, splat(3)), splat(4))
        hits = builder.and_(hits, builder.icmp_unsigned("!=", builder.and_(words, splat(5)), splat(6)))
        if k == 8:
            # a row's 8 hits are one byte of the bit mask: counted by a byte-wise popcount,
            # without shuffles (measured, one thread: float32 rows of 8 at 44-54 GB/s against
            # 34-36 shuffled)
            per_row = builder.bitcast(hits, ir.VectorType(ir.IntType(8), ROWS))
            ctpop = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(per_row.type, [per_row.type]),
                f"llvm.ctpop.v{ROWS}i8")
            counts = builder.call(ctpop, [per_row])
            row_type = ir.VectorType(word, ROWS)
            total = (counts if word.width == 8 else builder.zext(counts, row_type))
        else:
            # shuffled as bytes, not words: the 16 * width hits fill fewer registers (a quarter
            # for float32)
            # (measured: float32 rows of 6 at 39-44 GB/s against 34-36 shuffled as words)
            byte_lanes = ir.VectorType(ir.IntType(8), vector_type.count)
            ones = builder.zext(hits, byte_lanes)
            undef = ir.Constant(byte_lanes, ir.Undefined)
            total = None
            for j in range(k):
                lanes = ir.Constant(ir.VectorType(ir.IntType(32), ROWS), [i * k + j for i in range(ROWS)])
                part = builder.shuffle_vector(ones, undef, lanes)
                total = part if total is None else builder.add(total, part)
            if word.width > 8:
                total = builder.zext(total, ir.VectorType(word, ROWS))
        base = context.make_array(sig.args[7])(context, builder, args[7]).data
        at = context.cast(builder, args[8], sig.args[8], types.intp)
        size = context.cast(builder, args[9], sig.args[9], types.intp)

        def store(cell):
            cell_type = ir.VectorType(cell, ROWS)
            if cell.width > word.width:
                value = builder.zext(total, cell_type)
            elif cell.width < word.width:  # a row's count fits any cell
                value = builder.trunc(total, cell_type)
            else:
                value = total
            where = builder.bitcast(builder.gep(base, [builder.mul(at, ir.Constant(i64, cell.width // 8))]),
                                    cell_type.as_pointer())
            has = builder.zext(builder.icmp_unsigned("!=", value, ir.Constant(cell_type, None)), cell_type)
            builder.store(builder.select(args[10], has, value), where, align=1)

        # the cell width as a branch at the store only: the loop around it is too large for LLVM
        # to copy once per width
        with builder.if_else(builder.icmp_signed("<=", size, ir.Constant(i64, 2))) as (narrow, wide):
            with narrow:
                with builder.if_else(builder.icmp_signed("==", size, ir.Constant(i64, 1))) as (one, two):
                    with one:
                        store(ir.IntType(8))
                    with two:
                        store(ir.IntType(16))
            with wide:
                with builder.if_else(builder.icmp_signed("==", size, ir.Constant(i64, 4))) as (four, eight):
                    with four:
                        store(ir.IntType(32))
                    with eight:
                        store(ir.IntType(64))
        return context.get_dummy_value()

    return types.none(src, start, width, m, v, m2, v2, cells, at, cell_bytes, any_mode), codegen


@njit(**JIT)
def short_rows(src, sp, width, cells, dp, cell_bytes, m, v, m2, v2, any_mode, first, stop):
    """Cell dp + i = the matches among the `width` words from src[sp + i*width] (any_mode: 1 if
    one does, else 0) for the rows of steps first..stop (16 rows a step; threads each take a
    range of steps). `cells` is the cells' bytes (a uint8 view), each cell `cell_bytes` (1, 2,
    4, 8) bytes of an unsigned integer. The rows are contiguous words, their cells contiguous;
    NARROWEST <= width <= WIDEST. Two-clause tests only (a one-clause test has m2 = 0, whose
    second clause every word passes). Compiled on its own, once per word type, not inlined into
    slices.py's kernels: the shuffles of the seven widths take seconds to compile, and numba
    compiles a callee again into each caller."""
    if width == 4:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 4)), 4, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
    elif width == 8:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 8)), 8, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
    elif width == 2:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 2)), 2, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
    elif width == 3:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 3)), 3, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
    elif width == 5:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 5)), 5, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
    elif width == 6:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 6)), 6, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
    else:
        for b in range(first, stop):
            add_rows(src, np.uint64(sp + b * (ROWS * 7)), 7, m, v, m2, v2, cells,
                     np.uint64(dp + b * ROWS), cell_bytes, any_mode)
