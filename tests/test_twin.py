"""Every public function against its NumPy twin (fpclass.twin), through the one comparison table
(tests/comparisons.py): value, dtype and type on the adversarial arrays of tests/samples.py, for
every axis (tuples, None and () included), keepdims, both signs, limits and out=; no function writes
its input; the twin has every public function's signature and imports nothing of the kernels; the
table's peers (numpy, torch, bottleneck) answer as the twin does."""

import ast
import inspect
import itertools
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import comparisons
import fpclass
import samples
from comparisons import COMPARISONS
from fpclass import twin

ARRAYS = list(samples.adversarial())
SIGNS = [{}, {"detect_negative": False}, {"detect_positive": False},
         {"detect_negative": False, "detect_positive": False}]
RAISES = (TypeError, ValueError, np.exceptions.AxisError)


def axes(ndim):
    """None, each axis, -1, every pair, all axes as a tuple, and ()."""
    yield None
    yield ()
    if ndim:
        yield from range(ndim)
        yield -1
        yield from itertools.combinations(range(ndim), 2)
    if ndim > 2:
        yield tuple(range(ndim))


def calls(name, a):
    """Every set of keyword arguments `name` is compared with on `a` (`out`: the dtype of a fresh
    out= array)."""
    params = inspect.signature(getattr(twin, name)).parameters
    signs = SIGNS if "detect_negative" in params else [{}]
    rest = [{}]
    if "axis" in params:
        rest = [{"axis": axis, "keepdims": keep} for axis in axes(a.ndim) for keep in (False, True)]
    elif "limit" in params:
        rest = [{"limit": limit} for limit in (None, 0, 1, 3)]
    elif "out" in params:
        rest = [{}, {"out": bool}, {"out": np.uint8}]
    return [{**s, **r} for s in signs for r in rest]


def outcome(fn, a, kwargs):
    """("value", fn(a, **kwargs)) or ("raises", the exception's type)."""
    kwargs = dict(kwargs)
    if "out" in kwargs:
        kwargs["out"] = np.full(a.shape, 7, kwargs["out"])
    try:
        result = fn(a, **kwargs)
    except RAISES as e:
        return "raises", type(e)
    if "out" in kwargs:
        assert result is kwargs["out"]
    return "value", result


def assert_same(got, want, where):
    """Same type, dtype, shape and value."""
    assert type(got) is type(want), f"{where}: {type(got).__name__}, the twin {type(want).__name__}"
    if isinstance(want, np.ndarray):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), \
            f"{where}: {got.dtype}{got.shape}, the twin {want.dtype}{want.shape}"
        assert np.array_equal(got, want), f"{where}:\n{got}\nthe twin:\n{want}"
    elif isinstance(want, np.generic):
        assert got.dtype == want.dtype and got == want, f"{where}: {got!r}, the twin {want!r}"
    elif isinstance(want, int):  # one count
        assert got == want, f"{where}: {got!r}, the twin {want!r}"
    else:  # None, an index tuple or ClassCounts: of Python ints
        assert got == want, f"{where}: {got!r}, the twin {want!r}"
        assert all(type(i) is int for i in got or ()), where


@pytest.mark.parametrize("name", COMPARISONS)
def test_fpclass_is_its_twin(name, both_launchers):
    real, oracle = COMPARISONS[name]["fpclass"], COMPARISONS[name]["twin"]
    for label, a in ARRAYS:
        for kwargs in calls(name, a):
            where = f"{name}({label}, {kwargs})"
            got_kind, got = outcome(real, a, kwargs)
            want_kind, want = outcome(oracle, a, kwargs)
            assert got_kind == want_kind, f"{where}: fpclass {got_kind} {got}, the twin {want}"
            if want_kind == "raises":
                assert got is want, f"{where}: fpclass raises {got.__name__}, the twin {want}"
            else:
                assert_same(got, want, where)


@pytest.mark.parametrize("library", ["fpclass", "twin"])
def test_no_function_writes_its_input(library):
    for label, a in ARRAYS:
        before, flags = a.copy(), (a.strides, a.flags.writeable, a.flags.c_contiguous)
        for name, implementations in COMPARISONS.items():
            for kwargs in calls(name, a)[:6]:
                outcome(implementations[library], a, kwargs)
        assert a.tobytes() == before.tobytes(), f"{library} wrote into {label}"
        assert (a.strides, a.flags.writeable, a.flags.c_contiguous) == flags, label


def test_every_public_function_has_a_twin_with_its_signature():
    public = set(fpclass.facade.PUBLIC)        # the classifying functions: the façade's table
    assert public <= set(fpclass.__all__) and set(COMPARISONS) == public
    for name in public:
        real, oracle = getattr(fpclass, name), getattr(twin, name)
        assert inspect.signature(real) == inspect.signature(oracle), name
        doc = inspect.getdoc(oracle)
        assert "mpty input" in doc, f"twin.{name} says nothing of empty input"
    assert twin.ClassCounts is fpclass.ClassCounts is fpclass.operators.queries.ClassCounts


def test_the_twin_imports_numpy_and_ml_dtypes_only():
    # a low layer: the operators may use it, it uses nothing of theirs (nor numba, nor the format
    # table that the bit tests come from: the twin decides by values)
    tree = ast.parse(Path(twin.__file__).read_text())
    imported = {(node.level, node.module) if isinstance(node, ast.ImportFrom) else (0, alias.name)
                for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert imported <= {(0, "__future__"), (0, "numpy"), (0, "ml_dtypes"), (1, "counts")}, imported


@pytest.mark.parametrize("dtype", samples.ML_FLOATS + [np.dtype(ml_dtypes.complex32),
                                                       np.dtype(ml_dtypes.bcomplex32)], ids=str)
def test_the_twin_widens_every_value_exactly(dtype):
    # values() widens ml_dtypes to float32 / complex64: exact, as the float64 of every pattern shows
    x = samples.all_patterns(dtype) if dtype.itemsize <= 2 else samples.random_bits(dtype, 65536)
    padding = twin._PADDED_BITS.get(dtype.name)
    if padding:  # the padding bits do not count: only patterns without them have a value
        x = x[: 1 << padding]
    with np.errstate(all="ignore"):  # signalling NaNs
        wide = twin.values(x)
        exact = x.astype(np.complex128 if "complex" in dtype.name else np.float64)
        again = wide.astype(exact.dtype)
    assert wide.dtype in (np.float32, np.complex64)
    assert np.array_equal(again, exact, equal_nan=True)
    assert np.array_equal(np.signbit(wide.real), np.signbit(exact.real))


# -- the table's peers -----------------------------------------------------------------------------

PEERS = [(name, library) for name, implementations in COMPARISONS.items()
         for library in implementations if library not in ("fpclass", "twin")]


def peer_calls(library, fn, ndim):
    """Keyword arguments for a peer: those of its signature, with the axes it takes (torch reduces
    every dim for dim=(); bottleneck takes no tuple)."""
    params = inspect.signature(fn).parameters
    if "axis" in params:
        tuples = [] if library == "bottleneck" else [tuple(range(ndim))]
        keeps = (False, True) if "keepdims" in params else (False,)
        return [{"axis": a, **({"keepdims": k} if "keepdims" in params else {})}
                for a in [None, *range(ndim), *tuples] for k in keeps]
    if "limit" in params:
        return [{"limit": None}, {"limit": 2}]
    return [{}]


@pytest.mark.parametrize("name, library", PEERS, ids=[f"{n}-{lib}" for n, lib in PEERS])
def test_peers_answer_as_the_twin(name, library):
    if library in ("torch", "bottleneck"):
        pytest.importorskip(library)
    peer = COMPARISONS[name][library]
    cases = itertools.product((np.float32, np.float64), [(11,), (4, 5)])
    for seed, (dtype, shape) in enumerate(cases):
        a = samples.filled(dtype, shape, seed)
        for kwargs in peer_calls(library, peer, a.ndim):
            got = peer(comparisons.prepare(library, a), **kwargs)
            got = got.numpy() if hasattr(got, "numpy") else got
            want = getattr(twin, name)(a, **kwargs)
            where = f"{library} {name}({a.dtype}{shape}, {kwargs})"
            if isinstance(want, (tuple, type(None))):
                assert got == want, where
            else:
                assert np.shape(got) == np.shape(want) and np.array_equal(got, want), where
