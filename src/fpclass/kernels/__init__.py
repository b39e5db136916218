"""Numba kernels: plain loops over unsigned-integer words, told what to look for by bit tests.

`launch` is the entry point from NumPy; importing it imports numba, so callers import it lazily.
"""
