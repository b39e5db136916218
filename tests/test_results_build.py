"""fpclass.results.build, the one place results are made: its counts, locations and sign flips
against NumPy's own classification of the values, and the same answer as the scan gives for the
same values held by a reader (layout.values_task read by run_task)."""

from dataclasses import replace

import numpy as np
import pytest

from fpclass.results import build
from fpclass.scan.readers.reporting import values_task
from fpclass.scan.run import run_task

SPECIALS = np.array([0.0, -0.0, 1.5, np.nan, np.inf, -np.inf, -2.0, np.nan, np.inf])


def cplx(re, im):
    """re + i im, without the NaN that 1j * inf makes."""
    out = np.empty(np.shape(re), complex)
    out.real, out.imag = re, im
    return out


def truth(values, limit):
    """(nan, +inf, -inf, first `limit` (index, class)) of a real or complex array, by NumPy; a
    complex array's index ends with its part (0 real, 1 imaginary)."""
    v = np.asarray(values)
    if v.dtype.kind == "c":
        v = np.stack([v.real, v.imag], axis=-1)
    counts = (int(np.isnan(v).sum()), int(np.isposinf(v).sum()), int(np.isneginf(v).sum()))
    hits = [(tuple(int(i) for i in idx),
             "nan" if np.isnan(v[idx]) else "posinf" if v[idx] > 0 else "neginf")
            for idx in map(tuple, np.argwhere(~np.isfinite(v)))]
    return counts, hits[:limit]


def found(result):
    return ((result.nan, result.posinf, result.neginf),
            [(loc.index, loc.cls) for loc in result.locations])


def values_cases():
    rng = np.random.default_rng(21)
    for dtype in ("<f4", ">f8", "<f2", "<c8", ">c16"):
        for shape in ((), (0,), (9,), (3, 4), (2, 0, 3)):
            n = int(np.prod(shape))
            a = rng.choice(SPECIALS, size=(n, 2))
            a = cplx(a[:, 0], a[:, 1]) if dtype[1] == "c" else a[:, 0]
            yield np.asarray(a.reshape(shape)).astype(dtype)
    yield 1.0
    yield float("-inf")
    yield complex(float("nan"), float("-inf"))
    yield np.array([[np.nan, 1.0, np.inf], [-np.inf, 2.0, np.nan]])[:, ::-2]  # a strided view


@pytest.mark.parametrize("limit", [0, 1, 3, 100])
def test_in_memory_values_are_classified_as_numpy_says_and_as_the_scan_says(limit):
    for values in values_cases():
        result = build.of_values("", "x", values, "", limit)
        assert found(result) == truth(values, limit), values
        assert result.status == "checked" and result.missing == 0
        a = np.asarray(values)
        assert result.values_checked == a.size * (2 if a.dtype.kind == "c" else 1)
        assert result.bytes_checked == a.nbytes
        # the scan gathers statistics by default, fpclass.check when asked
        assert build.of_values("", "x", values, "", limit, stats=True) == \
            run_task(values_task("", "x", values), limit)


@pytest.mark.parametrize("values, status", [
    (np.arange(3), "not_applicable"), (np.array([True]), "not_applicable"),
    (np.array(["a"]), "not_applicable"), (np.array([b"a"]), "not_applicable"),
    (np.array([1.0, "a"], dtype=object), "unchecked"),
    (np.zeros(2, [("a", "<f4")]), "unchecked"), (np.array(["2020"], "M8[D]"), "unchecked"),
])
def test_values_that_are_not_floats_answer_as_the_scan_answers(values, status):
    result = build.of_values("f", "x", values, "", 5)
    assert result.status == status and result.nonfinite == 0
    assert (status == "unchecked") == bool(result.reason and str(values.dtype) in result.reason)
    assert result == run_task(values_task("f", "x", values), 5)


@pytest.mark.parametrize("negated", [False, True])
@pytest.mark.parametrize("conjugated", [False, True])
def test_a_flipped_view_is_counted_and_located_as_its_values(negated, conjugated):
    rng = np.random.default_rng(int(negated) * 2 + int(conjugated))
    stored = cplx(rng.choice(SPECIALS, size=(5, 7)), rng.choice(SPECIALS, size=(5, 7)))
    values = stored.conj() if conjugated else stored
    values = -values if negated else values
    for limit in (0, 4, 1000):
        tally = build.Tally("", "x", "complex128", stored.shape, limit, negated=negated,
                            conjugated=conjugated)
        # in two blocks of rows, as a scan reads them; where() places each block's rows
        parts = build.complex_parts(stored)
        tally.add(parts[:2], None, 0)
        tally.add(parts[2:], lambda r: (r[0] + 2, *r[1:]), 0)
        assert found(tally.result()) == truth(values, limit)


def test_blanks_are_missing_and_counted_as_values_only_where_they_are_read():
    data = np.array([np.nan, 7.0, np.inf, 1.0, -np.inf])
    mask = np.array([False, True, False, True, False])
    for blank_values in (True, False):
        tally = build.Tally("", "x", "f8", (5,), 3, blank_values=blank_values)
        tally.add(np.ma.MaskedArray(data, mask), None, data.nbytes)
        r = tally.result()
        assert (r.nan, r.posinf, r.neginf, r.missing) == (1, 1, 1, int(mask.sum()))
        assert [(loc.index, loc.cls) for loc in r.locations] == [
            ((0,), "nan"), ((1,), "missing"), ((2,), "posinf")]
        assert r.values_checked == data.size - (0 if blank_values else int(mask.sum()))


def test_merged_parts_add_up_and_stay_unchecked_if_one_part_is():
    whole = np.array([np.nan, 1.0, np.inf, -np.inf, np.nan, 2.0])
    parts = [build.of_values("f", "x", whole[i:i + 2], "", 10) for i in (4, 0, 2)]
    parts = [replace(p, first=first, locations=tuple(replace(loc, index=(loc.index[0] + first,))
                                                     for loc in p.locations))
             for p, first in zip(parts, (4, 0, 2))]
    merged = build.merge_parts(parts, 3)
    assert found(merged) == truth(whole, 3)
    assert merged.values_checked == whole.size and merged.status == "checked"
    broken = build.unchecked_item(parts[0], "cannot read")
    assert build.merge_parts([broken, *parts[1:]], 3).status == "unchecked"
