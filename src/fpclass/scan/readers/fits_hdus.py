"""The tasks of one FITS HDU of each kind, from its header (no data is read): images (raw,
scaled, tile-compressed), random groups, binary-table columns and ASCII tables."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from ..storage.bands import Bands
from ..storage.grids import Grid
from ..storage.ranges import Range
from ..tasks import Task
from .fits_scaling import (BITPIX_DTYPES, FLOAT_COLUMNS, Bad, _line, axes, column_scaling,
                           header_int, header_number, image_scaling)
from .fits_tiles import direct_tiles
from .reporting import float_task, not_applicable, unchecked

_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Integer table column codes (TFORM letters), scaled by TSCALn/TZEROn.
_INTEGER_COLUMNS = ("B", "I", "J", "K")


def hdu_tasks(fits, path, size, hdu, info) -> list:
    """The tasks of one HDU, named by suffix ("" for an image, "/column" for a table column)."""
    h = hdu.header
    try:
        _no_twice(h)
        if isinstance(hdu, fits.GroupsHDU):
            return _groups(path, h)
        if isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU)):
            return _image(path, size, h, info, h.get("XTENSION") is not None)
        if isinstance(hdu, fits.BinTableHDU):
            if fits.CompImageHDU.match_header(h):
                return _compressed(path, size, h, info)
            return _bintable(path, size, hdu, info)
        if isinstance(hdu, fits.TableHDU):
            return _ascii_table(path, hdu)
    except Bad as e:
        return [unchecked(path, "", "", (), str(e))]
    if info["datSpan"]:
        kind = h.get("XTENSION", "primary HDU")
        return [unchecked(path, "", str(kind), (), f"{kind} HDU: not a kind of HDU fpclass reads")]
    return []


def plain_image_tasks(path, size, image) -> list:
    """hdu_tasks of a fits_headers.PlainImage (no astropy HDU object)."""
    try:
        _no_twice(image.header)
        return _image(path, size, image.values, image.info, image.extension)
    except Bad as e:
        return [unchecked(path, "", "", (), str(e))]


#: Keywords that describe the data: one that appears twice makes the data ambiguous (astropy
#: takes the first for some uses and the last for others).
_DATA_KEYS = re.compile(r"BITPIX|NAXIS[0-9]*|BSCALE|BZERO|BLANK|PCOUNT|GCOUNT|TFIELDS|GROUPS|"
                        r"T(FORM|SCAL|ZERO|NULL|DIM)[0-9]+|"
                        r"Z(IMAGE|BITPIX|NAXIS[0-9]*|TILE[0-9]+|CMPTYPE|SCALE|ZERO|BLANK)")


def _no_twice(h) -> None:
    twice = [k for k, n in Counter(h.keys()).items() if n > 1 and _DATA_KEYS.fullmatch(k)]
    if twice:
        raise Bad(f"header keyword {twice[0]} appears more than once: the data it describes "
                  "is ambiguous, so not read")


def _past_end(begin, nbytes, size) -> str:
    if begin + nbytes <= size:
        return ""
    return (f"data [{begin}, {begin + nbytes}) lies past the end of the file ({size} bytes; "
            "truncated?)")


def _integer_images(path, label, shape, bitpix, bscale, bzero) -> Task:
    # Integers cannot be NaN or Inf; scaled ones are floats to a reader, finite unless the
    # scale takes the largest integer past float32 (what astropy gives BITPIX 8 and 16). Used
    # for tile-compressed integer images, whose tiles astropy decodes.
    top = 2.0 ** (bitpix if bitpix == 8 else bitpix - 1)
    if not math.isfinite(bscale) or not math.isfinite(bzero) or \
            top * abs(bscale) + abs(bzero) > _FLOAT32_MAX:
        return unchecked(path, "", label, shape, f"BSCALE {bscale:g} and BZERO {bzero:g} can "
                         f"scale BITPIX {bitpix} integers past the float range: not checked")
    return not_applicable(path, "", label, shape, "integers (BLANK is an integer blank)")


def _image(path, size, h, info, extension) -> list:
    """Tasks of an image of header values `h` (a Header, or a dict of the data keywords), an
    IMAGE extension or a primary HDU."""
    shape = axes(h)
    if not shape:
        return []  # NAXIS = 0: no data (an empty primary HDU)
    bitpix = h.get("BITPIX")
    label = f"BITPIX {bitpix}"
    if isinstance(bitpix, bool) or bitpix not in BITPIX_DTYPES:
        return [unchecked(path, "", label, shape, f"BITPIX {bitpix!r} is not a FITS data type")]
    bitpix = int(bitpix)
    if extension:
        counts = header_int(h, "PCOUNT", 0), header_int(h, "GCOUNT", 1)
        if counts != (0, 1):
            return [unchecked(path, "", label, shape, f"IMAGE extension with PCOUNT {counts[0]} "
                              f"and GCOUNT {counts[1]}: not a plain image")]
    bscale, bzero = header_number(h, "BSCALE", 1.0), header_number(h, "BZERO", 0.0)
    scaling = image_scaling(bitpix, bscale, bzero, h.get("BLANK"))
    if bitpix > 0 and scaling is None:
        return [not_applicable(path, "", label, shape, "integers (BLANK is an integer blank)")]
    nbytes = math.prod(shape) * abs(bitpix) // 8
    late = _past_end(info["datLoc"], nbytes, size)
    if late:
        return [unchecked(path, "", label, shape, late)]
    if scaling:
        # Decoded here from the stored values, a box of elements at a time (blocks: elements).
        label = f"{label} ({scaling.label}, BSCALE {bscale:g}, BZERO {bzero:g})"
        return [Task(path, "", label, shape, element=scaling.physical, grid=shape,
                     storage=Grid(path, "fits", nbytes, math.prod(shape), offset=info["datLoc"],
                                  decode=scaling.encode()))]  # blanks come masked, not as NaN
    return [float_task(path, "", label, shape, f">f{-bitpix // 8}",
                       Range(path, info["datLoc"], nbytes), missing=True)]


def _groups(path, h) -> list:
    bitpix = h.get("BITPIX")
    shape = (header_int(h, "GCOUNT", 1), header_int(h, "PCOUNT", 0) + math.prod(axes(h)[:-1]))
    label = f"BITPIX {bitpix}, random groups"
    if isinstance(bitpix, int) and bitpix > 0:
        return [not_applicable(path, "", label, shape, "integers")]
    return [unchecked(path, "", label, shape,
                      "random-groups data (GROUPS = T, a deprecated layout): not read")]


def _tiles(h) -> tuple:
    """(image shape, tile shape), NumPy order, of a tile-compressed image's table header."""
    shape = axes(h, "ZNAXIS")
    n = len(shape)
    tile = tuple(header_int(h, f"ZTILE{i}", header_int(h, "ZNAXIS1") if i == 1 else 1)
                 for i in range(n, 0, -1))
    if not all(tile):
        raise Bad(f"tile shape {list(tile)} has a zero side")
    return shape, tile


def _compressed(path, size, h, info) -> list:
    shape, tile = _tiles(h)
    bitpix = h.get("ZBITPIX")
    label = f"BITPIX {bitpix}, {h.get('ZCMPTYPE', '?')} tiles"
    if bitpix not in (8, 16, 32, 64, -32, -64):
        return [unchecked(path, "", label, shape, f"ZBITPIX {bitpix!r} is not a FITS data type")]
    tiles = math.prod(-(-n // t) for n, t in zip(shape, tile))
    rows = header_int(h, "NAXIS2")
    if rows != tiles:
        return [unchecked(path, "", label, shape, f"{rows} tiles stored, the image's "
                          f"{list(shape)} in tiles of {list(tile)} needs {tiles}")]
    stored = header_int(h, "NAXIS1") * rows + header_int(h, "PCOUNT", 0)
    late = _past_end(info["datLoc"], stored, size)
    if late:
        return [unchecked(path, "", label, shape, late)]
    if bitpix > 0:
        bscale, bzero = header_number(h, "BSCALE", 1.0), header_number(h, "BZERO", 0.0)
        return [_integer_images(path, label, shape, bitpix, bscale, bzero)]
    element = np.dtype(f"f{-bitpix // 8}").str
    return [Task(path, "", label, shape, element=element, grid=shape, missing=True,
                 storage=Grid(path, "fits", math.prod(shape) * (-bitpix // 8), tiles,
                              offset=info["hdrLoc"], packed=True,
                              decode=direct_tiles(h, info["datLoc"], tile)))]


def _bintable(path, size, hdu, info) -> list:
    h = hdu.header
    row, rows = header_int(h, "NAXIS1"), header_int(h, "NAXIS2")
    try:
        columns = hdu.columns
        layout = columns.dtype
    except Exception as e:
        return [unchecked(path, "", "BINTABLE", (rows,), f"columns cannot be parsed: {_line(e)}")]
    if layout.itemsize != row:  # astropy then reads rows of the columns' width, not NAXIS1's
        return [unchecked(path, "", "BINTABLE", (rows,), f"the columns take {layout.itemsize} "
                          f"bytes of a row, NAXIS1 says {row}: not read")]
    late = _past_end(info["datLoc"], row * rows, size)
    tasks = []
    seen = Counter(c.name for c in columns)
    for n, col in enumerate(columns):
        field = layout.names[n]
        fdt, offset = layout.fields[field][:2]
        name = "/" + (col.name or f"column {n + 1}")
        if seen[col.name] > 1:
            name += f" (column {n + 1})"
        fmt = col.format
        label = str(fmt)
        shape = (rows,) + fdt.shape
        code = fmt.format
        if code in ("P", "Q"):
            inner = getattr(fmt, "p_format", "")
            if inner in FLOAT_COLUMNS:
                tasks.append(unchecked(path, name, label, (rows,), "variable-length array column "
                                       "(values in the heap): not read"))
            else:
                tasks.append(not_applicable(path, name, label, (rows,)))
            continue
        scaling = None
        if code in _INTEGER_COLUMNS or code in FLOAT_COLUMNS:
            scaling = column_scaling(code, fdt.base.str, col.bscale, col.bzero, col.null)
        if isinstance(scaling, str):
            tasks.append(unchecked(path, name, label, shape, f"scaled column: {scaling}"))
            continue
        if code not in FLOAT_COLUMNS and scaling is None:
            tasks.append(not_applicable(path, name, label, shape))
            continue
        if scaling and code in "CM":
            tasks.append(unchecked(path, name, label, shape, "scaled complex column "
                                   "(TSCAL/TZERO): astropy drops its imaginary parts; not read"))
            continue
        if late:
            tasks.append(unchecked(path, name, label, shape, late))
            continue
        if offset + fdt.itemsize > row:
            tasks.append(unchecked(path, name, label, shape, f"column ends at byte "
                                   f"{offset + fdt.itemsize} of a {row}-byte row"))
            continue
        if scaling:
            label = f"{label} ({scaling.label}, TSCAL {scaling.scale:g}, TZERO {scaling.zero:g})"
            tasks.append(_column(path, name, label, shape, scaling.physical,
                                 info["datLoc"] + offset, row, scaling))
            continue
        tasks.append(_column(path, name, label, shape, FLOAT_COLUMNS[code],
                             info["datLoc"] + offset, row))
    return tasks


def _column(path, name, label, shape, element, offset, row, scaling=None) -> Task:
    """A float column: Bands of rows `row` bytes apart, each seen as a strided view of its
    bytes and, for a column of `scaling`, decoded to physical `element`s (decode_bands). Strided
    storage reads the same bytes as fast (measured), but needs a row length that is a whole
    number of elements, which a string or 16-bit column breaks."""
    if scaling is None:  # NaN is the blank of a float column
        nbytes = math.prod(shape) * np.dtype(element).itemsize
        return float_task(path, name, label, shape, element, Bands(path, offset, nbytes, row),
                          missing=True)
    nbytes = math.prod(shape) * np.dtype(scaling.raw).itemsize
    return float_task(path, name, label, shape, element,
                      Bands(path, offset, nbytes, row, scaling.raw, "fits", scaling.encode()))


def _ascii_table(path, hdu) -> list:
    rows = header_int(hdu.header, "NAXIS2")
    tasks = []
    for n, col in enumerate(hdu.columns):
        name = "/" + (col.name or f"column {n + 1}")
        if col.format.format in "EFD":
            tasks.append(unchecked(path, name, str(col.format), (rows,), "ASCII-table numbers "
                                   "are text (NAN, INF or out-of-range text reads as NaN/Inf): "
                                   "not checked"))
        else:
            tasks.append(not_applicable(path, name, str(col.format), (rows,)))
    return tasks


