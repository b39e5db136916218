"""FITS plain image headers read at their cost (issue 22, readers/fits_headers.py): each HDU
fits_headers takes is where astropy's HDU list has it, of its kind and name, and every file,
edited or mutated at each rule fits_headers keeps, is planned exactly as astropy's HDU list
reading every HDU plans it (the reading before fits_headers)."""

import dataclasses
import io
import warnings

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

from fpclass.scan import scan  # noqa: E402
from fpclass.scan.readers import ReaderError  # noqa: E402
from fpclass.scan.readers import fits as fits_reader  # noqa: E402
from fpclass.scan.readers import fits_headers  # noqa: E402


def _hdus(tmp_path) -> list:
    """[(header cards, data bytes)] of a file of images of every kind fits_headers may take or
    leave (scaled, integer, empty, 3-d, repeated names), a table and a tile-compressed image."""
    primary = fits.PrimaryHDU(np.array([[1, np.nan]], np.float32))
    scaled = fits.ImageHDU(np.array([[1, -32768, 7]], np.int16), name="I16")
    scaled.header["BSCALE"], scaled.header["BZERO"], scaled.header["BLANK"] = 2.0, 1.5, -32768
    table = fits.BinTableHDU.from_columns([fits.Column("x", "E", array=np.array([1, np.nan]))],
                                          name="TAB")
    hdul = fits.HDUList([
        primary, fits.ImageHDU(np.array([np.inf, 1, 2]), name="SCI"), scaled,
        fits.ImageHDU(np.zeros((2, 2, 2), np.float32), name="SCI", ver=2), fits.ImageHDU(),
        table, fits.CompImageHDU(np.ones((4, 4), np.float32), compression_type="GZIP_1"),
        fits.ImageHDU(np.arange(6, dtype=np.int32).reshape(2, 3))])
    path = tmp_path / "base.fits"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy warns of the scaled image's unused BSCALE
        hdul.writeto(path)
    raw = path.read_bytes()
    out = []
    with fits.open(path, disable_image_compression=True) as read:
        for hdu in read:
            info = hdu.fileinfo()
            head = raw[info["hdrLoc"]:info["datLoc"]]
            cards = [head[at:at + 80] for at in range(0, len(head), 80)]
            out.append((cards[:cards.index(fits_headers.END_CARD)],
                        raw[info["datLoc"]:info["datLoc"] + info["datSpan"]]))
    return out


def _file(hdus, tail=b"") -> bytes:
    out = b""
    for cards, data in hdus:
        head = b"".join(cards) + fits_headers.END_CARD
        out += head + b" " * (-len(head) % 2880) + data
    return out + tail


def _card(text: str) -> bytes:
    return text.encode("latin-1")[:80].ljust(80)


KEYS = ["SIMPLE", "XTENSION", "BITPIX", "NAXIS", "NAXIS1", "NAXIS2", "NAXIS3", "PCOUNT", "GCOUNT",
        "GROUPS", "BSCALE", "BZERO", "BLANK", "EXTEND", "EXTNAME", "EXTVER", "ZNAXIS", "TFORM1",
        "END", "FOO"]
CARD_VALUES = ["T", "F", "-32", "16", "8", "0", "1", "2", "3", "-1", "1000", "2.0", "1E999",
               "'IMAGE   '", "'BINTABLE'", "'image'", "'SCI'", "'a: 1'", "NAN", "", "'x",
               "99999999999999999999", "1.0E10"]
CARD_FORMS = ["{k:8}= {v:>20}", "{k:8}= {v:>20} / {k} NAXIS1 in a comment", "{k}= {v}",
              "{lk:8}= {v:>20}", " {k:7}= {v}", "HIERARCH {k} = {v}", "CONTINUE  '{v}'",
              "COMMENT {k} {v}", "{k:8}={v}", "{k:8}  {v}"]


def _mutate(hdus, rng) -> tuple:
    """A copy of `hdus` with one to three seeded mutations, and bytes to add after the file."""
    hdus = [(list(cards), data) for cards, data in hdus]
    tail = b""
    for _ in range(int(rng.integers(1, 4))):
        i = int(rng.integers(len(hdus)))
        cards, data = hdus[i]
        j = int(rng.integers(len(cards)))
        op = rng.choice(["replace", "insert", "delete", "dup", "byte", "tail", "pad"])
        k, v = str(rng.choice(KEYS)), str(rng.choice(CARD_VALUES))
        card = _card(str(rng.choice(CARD_FORMS)).format(k=k, lk=k.lower(), v=v))
        if op == "replace":
            cards[j] = card
        elif op == "insert":
            cards.insert(j, card)
        elif op == "delete" and len(cards) > 1:
            del cards[j]
        elif op == "dup":
            cards.insert(int(rng.integers(len(cards) + 1)), cards[j])
        elif op == "byte":
            at = int(rng.integers(80))
            b = bytes([int(rng.choice([0, 9, 0x80, 0xFF, 61, 39, 97]))])
            cards[j] = cards[j][:at] + b + cards[j][at + 1:]
        elif op == "pad":  # an END variant or a header cut short
            cards.append(rng.choice([b"END" + b"x" * 77, b"END", b"END     =", b"\0" * 80,
                                     b"E" * 80]).ljust(80))
        else:
            tail = rng.choice([b"\0" * 2880, b"\0" * 100, b" " * 2880, b"SIMPLE", b"x" * 2880,
                               _file([hdus[-1]])[:5000], b""])
        hdus[i] = (cards, data)
    return hdus, tail


def _plan(path):
    try:
        return fits_reader.plan(str(path))
    except ReaderError as e:
        return f"ReaderError: {e}"


def test_plain_headers_are_placed_and_named_as_astropy_reads_them(tmp_path, monkeypatch):
    """Every HDU fits_headers takes is where astropy's HDU list has it, of the same kind and name;
    it takes the plain images (5 of the file's 8 HDUs) and leaves the table and compressed
    image to astropy; the file is then planned as astropy alone would plan it."""
    path = tmp_path / "all.fits"
    path.write_bytes(_file(_hdus(tmp_path)))
    taken = []
    real = fits_headers.plain_image
    monkeypatch.setattr(fits_reader, "plain_image",
                        lambda *a, **k: taken.append(real(*a, **k)) or taken[-1])
    new = _plan(path)
    with fits.open(path, disable_image_compression=True) as hdul:
        for hdu, image in zip(hdul, taken, strict=True):
            assert (image is None) == (not isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU)))
            if image is None:
                continue
            info = hdu.fileinfo()
            assert image.info == {k: info[k] for k in ("hdrLoc", "datLoc", "datSpan")}
            assert image.extension == isinstance(hdu, fits.ImageHDU)
            assert (image.name, image.ver) == (hdu.name, hdu.ver)
            assert image.header == hdu.header or not image.extension  # open adds EXTEND to 0
    assert sum(t is not None for t in taken) == 6
    monkeypatch.setattr(fits_reader, "plain_image", lambda *a, **k: None)
    assert new == _plan(path)


def test_a_file_of_plain_images_is_planned_without_astropys_hdu_list(tmp_path, monkeypatch):
    path = tmp_path / "plain.fits"
    fits.HDUList([fits.PrimaryHDU()] + [fits.ImageHDU(np.ones((3, 4), np.float32), name=f"I{i}")
                                        for i in range(5)]).writeto(path)
    report = scan([path])
    monkeypatch.setattr(fits, "open", lambda *a, **k: pytest.fail("astropy's HDU list opened"))
    again = scan([path])
    assert [(t.name, t.status) for t in again.tensors] == [(t.name, t.status)
                                                           for t in report.tensors]
    assert [t.name for t in again.tensors] == [f"I{i}" for i in range(5)]


def _both_plans(path, monkeypatch) -> tuple:
    """(the plan, the plan when astropy's HDU list reads every HDU, how many HDUs fits_headers
    took)."""
    taken = []
    real = fits_headers.plain_image
    monkeypatch.setattr(fits_reader, "plain_image",
                        lambda *a, **k: taken.append(real(*a, **k)) or taken[-1])
    new = _plan(path)
    monkeypatch.setattr(fits_reader, "header_text", lambda *a, **k: (b"", -1))
    monkeypatch.setattr(fits_reader, "_no_hdu_at", lambda *a, **k: False)
    want = _plan(path)
    monkeypatch.undo()
    return new, want, sum(t is not None for t in taken)


def _edit(hdu, at, cards=(), drop=0, plain=False):
    """An edit of `hdus`: `cards` put in place of `drop` cards from card `at` of HDU `hdu` (a
    keyword: the card of that keyword); `plain`: of the plain images only (astropy's HDU list
    is then not needed for the others)."""
    def edit(hdus):
        head, data = hdus[hdu]
        k = at if isinstance(at, int) else [c[:8].rstrip() for c in head].index(at.encode())
        hdus[hdu] = (head[:k] + [_card(c) for c in cards] + head[k + drop:], data)
        return _file(hdus[:5] if plain else hdus)
    return edit


#: Targeted edits, one per rule of fits_headers: each makes astropy read the HDU otherwise
#: than as a plain image, or fail, and a reader without that rule would differ from it.
EDITS = {
    "HIERARCH keyword after spaces": _edit(3, "NAXIS3", ["HIERARCH   NAXIS3 = 2"], 1),
    "HIERARCH keyword": _edit(3, "NAXIS3", ["HIERARCH NAXIS3 = 2"], 1),
    "CONTINUE after XTENSION": _edit(1, 1, ["CONTINUE  'X'"]),
    "CONTINUE of no string after XTENSION": _edit(1, 1, ["CONTINUE  5"]),
    "CONTINUE after NAXIS1": _edit(1, "PCOUNT", ["CONTINUE  '5'"]),
    "record-valued PCOUNT": _edit(1, "PCOUNT", ["PCOUNT  = 'a: 5'"], 1),
    "record-valued NAXIS1": _edit(1, "NAXIS1", ["NAXIS1  = 'a: 3'"], 1),
    "NAXIS1 twice": _edit(1, "PCOUNT", ["NAXIS1  =                    2"]),
    "BITPIX twice, the same": _edit(1, "NAXIS", ["BITPIX  =                  -64"]),
    "EXTEND unparsable": _edit(0, "EXTEND", ["EXTEND  = 'x"], 1),
    "EXTEND unparsable, plain images": _edit(0, "EXTEND", ["EXTEND  = 'x"], 1, plain=True),
    "no EXTEND, plain images": _edit(0, "EXTEND", [], 1, plain=True),
    "EXTEND false": _edit(0, "EXTEND", ["EXTEND  =                    F"], 1),
    "no EXTEND": _edit(0, "EXTEND", [], 1),
    "GROUPS in a primary": _edit(0, "EXTEND", ["GROUPS  =                    T"]),
    "GROUPS false": _edit(0, "EXTEND", ["GROUPS  =                    F"]),
    "XTENSION in a primary": _edit(0, "EXTEND", ["XTENSION= 'IMAGE   '", "PCOUNT  = 2"]),
    "XTENSION 5 in a primary": _edit(0, "EXTEND", ["XTENSION= 5", "PCOUNT  = 2"]),
    "SIMPLE in an extension": _edit(1, "PCOUNT", ["SIMPLE  =                    T"]),
    "non-standard NAXIS1": _edit(1, "NAXIS1", ["NAXIS1= 3"], 1),
    "value indicator at 7": _edit(1, "NAXIS1", ["NAXIS12= 3"]),
    "shifted NAXIS1": _edit(1, "NAXIS1", [" NAXIS1 = 3"], 1),
    "lower-case naxis1": _edit(1, "NAXIS1", ["naxis1  =                    3"], 1),
    "string NAXIS1": _edit(1, "NAXIS1", ["NAXIS1  = '3'"], 1),
    "float NAXIS1": _edit(1, "NAXIS1", ["NAXIS1  = 3.0"], 1),
    "negative NAXIS1": _edit(1, "NAXIS1", ["NAXIS1  = -3"], 1),
    "float BITPIX": _edit(1, "BITPIX", ["BITPIX  = -64.0"], 1),
    "BITPIX 12": _edit(1, "BITPIX", ["BITPIX  = 12"], 1),
    "NAXIS 1000": _edit(1, "NAXIS", ["NAXIS   = 1000"], 1),
    "NAXIS -1": _edit(1, "NAXIS", ["NAXIS   = -1"], 1),
    "ZNAXIS 5000 in an image": _edit(1, "PCOUNT", ["ZNAXIS  = 5000"]),
    "huge NAXIS after END     x": _edit(1, "PCOUNT", ["END     x", "ZNAXIS  = 5000"]),
    "END x card": _edit(1, "PCOUNT", ["END  x"]),
    "ENDTIME card": _edit(1, "PCOUNT", ["ENDTIME = 5"]),
    "PCOUNT 2": _edit(1, "PCOUNT", ["PCOUNT  = 2"], 1),
    "PCOUNT -1": _edit(1, "PCOUNT", ["PCOUNT  = -1"], 1),
    "PCOUNT 2.5": _edit(1, "PCOUNT", ["PCOUNT  = 2.5"], 1),
    "GCOUNT 0": _edit(1, "GCOUNT", ["GCOUNT  = 0"], 1),
    "GCOUNT 3": _edit(1, "GCOUNT", ["GCOUNT  = 3"], 1),
    "no PCOUNT, GCOUNT 2": _edit(1, "PCOUNT", ["GCOUNT  = 2"], 2),
    "PCOUNT in a primary": _edit(0, "EXTEND", ["PCOUNT  = 2"]),
    "BSCALE text": _edit(1, "PCOUNT", ["BSCALE  = 'abc'"]),
    "BSCALE 1E999": _edit(2, "BSCALE", ["BSCALE  = 1E999"], 1),
    "BSCALE unparsable": _edit(2, "BSCALE", ["BSCALE  = 1.0.0"], 1),
    "BLANK undefined": _edit(2, "BLANK", ["BLANK   ="], 1),
    "BLANK 2.5": _edit(2, "BLANK", ["BLANK   = 2.5"], 1),
    "EXTNAME unparsable": _edit(1, "EXTNAME", ["EXTNAME = 'SCI"], 1),
    "EXTNAME record-valued": _edit(1, "EXTNAME", ["EXTNAME = 'SCI: 1'"], 1),
    "EXTNAME number": _edit(1, "EXTNAME", ["EXTNAME = 7"], 1),
    "byte not ASCII": _edit(1, "EXTNAME", ["COMMENT caf\xe9"]),
    "NUL and TAB bytes": _edit(1, "EXTNAME", ["COMMENT \0\t\0"]),
    "TFORM1 twice in an image": _edit(1, "EXTNAME", ["TFORM1  = 'E'", "TFORM1  = 'D'"]),
    "XTENSION lower case": _edit(1, 0, ["XTENSION= 'image   '"], 1),
    "XTENSION unpadded": _edit(1, 0, ["XTENSION= 'IMAGE' / an image"], 1),
    "XTENSION with junk": _edit(1, 0, ["XTENSION= 'IMAGE   ' junk"], 1),
    "SIMPLE off column 30": _edit(0, 0, ["SIMPLE  = T"], 1),
    "SIMPLE = F": _edit(0, 0, ["SIMPLE  =                    F"], 1),
    "SIMPLE = F, plain images": _edit(0, 0, ["SIMPLE  =                    F"], 1, plain=True),
    "SIMPLE in a second HDU": _edit(1, 0, ["SIMPLE  =                    T"], 1),
    "header of two blocks": _edit(1, "EXTNAME", [f"COMMENT {i}" for i in range(40)]),
    "header of 70 blocks": _edit(1, "EXTNAME", [f"COMMENT {i}" for i in range(36 * 70)]),
}


@pytest.mark.parametrize("edit", EDITS)
def test_each_rule_of_plain_headers_keeps_astropys_reading(tmp_path, monkeypatch, edit):
    path = tmp_path / "edited.fits"
    path.write_bytes(EDITS[edit]([(list(c), d) for c, d in _hdus(tmp_path)]))
    new, want, _ = _both_plans(path, monkeypatch)
    assert new == want


@pytest.mark.parametrize("cut, taken, words", [(100, 5, "after the last HDU"),
                                               (2000, 5, "after the last HDU"),
                                               (2880 + 500, 6, "inside its last HDU")])
def test_a_file_cut_short_is_read_as_astropy_reads_it(tmp_path, monkeypatch, cut, taken, words):
    hdus = _hdus(tmp_path)
    path = tmp_path / "cut.fits"
    path.write_bytes(_file(hdus[:-1]) + _file(hdus[-1:])[:cut])
    new, want, n = _both_plans(path, monkeypatch)
    assert new == want and n == taken
    assert any(words in t.reason for t in new if t.reason)


@pytest.mark.parametrize("chunk", range(4))
def test_mutated_headers_are_planned_as_astropy_alone_plans_them(tmp_path, monkeypatch, chunk):
    """Seeded mutations of the cards fits_headers reads (each keyword astropy builds an image
    from, in standard, non-standard, lower-case, HIERARCH, CONTINUE, record-valued and commentary
    forms; duplicated, deleted and moved cards; END variants; stray bytes; bytes after the file):
    the plan, with its problems, offsets and reasons, is the one astropy's HDU list gives when it
    reads every HDU (the reading before fits_headers)."""
    base = _hdus(tmp_path)
    rng = np.random.default_rng(chunk)
    taken = 0
    for case in range(60):
        hdus, tail = _mutate(base, rng)
        path = tmp_path / f"m{chunk}-{case}.fits"
        path.write_bytes(_file(hdus, tail))
        new, want, n = _both_plans(path, monkeypatch)
        assert new == want, (case, path.read_bytes()[:2880])
        taken += n
    assert taken > 100


@pytest.mark.parametrize("wrong", ["span", "unreadable"])
def test_astropy_disagreeing_with_fits_headers_is_a_problem(tmp_path, monkeypatch, wrong):
    """Where astropy's HDU list, reading the table, does not find the HDUs before it where
    fits_headers put them (a rule gone wrong: HDU 2 given a block too many, or taken where
    astropy cannot read it), the table and the HDUs after it are a problem, never read from
    another place than astropy's."""
    base = _hdus(tmp_path)
    hdus = [(list(c), d) for c, d in base]
    if wrong == "unreadable":
        hdus[2] = ([hdus[2][0][0], _card("BITPIX  = 'x")] + hdus[2][0][2:], hdus[2][1])
    path = tmp_path / "wrong.fits"
    path.write_bytes(_file(hdus))
    starts = [len(_file(hdus[:i])) for i in range(len(hdus))]
    real = fits_headers.plain_image

    def misplacing(header_class, text, end, begin, first):
        if begin != starts[2]:
            return real(header_class, text, end, begin, first)
        if wrong == "unreadable":  # HDU 2 as it was before its BITPIX was spoilt
            text, end = fits_headers.header_text(io.BytesIO(_file(base[2:3])), 0)
        image = real(header_class, text, end, begin, first)
        return dataclasses.replace(image, info={**image.info, "datSpan": image.info["datSpan"]
                                                + (2880 if wrong == "span" else 0)})

    monkeypatch.setattr(fits_reader, "plain_image", misplacing)
    tasks = _plan(path)
    problems = [t.reason for t in tasks if t.status == "problem"]
    assert len(problems) == 1 and "astropy reads" in problems[0], problems
    assert not any("TAB" in t.name for t in tasks)


def test_a_fits_file_over_http_is_read_as_on_disk(tmp_path):
    """Plain images read by ranges, the table and the compressed image through astropy over the
    same file object: the report is the local file's, with the URL for its name."""
    remote_servers = pytest.importorskip("remote_servers")
    if remote_servers.nginx_missing():
        pytest.skip(remote_servers.nginx_missing())
    pytest.importorskip("fsspec")
    (tmp_path / "www").mkdir()
    path = tmp_path / "www" / "all.fits"
    path.write_bytes(_file(_hdus(tmp_path)))
    local = scan([path])
    with remote_servers.nginx(str(tmp_path / "www")) as url:
        remote = scan([url + "/all.fits"])
    assert not remote.problems
    assert [(t.name, t.status, t.nan, t.posinf, t.missing) for t in remote.tensors] == \
        [(t.name, t.status, t.nan, t.posinf, t.missing) for t in local.tensors]
    assert len(remote.tensors) == 7  # the empty image has none


def test_huge_axes_in_a_header_read_is_found_as_in_the_file(tmp_path):
    """fits_headers.huge_axes (on the header bytes read once) answers as fits._huge_axes (card by
    card in the file) on seeded soups of axis cards, END-like cards and fragments of them at
    every offset, the words split across cards included."""
    rng = np.random.default_rng(5)
    pieces = [b"NAXIS   = 5000 ", b"ZNAXIS  = 1000 ", b"NAXIS   = 999 ", b"NAXIS   = -1000 ",
              b"END     x", b"END", b"Z", b"ZNAXIS  ", b"NAXIS   = ", b"12 ", b" " * 7, b"x" * 13]
    found = 0
    for case in range(300):
        soup = b"".join(pieces[int(k)] for k in rng.integers(len(pieces), size=40))
        text = soup[:80 * int(rng.integers(1, 36))]
        text = text.ljust(-(-len(text) // 80) * 80) + fits_headers.END_CARD
        text = text.ljust(-(-len(text) // 2880) * 2880)
        path = tmp_path / f"h{case}"
        path.write_bytes(text)
        read, end = fits_headers.header_text(io.BytesIO(text), 0)[0], text.index(
            fits_headers.END_CARD)
        want = fits_reader._huge_axes(str(path), 0, len(text))
        assert fits_headers.huge_axes(read, end) == want, text
        found += bool(want)
    assert 30 < found < 270


def test_an_image_extension_of_gcount_2_without_pcount_is_unchecked_and_the_rest_read(tmp_path):
    """(Before, its message read the absent PCOUNT card: a KeyError that lost the HDUs after
    it.)"""
    path = tmp_path / "gcount.fits"
    path.write_bytes(_edit(1, "PCOUNT", ["GCOUNT  = 2"], 2)(_hdus(tmp_path)))
    report = scan([path])
    sci = next(t for t in report.tensors if t.name.startswith("SCI"))
    assert sci.status == "unchecked" and "PCOUNT 0 and GCOUNT 2" in sci.reason
    assert not report.problems and {"TAB/x", "COMPRESSED_IMAGE", "7"} <= {
        t.name for t in report.tensors}


@pytest.mark.parametrize("axes", [[10**15], [10**18, 100]])
def test_an_extension_declaring_more_data_than_a_seek_reaches_keeps_the_hdus_before(tmp_path,
                                                                                    axes):
    # the primary's +Inf is found whatever the extension after it declares
    from fpclass.scan import scan

    def card(text):
        return text.encode().ljust(80)

    def header(cards):
        b = b"".join(card(c) for c in cards) + card("END")
        return b + b" " * (-len(b) % 2880)

    data = np.array([1, np.inf], ">f4").tobytes()
    data += b"\0" * (-len(data) % 2880)
    naxes = [f"NAXIS{i + 1:<3}= {n:>20}" for i, n in enumerate(axes)]
    path = tmp_path / "huge.fits"
    path.write_bytes(
        header(["SIMPLE  =                    T", "BITPIX  =                  -32",
                "NAXIS   =                    1", "NAXIS1  =                    2",
                "EXTEND  =                    T"]) + data
        + header(["XTENSION= 'IMAGE   '", "BITPIX  =                  -32",
                  f"NAXIS   = {len(axes):>20}", *naxes, "PCOUNT  =                    0",
                  "GCOUNT  =                    1"]) + data)
    report = scan([str(path)])
    assert report.summary()["posinf"] == 1
    assert report.exit_code == 1
