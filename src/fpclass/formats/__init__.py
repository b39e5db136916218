"""The format table and what is derived from it: bit tests and dtype lookup.

    >>> from fpclass import formats
    >>> formats.format_of("bfloat16").has_inf
    True
"""

from .lookup import SUPPORTED, component_format, format_of, is_byteswapped
from .table import FORMATS, ML_DTYPES_NAMES, Format, Kind, NaN
from .bit_tests import BitTest, Query, bit_test
from .magnitude import has_magnitude_bounds, largest_magnitude_exponent, magnitude_exponent

__all__ = [
    "FORMATS", "ML_DTYPES_NAMES", "SUPPORTED", "BitTest", "Format", "Kind", "NaN", "Query",
    "bit_test", "component_format", "format_of", "has_magnitude_bounds", "is_byteswapped",
    "largest_magnitude_exponent", "magnitude_exponent",
]
