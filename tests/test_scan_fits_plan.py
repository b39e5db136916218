"""FITS header cards found at their cost (issue 22): a header holding nothing a non-finite value
needs (a NaN/Inf word, a three-digit exponent, 300 digits) is passed over without the regex.
Against astropy: every card of a file of many HDUs that astropy reads as a non-finite float, or
refuses holding NaN/Inf text, is a task of the report, and no other card is."""

import math
import re
import warnings

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

from fpclass.scan import scan  # noqa: E402

#: Header values written as raw card text: some astropy reads as Inf or refuses (NaN/Inf text),
#: most it reads as finite numbers or text that only looks suspect.
VALUES = ["1.5", "1E999", "-1e999", "1.0D+999", "1d999", "+1E+999", "NAN", "nan", "-Inf",
          "inf", "1E+308", "1E-999", "9" * 68, "'NAN'", "'INFO'", "1.0E000", "2.5D-10", "T",
          "1E99", "123456789"]


def _write(path, hdus=24):
    rng = np.random.default_rng(1)
    hdul = [fits.PrimaryHDU()]
    for i in range(hdus):
        hdu = fits.ImageHDU(np.ones((2, 3), np.float32), name=f"IM{i}")
        for k in range(3):
            hdu.header[f"KEY{k}"] = 0.0
        hdu.header["COMMENT"] = "NaN and INF in a comment are text" if i % 5 == 0 else "plain"
        hdul.append(hdu)
    fits.HDUList(hdul).writeto(path)
    data = bytearray(path.read_bytes())
    # every third HDU gets values patched in (the rest hold no suspect text at all)
    for at in [m.start() for m in re.finditer(rb"KEY[0-9]    = ", data)]:
        if (at // 2880) % 3:
            continue
        text = VALUES[int(rng.integers(len(VALUES)))].encode()
        data[at + 10:at + 80] = text.rjust(20).ljust(70)
    # and HDUs whose only suspect text is one value of one kind
    keys = [m.start() for m in re.finditer(rb"KEY0    = ", data)]
    for hdu, text in {2: b"-Inf", 6: b"nan", 8: b"1D999", 12: b"+1E+999"}.items():
        assert (keys[hdu] // 2880) % 3 and hdu % 5
        data[keys[hdu] + 10:keys[hdu] + 80] = text.rjust(20).ljust(70)
    path.write_bytes(bytes(data))


def _astropy_cards(path) -> dict:
    """{"HDU@KEY": "checked" | "unchecked"}: astropy's reading of each card as the file holds it
    (astropy's HDU list gives each header's place; a card it refuses is rewritten there)."""
    out = {}
    raw = path.read_bytes()
    with warnings.catch_warnings(), fits.open(path) as hdul:
        warnings.simplefilter("ignore")  # astropy warns of the cards it refuses
        for hdu in hdul:
            info = hdu.fileinfo()
            header = raw[info["hdrLoc"]:info["datLoc"]]
            for at in range(0, len(header), 80):
                image = header[at:at + 80].decode("ascii")
                if not image.startswith("KEY"):
                    continue
                name = f"{hdu.name or 'PRIMARY'}@{image[:8].strip()}"
                try:
                    value = fits.Card.fromstring(image).value
                except fits.VerifyError:
                    field = image[10:].split("/")[0].strip()
                    if re.fullmatch(r"[+-]?(NAN|INF|INFINITY)", field, re.IGNORECASE):
                        out[name] = "unchecked"
                    continue
                if isinstance(value, float) and not math.isfinite(value):
                    out[name] = "checked"
    return out


def test_header_cards_of_many_hdus_are_astropys(tmp_path):
    path = tmp_path / "many.fits"
    _write(path)
    want = _astropy_cards(path)
    assert len(want) >= 5 and "unchecked" in want.values() and "checked" in want.values()
    report = scan([path])
    got = {t.name: t.status for t in report.tensors if "@" in t.name}
    assert got == want
