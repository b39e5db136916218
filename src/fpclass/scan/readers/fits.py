"""FITS files (.fits .fit .fts, and tile-compressed .fz): every HDU's header, parsed by astropy;
no data is read while planning. `fits_headers` reads plain image headers (parsed once by
astropy's Header, without its HDU objects), astropy's HDU list every other; `fits_hdus` makes
the tasks of each HDU, `fits_read` reads them, `fits_scaling` holds header values and the
physical values of scaled data.

- Images (primary or IMAGE) of BITPIX -32/-64: big-endian floats stored contiguously, read raw
  from the HDU's data offset.
- Scaled images (BSCALE/BZERO, integer or float) and scaled binary-table columns (TSCALn/TZEROn
  on B/I/J/K/E/D columns): the physical values, computed from the stored ones a box of elements
  (a band of rows) at a time as astropy computes them, in the type astropy gives them
  ("int16 scaled to float32"): a non-finite scale or zero makes every value non-finite, and a
  finite value scaled past the type's range counts as the Inf astropy gives. Blanks (BLANK,
  TNULLn, a stored NaN) are missing values. Pseudo-unsigned scalings give integers.
- Tile-compressed images (a BINTABLE with ZIMAGE = T) are read through astropy's
  CompImageHDU.section, whole tiles at a time: each tile is decompressed once.
- NaN is FITS's undefined value for floating-point images (FITS 4.0 section 5.3: "the IEEE NaN
  should be used to represent an undefined value") and for E/D/C/M table fields (section 7.3.3:
  "The IEEE NaN is used to represent null values"), so NaN counts as missing there; Inf is Inf.
- Binary tables: each E/D/C/M column is a tensor of shape (NAXIS2,) + its TDIM (or repeat)
  shape, read in bands of rows, each band seen as a strided view. Unscaled integer, logical,
  bit and character columns are not applicable; variable-length arrays (P/Q, data in the heap)
  and scaled complex columns are unchecked.
- Unscaled integer images are not applicable (BLANK is an integer blank). ASCII-table numbers
  are text ("NAN" and "INF" among them): unchecked. Random groups of floats: unchecked.
- Header keywords: FITS has no NaN or Inf value, and astropy refuses a card holding NAN or INF;
  a float keyword too large for a double ("1E999") is Inf to astropy. Such cards are reported
  (`HDU@KEY`): the Inf checked, the card astropy refuses unchecked. A file with SIMPLE = F
  (astropy reads it as bytes of no standard layout) is not read.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections import Counter
from dataclasses import replace

from . import ReaderError
from ..signatures import FITS_MAGIC
from ..tasks import problem
from .fits_headers import AXES_CARD, header_text, huge_axes, plain_image
from .fits_hdus import hdu_tasks, plain_image_tasks
from .fits_read import decode_bands, read_blocks  # noqa: F401  (its storages name this module)
from .fits_scaling import _astropy, _line, header_cards, header_text_cards
from .reporting import marker
from ..storage.reads import file_size, open_binary

#: HDUs read from one file; the HDUs after are a problem (a header takes 0.1 to 0.4 ms to
#: parse, so a file of a million tiny HDUs would take minutes to plan).
MAX_HDUS = 10_000


def plan(path: str) -> list:
    """Tasks for every HDU of the FITS file at `path`: one per image, one per table column."""
    fits = _astropy()
    with open_binary(path) as f:
        size = file_size(f)
        head = f.read(9)
    if not head.startswith(FITS_MAGIC):
        raise ReaderError(f"not a FITS file: it starts with {head!r}, not "
                          f"{FITS_MAGIC.decode()!r}")
    # astropy warns about what it repairs or skips; what matters is checked below instead.
    with warnings.catch_warnings(), _HDUList(fits, path) as hdul, open_binary(path) as f:
        warnings.simplefilter("ignore")
        planned, tail = _walk(fits, hdul, f, path, size)
    tasks = [marker(path, "fits")]
    for (_, _, _, hdu_tasks_), name in zip(planned, _hdu_names(planned)):
        tasks += [replace(t, name=name + t.name) for t in hdu_tasks_]
    return tasks + tail


class _HDUList:
    """astropy's list of the file's HDUs, opened on first use (a file of plain images is read
    without it); a failure to open is the ReaderError of an unreadable file."""

    def __init__(self, fits, path: str):
        self._fits, self._path = fits, path
        self._stack = contextlib.ExitStack()
        self._hdul = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stack.close()

    def __getitem__(self, index: int):
        if self._hdul is None:
            # A file object of ours: astropy would download a URL whole, and leaves a file it
            # opened itself open when a header fails it with anything but OSError.
            f = self._stack.enter_context(open_binary(self._path))
            try:
                self._hdul = self._stack.enter_context(self._fits.open(
                    f, memmap=False, lazy_load_hdus=True, disable_image_compression=True))
            except Exception as e:  # astropy raises OSError, ValueError, VerifyError, KeyError...
                raise ReaderError(f"not a readable FITS file: {_line(e)}") from None
        return self._hdul[index]

    def __len__(self) -> int:
        """HDUs astropy read (once it has read them all)."""
        return 0 if self._hdul is None else len(self._hdul)


def _walk(fits, hdul, f, path, size) -> tuple:
    """([(index, EXTNAME, EXTVER, tasks)] of the HDUs read, [problems]): what stops the reading
    (MAX_HDUS, a header astropy cannot read, a truncated file, bytes after the last HDU) is a
    problem. Plain image headers are read by fits_headers, every other by astropy's HDU list
    `hdul` (which reads the HDUs before it again: each must be where fits_headers put it)."""
    planned, end, start = [], 0, -1
    for index in itertools.count():
        if index == MAX_HDUS:
            return planned, [problem(path, f"more than {MAX_HDUS} HDUs: those after the first "
                                     f"{MAX_HDUS} are not read")]
        # a header whose data ends past the file's end (or past what a seek reaches) ends it
        text, stop = header_text(f, end) if end < size else (b"", -1)
        if not text and _no_hdu_at(f, path, end, size):
            break
        huge = huge_axes(text, stop) if text else _huge_axes(path, end, size)
        if huge:
            if not index:
                raise ReaderError(f"not a readable FITS file: its primary header declares "
                                  f"{huge} (FITS allows at most 999 axes)")
            return planned, [problem(path, f"HDU {index} declares {huge} (FITS allows at most "
                                     "999 axes): it and the HDUs after it are not read")]
        image = plain_image(fits.Header, text, stop, end, not index) if text else None
        if image is not None:
            info, ident = image.info, (index, image.name, image.ver)
            try:
                tasks = plain_image_tasks(path, size, image)
                tasks += header_text_cards(path, image.text)
            except Exception as e:
                return planned, _unreadable(path, index, e)
        else:
            got = _astropy_hdu(fits, hdul, path, size, index, end, start)
            if got is None:
                break
            if not isinstance(got, tuple):
                return planned, got
            info, ident, tasks = got
        start, end = info["hdrLoc"], info["datLoc"] + info["datSpan"]
        planned.append((*ident, tasks))
    if end > size:  # FITS files are whole 2880-byte blocks
        return planned, [problem(path, f"the file ends at byte {size}, inside its last HDU "
                                 f"(which ends at byte {end}): truncated? Any HDUs after it are "
                                 "lost")]
    if end < size and not _zeros(path, end, size):
        return planned, [problem(path, f"bytes {end}..{size} after the last HDU are not a "
                                 "readable HDU (a corrupt header?): not read")]
    return planned, []


def _no_hdu_at(f, path, end, size) -> bool:
    """Whether astropy reads no HDU at byte `end`: the end of the file, or zeros to it (astropy
    takes them for padding)."""
    return end >= size or _zeros(path, end, size, f)


def _astropy_hdu(fits, hdul, path, size, index, at, start):
    """(fileinfo, (index, EXTNAME, EXTVER), tasks) of HDU `index` (at byte `at`) as astropy's
    HDU list reads it; None when astropy finds no HDU there; else [problems]."""
    try:
        hdu = hdul[index]
    except IndexError:
        if len(hdul) < index:
            return [problem(path, f"astropy reads {len(hdul)} HDUs where fpclass found "
                            f"{index}: HDU {index} and those after it are not read")]
        return None
    except ReaderError:
        raise
    except Exception as e:
        return _unreadable(path, index, e)
    if not hasattr(hdu, "fileinfo"):  # SIMPLE = F: astropy gives the rest as raw bytes
        raise ReaderError("SIMPLE = F: the file says it does not conform to the FITS "
                          "standard, so its layout is unknown (astropy reads it only as "
                          "bytes): not read")
    try:
        info = hdu.fileinfo()
        if info["hdrLoc"] <= start or info["datSpan"] < 0:  # GCOUNT < 0, for one: astropy
            return [problem(path, f"HDU {index} starts at byte {info['hdrLoc']} with "
                            f"{info['datSpan']} data bytes, not after HDU {index - 1}: its "
                            "header (PCOUNT, GCOUNT, NAXISn) is corrupt; it and the HDUs after "
                            "it are not read")]
        if info["hdrLoc"] != at:
            return [problem(path, f"astropy reads HDU {index} at byte {info['hdrLoc']}, "
                            f"fpclass found it at byte {at}: it and the HDUs after it are not "
                            "read")]
        ident = (index, hdu.name, hdu.header.get("EXTVER", 1))
        tasks = hdu_tasks(fits, path, size, hdu, info)
        tasks += header_cards(path, info["hdrLoc"], info["datLoc"])
    except Exception as e:  # a header card astropy refuses when it is used
        return _unreadable(path, index, e)
    return info, ident, tasks


def _unreadable(path, index, e) -> list:
    if not index:
        raise ReaderError(f"not a readable FITS file: {_line(e)}") from None
    return [problem(path, f"HDU {index} cannot be read ({_line(e)}): it and the HDUs after it "
                    "are not read")]



def _huge_axes(path: str, begin: int, size: int) -> str:
    """"NAXIS = n" when the header at byte `begin` declares more than 999 axes, else "":
    astropy builds a list of that many axes before anything can be checked (2^31: minutes)."""
    if begin >= size:
        return ""
    with open_binary(path) as f:
        f.seek(begin)
        while True:
            block = f.read(2880)
            for at in range(0, len(block) - 79, 80):
                card = block[at:at + 80]
                if card[:8] == b"END     ":
                    return ""
                m = AXES_CARD.match(card)
                if m and abs(int(m[2])) > 999:
                    return f"{m[1].decode().strip()} = {int(m[2])}"
            if len(block) < 2880:
                return ""


def _zeros(path: str, begin: int, end: int, f=None) -> bool:
    """Whether bytes [begin, end) of `path` (open as `f`, if given) are all zero (padding)."""
    step = 2880  # a header's first block first: most are not zeros
    with contextlib.nullcontext(f) if f is not None else open_binary(path) as f:
        f.seek(begin)
        while begin < end:
            block = f.read(min(step, end - begin))
            if not block or block.count(0) != len(block):
                return False
            begin, step = begin + len(block), 1 << 20
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
