"""The blank rules of zarr and FITS and the one NaN-blank test (see the package docstring)."""

from __future__ import annotations

import numpy as np


def nan_blank(values) -> bool:
    """Whether declared blank values (a fill value, a list of missing values) include NaN, which
    makes every NaN of their tensor a missing value: the one NaN-blank test of every format. Text
    and other non-numbers declare no NaN."""
    a = np.asarray(values)
    return a.dtype.kind in "fc" and bool(np.isnan(a).any())


def zarr_fill_is_blank(fill) -> bool:
    """zarr's rule: a NaN fill value is the array's blank, so NaN in it (chunks never written
    among them) counts as missing; any other fill value is data, counted like the values
    written."""
    return fill is not None and nan_blank(fill)


def fits_integer_blank(value):
    """The integer blank a FITS BLANK or TNULLn keyword declares, or None: astropy ignores a value
    that is not an integer, and so does this reader (FITS requires an integer; astropy takes a
    logical T as 1, and so does this reader)."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    return None


def fits_blanks(raw: np.ndarray, blank) -> np.ndarray | None:
    """FITS's rule: the stored values that are blanks (an integer equal to BLANK / TNULLn; a NaN
    float, FITS's undefined value), or None when none can be. Blanks are missing values whatever
    the scaling makes of them (astropy gives NaN for an image's BLANK pixels but the scaled TNULL
    value for a table's; FITS says both are undefined; astropy also skips a BLANK of 0, which
    FITS does not)."""
    if raw.dtype.kind == "f":
        return np.isnan(raw)
    if blank is None:
        return None
    info = np.iinfo(raw.dtype)
    if not info.min <= blank <= info.max:
        return None
    return raw == blank


__all__ = ["fits_blanks", "fits_integer_blank", "nan_blank", "zarr_fill_is_blank"]
