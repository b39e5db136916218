"""Missing values, for every format the scan reads: which stored values are the format's declared
blanks, so that they are counted as `missing` and never as NaN or Inf.

"Missing" and NaN are different answers. NaN (and +-Inf) is a finding: a value that went wrong.
A missing value is one the file itself declares undefined: a fill value, a blank, a masked
element. `--fail-on` ignores missing values by default and counts them with `--fail-on missing`.
A task reports missing values in one of two ways:

- `Task.missing`: NaN is the declared blank of the whole tensor, so every NaN in it counts as
  missing (`nan_blank` decides it from the declared blank values);
- a masked decode: the reader turns stored values into the values a library returns and masks
  the blanks (`cf.Policy.decode`, FITS's `fits_blanks` in its scaling); each masked element is
  missing whatever its value.

The rules, one per format family, side by side:

- CF (NetCDF classic and NetCDF-4/HDF5), in `cf`: `_FillValue` / `missing_value` (a NaN one
  makes every NaN missing), the type's default fill value, `valid_min` / `valid_max` /
  `valid_range`, and the packing (`scale_factor`, `add_offset`, `_Unsigned`), as netCDF4-python's
  auto mask and scale gives them. HDF5 datasets without CF packing whose `_FillValue` or
  `missing_value` is NaN (complex ones too) have NaN as their blank.
- zarr (`blanks.zarr_fill_is_blank`): a NaN `fill_value` is the array's blank, so every NaN in it
  (chunks never written among them) is missing; any other fill value is data.
- FITS (`blanks.fits_integer_blank`, `blanks.fits_blanks`): an integer equal to BLANK (images) or TNULLn (table
  columns), and every stored NaN of a float image or column (FITS's undefined value), whatever
  the scaling makes of them.
- Attributes (HDF5, NetCDF): a NaN `_FillValue` / `missing_value` attribute is the declared
  blank, not a finding (`cf.attribute_values`).
Other formats declare no blanks: their NaN are NaN.
"""

from . import cf
from .blanks import fits_blanks, fits_integer_blank, nan_blank, zarr_fill_is_blank

__all__ = ["cf", "fits_blanks", "fits_integer_blank", "nan_blank", "zarr_fill_is_blank"]
