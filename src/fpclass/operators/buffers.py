"""Non-finite counts over many raw buffers of one dtype in one call: the entry point for callers
that hold many tensors (fpclass.check, fpclass.torch.watch) and cannot afford an ndarray each."""

from __future__ import annotations

import functools

import numpy as np

from ..formats import Query
from .inputs import as_source


def count_nonfinite_words(dtype, addresses, lengths) -> np.ndarray:
    """For each buffer of lengths[i] contiguous, aligned, native-layout elements of `dtype` at
    addresses[i]: how many of its stored words are NaN or Inf (an int64 array; a complex element
    is two words). Nothing is checked: the memory must stay alive and readable for the call.
    TypeError for dtypes classified by value (long double) and for dtypes fpclass does not take."""
    src = as_source(np.empty(0, dtype))
    if src.by_value:
        raise TypeError(f"{src.array.dtype} is classified by value; pass it as an ndarray")
    from ..kernels import launch
    words = np.asarray(lengths, np.int64) * src.lanes
    return launch.count_buffers(addresses, words, src.word, src.test(Query.NONFINITE))


@functools.lru_cache(maxsize=64)
def nonfinite_counter(dtype):
    """count_nonfinite_words for one buffer at a time, prepared once per dtype: a function
    (address, length) -> int with the same contract, for callers that check tensors one by one
    as they appear (fpclass.torch.watch's hooks)."""
    src = as_source(np.empty(0, dtype))
    if src.by_value:
        raise TypeError(f"{src.array.dtype} is classified by value; pass it as an ndarray")
    from ..kernels import launch
    count = launch.buffer_counter(src.word, src.test(Query.NONFINITE))
    lanes = src.lanes
    return count if lanes == 1 else lambda address, length: count(address, lanes * length)


@functools.lru_cache(maxsize=64)
def nonfinite_screen(dtype):
    """A function (address, length) -> bool: is one of the `length` elements of `dtype` at
    `address` (one contiguous buffer, alive for the call) NaN or Inf? nonfinite_counter's
    question without the count, for callers that only need the yes or no (fpclass.torch.watch):
    below the parallel threshold it keeps the largest exponent field of a run instead of a count,
    which reads what a layer has just written (in another core's cache) faster."""
    src = as_source(np.empty(0, dtype))
    if src.by_value:
        raise TypeError(f"{src.array.dtype} is classified by value; pass it as an ndarray")
    from ..kernels import launch
    from ..kernels.buffers import any_one
    from ..kernels.constants import scalars
    from ..kernels.launch_find import above
    from ..kernels.threads import threads_for
    test = src.test(Query.NONFINITE)
    count = launch.buffer_counter(src.word, test)
    if test is None:
        return lambda address, length: False
    m, v, m2, v2 = scalars(test, src.word)
    top, bound = above(test, src.word)
    like, lanes = np.empty(0, src.word), src.lanes

    def screen(address: int, length: int) -> bool:
        words = lanes * length
        if threads_for(words) > 1:  # large: the counter, on every core
            return count(address, words) > 0
        return bool(any_one(address, words, like, m, v, m2, v2, top, bound))
    return screen
