"""Non-finite counts over many raw buffers of one dtype in one call: the entry point for callers
that hold many tensors (fpclass.check, fpclass.torch.watch) and cannot afford an ndarray each."""

from __future__ import annotations

import functools

import numpy as np

from ..formats import Query
from ..kernels import threads
from .inputs import as_source


def count_nonfinite_words(dtype, addresses, lengths) -> np.ndarray:
    """For each buffer of lengths[i] contiguous, aligned, native-layout elements of `dtype` at
    addresses[i]: how many of its stored words are NaN or Inf (an int64 array; a complex element
    is two words). Nothing is checked: the memory must stay alive and readable for the call.
    TypeError for dtypes classified by value (long double) and for dtypes fpclass does not take."""
    src = _raw(dtype)
    from ..kernels import launch
    words = np.asarray(lengths, np.int64) * src.lanes
    return launch.count_buffers(addresses, words, src.word, src.test(Query.NONFINITE))


@functools.lru_cache(maxsize=64)
def nonfinite_counter(dtype):
    """count_nonfinite_words for one buffer at a time, prepared once per dtype: a function
    (address, length) -> int with the same contract, for callers that check tensors one by one
    as they appear."""
    src = _raw(dtype)
    from ..kernels import launch
    return _per_element(launch.buffer_counter(src.word, src.test(Query.NONFINITE)), src.lanes)


@functools.lru_cache(maxsize=64)
def nonfinite_screen(dtype):
    """nonfinite_counter's question without the count, prepared once per dtype: a function
    (address, length) -> bool, is one of the `length` elements of `dtype` at `address` NaN or
    Inf? For callers that only need the yes or no (fpclass.torch.watch)."""
    src = _raw(dtype)
    from ..kernels import launch
    return _per_element(launch.buffer_screen(src.word, src.test(Query.NONFINITE)), src.lanes)


@functools.lru_cache(maxsize=64)
def magnitude_screen(dtype):
    """nonfinite_screen's question with a bound on the answer "finite": a function
    (address, length) -> None when one of the `length` elements of `dtype` at `address` is NaN
    or Inf, else the least k such that the largest exponent field among them holds no magnitude
    of 2**k or more (the format table's bounds; length 0 gives the least field's). Read as the
    screen reads (the same words, threads and parts). ValueError for dtypes without such
    bounds (accepted: real formats that keep IEEE's specials, as float16, bfloat16, float32,
    float64)."""
    from ..formats import has_magnitude_bounds, magnitude_exponent
    src = _raw(dtype)
    f = src.word_format
    if src.lanes != 1 or src.swapped or f is None or not has_magnitude_bounds(f):
        raise ValueError(f"no magnitude bounds for {np.dtype(dtype)}: accepted are real, "
                         "native-order formats that keep IEEE's NaN and Inf (float16, bfloat16, "
                         "float32, float64, ...)")
    from ..kernels import launch
    from ..kernels.launch_find import above
    top, bound = (int(t) for t in above(src.test(Query.NONFINITE), src.word))
    if top != f.exponent_mask:  # the non-finite test is "(w & exponent) > bound" in these
        raise ValueError(f"{f.name}'s non-finite test is not on its exponent field")
    largest, shift = launch.buffer_maximum(src.word, top), f.mantissa_bits
    exponents = [magnitude_exponent(f, field) for field in range(top >> shift)]

    def magnitude(address: int, length: int):
        found = largest(address, length)
        return None if found > bound else exponents[found >> shift]
    return magnitude


def mark_period() -> None:
    """A period of the caller's work begins (fpclass.torch.watch: a forward pass): the screens
    time these periods to choose how to read large buffers (kernels/threads.py, SplitChoice)."""
    threads.SPLIT.mark()


def _raw(dtype):
    """The source of an empty array of `dtype`: its word, lanes and tests; TypeError for dtypes
    classified by value."""
    src = as_source(np.empty(0, dtype))
    if src.by_value:
        raise TypeError(f"{src.array.dtype} is classified by value; pass it as an ndarray")
    return src


def _per_element(of_words, lanes: int):
    """A function of (address, words) as one of (address, elements) of `lanes` words each."""
    return of_words if lanes == 1 else lambda address, length: of_words(address, lanes * length)
