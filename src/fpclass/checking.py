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

import numpy as np

from . import check_walk
from .adapters import adapter_for, arrays
from .facade import count_inf, count_nan, isnan, isposinf, locate_nonfinite
from .formats import Kind, component_format, format_of
from .operators.buffers import count_nonfinite_words
from .scan.dtypes import np_dtype
from .scan.engine import run_task
from .scan.readers.reporting import values_task
from .results.report import CHECKED, Location, ScanReport, TensorResult, parse_fail_on
from .results.status import NOT_APPLICABLE, UNCHECKED

_Done = check_walk.Done

DEFAULT_MAX_LOCATIONS = 5
#: What an array's dtype asks for: a count, nothing (integers and bool: not applicable), or a
#: checked answer without reading (float formats without NaN and Inf: float4, float6).
_COUNT, _NOT_APPLICABLE, _NOTHING_TO_READ = "count", "not applicable", "nothing to read"


def check(obj, fail_on="nan,inf", *, grads: bool = False,
          max_locations: int = DEFAULT_MAX_LOCATIONS) -> ScanReport:
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
    `max_locations` locations, status, exit_code, to_json()); `fail_on` as in scan."""
    classes = parse_fail_on(fail_on)
    if not isinstance(max_locations, int) or isinstance(max_locations, bool) or max_locations < 0:
        raise ValueError(f"max_locations must be an integer >= 0, got {max_locations!r}")
    start = time.perf_counter()
    collecting = gc.isenabled()
    # Nothing here makes reference cycles, but every result is a new tracked object: with a
    # model's tens of thousands of tensors alive, the collector's passes cost as much as the
    # check (measured: 1.3-2x at 10,000 tiny tensors).
    gc.disable()
    try:
        tensors = _Checker(max_locations).run(check_walk.items(obj, grads, max_locations))
    finally:
        if collecting:
            gc.enable()
    return ScanReport(tensors=tensors, fail_on=classes, seconds=time.perf_counter() - start)


# -- checking --------------------------------------------------------------------------------------

class _Checker:
    """Builds one TensorResult per array: the clean contiguous ones from one batched count per
    dtype, the rest (and every array with a finding) from a full look at an ndarray view."""

    def __init__(self, max_locations: int):
        self.limit = max_locations
        self.results: list = []
        self.batches: dict = {}   # id(NumPy dtype) -> (dtype, [slot], [address], [length], [array])
        self.later: list = []     # (slot, name, dtype name, shape, array) to look at in full
        self.kinds: dict = {}     # id(dtype) -> (dtype, _COUNT | _NOT_APPLICABLE | ..., lanes)
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
        for dtype, slots, addresses, lengths, sources in self.batches.values():
            counts = count_nonfinite_words(dtype, addresses, lengths)
            for k in np.flatnonzero(counts).tolist():  # the results queued as clean are not
                slot = slots[k]
                r = self.results[slot]
                self.later.append((slot, r.name, r.dtype, r.shape, sources[k]))
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
        entry = dtypes.get(t.dtype)
        if entry is None:
            np_dtype = adapter.numpy_dtype(t.dtype)
            entry = dtypes[t.dtype] = (np_dtype, str(t.dtype)[6:],
                                       *(self._kind(np_dtype) if np_dtype is not None else ()))
        # A lazily negated or conjugated tensor is counted as stored: NaN and Inf have no sign to
        # flip. Only a finding's details (examine) need the values' signs.
        if entry[0] is None or not t.is_cpu or t.layout is not strided or not t.is_contiguous():
            return False
        np_dtype, dname, what, lanes = entry
        shape = tuple(t.shape)
        n = t.numel()
        if what is _COUNT:
            self._queue(np_dtype, t.data_ptr(), n, lanes, name, dname, shape, t)
        else:
            self._answer(what, name, dname, shape, n)
        return True

    def _answer(self, what, name, dname, shape, n) -> None:
        """The result of an array whose dtype cannot hold NaN or Inf: nothing is read."""
        if what is _NOT_APPLICABLE:
            self.results.append(TensorResult("", name, dname, shape, NOT_APPLICABLE))
        else:
            self.results.append(TensorResult("", name, dname, shape, CHECKED, values_checked=n))

    def _kind(self, dtype) -> tuple:
        """(what to do with arrays of `dtype`, values per element), once per dtype (by id: hashing
        a dtype costs more than the rest of the work for a small tensor)."""
        known = self.kinds.get(id(dtype))
        if known is None or known[0] is not dtype:
            fmt = format_of(dtype)
            if fmt.kind is Kind.INTEGER:
                what = _NOT_APPLICABLE
            elif fmt.kind is Kind.FLOAT and not (fmt.has_nan or fmt.has_inf):
                what = _NOTHING_TO_READ
            else:
                what = _COUNT
            known = self.kinds[id(dtype)] = (dtype, what, 2 if fmt.kind is Kind.COMPLEX else 1)
        return known[1:]

    def _queue(self, dtype, address: int, n: int, lanes: int, name, dname, shape, x) -> None:
        """Count the array with the others of its dtype; its result says clean until then."""
        batch = self.batches.get(id(dtype))
        if batch is None or batch[0] is not dtype:
            batch = self.batches[id(dtype)] = (dtype, [], [], [], [])
        batch[1].append(len(self.results))
        batch[2].append(address)
        batch[3].append(n)
        batch[4].append(x)
        self.results.append(TensorResult("", name, dname, shape, CHECKED, 0, 0, 0, (), lanes * n,
                                         n * dtype.itemsize))

    def _general(self, name, x) -> None:
        shape = tuple(int(n) for n in getattr(x, "shape", ()))
        dname = str(getattr(x, "dtype", "")).removeprefix("torch.")
        try:
            view = _view(x)
        except Exception as e:  # whatever the object's own conversion raises: unchecked
            reason = str(e) if isinstance(e, TypeError) else \
                f"cannot read {_type_name(x)} as an array: {type(e).__name__}: {e}"
            self.results.append(TensorResult("", name, dname, shape, UNCHECKED, reason=reason))
            return
        a = view.array
        if not isinstance(x, np.ndarray) and type(x).__module__.partition(".")[0] != "torch":
            dname = str(a.dtype)
        try:
            what, lanes = self._kind(a.dtype)
        except TypeError:  # text, objects, records: not applicable or unchecked, as the scan says
            self.results.append(run_task(values_task("", name, a, dname), self.limit))
            return
        if what is not _COUNT:
            self._answer(what, name, dname, shape, a.size)
            return
        fmt = format_of(a.dtype)
        flat = not (view.negated or view.conjugated or view.packed) and a.flags.c_contiguous \
            and a.flags.aligned and fmt.kind in (Kind.FLOAT, Kind.COMPLEX) \
            and (fmt.kind is Kind.FLOAT or component_format(fmt) is not None)
        if flat:
            self._queue(a.dtype, a.ctypes.data, a.size, lanes, name, dname, shape, view)
        else:
            self.later.append((len(self.results), name, dname, shape, view))
            self.results.append(None)

    def _examine(self, name, dname, shape, x) -> TensorResult:
        """The full answer for one array: counts of each class and the first locations."""
        view = x if isinstance(x, arrays.View) else _view(x)
        a = view.array
        values = _parts(a) if format_of(a.dtype).kind is Kind.COMPLEX else a
        nan = int(count_nan(values))
        pinf = int(count_inf(values, detect_negative=False))
        ninf = int(count_inf(values, detect_positive=False))
        if view.conjugated:  # the stored imaginary parts have the opposite sign
            im = values[..., 1]
            im_pos = int(count_inf(im, detect_negative=False))
            im_neg = int(count_inf(im, detect_positive=False))
            pinf, ninf = pinf - im_pos + im_neg, ninf - im_neg + im_pos
        if view.negated:
            pinf, ninf = ninf, pinf
        locations = ()
        if nan + pinf + ninf and self.limit:
            locations = _locations(values, self.limit, view)
        return TensorResult("", name, dname, shape, CHECKED, nan, pinf, ninf, locations,
                            values.size, a.nbytes)


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


def _parts(a: np.ndarray) -> np.ndarray:
    """A complex array's real and imaginary parts as a trailing axis of 2 (a view)."""
    if a.dtype.type.__module__ == "numpy":
        part = np.dtype(f"{a.dtype.byteorder if a.dtype.byteorder in '<>' else '='}"
                        f"f{a.dtype.itemsize // 2}")
    else:  # ml_dtypes complex32 / bcomplex32
        part = np_dtype(component_format(format_of(a.dtype)).name)
    return a[..., None].view(part)


def _locations(values: np.ndarray, limit: int, view: arrays.View) -> tuple:
    rows = locate_nonfinite(values, limit)
    if values.ndim == 0:
        hit = values.reshape(1)
    else:
        hit = values[tuple(rows.T)]
    flip = np.full(len(rows), view.negated)
    if view.conjugated:
        flip ^= rows[:, -1] == 1
    nan, positive = isnan(hit), isposinf(hit) ^ flip
    classes = np.where(nan, "nan", np.where(positive, "posinf", "neginf"))
    return tuple(Location(tuple(r), c) for r, c in zip(rows.tolist(), classes.tolist()))

