"""The one-buffer readers of kernels/launch_buffers.py (watch's screen and magnitude bound) after
their first call: they call the compiled entry point of the kernel's overload in the
dispatcher's place, and answer as NumPy says at every position."""

import ml_dtypes
import numpy as np
import pytest
from numba import typeof
from numba.core.dispatcher import Dispatcher

from fpclass.formats import Query, format_of
from fpclass.kernels import buffers as kernels
from fpclass.kernels import launch_buffers
from fpclass.kernels.launch_find import above
from fpclass.operators.inputs import as_source

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def _terms(dtype):
    src = as_source(np.empty(0, dtype))
    return src.word, src.test(Query.NONFINITE)


def _screen(dtype):
    """A new screen (nonfinite_screen keeps one a dtype: this one's first call is the test's)."""
    return launch_buffers.buffer_screen(*_terms(dtype))


def _maximum(dtype):
    word, test = _terms(dtype)
    return launch_buffers.buffer_maximum(word, int(above(test, word)[0]))


def _cell(reader, name):
    """What the reader's closure holds under `name`."""
    return reader.__closure__[reader.__code__.co_freevars.index(name)].cell_contents


def _kernel_cell(reader):
    """What the reader calls for its one-thread read now (its closure's `one`)."""
    return _cell(reader, "one")


def _largest_field(x, dtype) -> int:
    """The largest exponent field among x's words, shifted into place (NumPy's truth)."""
    f = format_of(np.dtype(dtype))
    words = x.view(np.dtype(f"u{x.itemsize}")).astype(np.uint64)
    return int((words & np.uint64(f.exponent_mask)).max()) if x.size else 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("make, kernel", [(_screen, "any_one"), (_maximum, "max_one")])
def test_after_its_first_call_a_reader_calls_the_compiled_code(dtype, make, kernel):
    reader = make(dtype)
    before = _kernel_cell(reader)
    x = np.linspace(-3, 3, 300).astype(dtype)
    first = reader(x.ctypes.data, x.size)
    now = _kernel_cell(reader)
    assert now is not before and not isinstance(now, Dispatcher), now
    # the overload for exactly the types the reader passes: the address, the length, its terms
    terms = ("like", "m", "v", "m2", "v2", "top", "bound") if make is _screen else ("like", "top")
    types = [typeof(x.ctypes.data), typeof(x.size)] + [typeof(_cell(reader, n)) for n in terms]
    assert now is getattr(kernels, kernel).get_overload(tuple(types))
    # the answers after the switch, as NumPy gives them, a NaN, an Inf and a peak everywhere
    if make is _screen:
        assert first is False
    else:
        assert first == _largest_field(x, dtype)
    for position in (0, 1, 63, 64, 150, 299):
        for value in (np.nan, np.inf, -np.inf, 60000.0, 0.5):
            y = x.copy()
            y[position] = value
            y = y.astype(dtype)
            bad = not np.isfinite(y.astype(np.float64)).all()
            got = reader(y.ctypes.data, y.size)
            if make is _screen:
                assert got is bad, (position, value)
            elif not bad:
                assert got == _largest_field(y, dtype), (position, value)
            else:
                assert got == format_of(np.dtype(dtype)).exponent_mask, (position, value)
    assert reader(x.ctypes.data, 0) == 0


def test_a_kernel_numba_names_no_overload_for_stays_itself():
    def plain(*args):
        return sum(args)
    assert launch_buffers._called(plain, (1, 2)) == (3, plain)


def test_the_entry_point_is_the_overload_for_the_calls_types():
    x = np.arange(10, dtype=np.uint32)
    found, entry = launch_buffers._called(kernels.max_one, (x.ctypes.data, 10, x[:0],
                                                             np.uint32(0xFFFFFFFF)))
    assert found == 9 and not isinstance(entry, Dispatcher)
    assert entry(x.ctypes.data, 5, x[:0], np.uint32(0xFFFFFFFF)) == 4
