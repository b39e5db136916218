"""stats_vectors' loop over byte-shuffled words (HDF5's shuffle filter): each vector of 64 words
is rebuilt in registers from 64 bytes of each byte plane (interleaved pairwise), then tested and
folded into the extremes as stats_vectors folds stored words. The shuffled bytes are read once;
nothing is written."""

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .stats_vectors import emit
from .vectors import VECTOR


def _make(swap: bool):
    """count_and_extremes_planes for words in this machine's byte order or (`swap`) the other."""
    def typer(typingctx, src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2, plane):
        return _typer(swap, src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2, plane)
    typer.__name__ = "count_and_extremes_planes" + ("_swapped" if swap else "")
    return intrinsic(typer)


def _typer(swap, src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2, plane):
    """stats_vectors.count_and_extremes over the 64 * vectors words from word `start` of words
    stored shuffled in `src` (a 1-D C-contiguous uint8 array): byte k of word i at
    src[k * plane + i], byte 0 the lowest-addressed; the word type is the tests' (m0's, an
    unsigned integer of 2, 4 or 8 bytes). Nothing is checked (the caller's duty)."""
    if not (isinstance(src, types.Array) and src.ndim == 1 and src.layout == "C"
            and src.dtype == types.uint8 and isinstance(m0, types.Integer)
            and not m0.signed and m0.bitwidth in (16, 32, 64)):
        return None

    def codegen(context, builder, sig, args):
        word = sig.args[3]
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        stride = context.cast(builder, args[11], sig.args[11], types.intp)
        wt = context.get_value_type(word)
        bytes_t = ir.VectorType(ir.IntType(8), VECTOR)
        vt = ir.VectorType(wt, VECTOR)

        def load(at):
            # the planes interleaved pairwise: bytes into 16-bit halves, halves into words
            # (a permute per output register; zero-extending and shifting each byte into place
            # measured as fast in an earlier, blocked form of this kernel; in-lane unpacks too)
            lanes = []
            for k in range(wt.width // 8):
                where = builder.add(at, builder.mul(stride, ir.Constant(stride.type, k)))
                lanes.append(builder.load(builder.bitcast(builder.gep(data, [where]),
                                                          bytes_t.as_pointer()), align=1))
            bits = 8
            while len(lanes) > 1:
                mask = ir.Constant(ir.VectorType(ir.IntType(32), 2 * VECTOR),
                                   [i // 2 + VECTOR * (i % 2) for i in range(2 * VECTOR)])
                bits *= 2
                wide = ir.VectorType(ir.IntType(bits), VECTOR)
                lanes = [builder.bitcast(builder.shuffle_vector(lo, hi, mask), wide)
                         for lo, hi in zip(lanes[::2], lanes[1::2])]
            return lanes[0]
        return emit(context, builder, sig, args, word, load, swap)

    result = types.UniTuple(types.uint64, 6)
    return result(src, start, vectors, m0, v0, m1, v1, m1b, v1b, m2, v2, plane), codegen


count_and_extremes_planes = _make(False)
count_and_extremes_planes_swapped = _make(True)
