"""Structural mutations of zarr stores (v2 and v3 metadata, chunks, the tree of groups and arrays)
and FITS files (header cards, scaling and blank keywords, data, truncation) for
tests/zarr_fits_fuzz.py. Each mutator edits `files` ({relative path: bytes}) in place and returns
a description; MUTATORS holds each format's, with their weights."""

from __future__ import annotations

import json

import numpy as np

from zarr_fits_seeds import INF, MAIN, NAN


def _loads(b: bytes):
    return json.loads(b.decode("utf-8", "replace"))


def _dumps(doc) -> bytes:
    return json.dumps(doc).encode()  # NaN / Infinity tokens, as zarr writes them


INTERESTING = [NAN, INF, -INF, "NaN", "Infinity", "-Infinity", 0, 1, -1, 1e309, None, "x",
               [NAN], {"a": NAN}, True, 2 ** 63, 3.5, [], {}]
DTYPES_V2 = ["<f4", ">f4", "<f8", ">f8", "<f2", "<c8", ">c16", "<i4", "|u1", "|b1", "<U3",
             "|O", "|V8", [["x", "<f4"]], "<m8[s]", "<f16"]
DTYPES_V3 = ["float32", "float64", "float16", "complex64", "int32", "uint8", "bool", "bfloat16",
             {"name": "float32"}, "string", "float8_e4m3fn", "nope"]


def _meta_files(files):
    return sorted(k for k in files if k.rsplit("/", 1)[-1] in (".zarray", ".zgroup", ".zattrs",
                                                              "zarr.json"))


def m_zarr_json(rng, files, fmt):
    key = rng.choice(_meta_files(files))
    try:
        doc = _loads(files[key])
    except ValueError:
        files[key] = files[key][: rng.randrange(len(files[key]) + 1)]
        return f"{key}: truncated text"
    if not isinstance(doc, dict):
        return f"{key}: not an object, left"
    v3 = key.endswith("zarr.json")
    fields = ["attributes", "fill_value", "shape", "node_type", "zarr_format"] if v3 else \
        ["fill_value", "dtype", "shape", "chunks", "compressor", "filters", "order",
         "dimension_separator", "zarr_format"]
    if v3 and doc.get("node_type") == "array":
        fields += ["data_type", "codecs", "chunk_grid", "chunk_key_encoding"]
    if key.endswith(".zattrs"):
        fields = ["attr"]
    field = rng.choice(fields)
    if field in ("attributes", "attr"):
        target = doc.setdefault("attributes", {}) if v3 else doc
        if not isinstance(target, dict):
            return f"{key}: attributes not an object"
        name = rng.choice(list(target) + ["new"]) if target else "new"
        target[name] = rng.choice(INTERESTING)
        text = f"attribute {name} = {target[name]!r}"
    elif field in ("dtype", "data_type"):
        doc[field] = rng.choice(DTYPES_V2 if field == "dtype" else DTYPES_V3)
        text = f"{field} = {doc[field]!r}"
    elif field in ("shape", "chunks"):
        dims = list(doc.get(field) or [4])
        i = rng.randrange(len(dims)) if dims else 0
        choice = rng.choice(["grow", "shrink", "zero", "huge", "add", "drop"])
        if choice == "grow" and dims:
            dims[i] += rng.randint(1, 5)
        elif choice == "shrink" and dims:
            dims[i] = max(0, dims[i] - rng.randint(1, 3))
        elif choice == "zero" and dims:
            dims[i] = 0
        elif choice == "huge" and dims:
            dims[i] = 1 << rng.choice([31, 40, 62])
        elif choice == "add":
            dims.append(rng.randint(1, 3))
        elif dims:
            dims.pop()
        doc[field] = dims
        text = f"{field} {choice} = {dims}"
    elif field == "codecs":
        codecs = doc.get("codecs") or []
        choice = rng.choice(["drop", "bytes-big", "gzip", "unknown"])
        if choice == "drop" and len(codecs) > 1:
            codecs.pop()
        elif choice == "bytes-big":
            codecs[0:1] = [{"name": "bytes", "configuration": {"endian": "big"}}]
        elif choice == "gzip":
            codecs.append({"name": "gzip", "configuration": {"level": 1}})
        else:
            codecs.append({"name": "no-such-codec"})
        doc["codecs"] = codecs
        text = f"codecs {choice}"
    elif field == "compressor":
        doc[field] = rng.choice([None, {"id": "zlib", "level": 1}, {"id": "nope"},
                                 {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}])
        text = f"compressor = {doc[field]!r}"
    else:
        doc[field] = rng.choice(INTERESTING + ["F", "C", "/", ".", 2, 3, "group", "array"])
        text = f"{field} = {doc[field]!r}"
    files[key] = _dumps(doc)
    return f"{key}: {text}"


def _chunk_files(files):
    return sorted(k for k in files if k not in _meta_files(files))


def m_zarr_chunk(rng, files, fmt):
    chunks = _chunk_files(files)
    if not chunks:
        return m_zarr_json(rng, files, fmt)
    key = rng.choice(chunks)
    b = bytearray(files[key])
    choice = rng.choice(["delete", "truncate", "flip", "nan32", "nan64", "extend"])
    if choice == "delete":
        del files[key]
        return f"{key}: deleted (reads as the fill value)"
    if choice == "truncate":
        b = b[: rng.randrange(len(b) + 1)]
    elif choice == "extend":
        b += bytes(rng.randrange(1, 9))
    elif choice == "flip" and b:
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif b:
        pattern = (np.float32(NAN) if choice == "nan32" else np.float64(-INF)).tobytes()
        at = rng.randrange(max(1, len(b) - len(pattern) + 1))
        at -= at % len(pattern)
        b[at:at + len(pattern)] = pattern[: len(b) - at]
    files[key] = bytes(b)
    return f"{key}: {choice}"


def m_zarr_tree(rng, files, fmt):
    """Group metadata removed, or an array moved below a folder without it."""
    metas = [k for k in _meta_files(files) if k.rsplit("/", 1)[-1] in (".zgroup", "zarr.json")]
    choice = rng.choice(["drop-group", "move"])
    if choice == "drop-group" and metas:
        key = rng.choice(metas)
        del files[key]
        return f"{key}: deleted"
    arrays = sorted({k.rsplit("/", 1)[0] for k in files
                     if k.endswith("/.zarray") or (k.endswith("/zarr.json") and
                                                   b'"array"' in files[k])})
    if not arrays:
        return "no array to move"
    src = rng.choice(arrays)
    dst = f"{MAIN['zarr']}/moved/x{rng.randrange(9)}/" + src.rsplit("/", 1)[-1]
    for k in [k for k in files if k.startswith(src + "/")]:
        files[dst + k[len(src):]] = files.pop(k)
    return f"{src} moved to {dst}"


ZARR = [(m_zarr_json, 5), (m_zarr_chunk, 4), (m_zarr_tree, 1)]


def _cards(b: bytes):
    """[(offset of the card, key)] of every header card in a FITS file, HDU by HDU (a header ends
    at its END card; its data follows, then the next header, found by looking for XTENSION at a
    block start)."""
    out = []
    for block in range(0, len(b), 2880):
        if b[block:block + 8] not in (b"SIMPLE  ", b"XTENSION"):
            continue
        for at in range(block, len(b) - 79, 80):
            key = b[at:at + 8].decode("ascii", "replace").strip()
            out.append((at, key))
            if key == "END":
                break
    return out


CARD_VALUES = ["NAN", "INF", "-INF", "1E999", "-1E999", "1E39", "1E38", "1E300", "0", "0.0",
               "-1", "1", "2", "16", "-32", "-64", "8", "64", "32", "32768", "-128", "T", "F",
               "'E'", "'D'", "'I'", "'J'", "'K'", "'B'", "'2E'", "'C'", "'PE()'", "'X'",
               "1000000000", "3", "0.5", "'abc'", "2147483648", "9.9E307"]
HOT_KEYS = ("BITPIX", "NAXIS", "BSCALE", "BZERO", "BLANK", "TSCAL", "TZERO", "TNULL", "TFORM",
            "SIMPLE", "PCOUNT", "GCOUNT", "ZBITPIX", "ZNAXIS", "TDIM", "EXTNAME", "EXTVER")


def _set_card(b: bytearray, at: int, key: str, value: str) -> None:
    b[at:at + 80] = f"{key:<8}= {value:>20}".ljust(80)[:80].encode()


def m_fits_card(rng, files, fmt):
    b = bytearray(files[MAIN["fits"]])
    cards = [(at, k) for at, k in _cards(bytes(b)) if k.startswith(HOT_KEYS)]
    if not cards:
        return m_fits_data(rng, files, fmt)
    at, key = rng.choice(cards)
    value = rng.choice(CARD_VALUES)
    _set_card(b, at, key, value)
    files[MAIN["fits"]] = bytes(b)
    return f"card {key} = {value}"


def m_fits_add_card(rng, files, fmt):
    """A scaling or blank keyword added where a blank card (or a removable one) stands."""
    b = bytearray(files[MAIN["fits"]])
    cards = _cards(bytes(b))
    ends = [at for at, k in cards if k == "END"]
    if not ends:
        return m_fits_data(rng, files, fmt)
    end = rng.choice(ends)
    if (end + 80) % 2880 == 0:  # no room left in the block: replace the card before END
        end -= 80
    key = rng.choice(["BSCALE", "BZERO", "BLANK", "TSCAL1", "TZERO1", "TSCAL2", "TNULL2",
                      "TSCAL4", "TZERO4", "EXPTIME", "TNULL3"])
    value = rng.choice(CARD_VALUES)
    _set_card(b, end, key, value)
    b[end + 80:end + 160] = b"END".ljust(80)
    files[MAIN["fits"]] = bytes(b)
    return f"added {key} = {value}"


def m_fits_data(rng, files, fmt):
    b = bytearray(files[MAIN["fits"]])
    headers = {at - at % 2880 for at, k in _cards(bytes(b))}
    blocks = [k for k in range(0, len(b), 2880) if k not in headers]
    if not blocks:
        return "no data block"
    block = rng.choice(blocks)
    at = block + rng.randrange(0, 2880, 4)
    choice = rng.choice(["nan32", "inf32", "nan64", "int-max", "flip", "zero"])
    pattern = {"nan32": np.array(NAN, ">f4").tobytes(), "inf32": np.array(INF, ">f4").tobytes(),
               "nan64": np.array(NAN, ">f8").tobytes(), "int-max": b"\x7f\xff",
               "zero": bytes(4)}.get(choice)
    if pattern is None:
        b[at] ^= 1 << rng.randrange(8)
    else:
        b[at:at + len(pattern)] = pattern
    files[MAIN["fits"]] = bytes(b[: len(files[MAIN["fits"]])])
    return f"data byte {at}: {choice}"


def m_fits_truncate(rng, files, fmt):
    b = files[MAIN["fits"]]
    cut = rng.choice([rng.randrange(len(b)), len(b) - 2880, len(b) - rng.randrange(1, 80)])
    files[MAIN["fits"]] = b[:max(0, cut)] if rng.random() < 0.8 else b + bytes(2880)
    return f"truncated to {cut}"


FITS = [(m_fits_card, 6), (m_fits_add_card, 3), (m_fits_data, 3), (m_fits_truncate, 1)]
MUTATORS = {"zarr": ZARR, "fits": FITS}
