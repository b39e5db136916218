"""Bit tests handed to the kernels: as scalars of the word type, or as rows of a word array."""

from __future__ import annotations

import functools

import numpy as np

_NEVER = (0, 1, 0, 1)  # (w & 0) == 1 never holds


@functools.lru_cache(maxsize=1024)
def scalars(test, word: np.dtype) -> tuple:
    """The test's four constants as scalars of the word type (so kernels compute in that width)."""
    return tuple(word.type(v) for v in test)


@functools.lru_cache(maxsize=1024)
def flat_test_words(test, word: np.dtype, negate: bool, lanes: int) -> np.ndarray:
    """elementwise.mask_flat's `test` argument: the test's four constants and its flags as an
    array of the word type (read-only: it is shared)."""
    words = np.array([*test, int(negate) | (2 if lanes == 2 else 0)], dtype=word)
    words.flags.writeable = False
    return words


def table(tests: list, word: np.dtype) -> np.ndarray:
    """Bit tests as a (T, 4) array of the word type; None becomes a test that matches nothing."""
    return np.array([list(_NEVER if t is None else t) for t in tests], dtype=word).reshape(len(tests), 4)
