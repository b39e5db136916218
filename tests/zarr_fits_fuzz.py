"""Structural fuzzing of `fpclass.scan` on zarr stores (v2 and v3) and FITS files: seed files
written by zarr and astropy with planted NaN/±Inf (scaled FITS data, blanks, attributes, arrays
below folders without group metadata), seeded mutations that know each format's structure, and
zarr / astropy as the independent readers. The supervisor and the worker protocol are
tests/fuzz_supervisor.py's, the judge builds on tests/fuzz_judge.py; only the seeds and mutations
are here.

    python tests/zarr_fits_fuzz.py show FORMAT INDEX [--seed S] [--out DIR]   # one case's files

A case is (base seed, format, index): the same triple always gives the same bytes.

The oracles, the judge and the worker script are in tests/zarr_fits_oracles.py.
"""

from __future__ import annotations

import io
import json
import os
import random
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import fuzz_supervisor  # noqa: E402
import zarr_fits_oracles  # noqa: E402
from zarr_fits_oracles import FORMATS, judge  # noqa: E402,F401  (the test imports both here)

MAIN = {"zarr": "case.zarr", "fits": "case.fits"}
NAN, INF = float("nan"), float("inf")


def _arr(shape, dtype, plants=(), seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    flat = a.reshape(-1)
    for i, v in dict(plants).items():
        flat[i % flat.size] = v
    return a


# ---------------------------------------------------------------------------------------------
# Seeds: {relative path: bytes} of each seed store or file.

def _files_of(root: str) -> dict:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, os.path.dirname(root)).replace(os.sep, "/")] = f.read()
    return out


def _zarr_seed(fmt: int, variant: str) -> dict:
    import zarr
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, MAIN["zarr"])
        g = zarr.open_group(root, mode="w", zarr_format=fmt)
        clean = variant == "clean"
        plants = {} if clean else {1: NAN, 7: INF, 12: -INF}
        kw = {} if variant != "raw" else {"compressors": None}
        a = g.create_array("a", shape=(6, 5), chunks=(4, 3), dtype="<f4", **kw)
        a[...] = _arr((6, 5), "<f4", plants)
        a.attrs.update({"units": "m", "scale": 1.5 if clean else NAN,
                        "nested": {"v": [1.0, 2.0 if clean else INF]}})
        b = g.create_array("sub/b", shape=(9,), chunks=(4,), dtype="<f8", fill_value=NAN,
                           **kw)
        b[:4] = _arr((4,), "<f8", {} if clean else {2: -INF})
        c = zarr.create_array(os.path.join(root, "loose", "deep", "c"), shape=(7,),
                              chunks=(3,), dtype=">f8" if fmt == 2 else "float64",
                              zarr_format=fmt, **kw)
        c[...] = _arr((7,), "<f8", {} if clean else {6: NAN})
        g.create_array("i", shape=(4,), chunks=(4,), dtype="<i2")[...] = np.arange(4)
        g.create_array("z", shape=(3,), chunks=(2,), dtype="<c8", **kw)[...] = \
            _arr((3,), "<c8", {} if clean else {0: complex(1, NAN)})
        if not clean:
            g.attrs["g"] = -INF
        return _files_of(root)


def _fits_seed(variant: str) -> dict:
    from astropy.io import fits
    clean = variant == "clean"
    p = {} if clean else {0: NAN, 5: INF, 9: -INF}
    primary = fits.PrimaryHDU(_arr((5, 7), ">f4", p))
    scaled = fits.ImageHDU(np.arange(-20, 20, dtype=np.int16).reshape(5, 8), name="SCALED")
    scaled.header["BSCALE"], scaled.header["BZERO"], scaled.header["BLANK"] = 2.0, 1.0, 3
    ints = fits.ImageHDU(np.arange(12, dtype=np.int32).reshape(3, 4), name="INTS")
    cols = [fits.Column("e", "E", array=_arr(6, "f4", p)),
            fits.Column("d", "2D", array=_arr((6, 2), "f8", {} if clean else {3: INF})),
            fits.Column("i", "I", array=np.arange(6, dtype=np.int16), null=2),
            fits.Column("j", "J", array=np.arange(6, dtype=np.int32)),
            fits.Column("s", "3A", array=np.array([b"abc"] * 6))]
    table = fits.BinTableHDU.from_columns(cols, name="TAB")
    table.header["TSCAL3"], table.header["TZERO3"] = 0.5, 1.0
    table.header["TSCAL1"] = 1.0
    hdus = [primary, scaled, ints, table]
    if variant == "compressed":
        hdus.append(fits.CompImageHDU(_arr((6, 6), "f4", p), name="CMP",
                                      compression_type="GZIP_1", quantize_level=0.0))
    buf = io.BytesIO()
    fits.HDUList(hdus).writeto(buf)
    return {MAIN["fits"]: buf.getvalue()}


_SEEDS: dict = {}


def seeds(fmt: str) -> dict:
    if fmt not in _SEEDS:
        if fmt == "zarr":
            _SEEDS[fmt] = {f"v{v}-{k}": _zarr_seed(v, k) for v in (2, 3)
                           for k in ("planted", "raw", "clean")}
        else:
            _SEEDS[fmt] = {k: _fits_seed(k) for k in ("planted", "compressed", "clean")}
    return _SEEDS[fmt]


# ---------------------------------------------------------------------------------------------
# Mutations: each edits `files` ({path: bytes}) in place and returns a description.

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


@dataclass
class Case:
    fmt: str
    index: int
    seed_name: str
    steps: list
    files: dict

    @property
    def id(self) -> str:
        return f"{self.fmt}#{self.index}"


def make_case(fmt: str, index: int, base_seed: int = 0) -> Case:
    rng = random.Random(f"{base_seed}:{fmt}:{index}")
    name = rng.choice(sorted(seeds(fmt)))
    files = dict(seeds(fmt)[name])
    steps = []
    table = MUTATORS[fmt]
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutator = rng.choices([m for m, _ in table], [w for _, w in table])[0]
        try:
            steps.append(mutator(rng, files, fmt))
        except Exception as e:  # a mutation that does not fit this seed: noted, nothing done
            steps.append(f"({mutator.__name__} n/a: {type(e).__name__})")
    return Case(fmt, index, name, steps, files)


def write_case(case: Case, root: str) -> str:
    d = os.path.join(root, case.fmt, str(case.index))
    return write_files(case.files, d, case.fmt)


def write_files(files: dict, d: str, fmt: str) -> str:
    for name, data in files.items():
        p = os.path.join(d, *name.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    main = os.path.join(d, MAIN[fmt])
    os.makedirs(main, exist_ok=True) if fmt == "zarr" else None
    return main


def run_cases(cases, workdir, warmup, workers=2):
    """fuzz_supervisor.run_cases with zarr_fits_oracles.py as the worker script."""
    return fuzz_supervisor.run_cases(cases, workdir, warmup, worker=zarr_fits_oracles.__file__,
                                     workers=workers)


def _show(argv):
    import argparse
    p = argparse.ArgumentParser(prog="zarr_fits_fuzz.py show")
    p.add_argument("fmt", choices=FORMATS)
    p.add_argument("index", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    case = make_case(args.fmt, args.index, args.seed)
    path = write_case(case, args.out)
    print(f"{case.id} from seed {case.seed_name!r}:")
    for step in case.steps:
        print("  " + step)
    print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["show"]:
        _show(sys.argv[2:])
    else:
        sys.exit(__doc__)
