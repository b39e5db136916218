"""Iteration plans: any strided array seen as words of a flat buffer, with no copy.

A kernel never sees an ndarray's own layout. It sees each operand as a 1-D contiguous array of
unsigned words covering the operand's memory (`flat`), the word index of element [0, ..., 0]
(`offset`) and per-axis strides in words. `plan()` drops length-1 axes, merges axes that are
contiguous in every operand, and — when the caller allows it — reorders axes into memory order,
so a transposed or reversed contiguous array becomes one unit-stride run.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Words(NamedTuple):
    flat: np.ndarray      # 1-D contiguous unsigned words spanning the operand
    offset: int           # word index of element [0, ..., 0] in `flat`
    strides: tuple        # per-axis strides, in words (may be negative or zero)


class _Window:
    """Exposes raw memory through the array interface while keeping its owner alive."""

    def __init__(self, interface: dict, owner):
        self.__array_interface__ = interface
        self.owner = owner


def as_words(a: np.ndarray, word: np.dtype) -> Words | None:
    """`a` seen as words of dtype `word` (whose size divides a.itemsize), or None when a stride or
    the address is not a multiple of the word size. The view is marked writable even for read-only
    input (kernels never write to their source; one compiled signature then serves both)."""
    w = word.itemsize
    if a.ctypes.data % w or any(s % w for s in a.strides):
        return None
    low = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0 and n > 0)
    high = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0 and n > 0) + a.itemsize
    flat = _writable_words(a.ctypes.data + low, (high - low) // w, word, a)
    return Words(flat, -low // w, tuple(s // w for s in a.strides))


def _writable_words(address: int, count: int, word: np.dtype, owner) -> np.ndarray:
    """`count` words of dtype `word` at `address` (memory `owner` holds, kept alive by the
    view), typed writable whatever the owner's flag: kernels never write to their source."""
    interface = {"shape": (count,), "typestr": word.str, "version": 3, "data": (address, False)}
    return np.asarray(_Window(interface, owner))


def flat_words(a: np.ndarray, word: np.dtype) -> np.ndarray:
    """C-contiguous `a` as one 1-D run of words of dtype `word` over its memory, no copy; marked
    writable even for read-only input, as as_words' views are (numba would otherwise compile
    every kernel a second time, for the read-only array type, after `fpclass warmup`)."""
    flat = a.reshape(-1).view(word)
    return flat if flat.flags.writeable else _writable_words(flat.ctypes.data, flat.size, word, a)


def read_only_bytes(data) -> np.ndarray:
    """`data` (any buffer) as a read-only uint8 array, no copy: the decoders' kernels then have
    one compiled signature whoever owns the bytes (`bytes` are read-only, a bytearray is not)."""
    src = np.frombuffer(data, np.uint8)
    if src.flags.writeable:
        src = src.view()
        src.flags.writeable = False
    return src


class Plan(NamedTuple):
    shape: np.ndarray            # int64, ndim >= 1
    offsets: tuple               # per operand
    strides: tuple               # per operand: int64 arrays
    size: int                    # elements visited


def plan(shape, operands: list[Words], *, reorder: bool) -> Plan:
    """An iteration plan over `shape` for `operands` (Words of arrays of that shape).

    With `reorder=False` the plan visits elements in C order (for positions); with True it
    visits them in the first operand's memory order (for masks and counts).
    """
    offsets = [op.offset for op in operands]
    axes = [(n, [op.strides[i] for op in operands]) for i, n in enumerate(shape) if n != 1]
    if reorder:
        for n, strides in axes:
            if strides[0] < 0:  # walk reversed axes forwards, in every operand alike
                for k, s in enumerate(strides):
                    offsets[k] += (n - 1) * s
                    strides[k] = -s
        axes.sort(key=lambda ax: tuple(abs(s) for s in ax[1]), reverse=True)
    merged: list = []
    for n, strides in axes:
        if merged:
            outer_n, outer = merged[-1]
            if all(o == s * n for o, s in zip(outer, strides)):
                merged[-1] = (outer_n * n, strides)
                continue
        merged.append((n, list(strides)))
    if not merged:
        merged = [(1, [1] * len(operands))]
    out_shape = np.array([n for n, _ in merged], dtype=np.int64)
    per_op = tuple(np.array([ax[1][k] for ax in merged], dtype=np.int64) for k in range(len(operands)))
    return Plan(out_shape, tuple(offsets), per_op, int(np.prod(out_shape)))


_UNIT = {1: np.array([1], np.int64), 2: np.array([2], np.int64)}


def source_plan(a: np.ndarray, word: np.dtype, lanes: int = 1, *, c_order: bool = False):
    """(flat words, plan) for reading `a` alone (lanes words an element), or (None, None) when
    its layout needs copying. A C-contiguous aligned array skips planning: one run."""
    if a.flags.c_contiguous and a.flags.aligned:
        return flat_words(a, word), Plan(np.array([a.size], np.int64), (0,), (_UNIT[lanes],), a.size)
    src = as_words(a, word)
    if src is None:
        return None, None
    return src.flat, plan(a.shape, [src], reorder=not c_order)


def without_broadcast(a: np.ndarray) -> tuple[np.ndarray, int]:
    """`a` with each stride-0 axis cut to length 1 (a view holding each distinct element once,
    same ndim, so its indices are indices of `a`), and how many times each element repeats in `a`.
    Whole-array any/count/first answer from it: a repeat changes no presence, only a count."""
    if a.size == 0 or all(s != 0 or n <= 1 for n, s in zip(a.shape, a.strides)):
        return a, 1
    b = a[tuple(slice(0, 1) if s == 0 and n > 1 else slice(None) for n, s in zip(a.shape, a.strides))]
    return b, a.size // b.size


def position_in(flat: int, part_shape, shape) -> int:
    """The C-order position in `shape` of C-order position `flat` of a part whose indices are
    indices of `shape` (same ndim, each axis no longer: without_broadcast's view). In Python ints,
    which cost less than numpy's unravel_index and ravel_multi_index on a one-element answer."""
    index = []
    for n in reversed(part_shape):
        flat, i = divmod(flat, n)
        index.append(i)
    position = 0
    for i, n in zip(reversed(index), shape):
        position = position * n + i
    return position


def c_order_streams(a: np.ndarray) -> bool:
    """Does a C-order walk of `a` read its memory in order, each axis forwards or backwards: are the
    strides of its axes longer than 1 non-increasing in size? Then a C-order search is a memory
    stream; otherwise (transposed, F order, channels_last) it jumps on every step."""
    strides = [abs(s) for n, s in zip(a.shape, a.strides) if n > 1]
    return all(outer >= inner for outer, inner in zip(strides, strides[1:]))
