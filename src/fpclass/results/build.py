"""Results from what was found: the one place a TensorResult is made.

Checked (counts of NaN, +Inf, -Inf and missing, the first locations, the sign flips of negated or
conjugated views, a reader's blanks), unchecked with the reason, not applicable, answered without
reading, and the parts of one tensor merged into one. The scan (its engine, overlapping views, the
dask executor) and fpclass.check build every result here; values held in memory (a Python float, a
pandas column) are classified here through the core, as the scan classifies the bytes it reads.

Below both the scan and check: it imports the core's public functions, the format table and the
result model, nothing of the scan, check, dask or the adapters.
"""

from __future__ import annotations

import numpy as np

from ..facade import count_inf, count_nan, count_nonfinite, isnan, isposinf, locate_nonfinite
from ..formats import ML_DTYPES_NAMES, Kind, component_format, format_of
from ..operators.statistics import ValueStats, value_stats
from .density import merge as merge_maps
from .report import Location, TensorResult
from .status import CHECKED, NOT_APPLICABLE, UNCHECKED

#: The class a value has once its sign is flipped.
SWAPPED = {"posinf": "neginf", "neginf": "posinf", "nan": "nan"}


def checked(file, name, dtype, shape, nan=0, posinf=0, neginf=0, locations=(), values=0,
            nbytes=0, *, first=0, missing=0, stats=None, declared_range=()) -> TensorResult:
    """A checked result from its counts, first locations (Location, C order), the values
    classified, the bytes read and their statistics (a ValueStats; None: none)."""
    return TensorResult(file, name, dtype, shape, CHECKED, nan, posinf, neginf, locations, values,
                        nbytes, "", first, missing, stats, 0, declared_range)  # positional


def unchecked(file, name, dtype, shape, reason: str, *, first=0) -> TensorResult:
    """What could not be checked, with the reason (never clean: exit code 2)."""
    return TensorResult(file, name, dtype, tuple(shape), UNCHECKED, 0, 0, 0, (), 0, 0, reason,
                        first)


def unchecked_item(item, reason: str) -> TensorResult:
    """unchecked() for `item`: anything with file, name, dtype, shape and first (a scan task)."""
    return TensorResult(item.file, item.name, item.dtype, item.shape, UNCHECKED, 0, 0, 0, (), 0, 0,
                        reason, item.first)


def not_applicable(file, name, dtype, shape, reason: str = "") -> TensorResult:
    """Data proven to hold no NaN or Inf (integers, bool, text): nothing to count."""
    return TensorResult(file, name, dtype, tuple(shape), NOT_APPLICABLE, 0, 0, 0, (), 0, 0, reason)


def answered(file, name, dtype, shape, status: str, reason: str = "", *, first=0,
             values=0) -> TensorResult:
    """The result of an item answered without reading: its planned status and reason (`values`:
    those known checked without reading, a format that holds no NaN or Inf)."""
    # positional: a call per tensor (a check of a model, a scan of a header of 250,000)
    return TensorResult(file, name, dtype, shape, status, 0, 0, 0, (), values, 0, reason, first)


def value_rule(dtype: np.dtype):
    """How values held in memory of NumPy `dtype` are answered: None when they are classified
    (float, complex), else (status, reason): not applicable for integers, bool and text,
    unchecked for anything else (objects, records, datetimes, dtypes NumPy does not know)."""
    if dtype.kind in "biu":
        return NOT_APPLICABLE, "not a floating-point type"
    if dtype.kind in "SU":
        return NOT_APPLICABLE, "text, not a floating-point type"
    if dtype.kind not in "fc" or dtype.names is not None:
        return UNCHECKED, f"values of type {dtype} cannot be classified"
    return None


def of_values(file, name, values, dtype_label: str = "", limit: int = 5, *,
              stats: bool = False) -> TensorResult:
    """The result for values held in memory (a Python float or complex, a NumPy array): checked
    if float (complex as its two parts, located by element then part), else as value_rule says;
    the answer a scan gives for the same values in a file (readers' reporting.values_task)."""
    a = np.asarray(values)
    label = dtype_label or a.dtype.name
    rule = value_rule(a.dtype)
    if rule is not None:
        status, reason = rule
        return TensorResult(file, name, label, tuple(a.shape), status, reason=reason)
    tally = Tally(file, name, label, tuple(a.shape), limit, stats=stats)
    tally.add(complex_parts(a) if a.dtype.kind == "c" else a, None, a.nbytes)
    return tally.result()


def complex_parts(a: np.ndarray) -> np.ndarray:
    """A complex array's real and imaginary parts as a trailing axis of 2 (a view)."""
    if a.dtype.type.__module__ == "numpy":
        part = np.dtype(f"{a.dtype.byteorder if a.dtype.byteorder in '<>' else '='}"
                        f"f{a.dtype.itemsize // 2}")
    else:  # ml_dtypes complex32 / bcomplex32
        name = component_format(format_of(a.dtype)).name
        if name in ML_DTYPES_NAMES:
            import ml_dtypes
            part = np.dtype(getattr(ml_dtypes, name))
        else:
            part = np.dtype(name)
    return a[..., None].view(part)


def has_stats(dtype: np.dtype) -> bool:
    """Whether values of `dtype` get statistics (value_stats): real floating-point formats."""
    try:
        return format_of(dtype).kind in (Kind.FLOAT, Kind.NATIVE)
    except TypeError:
        return False


def classify(values, limit: int, stats: list | None = None):
    """(nan, +inf, -inf, index rows, classes) of a real array of any shape and strides: the
    counts, and the first `limit` non-finite values' index rows (tuples, C order) and classes.
    With a list `stats`, the values' ValueStats is appended to it (from the same pass that
    counts the non-finite values; None where the dtype has none)."""
    if stats is not None and has_stats(values.dtype):
        s = value_stats(values)
        stats.append(s)
        nonfinite = s.nonfinite
    else:
        if stats is not None:
            stats.append(None)
        nonfinite = int(count_nonfinite(values))
    if not nonfinite:
        return 0, 0, 0, [], []
    nan = int(count_nan(values))
    pinf = int(count_inf(values, detect_negative=False))
    ninf = nonfinite - nan - pinf  # values are real: non-finite is exactly NaN, +Inf or -Inf
    if limit <= 0:
        return nan, pinf, ninf, [], []
    rows = locate_nonfinite(values, limit)
    hit = values[tuple(rows.T)] if values.ndim else values.reshape(1)
    classes = np.where(isnan(hit), "nan", np.where(isposinf(hit), "posinf", "neginf"))
    return nan, pinf, ninf, [tuple(r) for r in rows.tolist()], classes.tolist()


class Tally:
    """The counts and first `limit` locations of one tensor (or part of one), as its blocks are
    classified; result() makes the checked result.

    `negated`: the stored values are the negatives of the values (torch's lazy negation);
    `conjugated`: the stored imaginary parts are (lazy conjugation; the blocks' last axis then
    holds the two parts). `missing`: NaN is the format's declared blank, counted as missing.
    `repeat`: each value read stands for this many (a broadcast dimension read once). The masked
    values of a masked array are blanks, counted as missing; `blank_values` says whether they
    count among the values checked (a reader's blank read from the file: yes; pandas' pd.NA,
    which holds no value: no).

    With `stats`, the ValueStats of the values read are kept (operators/statistics.py: zero,
    subnormal, normal, finite min / max / absmax), from the same pass that counts NaN and Inf;
    blanks and out-of-range values are not among them. `out_of_range` (a mask per add, from a
    CF valid range) counts values apart: neither missing nor in the statistics.
    `declared_range`: a CF actual_range the result carries (TensorResult.declared_range)."""

    __slots__ = ("file", "name", "dtype", "shape", "first", "limit", "negated", "conjugated",
                 "as_missing", "repeat", "blank_values", "nan", "posinf", "neginf", "missing",
                 "values", "bytes", "locations", "stats", "out_of_range", "declared_range")

    def __init__(self, file, name, dtype, shape, limit: int, first: int = 0,
                 negated: bool = False, conjugated: bool = False, missing: bool = False,
                 repeat: int = 1, blank_values: bool = True, stats: bool = False,
                 declared_range: tuple = ()):
        self.file, self.name, self.dtype, self.shape, self.first = file, name, dtype, shape, first
        self.limit, self.negated, self.conjugated = limit, negated, conjugated
        self.as_missing, self.repeat, self.blank_values = missing, repeat, blank_values
        self.nan = self.posinf = self.neginf = self.missing = self.out_of_range = 0
        self.values = self.bytes = 0
        self.locations: list = []
        self.stats = ValueStats() if stats else None
        self.declared_range = declared_range

    def _add_stats(self, found: list, negate: tuple) -> None:
        """Add the ValueStats in `found` (None: values without statistics), each negated where
        `negate` says."""
        if self.stats is None:
            return
        for s, neg in zip(found, negate):
            if s is None:
                self.stats = None
                return
            s = s.negated() if neg else s
            if self.repeat != 1:
                s = s._replace(**{f: getattr(s, f) * self.repeat for f in ValueStats._fields[:5]})
            self.stats = self.stats + s

    def add(self, values, where=None, nbytes: int = 0, out_of_range=None) -> None:
        """Classify `values`, `nbytes` bytes read; `where(row)` gives the location in the tensor
        of an index row of `values` (None: the row itself). `out_of_range`: a bool mask of the
        values outside a valid range (masked too, when `values` is a masked array), counted as
        out of range rather than missing."""
        room = self.limit - len(self.locations)
        blank = np.ma.getmaskarray(values) if np.ma.isMaskedArray(values) else None
        outside = None
        if blank is not None:
            data = np.ma.getdata(values)
            values = np.where(blank, 0, data)
            if out_of_range is not None and out_of_range.any():
                outside = out_of_range & blank
                blank = blank & ~outside
        found: list | None = [] if self.stats is not None else None
        if found is not None and blank is not None and (blank.any() or outside is not None):
            # Statistics of the values a reader returns: blanks and out-of-range values are not.
            keep = ~(blank | outside) if outside is not None else ~blank
            kept = data[keep] if not self.conjugated else data[keep.all(axis=-1)]
            if self.conjugated:
                self._add_stats([stats_of(kept[..., 0]), stats_of(kept[..., 1])],
                                (self.negated, not self.negated))
            else:
                self._add_stats([stats_of(kept)], (self.negated,))
            found = None
        if self.conjugated:  # the imaginary parts change sign (the real ones if also negated)
            parts: list | None = [] if found is not None else None
            re_nan, re_pinf, re_ninf, re_rows, re_classes = classify(values[..., 0], room, parts)
            im_nan, im_pinf, im_ninf, im_rows, im_classes = classify(values[..., 1], room, parts)
            if parts is not None:
                self._add_stats(parts, (self.negated, not self.negated))
            if self.negated:
                re_pinf, re_ninf, re_classes = re_ninf, re_pinf, [SWAPPED[c] for c in re_classes]
            else:
                im_pinf, im_ninf, im_classes = im_ninf, im_pinf, [SWAPPED[c] for c in im_classes]
            counts = (re_nan + im_nan, re_pinf + im_pinf, re_ninf + im_ninf)
            hits = sorted([(r + (0,), c) for r, c in zip(re_rows, re_classes)]
                          + [(r + (1,), c) for r, c in zip(im_rows, im_classes)])[:room]
        else:
            nan, pinf, ninf, rows, classes = classify(values, room, found)
            if found is not None:
                self._add_stats(found, (self.negated,))
            if self.negated:
                pinf, ninf, classes = ninf, pinf, [SWAPPED[c] for c in classes]
            counts, hits = (nan, pinf, ninf), list(zip(rows, classes))
        repeat = self.repeat
        nan, pinf, ninf = counts if repeat == 1 else (c * repeat for c in counts)
        if self.as_missing:
            self.missing += nan
            hits = [(r, "missing" if c == "nan" else c) for r, c in hits]
        else:
            self.nan += nan
        self.posinf += pinf
        self.neginf += ninf
        size = values.size
        if outside is not None:
            self.out_of_range += int(np.count_nonzero(outside)) * repeat
            rows = [(tuple(r), "out_of_range") for r in np.argwhere(outside)[:room].tolist()]
            hits = sorted(hits + rows)[:room]
        if blank is not None:
            blanks = int(np.count_nonzero(blank))
            if blanks:
                self.missing += blanks
                rows = [(tuple(r), "missing") for r in np.argwhere(blank)[:room].tolist()]
                hits = sorted(hits + rows)[:room]
                if not self.blank_values:
                    size -= blanks
        if where is None:
            self.locations += [Location(r, c) for r, c in hits]
        else:
            self.locations += [Location(where(r), c) for r, c in hits]
        self.values += size * repeat
        self.bytes += nbytes

    def add_finite(self, stats: ValueStats | None, values: int, nbytes: int) -> None:
        """Add `values` values known to be finite, `nbytes` bytes read, classified where they
        were decoded (the scan's shuffled HDF5 chunks): their ValueStats (None: none kept)."""
        self._add_stats([stats], (self.negated,))
        self.values += values * self.repeat
        self.bytes += nbytes

    def add_fields(self, blocks: np.ndarray, fields, where, nbytes: int) -> None:
        """Classify the float fields of block-quantized data: `blocks` holds one block per row
        (bytes), `fields` is (name, byte offset, NumPy dtype) per field; the locations come in
        block order, then field order, each naming its field; `where(k)` gives the location in
        the tensor of row k."""
        room = self.limit - len(self.locations)
        found = []
        for order, (field, offset, dtype) in enumerate(fields):
            v = blocks[:, offset:offset + dtype.itemsize].view(dtype)[:, 0]
            field_stats: list | None = [] if self.stats is not None else None
            nan, pinf, ninf, rows, classes = classify(v, room, field_stats)
            if field_stats is not None:
                self._add_stats(field_stats, (False,))
            self.nan += nan
            self.posinf += pinf
            self.neginf += ninf
            found += [(r[0], order, cls, field) for r, cls in zip(rows, classes)]
            self.values += v.size
        found.sort()
        self.locations += [Location(where(k), cls, field) for k, _, cls, field in found[:room]]
        self.bytes += nbytes

    def result(self) -> TensorResult:
        return TensorResult(self.file, self.name, self.dtype, self.shape, CHECKED, self.nan,
                            self.posinf, self.neginf, tuple(self.locations), self.values,
                            self.bytes, "", self.first, self.missing, self.stats,
                            self.out_of_range, self.declared_range)


def stats_of(values: np.ndarray):
    """value_stats of `values`, None where their dtype has no statistics."""
    return value_stats(values) if has_stats(values.dtype) else None


def merge_stats(parts) -> ValueStats | None:
    """The statistics of all of `parts` (ValueStats or None each): None if any is None."""
    total = ValueStats()
    for s in parts:
        if s is None:
            return None
        total = total + s
    return total


def merge_parts(parts: list, max_locations: int) -> TensorResult:
    """One result from the results of a tensor's parts (in any order): unchecked, with the first
    part's reason, if any part is."""
    parts = sorted(parts, key=lambda r: r.first)
    head = parts[0]
    bad = [p for p in parts if p.status == UNCHECKED]
    locations = tuple(loc for p in parts for loc in p.locations)[:max_locations]
    return TensorResult(
        head.file, head.name, head.dtype, head.shape, UNCHECKED if bad else head.status,
        sum(p.nan for p in parts), sum(p.posinf for p in parts), sum(p.neginf for p in parts),
        locations, sum(p.values_checked for p in parts), sum(p.bytes_checked for p in parts),
        bad[0].reason if bad else "", missing=sum(p.missing for p in parts),
        stats=None if bad else merge_stats(p.stats for p in parts),
        out_of_range=sum(p.out_of_range for p in parts), declared_range=head.declared_range,
        density=merge_maps(p.density for p in parts))
