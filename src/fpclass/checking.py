"""fpclass.check: NaN and Inf in the arrays a program holds — a model's parameters, buffers and
gradients, a (nested) state dict, a list — reported as `fpclass scan` reports files.

Contiguous arrays are not classified one call at a time: their addresses go to one kernel call
per dtype, which cuts them into pieces and spreads the pieces over the cores, so a thousand small
tensors cost what one large one does. Only arrays holding a NaN or an Inf are read again, to
count each class and locate the first ones.
"""

from __future__ import annotations

import gc
import time
from dataclasses import replace
from typing import Iterable

import numpy as np

from . import check_walk
from .adapters import adapter_for, arrays
from .formats import Kind, component_format, format_of
from .operators.buffers import count_nonfinite_words
from .results import build
from .results.fail_on import fail_on_parameter
from .results.report import ScanReport, TensorResult
from .results.status import CHECKED, NOT_APPLICABLE

_Done = check_walk.Done

DEFAULT_MAX_LOCATIONS = 5
#: What an array's dtype asks for: a count, nothing (integers and bool: not applicable), or a
#: checked answer without reading (float formats without NaN and Inf: float4, float6).
_COUNT, _NOT_APPLICABLE, _NOTHING_TO_READ = "count", "not applicable", "nothing to read"


def check(obj: object, fail_on: str | Iterable[str] = "nan,inf", *, grads: bool = False,
          max_locations: int = DEFAULT_MAX_LOCATIONS, stats: bool = False) -> ScanReport:
    """Check every array and number in `obj` for NaN and ±Inf: a torch nn.Module (its parameters
    and buffers, and with `grads` each parameter's .grad), a mapping of names to values, an
    iterable (named "0", "1", ...), a pandas DataFrame or Series, an xarray Dataset or DataArray,
    or one array (named "", its .grad with `grads` named "grad"). Mappings, lists, tuples and sets
    are walked at any depth (names joined with "."), and everything above found inside them:
    modules, frames (column by column), datasets (variable by variable), Python floats and
    complex numbers (checked as values). Each container is walked once, under the first name that
    reaches it (cycles end; the same model twice is reported once); arrays are reported under
    every name. Integers, bool, text, None are skipped as values, not applicable as arrays.
    pd.NA is missing, never NaN: counted as `missing` (a fail_on class), not as `nan`.
    Unchecked, with the reason (exit code 2), never raised: arrays that cannot be read in place
    (off the host, sparse, lazy dask / dask-backed xarray data, never computed), object arrays,
    objects of other types. Returns the ScanReport fpclass scan gives (counts, first
    `max_locations` locations, status, exit_code, to_json()); `fail_on` as in scan. `stats`
    (or a gate in `fail_on`): each array's statistics (TensorResult.stats) as in scan; Python
    numbers, pandas columns and masked arrays have none (null)."""
    classes = fail_on_parameter(fail_on)
    stats = bool(stats) or any(not isinstance(c, str) for c in classes)
    if not isinstance(max_locations, int) or isinstance(max_locations, bool) or max_locations < 0:
        raise ValueError(f"max_locations must be an integer >= 0, got {max_locations!r}")
    start = time.perf_counter()
    collecting = gc.isenabled()
    # Nothing here makes reference cycles, but every result is a new tracked object: with a
    # model's tens of thousands of tensors alive, the collector's passes cost as much as the
    # check (measured: 1.3-2x at 10,000 tiny tensors).
    gc.disable()
    try:
        tensors = _Checker(max_locations, stats).run(check_walk.items(obj, grads, max_locations))
    finally:
        if collecting:
            gc.enable()
    return ScanReport(tensors=tensors, fail_on=classes, seconds=time.perf_counter() - start)


# -- checking --------------------------------------------------------------------------------------

class _Rule:
    """What arrays of one dtype ask for: `what` (_COUNT, _NOT_APPLICABLE or _NOTHING_TO_READ) and
    `lanes`, the values per element (2 for complex); `dtype` the NumPy dtype (None: a torch dtype
    NumPy cannot view), `name` the dtype as reported."""

    __slots__ = ("dtype", "name", "what", "lanes")

    def __init__(self, dtype, name: str, what, lanes: int):
        self.dtype, self.name, self.what, self.lanes = dtype, name, what, lanes


class _Batch:
    """The contiguous arrays of one dtype counted in one kernel call: their places in the
    results, addresses, lengths (elements) and the arrays themselves (kept alive, and looked at
    again if they hold a NaN or an Inf)."""

    __slots__ = ("dtype", "slots", "addresses", "lengths", "sources")

    def __init__(self, dtype):
        self.dtype = dtype
        self.slots: list = []
        self.addresses: list = []
        self.lengths: list = []
        self.sources: list = []


class _Checker:
    """Builds one TensorResult per array: the clean contiguous ones from one batched count per
    dtype, the rest (and every array with a finding) from a full look at an ndarray view."""

    def __init__(self, max_locations: int, stats: bool = False):
        self.limit, self.stats = max_locations, stats
        self.results: list = []
        self.batches: dict = {}   # id(NumPy dtype) -> _Batch
        self.later: list = []     # (slot, name, dtype name, shape, array) to look at in full
        self.kinds: dict = {}     # id(NumPy dtype) -> _Rule
        self.torch = None
        self.is_torch: dict = {}  # type -> whether it comes from torch

    def run(self, items) -> list:
        is_torch = self.is_torch
        for name, x in items:
            cls = type(x)
            from_torch = is_torch.get(cls)
            if from_torch is None:
                from_torch = is_torch[cls] = cls.__module__.partition(".")[0] == "torch"
            if cls is _Done:
                self.results.append(x.result)
            elif not (from_torch and self._torch_fast(name, x)):
                self._general(name, x)
        for batch in self.batches.values():
            counts = count_nonfinite_words(batch.dtype, batch.addresses, batch.lengths)
            for k in np.flatnonzero(counts).tolist():  # the results queued as clean are not
                slot = batch.slots[k]
                r = self.results[slot]
                self.later.append((slot, r.name, r.dtype, r.shape, batch.sources[k]))
            for k in np.flatnonzero(counts == 0).tolist() if self.stats else ():  # clean ones
                slot = batch.slots[k]
                stats = _stats_at(batch.dtype, batch.addresses[k], batch.lengths[k],
                                  batch.sources[k])
                self.results[slot] = replace(self.results[slot], stats=stats)
        for slot, name, dname, shape, x in self.later:
            self.results[slot] = self._examine(name, dname, shape, x)
        return self.results

    def _torch_fast(self, name, t) -> bool:
        """Queue a contiguous CPU tensor of a float dtype for the batched count, or answer an
        integer or bool one; False for everything else."""
        if self.torch is None:
            from .adapters import torch as adapter
            self.torch = adapter, adapter.torch.strided, adapter.torch.Tensor, {}
        adapter, strided, tensor_type, dtypes = self.torch
        if not isinstance(t, tensor_type):
            return False
        rule = dtypes.get(t.dtype)
        if rule is None:
            np_dtype = adapter.numpy_dtype(t.dtype)
            known = self._kind(np_dtype) if np_dtype is not None else _Rule(None, "", None, 0)
            rule = dtypes[t.dtype] = _Rule(np_dtype, str(t.dtype)[6:], known.what, known.lanes)
        # A lazily negated or conjugated tensor is counted as stored: NaN and Inf have no sign to
        # flip. Only a finding's details (examine) need the values' signs.
        if rule.dtype is None or not t.is_cpu or t.layout is not strided or t.is_nested \
                or not t.is_contiguous():
            return False
        shape = tuple(t.shape)
        n = t.numel()
        if rule.what is _COUNT:
            self._queue(rule.dtype, t.data_ptr(), n, rule.lanes, name, rule.name, shape, t)
        else:
            self._answer(rule.what, name, rule.name, shape, n)
        return True

    def _answer(self, what, name, dname, shape, n) -> None:
        """The result of an array whose dtype cannot hold NaN or Inf: nothing is read."""
        if what is _NOT_APPLICABLE:
            self.results.append(build.answered("", name, dname, shape, NOT_APPLICABLE))
        else:
            self.results.append(build.answered("", name, dname, shape, CHECKED, values=n))

    def _kind(self, dtype) -> _Rule:
        """What to do with arrays of `dtype`, once per dtype (by id: hashing a dtype costs more
        than the rest of the work for a small tensor). TypeError for dtypes outside the format
        table (text, objects, records)."""
        known = self.kinds.get(id(dtype))
        if known is None or known.dtype is not dtype:
            fmt = format_of(dtype)
            if fmt.kind is Kind.INTEGER:
                what = _NOT_APPLICABLE
            elif fmt.kind is Kind.FLOAT and not (fmt.has_nan or fmt.has_inf):
                what = _NOTHING_TO_READ
            else:
                what = _COUNT
            lanes = 2 if fmt.kind is Kind.COMPLEX else 1
            known = self.kinds[id(dtype)] = _Rule(dtype, "", what, lanes)
        return known

    def _queue(self, dtype, address: int, n: int, lanes: int, name, dname, shape, x) -> None:
        """Count the array with the others of its dtype; its result says clean until then."""
        batch = self.batches.get(id(dtype))
        if batch is None or batch.dtype is not dtype:
            batch = self.batches[id(dtype)] = _Batch(dtype)
        batch.slots.append(len(self.results))
        batch.addresses.append(address)
        batch.lengths.append(n)
        batch.sources.append(x)
        self.results.append(build.checked("", name, dname, shape, 0, 0, 0, (), lanes * n,
                                          n * dtype.itemsize))

    def _general(self, name, x) -> None:
        try:
            shape = tuple(int(n) for n in getattr(x, "shape", ()))
        except Exception:  # a torch nested tensor has no one shape; _view says why it is unread
            shape = ()
        dname = str(getattr(x, "dtype", "")).removeprefix("torch.")
        try:
            view = _view(x)
        except Exception as e:  # whatever the object's own conversion raises: unchecked
            reason = str(e) if isinstance(e, TypeError) else \
                f"cannot read {_type_name(x)} as an array: {type(e).__name__}: {e}"
            self.results.append(build.unchecked("", name, dname, shape, reason))
            return
        a = view.array
        if not isinstance(x, np.ndarray) and type(x).__module__.partition(".")[0] != "torch":
            dname = view.packed or str(a.dtype)   # JAX int4 is read as int8 zeros
        try:
            rule = self._kind(a.dtype)
        except TypeError:  # text, objects, records: not applicable or unchecked, as the scan says
            self.results.append(build.of_values("", name, a, dname, self.limit))
            return
        if rule.what is not _COUNT:
            self._answer(rule.what, name, dname, shape, a.size)
            return
        fmt = format_of(a.dtype)
        flat = not (view.negated or view.conjugated or view.packed) and a.flags.c_contiguous \
            and a.flags.aligned and fmt.kind in (Kind.FLOAT, Kind.COMPLEX) \
            and (fmt.kind is Kind.FLOAT or component_format(fmt) is not None)
        if flat:
            self._queue(a.dtype, a.ctypes.data, a.size, rule.lanes, name, dname, shape, view)
        else:
            self.later.append((len(self.results), name, dname, shape, view))
            self.results.append(None)

    def _examine(self, name, dname, shape, x) -> TensorResult:
        """The full answer for one array: counts of each class and the first locations."""
        view = x if isinstance(x, arrays.View) else _view(x)
        a = view.array
        complex_ = format_of(a.dtype).kind is Kind.COMPLEX
        tally = build.Tally("", name, dname, shape, self.limit, negated=view.negated,
                            conjugated=view.conjugated and complex_, stats=self.stats)
        tally.add(build.complex_parts(a) if complex_ else a, None, a.nbytes)
        return tally.result()


class _Memory:
    """`length` bytes at `address`, through the array interface, keeping `owner` alive."""

    def __init__(self, address: int, length: int, owner):
        self.__array_interface__ = {"shape": (length,), "typestr": "|u1", "version": 3,
                                    "data": (address, True)}
        self.owner = owner


def _stats_at(dtype: np.dtype, address: int, n: int, owner):
    """The statistics (build.stats_of) of the `n` contiguous values of `dtype` at `address`,
    which `owner` holds; complex values as their parts."""
    a = np.asarray(_Memory(address, n * dtype.itemsize, owner)).view(dtype)
    return build.stats_of(build.complex_parts(a) if dtype.kind == "c" or
                          format_of(dtype).kind is Kind.COMPLEX else a)


def _view(x) -> arrays.View:
    """An ndarray view of `x` (TypeError naming why there is none)."""
    if isinstance(x, np.ndarray):
        return arrays.View(x)
    adapter = adapter_for(x)
    if adapter is not None and adapter.__name__ == "fpclass.dask":
        raise TypeError("a dask array is lazy and fpclass.check reads arrays in memory: pass "
                        "x.compute(), or count lazily with fpclass.count_nonfinite(x)")
    view = getattr(adapter, "view", None)
    if view is not None:
        return view(x)
    try:
        return arrays.View(np.asarray(x))
    except (TypeError, ValueError) as e:
        raise TypeError(f"cannot read {_type_name(x)} as an array: {e}") from None


def _type_name(x) -> str:
    return f"{type(x).__module__}.{type(x).__qualname__}"
