"""A read sieve: the value statistics of stored words of one real float dtype, read from a local
file and classified in the same nogil call (kernels/read_stats.py), for as long as the words
read hold no non-finite value. What holds one (its locations), and every read that fails or
ends early, is left to the caller's own reading and classification, so findings and errors
stay theirs."""

from __future__ import annotations

import numpy as np

from ..kernels import compile_cache
from .statistics import ValueStats, word_stats

#: Bytes read and classified at a time: a piece stays in a core's L2 cache (1-2 MiB on current
#: x86 and ARM cores) between its read and its classification.
PIECE_BYTES = 256 << 10
#: Runs of at most this many bytes are read the usual way: the sieve takes whole vectors of words
#: only, and classifying a run's last words apart costs more than a small run saves.
SMALL_BYTES = 64 << 10


class ReadSieve:
    """The statistics of the clean words read so far (`values` of them) for one dtype; `read`
    reads and classifies more. Not shared between threads."""

    __slots__ = ("_rule", "_itemsize", "_vector", "_signed", "_row", "_views", "values")

    def __init__(self, rule, itemsize: int):
        from ..kernels import launch_stats
        from ..kernels.vectors import VECTOR
        self._rule = rule
        self._itemsize = itemsize
        self._vector = VECTOR * itemsize
        self._signed = np.dtype(f"i{rule[2].itemsize}")
        self._row = launch_stats.empty_row()
        self._views: tuple = ()
        self.values = 0

    def read(self, fd: int, buf: np.ndarray, position: int, nbytes: int) -> int:
        """Read `nbytes` bytes (whole elements) of the file descriptor `fd` from byte `position`
        through `buf` (uint8: PIECE_BYTES, or fewer but at least one element), keeping the
        statistics of those read while none is non-finite. Returns how many bytes were read and
        kept (a multiple of the element size): `nbytes`, or fewer where a piece holds a
        non-finite value, a read failed or ended early, or at the last elements short of a
        vector (kernels/vectors.py: 64 words; read those again from there, the caller's
        way)."""
        from ..kernels.read_stats import read_clean  # imports numba: the caller checked warmth
        tests, consts, _, swapped, _ = self._rule
        _, raw, words, keys, piece = self._views_of(buf)
        done = read_clean(fd, raw, words, keys, position, nbytes, piece, tests, consts,
                          swapped, self._row)
        self.values += done // self._itemsize
        return done

    def read_all(self, fd: int, buf: np.ndarray, position: int, nbytes: int) -> bool:
        """`read`, all or nothing: whether all `nbytes` bytes were kept; if not, the statistics
        are as they were before the call (read the bytes again the caller's way)."""
        return self.read_runs(fd, buf, np.array([position], np.int64),
                              np.array([nbytes], np.int64)) == 1

    def read_runs(self, fd: int, buf: np.ndarray, positions: np.ndarray,
                  lengths: np.ndarray) -> int:
        """`read_all` of the runs of `lengths[k]` bytes from byte `positions[k]` (int64 arrays)
        in one call, in order, until one is not kept whole: how many were (the statistics hold
        exactly those)."""
        short = np.flatnonzero(lengths % self._vector)  # never kept: not read either
        if short.size:
            positions, lengths = positions[:short[0]], lengths[:short[0]]
        if not positions.size:
            return 0
        from ..kernels.read_stats import read_clean_runs
        tests, consts, _, swapped, _ = self._rule
        _, raw, words, keys, piece = self._views_of(buf)
        kept = read_clean_runs(fd, raw, words, keys, positions, lengths, piece, tests, consts,
                               swapped, self._row, np.empty_like(self._row))
        self.values += int(lengths[:kept].sum()) // self._itemsize
        return kept

    def _views_of(self, buf: np.ndarray) -> tuple:
        """(`buf`; the piece of it read into, as bytes, words and signed words; its size), kept
        while the caller passes the same buffer."""
        if not self._views or self._views[0] is not buf:
            piece = min(max(PIECE_BYTES, self._vector), buf.size)
            piece -= piece % self._vector  # none (nothing kept) in a buffer short of a vector
            raw = buf[:piece]
            self._views = (buf, raw, raw.view(self._rule[2]), raw.view(self._signed), piece)
        return self._views

    def stats(self) -> ValueStats:
        """The ValueStats of the `values` clean elements read."""
        return self._rule[4](self._row, self.values)


def read_sieve(dtype: np.dtype, nbytes: int) -> ReadSieve | None:
    """A ReadSieve for a run of `nbytes` bytes of elements of `dtype` (or runs of that size), or
    None where there is none (read and classify the usual way): at most SMALL_BYTES, no pread
    here (Windows, 32-bit systems, no symbol to link with), numba's cache not warm (the compile
    policy), a dtype without statistics kernel words (complex, integer, formats classified by
    value, sub-byte formats whose words the launcher shifts), a kernel that cannot be built
    here."""
    if nbytes <= SMALL_BYTES or not compile_cache.kernels_ready():
        return None
    from ..kernels import read_stats  # imports numba: the cache is warm
    if not read_stats.linkable():
        return None
    try:
        rule = word_stats(dtype)
    except TypeError:
        return None
    if rule is None or int(rule[1][2]) != 0 or rule[2].itemsize != dtype.itemsize:
        return None
    sieve = ReadSieve(rule, dtype.itemsize)
    key = (rule[2], rule[3])
    works = _works.get(key)
    if works is None:  # built (or loaded) and called once, reading nothing
        try:
            sieve.read(-1, np.empty(PIECE_BYTES, np.uint8), 0, 0)
            works = True
        except Exception:  # the kernel cannot be built here: read the usual way
            works = False
        _works[key] = works
    return sieve if works else None


_works: dict = {}  # (word, swapped) -> whether the kernel could be built and called here


def compile_for(dtype: np.dtype) -> None:
    """Compile (or load from numba's cache) the kernel the scan reads raw ranges of `dtype`
    with, where it has one (`fpclass warmup`)."""
    sieve = read_sieve(dtype, SMALL_BYTES + 1)
    if sieve is not None:
        nothing = np.zeros(1, np.int64)
        sieve.read_runs(-1, np.empty(PIECE_BYTES, np.uint8), nothing, nothing)
