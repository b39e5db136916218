"""One loop over 64-word vectors for the statistics kernel: three bit-test counts and the raw
extremes of every vector from one load (as vectors.py, portable LLVM IR).

Counting and the extremes in separate passes halve the speed of either alone (measured: 35 against
60 GB/s on bfloat16); here each vector is loaded once, tested three times into mask registers
(counted by popcount) and folded into running vertical maxima and minima, reduced across lanes
once per call. Words stored in the foreign byte order (FITS, NetCDF classic: big-endian) are
tested as stored (the tests are in the stored order) and byte-swapped in the register (one vector
bswap) for the extremes, so they run the same loop at nearly the same speed.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .vectors import VECTOR, splat_value


def _make(swap: bool):
    """count_and_extremes for words in this machine's byte order or (`swap`) the other."""
    def typer(typingctx, src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2):
        return _typer(swap, typingctx, src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2)
    typer.__name__ = "count_and_extremes" + ("_swapped" if swap else "")
    return intrinsic(typer)


def _typer(swap, typingctx, src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2):
    """(non-finite, tiny, zero, smallest unsigned, largest unsigned, largest signed) over the
    64 * vectors words from src[start] (vectors >= 1): the counts of tests (m0, v0), (m1, v1 and
    w & m1b != v1b) and (m2, v2), and the extremes of the words as uint64 (the signed one is the
    word's bits, sign-extended). src is a 1-D C-contiguous unsigned-integer array; nothing is
    checked (the caller's duty). Swapped: the counts' tests in the stored byte order, the
    extremes of the words in this machine's."""
    if not (isinstance(src, types.Array) and src.ndim == 1 and src.layout == "C"
            and isinstance(src.dtype, types.Integer) and not src.dtype.signed):
        return None
    u64 = types.uint64
    result = types.UniTuple(u64, 6)

    def codegen(context, builder, sig, args):
        word = sig.args[0].dtype
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        vt = ir.VectorType(context.get_value_type(word), VECTOR)

        def load(at):
            return builder.load(builder.bitcast(builder.gep(data, [at]), vt.as_pointer()),
                                align=1)
        return emit(context, builder, sig, args, word, load, swap)

    return result(src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2), codegen


count_and_extremes = _make(False)
count_and_extremes_swapped = _make(True)


def emit(context, builder, sig, args, word, load, swap: bool):
    """The loop of count_and_extremes over `args` (start, vectors, then the eight test words at
    args[3:11]) for words of numba type `word`, `load(at)` giving the vector of words from
    position `at` (an intp): shared by the loop over stored words and the one over byte-shuffled
    words (shuffled_vectors.py)."""
    wt = context.get_value_type(word)
    vt = ir.VectorType(wt, VECTOR)
    i64 = ir.IntType(64)
    start_at = context.cast(builder, args[1], sig.args[1], types.intp)
    n = context.cast(builder, args[2], sig.args[2], types.intp)

    def splat(i):
        return splat_value(builder, context.cast(builder, args[i], sig.args[i], word), vt)
    m0s, v0s, m1s, v1s, m1bs, v1bs, m2s, v2s = (splat(i) for i in range(3, 11))
    ones = ir.Constant(vt, [(1 << wt.width) - 1] * VECTOR)
    zeros = ir.Constant(vt, [0] * VECTOR)
    smallest = ir.Constant(vt, [1 << (wt.width - 1)] * VECTOR)
    counts = [cgutils.alloca_once_value(builder, ir.Constant(i64, 0)) for _ in range(3)]
    umin = cgutils.alloca_once_value(builder, ones)
    umax = cgutils.alloca_once_value(builder, zeros)
    smax = cgutils.alloca_once_value(builder, smallest)
    popcount = builder.module.declare_intrinsic("llvm.ctpop", [i64])
    bswap = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vt, [vt]), f"llvm.bswap.v{VECTOR}i{wt.width}") \
        if swap and wt.width > 8 else None

    def loop_over(one_mask: bool):
        with cgutils.for_range(builder, n) as loop:
            at = builder.add(start_at,
                             builder.mul(loop.index, ir.Constant(start_at.type, VECTOR)))
            words = load(at)
            values = builder.call(bswap, [words]) if bswap is not None else words
            if one_mask:  # zero values as constants: each test of a zero one instruction
                field = builder.and_(words, m0s)
                hits = [builder.icmp_unsigned("==", field, v0s),
                        builder.icmp_unsigned("==", field, zeros),
                        builder.icmp_unsigned("==", builder.and_(words, m2s), zeros)]
            else:
                hits = [builder.icmp_unsigned("==", builder.and_(words, m0s), v0s),
                        builder.and_(builder.icmp_unsigned("==", builder.and_(words, m1s), v1s),
                                     builder.icmp_unsigned("!=", builder.and_(words, m1bs),
                                                           v1bs)),
                        builder.icmp_unsigned("==", builder.and_(words, m2s), v2s)]
            for acc, hit in zip(counts, hits):
                bits = builder.bitcast(hit, ir.IntType(VECTOR))
                builder.store(builder.add(builder.load(acc), builder.call(popcount, [bits])),
                              acc)
            for acc, op, cmp in ((umin, "<", builder.icmp_unsigned),
                                 (umax, ">", builder.icmp_unsigned),
                                 (smax, ">", builder.icmp_signed)):
                old = builder.load(acc)
                builder.store(builder.select(cmp(op, values, old), values, old), acc)

    # Nearly every format's tests: non-finite and tiny test one field (the exponent), tiny and
    # zero test it for zero, and the tiny test's second clause never fails (mask 0, value not
    # 0): one AND fewer, no second clause, and a zero test one instruction per vector
    # (measured: see docs/benchmarks.md, issue 22).
    def scalar(i):
        return context.cast(builder, args[i], sig.args[i], word)
    zero = ir.Constant(wt, 0)
    one_mask = builder.icmp_unsigned("==", scalar(3), scalar(5))
    for i, op in ((6, "=="), (7, "=="), (8, "!="), (10, "==")):
        one_mask = builder.and_(one_mask, builder.icmp_unsigned(op, scalar(i), zero))
    with builder.if_else(one_mask) as (then, otherwise):
        with then:
            loop_over(True)
        with otherwise:
            loop_over(False)

    def reduce(name, acc, extend):
        f = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(wt, [vt]),
            f"llvm.vector.reduce.{name}.v{VECTOR}i{wt.width}")
        value = builder.call(f, [builder.load(acc)])
        return extend(value, i64)
    out = [builder.load(c) for c in counts]
    out += [reduce("umin", umin, builder.zext), reduce("umax", umax, builder.zext),
            reduce("smax", smax, builder.sext)]
    return context.make_tuple(builder, sig.return_type, out)
