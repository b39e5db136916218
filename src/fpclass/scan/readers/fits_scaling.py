"""FITS header values, and the physical values of scaled data (BSCALE/BZERO images, TSCALn/
TZEROn table columns) computed as astropy computes them, with FITS's blanks.

astropy gives a scaled integer image in float32 (BITPIX 8, 16) or float64 (BITPIX 32, 64), a
scaled float image in its own precision, and a scaled table column in float64: the stored values
cast to that type, multiplied by the scale (cast to the type: 1e39 is Inf in float32) unless it
is 1, then the zero added unless it is 0. So a non-finite scale or zero makes every value
non-finite, and a finite one may take values past the type's range (Inf), each counted where
astropy has it. The "pseudo-unsigned" scalings (scale 1, zero 2^(n-1), or -128 for BITPIX 8
images) give integers.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

import numpy as np

from . import require
from ..missing import fits_blanks, fits_integer_blank
from ..storage.reads import open_binary
from .reporting import unchecked, values_task


def _astropy():
    return require("astropy.io.fits", "fits", "reading FITS files")


def _line(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return " ".join(text.split())


class Bad(Exception):
    """A header that does not describe its data properly; the message is the reason."""


def header_int(h, key, default=None) -> int:
    value = h.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise Bad(f"header keyword {key} = {value!r}: a non-negative integer is required")
    return int(value)


def header_number(h, key, default) -> float:
    value = h.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise Bad(f"header keyword {key} = {value!r}: a number is required")
    try:
        return float(value)
    except OverflowError:  # an integer keyword of 400 digits: astropy cannot scale by it either
        raise Bad(f"header keyword {key} = {value}: out of the float range") from None


def axes(h, prefix="NAXIS") -> tuple:
    """The data shape in NumPy order (FITS lists the fastest axis first)."""
    n = header_int(h, prefix)
    return tuple(header_int(h, f"{prefix}{i}") for i in range(n, 0, -1))


@dataclass(frozen=True)
class Scaling:
    """How stored values become physical ones: stored dtype `raw` (big-endian), physical dtype
    `physical`, scale and zero, and the integer blank (None: none). Carried in a task as JSON."""

    raw: str
    physical: str
    scale: float
    zero: float
    blank: int | None = None

    def encode(self) -> str:
        return json.dumps(asdict(self))  # NaN and Inf as JSON's NaN / Infinity tokens

    @classmethod
    def decode(cls, text: str) -> "Scaling":
        return cls(**json.loads(text))

    @property
    def label(self) -> str:
        return f"{np.dtype(self.raw).name} scaled to {np.dtype(self.physical).name}"

    def values(self, raw: np.ndarray) -> np.ma.MaskedArray:
        """The physical values of stored values `raw`, as astropy computes them; blanks masked."""
        data = raw.astype(self.physical)
        with np.errstate(all="ignore"):  # what overflows is Inf, as astropy gives it
            if self.scale != 1:
                np.multiply(data, np.asarray(self.scale, data.dtype), out=data)
            if self.zero != 0:
                np.add(data, np.asarray(self.zero, data.dtype), out=data)
        mask = fits_blanks(raw, self.blank)
        return np.ma.MaskedArray(data, np.ma.nomask if mask is None else mask)


#: The integer dtypes astropy gives a pseudo-unsigned image (scale 1, this zero).
_UNSIGNED_IMAGES = {8: -128, 16: 1 << 15, 32: 1 << 31, 64: 1 << 63}
#: The same for table columns, by TFORM letter.
_UNSIGNED_COLUMNS = {"I": 1 << 15, "J": 1 << 31, "K": 1 << 63}
#: Table column type codes (TFORM letters) of floats → their big-endian element.
FLOAT_COLUMNS = {"E": ">f4", "D": ">f8", "C": ">c8", "M": ">c16"}
BITPIX_DTYPES = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}


def image_scaling(bitpix: int, bscale: float, bzero: float, blank) -> Scaling | None:
    """The scaling of an image's stored values, or None when astropy gives them unscaled or as
    integers (no scaling, or a pseudo-unsigned one)."""
    if (bscale, bzero) == (1, 0):
        return None
    if bitpix > 0 and bscale == 1 and bzero == _UNSIGNED_IMAGES[bitpix]:
        return None
    physical = "<f4" if bitpix in (8, 16, -32) else "<f8"
    return Scaling(BITPIX_DTYPES[bitpix], physical, bscale, bzero,
                   fits_integer_blank(blank) if bitpix > 0 else None)


def column_scaling(code: str, raw: str, scale, zero, null) -> Scaling | str | None:
    """The scaling of a B/I/J/K/E/D table column (None: unscaled; a string: why it is not
    read). astropy scales in float64 when TSCALn is not 1 or TZEROn not 0."""
    scale = 1 if scale in ("", None) else scale
    zero = 0 if zero in ("", None) else zero
    for value in (scale, zero):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            return f"TSCAL/TZERO {value!r} is not a number"
    if scale == 1 and zero == 0:
        return None
    if code in _UNSIGNED_COLUMNS and zero == _UNSIGNED_COLUMNS[code]:
        if scale == 1:
            return None  # pseudo-unsigned integers
        return "an unsigned integer column (TZERO 2^(n-1)) with a TSCAL: astropy cannot scale it"
    try:
        scale, zero = float(scale), float(zero)
    except OverflowError:
        return "TSCAL/TZERO out of the float range"
    return Scaling(np.dtype(raw).newbyteorder(">").str, "<f8", scale, zero,
                   fits_integer_blank(null) if np.dtype(raw).kind in "iu" else None)


#: Header text that may be a non-finite value: NaN or Inf words, or numbers astropy parses to
#: Inf (over 300 digits, or a three-digit exponent). Only the cards it finds are parsed, so a
#: header of a million cards costs one regex scan.
#: The lookahead names the alternatives' first letters: re then skips other bytes without trying
#: each alternative (2.2x faster on astropy's headers). An alternative added here needs its word
#: in _SUSPECT_WORDS too (suspect_free runs first).
_SUSPECT = re.compile(rb"(?=[NIEDnied0-9])(?:NAN|INF|[0-9]{300}|[ED][+]?[0-9]{3})",
                      re.IGNORECASE)
_NONFINITE_TEXT = re.compile(r"[+-]?(NAN|INF|INFINITY)", re.IGNORECASE)
#: What _SUSPECT needs in order to match, as words of the header mapped by _SUSPECT_BYTES (any
#: case; digits to "0", E and D to "E", the letters of NAN and INF to themselves, all else to a
#: space, "+" dropped): a header holding none of them has no suspect card, found by a few
#: substring searches (10 us a 2880-byte block, against 25 us for the regex).
_SUSPECT_BYTES = bytes(dict(zip(b"0123456789EeDdNnAaIiFf", b"0000000000EEEENNAAIIFF"))
                       .get(b, 32) for b in range(256))
_SUSPECT_WORDS = (b"NAN", b"INF", b"E000", b"0" * 300)


def suspect_free(text: bytes) -> bool:
    """Does header `text` hold none of the words _SUSPECT needs in order to match? (A superset
    test: where it says False, the regex is run; tests check it against _SUSPECT.)"""
    words = text.translate(_SUSPECT_BYTES, b"+")
    return not any(w in words for w in _SUSPECT_WORDS)


def header_cards(path: str, begin: int, end: int) -> list:
    """Tasks (named "@KEY") for the header cards in bytes [begin, end) of `path` whose value is
    not finite: checked where astropy reads a float ("1E999" is Inf), unchecked where astropy
    refuses the card (NAN, INF: FITS has no such values). Finite keywords give no task."""
    with open_binary(path) as f:
        f.seek(begin)
        text = f.read(max(0, end - begin))
    return header_text_cards(path, text)


def header_text_cards(path: str, text: bytes) -> list:
    """header_cards of header bytes `text` already read."""
    if suspect_free(text):
        return []
    cards = sorted({m.start() // 80 for m in _SUSPECT.finditer(text)})
    if not cards:
        return []
    Card = _astropy().Card
    tasks = []
    for k in cards:
        image = text[k * 80:(k + 1) * 80].decode("ascii", "replace")
        if image[8:10] != "= ":
            continue  # commentary cards (COMMENT, HISTORY, blank keyword, END) hold no value
        key = image[:8].strip()
        try:
            value = Card.fromstring(image).value
        except Exception:  # astropy raises VerifyError for an unparsable value
            field = image[10:].split("/")[0].strip()
            if _NONFINITE_TEXT.fullmatch(field):
                tasks.append(unchecked(path, f"@{key}", "header card", (), f"header keyword "
                                       f"{key} = {field}: FITS has no NaN or Inf value and "
                                       "astropy cannot read this card: not checked"))
            continue
        if isinstance(value, (float, complex)) and not isinstance(value, bool):
            if not np.isfinite(value):
                tasks.append(values_task(path, f"@{key}", np.asarray(value)))
    return tasks
