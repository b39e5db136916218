"""Short rows reduced along their own axis: 16 rows of 2..8 contiguous words answered per step.

Counting a row of 4 words with a loop of its own costs more than reading it (measured: 2-18% of
read bandwidth). Here 16 consecutive rows are one vector load and one vector compare; each of the
`width` elements of a row is gathered across the 16 rows by a constant shuffle, the shuffles add
up to 16 counts (or "has one") that go to 16 consecutive cells in one load and store. The width
must be a compile-time constant for the shuffles, so each width is its own branch.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .walk import JIT

#: Rows per step.
ROWS = 16
#: The row widths with a branch of their own (NARROWEST..WIDEST; wider rows are counted by
#: slices.py's loops).
NARROWEST, WIDEST = 2, 8


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


@intrinsic(prefer_literal=True)
def add_rows(typingctx, src, start, width, m, v, m2, v2, cells, at, any_mode):
    """cells[at + i] += how many of the `width` words src[start + i*width + j] (j < width) pass
    (w & m) == v and (w & m2) != v2, for i < 16 (any_mode: cells[at + i] |= "one does"). `width`
    is a literal int; m2 = v2 = None: a one-clause test. src and cells are 1-D C-contiguous
    unsigned arrays holding the 16 * width words and 16 cells (the caller's duty)."""
    if not (isinstance(width, types.IntegerLiteral) and isinstance(src, types.Array)
            and isinstance(cells, types.Array) and src.layout == "C" and cells.layout == "C"
            and isinstance(cells.dtype, types.Integer)):
        return None
    one_clause = m2 is types.none
    n = ROWS * width.literal_value
    k = width.literal_value

    def codegen(context, builder, sig, args):
        word = context.get_value_type(sig.args[0].dtype)
        cell = context.get_value_type(sig.args[7].dtype)
        vector_type = ir.VectorType(word, n)
        cell_type = ir.VectorType(cell, ROWS)

        def address(i, vec):
            data = context.make_array(sig.args[i])(context, builder, args[i]).data
            offset = context.cast(builder, args[i + 1], sig.args[i + 1], types.intp)
            return builder.bitcast(builder.gep(data, [offset]), vec.as_pointer())

        def splat(i):
            value = context.cast(builder, args[i], sig.args[i], sig.args[0].dtype)
            one = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value,
                                         ir.Constant(ir.IntType(32), 0))
            zeros = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.count), [0] * vector_type.count)
            return builder.shuffle_vector(one, ir.Constant(vector_type, ir.Undefined), zeros)

        words = _load_padded(builder, address(0, vector_type), word, n)
        vector_type = words.type
        hits = builder.icmp_unsigned("==", builder.and_(words, splat(3)), splat(4))
        if not one_clause:
            hits = builder.and_(hits, builder.icmp_unsigned("!=", builder.and_(words, splat(5)), splat(6)))
        # shuffled as words: x86 has permutes of words of every width, none of single bits
        ones = builder.zext(hits, vector_type)
        undef = ir.Constant(vector_type, ir.Undefined)
        total = None
        for j in range(k):
            lanes = ir.Constant(ir.VectorType(ir.IntType(32), ROWS), [i * k + j for i in range(ROWS)])
            part = builder.shuffle_vector(ones, undef, lanes)
            total = part if total is None else builder.add(total, part)
        if cell.width > word.width:
            total = builder.zext(total, cell_type)
        elif cell.width < word.width:  # a row's count fits any cell
            total = builder.trunc(total, cell_type)
        where = address(7, cell_type)
        old = builder.load(where, align=1)
        zero = ir.Constant(cell_type, None)
        has = builder.zext(builder.icmp_unsigned("!=", total, zero), cell_type)
        new = builder.select(args[9], builder.or_(old, has), builder.add(old, total))
        builder.store(new, where, align=1)
        return context.get_dummy_value()

    return types.none(src, start, width, m, v, m2, v2, cells, at, any_mode), codegen


@njit(**JIT)
def _steps(src, sp, steps, width, cells, dp, m, v, m2, v2, any_mode):
    for b in range(steps):
        s = np.uint64(sp + b * ROWS * width)
        d = np.uint64(dp + b * ROWS)
        if width == 4:
            add_rows(src, s, 4, m, v, m2, v2, cells, d, any_mode)
        elif width == 8:
            add_rows(src, s, 8, m, v, m2, v2, cells, d, any_mode)
        elif width == 2:
            add_rows(src, s, 2, m, v, m2, v2, cells, d, any_mode)
        elif width == 3:
            add_rows(src, s, 3, m, v, m2, v2, cells, d, any_mode)
        elif width == 5:
            add_rows(src, s, 5, m, v, m2, v2, cells, d, any_mode)
        elif width == 6:
            add_rows(src, s, 6, m, v, m2, v2, cells, d, any_mode)
        else:
            add_rows(src, s, 7, m, v, m2, v2, cells, d, any_mode)


@njit(**JIT)
def short_rows(src, sp, rows, width, cells, dp, m, v, m2, v2, any_mode):
    """cells[dp + i] += the matches among the `width` words from src[sp + i*width] (any_mode:
    |= "one does"), for the first rows // 16 * 16 rows; returns how many rows that was. The
    rows are contiguous words, their cells contiguous; NARROWEST <= width <= WIDEST."""
    steps = rows // ROWS
    if m2 == 0:
        _steps(src, sp, steps, width, cells, dp, m, v, None, None, any_mode)
    else:
        _steps(src, sp, steps, width, cells, dp, m, v, m2, v2, any_mode)
    return steps * ROWS
