"""Bit tests on 64 consecutive words at once, answered as the 64 bits of one integer.

A plain counting loop makes LLVM widen every compare result to the lanes of its partial sum
(about 8 vector ops per 64 bytes). Asking for the 64 results as one integer and counting its bits
maps onto one vector compare into a mask register and a popcount instead: 1.6x the counting speed
on 8- and 16-bit words, measured, which is what lets a class histogram keep up with memory. This
is portable LLVM IR, not assembly: the backend splits <64 x iN> into whatever registers the CPU has.
"""

import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Words per call of `match_bits`.
VECTOR = 64


def splat_value(builder, value, vector_type):
    """IR for `value` in every lane of `vector_type` (VECTOR lanes)."""
    undef = ir.Constant(vector_type, ir.Undefined)
    one = builder.insert_element(undef, value, ir.Constant(ir.IntType(32), 0))
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), VECTOR), [0] * VECTOR)
    return builder.shuffle_vector(one, undef, zeros)


@intrinsic
def match_bits(typingctx, src, start, m, v, m2, v2):
    """Bit k (k < 64, counted from the least significant) is set iff src[start + k] passes (w & m) == v and (w & m2) != v2, for k < 64.
    Pass m2 = v2 = None for a one-clause test. src is a 1-D C-contiguous unsigned-integer array
    and start + 64 <= src.size (the caller's duty: nothing is checked)."""
    if not (isinstance(src, types.Array) and src.ndim == 1 and src.layout == "C"
            and isinstance(src.dtype, types.Integer) and not src.dtype.signed
            and all(isinstance(t, types.Integer) for t in (start, m, v))):
        return None
    one_clause = m2 is types.none
    if one_clause != (v2 is types.none) or not (one_clause or isinstance(m2, types.Integer)
                                                   and isinstance(v2, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        word = sig.args[0].dtype
        vector_type = ir.VectorType(context.get_value_type(word), VECTOR)
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        start_at = context.cast(builder, args[1], sig.args[1], types.intp)
        address = builder.bitcast(builder.gep(data, [start_at]), vector_type.as_pointer())
        words = builder.load(address, align=1)

        def splat(i):
            return splat_value(builder, context.cast(builder, args[i], sig.args[i], word), vector_type)

        hits = builder.icmp_unsigned("==", builder.and_(words, splat(2)), splat(3))
        if not one_clause:
            hits = builder.and_(hits, builder.icmp_unsigned("!=", builder.and_(words, splat(4)), splat(5)))
        return builder.bitcast(hits, ir.IntType(VECTOR))

    return types.uint64(src, start, m, v, m2, v2), codegen


@intrinsic
def popcount(typingctx, bits):
    """The number of set bits of a uint64."""
    if bits != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])

    return types.uint64(types.uint64), codegen


@intrinsic
def masked_max(typingctx, src, start, vectors, mask):
    """The largest src[start + k] & mask for k < 64 * vectors (0 for none): a test of the form
    (w & mask) > bound holds for one of those words iff it holds for this. Two vector ops a load,
    no mask register moved: reads at memory speed where match_bits reaches 80% of it (measured).
    Same duties as match_bits."""
    if not (isinstance(src, types.Array) and src.ndim == 1 and src.layout == "C"
            and isinstance(src.dtype, types.Integer) and not src.dtype.signed
            and all(isinstance(t, types.Integer) for t in (start, vectors, mask))):
        return None

    def codegen(context, builder, sig, args):
        word = sig.args[0].dtype
        lane = context.get_value_type(word)
        vector_type = ir.VectorType(lane, VECTOR)
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        start_at = context.cast(builder, args[1], sig.args[1], types.intp)
        count = context.cast(builder, args[2], sig.args[2], types.intp)
        keep = splat_value(builder, context.cast(builder, args[3], sig.args[3], word), vector_type)
        top = cgutils.alloca_once_value(builder, ir.Constant(vector_type, [0] * VECTOR))
        with cgutils.for_range(builder, count) as loop:
            at = builder.add(start_at, builder.mul(loop.index, ir.Constant(start_at.type, VECTOR)))
            address = builder.bitcast(builder.gep(data, [at]), vector_type.as_pointer())
            words = builder.and_(builder.load(address, align=1), keep)
            old = builder.load(top)
            builder.store(builder.select(builder.icmp_unsigned(">", words, old), words, old), top)
        reduce_max = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lane, [vector_type]),
                                                    f"llvm.vector.reduce.umax.v{VECTOR}i{lane.width}")
        return builder.call(reduce_max, [builder.load(top)])

    return src.dtype(src, start, vectors, mask), codegen



@intrinsic
def stream_bits(typingctx, dst, start, bits):
    """dst[start + k] = bit k of `bits` (1 or 0, k < 64), written past the caches (a non-temporal
    store): a mask far larger than the cache then costs no read of its old bytes. dst is a 1-D
    C-contiguous integer array, &dst[start] is a multiple of 64 bytes, and `fence()` must run
    before other threads read what was written."""
    if not (isinstance(dst, types.Array) and dst.ndim == 1 and dst.layout == "C"
            and isinstance(dst.dtype, types.Integer) and isinstance(start, types.Integer)
            and bits == types.uint64):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        start_at = context.cast(builder, args[1], sig.args[1], types.intp)
        vector_type = ir.VectorType(context.get_value_type(sig.args[0].dtype), VECTOR)
        values = builder.zext(builder.bitcast(args[2], ir.VectorType(ir.IntType(1), VECTOR)), vector_type)
        address = builder.bitcast(builder.gep(data, [start_at]), vector_type.as_pointer())
        store = builder.store(values, address, align=64)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()

    return types.none(dst, start, bits), codegen


#: x86 orders non-temporal stores with `sfence`; LLVM may lower a seq_cst fence to a locked
#: instruction there, which it does not promise to order them.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def fence(typingctx):
    """Orders the non-temporal stores before it with every store after it."""

    def codegen(context, builder, sig, args):
        if _X86:
            sfence = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                    "llvm.x86.sse.sfence")
            builder.call(sfence, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.none(), codegen
