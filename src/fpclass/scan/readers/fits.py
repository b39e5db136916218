"""FITS files (.fits .fit .fts, and tile-compressed .fz): every HDU's header, parsed by astropy;
no data is read while planning.

- Images (primary or IMAGE) of BITPIX -32/-64: big-endian floats stored contiguously, read raw
  from the HDU's data offset. With BSCALE/BZERO the physical values (raw * BSCALE + BZERO, in
  the float type astropy gives them) are read through astropy's `section`, so that a finite value
  scaled past the float range counts as the Inf a reader sees.
- Tile-compressed images (a BINTABLE with ZIMAGE = T) are read through astropy's
  CompImageHDU.section, whole tiles at a time: each tile is decompressed once.
- NaN is FITS's undefined value for floating-point images (FITS 4.0 section 5.3: "the IEEE NaN
  should be used to represent an undefined value") and for E/D/C/M table fields (section 7.3.3:
  "The IEEE NaN is used to represent null values"), so NaN counts as missing there; Inf is Inf.
- Binary tables: each E/D/C/M column is a tensor of shape (NAXIS2,) + its TDIM (or repeat)
  shape, read here in bands of rows (`read_blocks`), each band seen as a strided view.
  Integer, logical, bit and character columns are not applicable; variable-length arrays (P/Q,
  data in the heap) and scaled float columns (TSCAL/TZERO) are unchecked.
- Integer images are not applicable (BLANK is an integer blank), unless BSCALE/BZERO could scale
  them past the float32 range. ASCII-table numbers are text ("NAN" and "INF" among them):
  unchecked. Random groups of floats: unchecked.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import threading
import warnings
from collections import Counter
from dataclasses import replace

import numpy as np

from . import ReaderError
from ..chunks import SourceError, _read_at
from ..tasks import DATASET, Task, problem
from .layout import float_task, marker, not_applicable, unchecked

#: HDUs read from one file; the HDUs after are a problem (astropy parses a header in about
#: 0.4 ms, so a file of a million tiny HDUs would take minutes to plan).
MAX_HDUS = 10_000
#: Table column type codes (TFORM letters) of floats → their big-endian element.
FLOAT_COLUMNS = {"E": ">f4", "D": ">f8", "C": ">c8", "M": ">c16"}
_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Starts of files that astropy would decompress whole before reading.
_WRAPPED = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"PK\x03\x04", "zip"))
_QUIET = threading.Lock()


def _astropy():
    try:
        from astropy.io import fits
    except ImportError as e:
        raise ReaderError(f"reading FITS needs astropy ({e}): install fpclass[fits]") from None
    return fits


def plan(path: str) -> list:
    """Tasks for every HDU of the FITS file at `path`: one per image, one per table column."""
    fits = _astropy()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(9)
    for magic, what in _WRAPPED:
        if head.startswith(magic):
            raise ReaderError(f"{what}-compressed FITS file: not read (decompress it first)")
    if not head.startswith(b"SIMPLE  ="):
        raise ReaderError(f"not a FITS file: it starts with {head!r}, not 'SIMPLE  ='")
    # astropy warns about what it repairs or skips; what matters is checked below instead.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            hdul = fits.open(path, memmap=False, lazy_load_hdus=True,
                             disable_image_compression=True)
        except Exception as e:  # astropy raises OSError, ValueError, VerifyError, KeyError...
            raise ReaderError(f"not a readable FITS file: {_line(e)}") from None
        with hdul:
            planned, tail = _walk(fits, hdul, path, size)
    tasks = [marker(path, "fits")]
    for (_, _, _, hdu_tasks), name in zip(planned, _hdu_names(planned)):
        tasks += [replace(t, name=name + t.name) for t in hdu_tasks]
    return tasks + tail


def _walk(fits, hdul, path, size) -> tuple:
    """([(index, EXTNAME, EXTVER, tasks)] of the HDUs astropy reads, [problems]): what stops
    the reading (MAX_HDUS, a header astropy cannot read, a truncated file, bytes after the last
    HDU) is a problem."""
    planned, end = [], 0
    for index in itertools.count():
        if index == MAX_HDUS:
            return planned, [problem(path, f"more than {MAX_HDUS} HDUs: those after the first "
                                     f"{MAX_HDUS} are not read")]
        try:
            hdu = hdul[index]
        except IndexError:
            break
        except Exception as e:
            if not index:
                raise ReaderError(f"not a readable FITS file: {_line(e)}") from None
            return planned, [problem(path, f"HDU {index} cannot be read ({_line(e)}): it and "
                                     "the HDUs after it are not read")]
        info = hdu.fileinfo()
        end = info["datLoc"] + info["datSpan"]
        planned.append((index, hdu.name, hdu.header.get("EXTVER", 1),
                        _hdu_tasks(fits, path, size, hdu, info)))
    if end > size:  # FITS files are whole 2880-byte blocks
        return planned, [problem(path, f"the file ends at byte {size}, inside its last HDU "
                                 f"(which ends at byte {end}): truncated? Any HDUs after it are "
                                 "lost")]
    if end < size and not _zeros(path, end, size):
        return planned, [problem(path, f"bytes {end}..{size} after the last HDU are not a "
                                 "readable HDU (a corrupt header?): not read")]
    return planned, []


def _line(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return " ".join(text.split())


def _zeros(path: str, begin: int, end: int) -> bool:
    """Whether bytes [begin, end) of `path` are all zero (padding)."""
    with open(path, "rb") as f:
        f.seek(begin)
        while begin < end:
            block = f.read(min(1 << 20, end - begin))
            if not block or block.count(0) != len(block):
                return False
            begin += len(block)
    return True


def _hdu_names(planned) -> list:
    """Each HDU's tensor name: its EXTNAME when unique in the file, "EXTNAME,EXTVER" (astropy's
    hdul["SCI", 2]) when that is, else its index."""
    names = Counter(name for _, name, _, _ in planned)
    pairs = Counter((name, ver) for _, name, ver, _ in planned)
    out = []
    for index, name, ver, _ in planned:
        if name and names[name] == 1:
            out.append(name)
        elif name and pairs[name, ver] == 1:
            out.append(f"{name},{ver}")
        else:
            out.append(str(index))
    return out


def _hdu_tasks(fits, path, size, hdu, info) -> list:
    """The tasks of one HDU, named by suffix ("" for an image, "/column" for a table column)."""
    h = hdu.header
    try:
        if isinstance(hdu, fits.GroupsHDU):
            return _groups(path, h)
        if isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU)):
            return _image(path, size, h, info)
        if isinstance(hdu, fits.BinTableHDU):
            if fits.CompImageHDU.match_header(h):
                return _compressed(path, size, h, info)
            return _bintable(path, size, hdu, info)
        if isinstance(hdu, fits.TableHDU):
            return _ascii_table(path, hdu)
    except _Bad as e:
        return [unchecked(path, "", "", (), str(e))]
    if info["datSpan"]:
        kind = h.get("XTENSION", "primary HDU")
        return [unchecked(path, "", str(kind), (), f"{kind} HDU: not a kind of HDU fpclass reads")]
    return []


class _Bad(Exception):
    """A header that does not describe its data properly; the message is the reason."""


def _int(h, key, default=None) -> int:
    value = h.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise _Bad(f"header keyword {key} = {value!r}: a non-negative integer is required")
    return int(value)


def _number(h, key, default) -> float:
    value = h.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise _Bad(f"header keyword {key} = {value!r}: a number is required")
    return float(value)


def _axes(h, prefix="NAXIS") -> tuple:
    """The data shape in NumPy order (FITS lists the fastest axis first)."""
    n = _int(h, prefix)
    return tuple(_int(h, f"{prefix}{i}") for i in range(n, 0, -1))


def _past_end(begin, nbytes, size) -> str:
    if begin + nbytes <= size:
        return ""
    return (f"data [{begin}, {begin + nbytes}) lies past the end of the file ({size} bytes; "
            "truncated?)")


def _integer_images(path, label, shape, bitpix, bscale, bzero) -> Task:
    # Integers cannot be NaN or Inf; scaled ones are floats to a reader, finite unless the
    # scale takes the largest integer past float32 (what astropy gives BITPIX 8 and 16).
    top = 2.0 ** (bitpix if bitpix == 8 else bitpix - 1)
    if not math.isfinite(bscale) or not math.isfinite(bzero) or \
            top * abs(bscale) + abs(bzero) > _FLOAT32_MAX:
        return unchecked(path, "", label, shape, f"BSCALE {bscale:g} and BZERO {bzero:g} can "
                         f"scale BITPIX {bitpix} integers past the float range: not checked")
    return not_applicable(path, "", label, shape, "integers (BLANK is an integer blank)")


def _image(path, size, h, info) -> list:
    shape = _axes(h)
    if not shape:
        return []  # NAXIS = 0: no data (an empty primary HDU)
    bitpix = h.get("BITPIX")
    label = f"BITPIX {bitpix}"
    if bitpix not in (8, 16, 32, 64, -32, -64):
        return [unchecked(path, "", label, shape, f"BITPIX {bitpix!r} is not a FITS data type")]
    if h.get("XTENSION") is not None and (_int(h, "PCOUNT", 0), _int(h, "GCOUNT", 1)) != (0, 1):
        return [unchecked(path, "", label, shape, f"IMAGE extension with PCOUNT {h['PCOUNT']} "
                          f"and GCOUNT {h['GCOUNT']}: not a plain image")]
    bscale, bzero = _number(h, "BSCALE", 1.0), _number(h, "BZERO", 0.0)
    if bitpix > 0:
        return [_integer_images(path, label, shape, bitpix, bscale, bzero)]
    nbytes = math.prod(shape) * (-bitpix // 8)
    late = _past_end(info["datLoc"], nbytes, size)
    if late:
        return [unchecked(path, "", label, shape, late)]
    if (bscale, bzero) != (1.0, 0.0):
        element = np.dtype(f"f{-bitpix // 8}").str  # astropy scales in the stored precision
        return [Task(path, "", f"{label}, BSCALE {bscale:g}, BZERO {bzero:g}", shape,
                     source=path, storage=DATASET, reader="fits", offset=info["hdrLoc"],
                     element=element, grid=shape, nbytes=nbytes, blocks=math.prod(shape),
                     missing=True)]
    task = float_task(path, "", label, shape, f">f{-bitpix // 8}", source=path,
                      offset=info["datLoc"], nbytes=nbytes)
    return [replace(task, missing=True)]


def _groups(path, h) -> list:
    bitpix = h.get("BITPIX")
    shape = (_int(h, "GCOUNT", 1), _int(h, "PCOUNT", 0) + math.prod(_axes(h)[:-1]))
    label = f"BITPIX {bitpix}, random groups"
    if isinstance(bitpix, int) and bitpix > 0:
        return [not_applicable(path, "", label, shape, "integers")]
    return [unchecked(path, "", label, shape,
                      "random-groups data (GROUPS = T, a deprecated layout): not read")]


def _tiles(h) -> tuple:
    """(image shape, tile shape), NumPy order, of a tile-compressed image's table header."""
    shape = _axes(h, "ZNAXIS")
    n = len(shape)
    tile = tuple(_int(h, f"ZTILE{i}", _int(h, "ZNAXIS1") if i == 1 else 1)
                 for i in range(n, 0, -1))
    if not all(tile):
        raise _Bad(f"tile shape {list(tile)} has a zero side")
    return shape, tile


def _compressed(path, size, h, info) -> list:
    shape, tile = _tiles(h)
    bitpix = h.get("ZBITPIX")
    label = f"BITPIX {bitpix}, {h.get('ZCMPTYPE', '?')} tiles"
    if bitpix not in (8, 16, 32, 64, -32, -64):
        return [unchecked(path, "", label, shape, f"ZBITPIX {bitpix!r} is not a FITS data type")]
    tiles = math.prod(-(-n // t) for n, t in zip(shape, tile))
    rows = _int(h, "NAXIS2")
    if rows != tiles:
        return [unchecked(path, "", label, shape, f"{rows} tiles stored, the image's "
                          f"{list(shape)} in tiles of {list(tile)} needs {tiles}")]
    late = _past_end(info["datLoc"], _int(h, "NAXIS1") * rows + _int(h, "PCOUNT", 0), size)
    if late:
        return [unchecked(path, "", label, shape, late)]
    if bitpix > 0:
        bscale, bzero = _number(h, "BSCALE", 1.0), _number(h, "BZERO", 0.0)
        return [_integer_images(path, label, shape, bitpix, bscale, bzero)]
    element = np.dtype(f"f{-bitpix // 8}").str
    return [Task(path, "", label, shape, source=path, storage=DATASET, reader="fits",
                 offset=info["hdrLoc"], element=element, grid=shape,
                 nbytes=math.prod(shape) * (-bitpix // 8), blocks=tiles, missing=True)]


def _bintable(path, size, hdu, info) -> list:
    h = hdu.header
    row, rows = _int(h, "NAXIS1"), _int(h, "NAXIS2")
    try:
        columns = hdu.columns
        layout = columns.dtype
    except Exception as e:
        return [unchecked(path, "", "BINTABLE", (rows,), f"columns cannot be parsed: {_line(e)}")]
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
        if code not in FLOAT_COLUMNS:
            tasks.append(not_applicable(path, name, label, shape))
            continue
        if col.bscale not in (None, 1) or col.bzero not in (None, 0):
            tasks.append(unchecked(path, name, label, shape, "scaled float column (TSCAL/TZERO):"
                                   " not checked"))
            continue
        if late:
            tasks.append(unchecked(path, name, label, shape, late))
            continue
        if offset + fdt.itemsize > row:
            tasks.append(unchecked(path, name, label, shape, f"column ends at byte "
                                   f"{offset + fdt.itemsize} of a {row}-byte row"))
            continue
        tasks.append(_column(path, name, label, shape, FLOAT_COLUMNS[code],
                             info["datLoc"] + offset, row))
    return tasks


def _column(path, name, label, shape, element, offset, row) -> Task:
    """A float column: row bands read by read_blocks, each seen as a strided view of its bytes
    (`strides` holds the row length in bytes). The engine's STRIDED tasks read the same bytes as
    fast (measured), but need a row length that is a whole number of elements, which a string
    or 16-bit column breaks."""
    task = float_task(path, name, label, shape, element, source=path, offset=offset,
                      nbytes=math.prod(shape) * np.dtype(element).itemsize)
    return replace(task, storage=DATASET, reader="fits", strides=(row,), blocks=shape[0],
                   missing=True)


def _ascii_table(path, hdu) -> list:
    rows = _int(hdu.header, "NAXIS2")
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


# --- reading -------------------------------------------------------------------------------


def read_blocks(task: Task, chunk_bytes: int):
    """Yield (origin, block) over the blocks [first, first + count) of a DATASET task: table rows
    (read here) or tiles / elements of an image read through astropy's `section`."""
    stop = task.blocks if task.count < 0 else task.first + task.count
    if task.strides:
        yield from _rows(task, task.first, stop, chunk_bytes)
    else:
        yield from _sections(task, task.first, stop, chunk_bytes)


def _rows(task, first, stop, chunk_bytes):
    """Rows [first, stop) of a table column in bands of about `chunk_bytes`, each a strided view
    of the band's bytes (unaligned when the row length is not a multiple of the element)."""
    (row,) = task.strides
    item = np.dtype(task.element)
    inner = task.grid[1:]  # a complex column's parts are a last axis of 2
    field = math.prod(inner) * item.itemsize
    strides, step = [], item.itemsize
    for n in reversed(inner):
        strides.insert(0, step)
        step *= n
    strides = (row,) + tuple(strides)
    per = max(1, chunk_bytes // max(row, 1))
    fd = os.open(task.source, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        end = task.offset + (task.shape[0] - 1) * row + field
        if task.shape[0] and end > size:
            raise SourceError(f"data ends at byte {end} but {task.source} has {size} bytes "
                              "(truncated?)")
        buf = None
        for a in range(first, stop, per):
            n = min(per, stop - a)
            nbytes = (n - 1) * row + field
            if buf is None or buf.size < nbytes:
                buf = np.empty(nbytes, np.uint8)
            _read_at(fd, memoryview(buf)[:nbytes], task.offset + a * row, task.source)
            block = np.ndarray((n,) + inner, item, buf, 0, strides)
            yield (a,) + (0,) * len(inner), block
    finally:
        os.close(fd)


class _Window(io.RawIOBase):
    """The bytes of a file from `base` on, seen as a file of their own: astropy then reads one
    HDU's header instead of every header before it (an HDUList re-parses them all)."""

    def __init__(self, path: str, base: int):
        super().__init__()
        self._f = open(path, "rb", buffering=0)
        self._base = base
        self._f.seek(base)

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        return self._f.readinto(b)

    def seek(self, pos, whence=os.SEEK_SET):
        if whence == os.SEEK_SET:
            pos += self._base
        return self._f.seek(pos, whence) - self._base

    def tell(self):
        return self._f.tell() - self._base

    def close(self):
        self._f.close()
        super().close()


def _sections(task, first, stop, chunk_bytes):
    """Blocks [first, stop) of an image read through astropy: whole tiles of a compressed image
    (its blocks are its tiles), or elements of a scaled one (its blocks are its elements),
    grouped into boxes of about `chunk_bytes`."""
    fits = _astropy()
    with io.BufferedReader(_Window(task.source, task.offset)) as window:
        try:
            # catch_warnings swaps process-wide state: one thread at a time.
            with _QUIET, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hdul = fits.open(window, memmap=False, lazy_load_hdus=True,
                                 ignore_missing_simple=True)
                hdu = hdul[0]
        except Exception as e:
            raise SourceError(f"astropy cannot read the HDU at byte {task.offset}: "
                              f"{_line(e)}") from None
        with hdul:
            shape = getattr(hdu, "shape", None)
            if shape is None or tuple(shape) != task.shape:
                raise SourceError(f"the HDU at byte {task.offset} is not the image of shape "
                                  f"{list(task.shape)} planned")
            if isinstance(hdu, fits.CompImageHDU):
                tile = tuple(int(t) for t in hdu.tile_shape)
            else:
                tile = (1,) * len(task.shape)
            grid = tuple(-(-n // t) for n, t in zip(task.shape, tile))
            limit = max(1, chunk_bytes // (math.prod(tile) * np.dtype(task.element).itemsize))
            # Boxes of whole tiles, one astropy call each (a call costs about 1 ms on top of the
            # decompression). Locations come in tile order, the order tiles are stored: a box is
            # yielded whole where its C order is that order (tiles that span the image beyond
            # their first axis of more than one pixel: row tiles, plane tiles), else tile by tile.
            cut = next((k for k, t in enumerate(tile) if t > 1), len(tile))
            whole = not any(g > 1 for g in grid[cut + 1:])
            section = hdu.section
            for start, extent in boxes(grid, first, stop, limit):
                index = tuple(slice(s * t, min((s + e) * t, n))
                              for s, e, t, n in zip(start, extent, tile, task.shape))
                try:
                    with np.errstate(all="ignore"):  # scaling past the float range gives Inf
                        block = section[index]
                except Exception as e:
                    raise SourceError(f"astropy cannot read {_box(index)}: {_line(e)}") from None
                origin = tuple(s.start for s in index)
                if whole:
                    yield origin, block
                    continue
                for k in itertools.product(*(range(e) for e in extent)):
                    part = tuple(slice(i * t, (i + 1) * t) for i, t in zip(k, tile))
                    yield tuple(o + p.start for o, p in zip(origin, part)), block[part]


def _box(index) -> str:
    return "[" + ", ".join(f"{s.start}:{s.stop}" for s in index) + "]"


def boxes(grid: tuple, first: int, stop: int, limit: int):
    """Yield (start, extent) boxes of an array of shape `grid` that cover its items [first, stop)
    in C order, in order, each contiguous in C order and of at most `limit` items (a box of one
    item along every axis may be the most that fits)."""
    if first >= stop:
        return
    if len(grid) == 1:
        for a in range(first, stop, limit):
            yield (a,), (min(limit, stop - a),)
        return
    inner = math.prod(grid[1:])
    i, j = divmod(first, inner)
    if j or stop - first < inner:  # a part of one slab, then the rest
        end = min(stop, (i + 1) * inner)
        for s, e in boxes(grid[1:], j, end - i * inner, limit):
            yield (i,) + s, (1,) + e
        yield from boxes(grid, end, stop, limit)
        return
    whole = stop // inner
    rest = (0,) * (len(grid) - 1)
    if inner <= limit:
        per = limit // inner
        for a in range(i, whole, per):
            yield (a,) + rest, (min(per, whole - a),) + tuple(grid[1:])
    else:
        for a in range(i, whole):
            for s, e in boxes(grid[1:], 0, inner, limit):
                yield (a,) + s, (1,) + e
    yield from boxes(grid, whole * inner, stop, limit)
