"""A typed user of fpclass's public API: checked with `mypy --strict` by tests/test_typing.py
(which also reads the `reveal_type` notes below), and run as a script there, so each revealed
type is also the type the call returns."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

import fpclass
from fpclass import twin
from fpclass.results import ExitCode, ScanReport

x = np.array([[1.0, np.nan], [np.inf, 2.0]])   # NDArray[Any], as most arrays are typed


class LikeATensor:
    """Stands for a torch.Tensor (recognised by its detach()), without torch's stubs to load."""

    def detach(self) -> LikeATensor:
        return self


mask = fpclass.isnan(x)
flag = fpclass.any_nan(x)
count = fpclass.count_nan(x)
per_row = fpclass.count_nonfinite(x, axis=1)
counts = fpclass.class_counts(x)
first = fpclass.first_nonfinite(x)
where = fpclass.locate_inf(x, limit=3)
out = np.empty(x.shape, bool)
written = fpclass.isinf(x, out, detect_negative=False)
report = fpclass.check({"w": x}, fail_on="nan")

if TYPE_CHECKING:  # reveal_type: mypy's builtin (pyflakes: undefined name)
    reveal_type(mask)
    reveal_type(flag)
    reveal_type(count)
    reveal_type(per_row)
    reveal_type(counts)
    reveal_type(counts.posinf)
    reveal_type(first)
    reveal_type(where)
    reveal_type(written)
    reveal_type(out)
    reveal_type(fpclass.isnan(1.5))
    reveal_type(fpclass.isnan(LikeATensor()))
    reveal_type(fpclass.count_nan(LikeATensor()))
    reveal_type(fpclass.dask.count_nan)
    reveal_type(twin.count_nan(x))
    reveal_type(twin.class_counts(x))
    reveal_type(twin.isnan(x, out))
    reveal_type(report)
    reveal_type(report.exit_code)
    reveal_type(fpclass.scan.scan)
    reveal_type(fpclass.torch.watch)

# What each call returns at run time, as revealed above.
assert type(mask) is np.ndarray and mask.dtype == np.bool_
assert type(flag) is np.bool_ and type(count) is int and json.dumps(count) == "1"
assert isinstance(per_row, np.ndarray) and per_row.dtype == np.int64
assert type(counts) is fpclass.ClassCounts and type(counts.posinf) is int
assert twin.count_nan(x) == count and twin.class_counts(x) == counts
assert first == (0, 1) and where.dtype == np.int64 and written is out
assert isinstance(report, ScanReport) and report.exit_code is ExitCode.FOUND


def uses_the_types(a: NDArray[np.float32]) -> tuple[int, bool]:
    """Strict code that needs no cast: the results have the types it declares."""
    n: int = fpclass.count_nan(a)
    return n, bool(fpclass.all_finite(a))


assert uses_the_types(np.ones(3, np.float32)) == (0, True)
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "a.npy"
    np.save(path, x)
    scanned: ScanReport = fpclass.scan.scan([str(path)])
    assert scanned.summary()["nan"] == 1
print("ok")
