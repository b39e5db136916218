"""Calling the kernels on NumPy arrays: one launcher per operation shape.

- element-wise (launch_elementwise.py): a mask, one byte per element;
- reduce (launch_reduce.py): counts and `any`, whole-array or per slice, the class histogram;
- raw buffers (launch_buffers.py): counts over many buffers, one buffer counted or screened;
- find (launch_find.py, launch_find_order.py): the first matches in C order, on any layout.

Everything there is about *how* to run (odd layouts, threads, early exit); *what* to look for
arrives as a BitTest from the format table. Importing this module imports numba (kernels compile,
or load from the on-disk cache, on first use), so the operators import it lazily. kernels/
numpy_bits.py offers the same functions evaluated by NumPy, for small inputs.
"""

from .constants import flat_test_words as test_words
from .launch_buffers import buffer_counter, buffer_maximum, buffer_screen, count_buffers
from .launch_elementwise import mask
from .launch_find_order import find
from .launch_reduce import count, histogram, reduce

__all__ = ["buffer_counter", "buffer_maximum", "buffer_screen", "count", "count_buffers", "find",
           "histogram", "mask", "reduce", "test_words"]
