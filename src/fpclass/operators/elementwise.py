"""The element-wise operators: isnan, isinf, isfinite, isposinf, isneginf."""

from __future__ import annotations

import numpy as np

from .. import twin
from ..formats import Kind, NaN, Query, format_of
from ..kernels import compile_cache, numpy_bits
from ..kernels.layout import flat_words
from ..kernels.numpy_bits import matches
from .inputs import as_source, check_flag, check_out
from .outputs import empty_mask

#: The masks of the formats classified by value (long double): the NumPy twin's.
BY_VALUE = {Query.NAN: twin.isnan, Query.NONFINITE: lambda a: ~twin.isfinite(a), Query.INF: twin.isinf,
            Query.POSINF: twin.isposinf, Query.NEGINF: twin.isneginf}


_BOOL, _U8 = np.dtype(bool), np.dtype(np.uint8)
#: Contiguous arrays up to this size take `_small`, where the per-call cost is the whole cost
#: (larger masks come from the pool of recycled memory: operators/outputs.py).
SMALL_ELEMENTS = _SMALL = 1 << 15


class DtypePath:
    """What a SmallPath knows about one input dtype: the stored word and its bit test and lanes
    (`word` False where the path does not apply), the flat kernel's test words once the kernel is
    used, and the one-call answer (see _one_call) or None."""

    __slots__ = ("dtype", "word", "test", "lanes", "words", "one_call")

    def __init__(self, dtype, word, test, lanes, one_call):
        self.dtype, self.word, self.test, self.lanes = dtype, word, test, lanes
        self.words, self.one_call = None, one_call


class SmallPath:
    """One operator's small-array path: its query, whether it negates, and per input dtype the
    word, bit test and lanes (or False where the path does not apply), plus the flat kernel's
    test words once the kernel is used. Keyed by id(dtype): hashing a dtype or an Enum costs more
    than the rest of a 1 Ki call; each entry keeps its dtype alive, so an id cannot be reused by
    another dtype while its entry exists."""

    __slots__ = ("query", "negate", "by_dtype")

    def __init__(self, query: Query, negate: bool):
        self.query, self.negate, self.by_dtype = query, negate, {}

    def prepare(self, dtype: np.dtype) -> DtypePath:
        """The DtypePath of `dtype`, made and kept."""
        if len(self.by_dtype) > 1024:
            self.by_dtype.clear()
        try:
            src = as_source(np.empty(0, dtype))
        except TypeError:
            src = None
        test = None if src is None else src.test(self.query)
        if src is None or src.by_value or test is None:
            entry = DtypePath(dtype, False, None, 1, None)
        else:
            entry = DtypePath(dtype, src.word, test, src.lanes, _one_call(src, self, test))
        self.by_dtype[id(dtype)] = entry
        return entry

    def hits(self, x, _ndarray=np.ndarray):
        """The answer (negated if this operator negates) for a small ndarray `x` of any layout,
        in one or two NumPy calls; None where this path does not apply."""
        if type(x) is not _ndarray or x.nbytes > numpy_bits.SMALL_BYTES:
            return None
        dtype = x.dtype
        entry = self.by_dtype.get(id(dtype))
        if entry is None or entry.dtype is not dtype:
            entry = self.prepare(dtype)
        if entry.word is False:
            return None
        if entry.one_call is not None:
            return entry.one_call(x)
        hit = matches(x, entry.word, entry.lanes, entry.test)
        return ~hit if self.negate else hit


#: The NumPy ufuncs whose definition is the format table's for IEEE formats (float16/32/64 and
#: their complex pairs): NaN is exponent all ones with a mantissa, Inf the two patterns beside.
_IEEE_UFUNCS = {(Query.NAN, False): np.isnan, (Query.INF, False): np.isinf,
                (Query.NONFINITE, True): np.isfinite}
_NUMPY_IEEE = {np.dtype(t).type for t in (np.float16, np.float32, np.float64, np.complex64,
                                          np.complex128)}


def _one_call(src, fast: SmallPath, test):
    """A one-call answer for small inputs, taking out= too, or None: numpy's own ufunc where the
    format table says the format is IEEE and numpy stores it (numpy implements exactly the table's
    definition), else for formats of at most 16 bits a lookup table of every stored pattern, built
    from the bit test itself. Either agrees with the kernels on every input
    (tests/test_operators.py, both launchers)."""
    ufunc = _IEEE_UFUNCS.get((fast.query, fast.negate))
    word_format = src.word_format
    if (ufunc is not None and src.array.dtype.type in _NUMPY_IEEE and word_format.inf
            and word_format.nan is NaN.IEEE):
        return ufunc
    if src.lanes == 1 and src.word.itemsize <= 2:
        patterns = np.arange(1 << (8 * src.word.itemsize), dtype=src.word)
        table = matches(patterns, src.word, 1, test)
        if fast.negate:
            table = ~table
        word = src.word
        # take's out= is buffered (mode "raise"): an out over x's own memory is safe
        return lambda x, out=None: table.take(x.view(word), out=out)
    return None


#: The small-array paths of isnan, isfinite and isinf (the public façade inlines them too).
SMALL_NAN, SMALL_FINITE = SmallPath(Query.NAN, False), SmallPath(Query.NONFINITE, True)
SMALL_INF = SmallPath(Query.INF, False)
SMALL_SIGNED_INF = {Query.POSINF: SmallPath(Query.POSINF, False),
                    Query.NEGINF: SmallPath(Query.NEGINF, False)}


def _small(x, fast: SmallPath, out, _limit=_SMALL, _bool=_BOOL, _u8=_U8, _ndarray=np.ndarray,
           _bits=numpy_bits):
    """The common case of a small, C-contiguous ndarray with no or a plain `out`: the same bit
    test as the general path, minus its planning; up to numpy_bits.SMALL_BYTES evaluated by NumPy
    (nothing to compile), above by the flat kernel. None where it does not apply.
    (Globals arrive as default arguments: at 1 Ki elements every lookup shows.)"""
    if type(x) is not _ndarray or x.size > _limit or not x.flags.c_contiguous:
        return None
    dtype = x.dtype
    entry = fast.by_dtype.get(id(dtype))
    if entry is None or entry.dtype is not dtype:
        entry = fast.prepare(dtype)
    word = entry.word
    if word is False:
        return None
    tiny = x.nbytes <= _bits.SMALL_BYTES
    if out is None:
        if tiny:
            if entry.one_call is not None:
                hit = entry.one_call(x)
            else:
                hit = matches(x, word, entry.lanes, entry.test)
                if fast.negate:
                    hit = ~hit
            return hit[()] if x.ndim == 0 else hit
        result = np.empty(x.shape, _bool)
    elif type(out) is _ndarray and out.shape == x.shape and (out.dtype is _bool or out.dtype is _u8):
        flags = out.flags
        if not (flags.c_contiguous and flags.writeable):
            return None
        result = out
    else:
        return None
    if tiny and entry.one_call is not None and result.dtype is _bool:
        entry.one_call(x, out=result)  # the ufunc or the lookup table; both allow out over x
        return result
    if tiny and not np.may_share_memory(x, result):
        hit = matches(x, word, entry.lanes, entry.test)
        np.copyto(result, ~hit if fast.negate else hit, casting="unsafe")
        return result
    if tiny or not compile_cache.kernels_ready():
        return None   # out over x's memory, or a cold cache: the general path's NumPy answers
    words = entry.words
    if words is None:
        words = entry.words = _launch().test_words(entry.test, word, fast.negate, entry.lanes)
    # mask_flat refuses (writes nothing) when out overlaps x; the general path handles that.
    if x.ndim == 1 and x.flags.writeable:
        done = _FLAT(x.view(word), result, words)
    else:
        done = _FLAT(flat_words(x, word), result.reshape(-1), words)
    if not done:
        return None
    return result[()] if out is None and x.ndim == 0 else result


def _classify(x, query: Query | None, negate: bool, out):
    src = as_source(x)
    a = src.array
    test = None if query is None else src.test(query)
    if out is None and test is None and not negate and not src.by_value:
        # No element can match: zeroed memory from the allocator, never written or read.
        result = np.zeros(a.shape, bool)
        return result[()] if a.ndim == 0 else result
    if out is None:
        result = empty_mask(a.shape) if a.flags.c_contiguous else np.empty_like(a, bool, order="K")
    else:
        result = check_out(out, a.shape)
    target = result
    if out is not None and a.size and np.may_share_memory(a, out):
        target = np.empty_like(a, dtype=bool, order="K")  # read all input before writing any
    if a.size == 0:
        pass
    elif src.by_value:
        with np.errstate(all="ignore"):
            target[...] = BY_VALUE[query](a) ^ negate if query is not None else negate
    elif test is None:  # the format has no such values: answer without reading the data
        target[...] = negate
    else:
        launcher(a).mask(a, src.word, src.lanes, test, negate, target.view(np.uint8))
    if target is not result:
        result[...] = target
    if out is not None:
        return out  # the caller's own object, also when it is a subclass written through a view
    return result[()] if a.ndim == 0 else result


def launcher(a: np.ndarray, _ready=compile_cache.kernels_ready):
    """What classifies `a`: NumPy for inputs of at most numpy_bits.SMALL_BYTES (no compile, no
    dispatch cost) and, by the compile policy, while numba's cache is cold (kernels/
    compile_cache.py); the numba kernels otherwise."""
    if a.nbytes <= numpy_bits.SMALL_BYTES or not _ready():
        return numpy_bits
    return _launch()


def _launch():
    """The kernel launcher, imported on first use: importing it imports numba."""
    global _LAUNCH, _FLAT
    if _LAUNCH is None:
        from ..kernels import elementwise, launch
        _LAUNCH, _FLAT = launch, elementwise.mask_flat
    return _LAUNCH


_LAUNCH = _FLAT = None


def isnan(x, out=None):
    """True where `x` is NaN (any sign, payload or quietness); NaT for datetimes; either part for
    complex. Same shape as `x`; a NumPy bool scalar for scalar input; writes into `out` if given."""
    if (done := _small(x, SMALL_NAN, out)) is not None:
        return done
    return _classify(x, Query.NAN, False, out)


def isinf(x, out=None, *, detect_negative=True, detect_positive=True):
    """True where `x` is an infinity of a selected sign (ONNX / OpenVINO IsInf attributes).
    Both flags false gives all False. Complex: either part infinite (both signs only)."""
    both = detect_negative is True and detect_positive is True  # the default, checked cheaply
    if both and (done := _small(x, SMALL_INF, out)) is not None:
        return done
    query = inf_query(x, "isinf", detect_negative, detect_positive)
    if query not in (None, Query.INF) and (done := _small(x, SMALL_SIGNED_INF[query], out)) is not None:
        return done
    return _classify(x, query, False, out)


def inf_query(x, what, detect_negative, detect_positive) -> Query | None:
    """The query for the selected signs; complex input with one or no sign is refused, as in
    numpy's isposinf (which part's sign would count?)."""
    neg = check_flag("detect_negative", detect_negative)
    pos = check_flag("detect_positive", detect_positive)
    if neg and pos:
        return Query.INF
    _refuse_complex(x, f"{what} with one or no sign")
    return Query.POSINF if pos else Query.NEGINF if neg else None


def isfinite(x, out=None):
    """True where `x` is neither NaN nor ±Inf (complex: both parts finite; NaT is not finite)."""
    if (done := _small(x, SMALL_FINITE, out)) is not None:
        return done
    return _classify(x, Query.NONFINITE, True, out)


def isposinf(x, out=None):
    """True where `x` is +Inf. Complex input raises TypeError, as in numpy."""
    return isinf(x, out, detect_negative=False)


def isneginf(x, out=None):
    """True where `x` is -Inf. Complex input raises TypeError, as in numpy."""
    return isinf(x, out, detect_positive=False)


def _refuse_complex(x, what):
    dtype = getattr(x, "dtype", None)
    try:
        kind = format_of(np.asarray(x).dtype if dtype is None else dtype).kind
    except TypeError:
        return  # not a supported dtype: the operator itself says so
    if kind is Kind.COMPLEX:
        raise TypeError(f"{what} is not supported for complex values because it would be ambiguous")
