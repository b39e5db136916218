"""Plain image headers read at their cost (issue 22): the header of a primary HDU (SIMPLE = T, no
GROUPS) or an IMAGE extension, read as bytes and parsed once by astropy's Header.fromstring, its
place and data size computed from that header as astropy computes them, and no astropy HDU
object built. astropy builds an HDU from a quick parse of a header's value cards (keyword ->
last card) and reads it again in full on first use; a header is taken here only where the two
cannot differ on anything an image depends on (the cards below), else None: astropy's HDU list
reads it (the FITS reader's walk), as it reads every table, random-groups or unknown HDU."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .fits_scaling import BITPIX_DTYPES

BLOCK = 2880
END_CARD = b"END" + b" " * 77
#: Header blocks read at most; a longer header is left to astropy.
MAX_BLOCKS = 64
#: The first END card of a block, where both of astropy's parsers stop.
_FIRST_END = re.compile(rb"(?:.{80})*?" + END_CARD, re.S)
_SIMPLE = re.compile(rb"SIMPLE  = {20}T *(?:/.*)?", re.S)
_IMAGE = re.compile(rb"XTENSION= 'IMAGE *' *(?:/.*)?", re.S)
#: The keywords astropy builds an image HDU from (its class, size and scaling), searched in the
#: header in upper case (4x faster than re.IGNORECASE): each must be a standard card of its
#: own, or stand in a value or a comment.
_BUILT_FROM = re.compile(rb"SIMPLE|XTENSION|GROUPS|BITPIX|NAXIS[0-9]*|PCOUNT|GCOUNT|BSCALE|"
                         rb"BZERO|BLANK")
#: Every place a card may declare its number of axes or end the FITS reader's search of a file. No
#: match hides one that starts inside it (none holds another's first letter followed by the
#: rest of that word), so non-overlapping matches find them all.
_AXES_AT = re.compile(rb"(?:NAXIS   |ZNAXIS  )= |END     ")
#: A card declaring a number of axes, the number in group 2.
AXES_CARD = re.compile(rb"(NAXIS   |ZNAXIS  )= +([+-]?[0-9]+) ")
_DATA_KEYS = ("BITPIX", "PCOUNT", "GCOUNT", "BSCALE", "BZERO", "BLANK")


@dataclass(frozen=True)
class PlainImage:
    """A plain image header at byte `begin`: `text` (its whole blocks), `header` (astropy's Header
    of it), `values` (the data keywords present, each parsed once: BITPIX, NAXISn, PCOUNT,
    GCOUNT, BSCALE, BZERO, BLANK), `extension` (an IMAGE extension, not a primary HDU), the HDU's
    `name` and `ver` as astropy gives them, and `info` as astropy's fileinfo() gives it
    (hdrLoc, datLoc, datSpan: the data padded to whole blocks)."""

    text: bytes
    header: object
    values: dict
    extension: bool
    name: str
    ver: object
    info: dict


def header_text(f, begin: int) -> tuple:
    """(the header's bytes through the block of its END card, the END card's place in them) read
    from file object `f` at byte `begin`; (b"", -1) when the file ends first (astropy then
    reads the header another way) or the header is longer than MAX_BLOCKS."""
    f.seek(begin)
    blocks = []
    for _ in range(MAX_BLOCKS):
        block = f.read(BLOCK)
        if len(block) < BLOCK:
            return b"", -1
        blocks.append(block)
        m = _FIRST_END.match(block)
        if m:
            return b"".join(blocks), (len(blocks) - 1) * BLOCK + m.end() - 80
    return b"", -1


def huge_axes(text: bytes, end: int) -> str:
    """"NAXIS = n" when a card before byte `end` of header `text` declares more than 999 axes
    before any card starting "END     " (as fits._huge_axes finds it in a file), else ""."""
    for m in _AXES_AT.finditer(text, 0, end):
        at = m.start()
        if at % 80 == 0:
            if text[at:at + 3] == b"END":
                return ""
            card = AXES_CARD.match(text, at, at + 80)
            if card and abs(int(card[2])) > 999:
                return f"{card[1].decode().strip()} = {int(card[2])}"
    return ""


def _standard_cards(text: bytes, end: int) -> set | None:
    """The keywords astropy builds an image from that `text` holds (before byte `end`), when each
    is one standard card ("KEYWORD = value", upper case, in columns 1-10) not continued by a
    CONTINUE card, and every other place these words appear is inside the value or comment of
    another card (not a HIERARCH card): the quick parse and Header then read the same card for
    each. Else None."""
    seen = set()
    upper = text.upper()
    for m in _BUILT_FROM.finditer(upper, 0, end):
        start = m.start() - m.start() % 80
        if m.start() - start >= 10:
            if upper[start:start + 8] == b"HIERARCH":
                return None
            continue
        word = m.group()  # (a word in columns 2-10 fails the standard form)
        if word in seen or text[start:start + 10] != word.ljust(8) + b"= " or \
                text[start + 80:start + 88] == b"CONTINUE":
            return None
        seen.add(word)
    return seen


def _count(value, low=0, high=None) -> bool:
    return type(value) is int and value >= low and (high is None or value <= high)


def plain_image(header_class, text: bytes, end: int, begin: int, first: bool) -> PlainImage | None:
    """The PlainImage of header `text` (END card at byte `end`) read at byte `begin`, parsed by
    `header_class` (astropy's Header), or None where astropy's HDU list must read it: not a
    plain image header, or one astropy would read otherwise (a value it cannot parse, a data
    keyword that is not a count astropy can size the data by). `first`: the file's first HDU,
    whose EXTEND keyword astropy's open reads."""
    card0 = text[:80]
    extension = _IMAGE.fullmatch(card0) is not None
    if not extension and _SIMPLE.fullmatch(card0) is None:
        return None
    seen = _standard_cards(text, end)
    # GROUPS: random groups to astropy; XTENSION in a primary header: an extension to _image
    if seen is None or b"GROUPS" in seen or (not extension and b"XTENSION" in seen):
        return None
    try:  # a missing keyword, a card astropy cannot parse (or a byte not ASCII) raise here
        header = header_class.fromstring(text.decode("ascii"))
        values = {key: header[key] for key in _DATA_KEYS if key.encode() in seen}
        values["NAXIS"] = naxis = header["NAXIS"]
        if type(values["BITPIX"]) is not int or values["BITPIX"] not in BITPIX_DTYPES or \
                not _count(naxis, 0, 999):
            return None
        for i in range(1, naxis + 1):
            values[f"NAXIS{i}"] = header[f"NAXIS{i}"]
            if not _count(values[f"NAXIS{i}"]):
                return None
        pcount, gcount = values.get("PCOUNT", 0), values.get("GCOUNT", 1)
        if not (_count(pcount) and _count(gcount)):
            return None  # astropy sizes the data by them, whatever they are
        if first and "EXTEND" in header:
            header["EXTEND"]  # astropy's open reads it: a card it cannot parse fails there
        name = str(header.get("EXTNAME", "" if extension else "PRIMARY"))
        ver = header.get("EXTVER", 1)
    except Exception:  # astropy's HDU list says what it makes of it
        return None
    nbytes = 0
    if naxis:
        nbytes = abs(values["BITPIX"]) * gcount * \
            (pcount + math.prod(values[f"NAXIS{i}"] for i in range(1, naxis + 1))) // 8
    info = {"hdrLoc": begin, "datLoc": begin + len(text), "datSpan": -(-nbytes // BLOCK) * BLOCK}
    return PlainImage(text, header, values, extension, name, ver, info)
