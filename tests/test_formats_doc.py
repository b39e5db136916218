"""docs/formats.md's table of stored bit patterns against ml_dtypes' values (every pattern of every
8- and 16-bit format converted to float64) and against fpclass, so the page cannot drift."""

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fpclass
from fpclass import formats

DOC = Path(__file__).resolve().parents[1] / "docs" / "formats.md"
ROW = re.compile(r"^\| (?P<name>b?float\w+) \| [^|]+ \| (?P<nan>[^|]+) \| (?P<posinf>[^|]+) \| "
                 r"(?P<neginf>[^|]+) \| (?P<zero>[^|]+) \|$", re.M)
ROWS = {m["name"]: m for m in ROW.finditer(DOC.read_text(encoding="utf-8"))}


def patterns(cell: str):
    """'0x7C01–0x7FFF, 0xFC01' -> that set of ints; 'none' -> empty; words (a rule) -> None."""
    cell = cell.strip()
    if cell == "none":
        return set()
    if not re.fullmatch(r"0x[0-9A-F]+(–0x[0-9A-F]+)?(, 0x[0-9A-F]+(–0x[0-9A-F]+)?)*", cell):
        return None
    found = set()
    for part in cell.split(", "):
        low, _, high = part.partition("–")
        found.update(range(int(low, 16), int(high or low, 16) + 1))
    return found


def dtype_of(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def test_every_floating_point_format_has_a_row():
    floats = {f.name for f in formats.FORMATS.values() if f.kind is formats.Kind.FLOAT}
    assert set(ROWS) == floats


@pytest.mark.parametrize("name", [n for n in ROWS if formats.format_of(n).bits <= 16])
def test_patterns_of_narrow_formats_are_every_such_pattern(name):
    f, row = formats.format_of(name), ROWS[name]
    x = np.arange(1 << f.bits, dtype=f"u{f.itemsize}").view(dtype_of(name))
    with np.errstate(invalid="ignore"):
        values = x.astype(np.float64)
    truth = {"nan": np.isnan(values), "posinf": np.isposinf(values),
             "neginf": np.isneginf(values), "zero": values == 0}
    ours = {"nan": fpclass.isnan(x), "posinf": fpclass.isposinf(x), "neginf": fpclass.isneginf(x)}
    for column, mask in truth.items():
        documented = patterns(row[column])
        assert documented == set(np.flatnonzero(mask).tolist()), (name, column)
        if column in ours:
            np.testing.assert_array_equal(ours[column], mask, err_msg=f"{name} {column}")


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_wide_formats_infinities_and_zeros(name):
    row, dtype = ROWS[name], np.dtype(name)
    as_values = lambda cell: np.array(sorted(patterns(cell)), f"u{dtype.itemsize}").view(dtype)
    assert list(as_values(row["posinf"])) == [np.inf]
    assert list(as_values(row["neginf"])) == [-np.inf]
    zeros = as_values(row["zero"])
    assert list(zeros) == [0, 0] and list(np.signbit(zeros)) == [False, True]
