"""The independent readers of tests/zarr_fits_fuzz.py (zarr, astropy), its judge and its worker
script (fuzz_supervisor.run_cases starts `python tests/zarr_fits_oracles.py worker BATCH`), in
fuzz_oracles_core's shape and in fpclass's conventions: NaN that is a declared blank (zarr's NaN
fill value; FITS's stored NaN, BLANK and TNULLn values, every NaN of a tile-compressed float
image) is missing, not NaN; float attributes of zarr nodes are "node@attribute" (their float
leaves) and FITS header keywords astropy reads as Inf are "HDU@KEY"."""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from fuzz_judge import judge as judge_core
from fuzz_oracles_core import counts, reject
from fuzz_supervisor import Outcome, serve

FORMATS = ("zarr", "fits")


# ---------------------------------------------------------------------------------------------
# Oracles, in fuzz_oracles_core's shape: {"ok": True, "tensors": {name: [(nan, +inf, -inf)]},
# "unverified": [names]} or {"ok": False, "reason": ...}.

def oracle(fmt: str, path: str) -> dict:
    return oracle_zarr(path) if fmt == "zarr" else oracle_fits(path)


def _blank_counts(values, blank_mask=None) -> tuple:
    """(NaN not blank, +Inf, -Inf) of `values` (complex as parts), blanks excluded."""
    v = np.asarray(values)
    parts = [v.real, v.imag] if v.dtype.kind == "c" else [v]
    nan = pinf = ninf = 0
    for p in parts:
        p = p.astype(np.float64)
        keep = np.ones(p.shape, bool) if blank_mask is None else ~blank_mask
        nan += int((np.isnan(p) & keep).sum())
        pinf += int((np.isposinf(p) & keep).sum())
        ninf += int((np.isneginf(p) & keep).sum())
    return nan, pinf, ninf


def _floats(value):
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def oracle_zarr(path):
    """Every folder of the store holding zarr metadata, opened by zarr: arrays read whole (a NaN
    fill value makes NaN missing), attributes' float leaves."""
    import zarr
    nodes = []
    for d, _, names in os.walk(path):
        if {".zarray", ".zgroup", "zarr.json"} & set(names):
            rel = os.path.relpath(d, path).replace(os.sep, "/")
            nodes.append("" if rel == "." else rel)
    if not nodes:
        return reject("no zarr metadata")
    tensors, unverified = {}, []
    store = zarr.storage.LocalStore(path, read_only=True)
    for node in sorted(nodes):
        try:
            obj = zarr.open(store=store, path=node, mode="r", use_consolidated=False)
            attrs = obj.attrs.asdict()
        except Exception as e:
            return reject(f"zarr.open({node!r}): {type(e).__name__}: {e}")
        for key, value in attrs.items():
            floats = _floats(value)
            if floats:
                tensors[f"{node}@{key}"] = [counts(np.array(floats))]
        if isinstance(obj, zarr.Array):
            dt = np.dtype(obj.dtype)
            if dt.kind not in "fc":
                if dt.kind in "OV" or dt.hasobject:
                    unverified.append(node)
                continue
            try:
                a = np.asarray(obj[...])
            except Exception as e:
                return reject(f"zarr read {node!r}: {type(e).__name__}: {e}")
            fill = obj.fill_value
            blank = np.isnan(a) if fill is not None and np.isnan(fill) else None
            if dt.kind == "c" and blank is not None:
                blank = None  # complex: parts with NaN are blanks; counted below
                a = np.stack([a.real, a.imag], -1)
                blank = np.isnan(a)
            tensors[node] = [_blank_counts(a, blank)]
    return {"ok": True, "tensors": tensors, "unverified": unverified}


def _hdu_name(index, hdu, names, pairs):
    name, ver = hdu.name, hdu.header.get("EXTVER", 1)
    if name and names[name] == 1:
        return name
    if name and pairs[(name, ver)] == 1:
        return f"{name},{ver}"
    return str(index)


def oracle_fits(path):
    """astropy's read of every HDU: images (physical values; blanks from the stored values),
    table columns, tile-compressed images (every NaN a blank); header keywords read as Inf."""
    import collections
    from astropy.io import fits
    tensors, unverified = {}, []
    try:
        with fits.open(path, memmap=False) as hdul, \
                fits.open(path, memmap=False, do_not_scale_image_data=True) as raw_hdul:
            hdus = list(hdul)
            names = collections.Counter(h.name for h in hdus)
            pairs = collections.Counter((h.name, h.header.get("EXTVER", 1)) for h in hdus)
            for i, hdu in enumerate(hdus):
                name = _hdu_name(i, hdu, names, pairs)
                for card in hdu.header.cards:
                    v = card.value
                    if isinstance(v, float) and not math.isfinite(v):
                        tensors[f"{name}@{card.keyword}"] = [counts(np.array(v))]
                _oracle_hdu(fits, hdu, raw_hdul[i], name, tensors, unverified)
    except Exception as e:
        return reject(f"astropy: {type(e).__name__}: {e}")
    return {"ok": True, "tensors": tensors, "unverified": unverified}


def _oracle_hdu(fits, hdu, raw_hdu, name, tensors, unverified):
    if isinstance(hdu, fits.CompImageHDU):
        data = hdu.data
        if data is not None and data.dtype.kind == "f":
            tensors[name] = [_blank_counts(data, np.isnan(data))]
        return
    if isinstance(hdu, fits.GroupsHDU) or isinstance(hdu, fits.TableHDU) and \
            not isinstance(hdu, fits.BinTableHDU):
        unverified.append(name)
        return
    if isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU)):
        data = hdu.data
        if data is None or data.dtype.kind != "f":
            return
        raw = raw_hdu.data
        blank = raw_hdu.header.get("BLANK")  # astropy drops it from a scaled HDU's header
        if raw.dtype.kind == "f":
            mask = np.isnan(raw)
        elif isinstance(blank, int):  # astropy takes a logical T as 1
            mask = raw == blank
        else:
            mask = None
        tensors[name] = [_blank_counts(data, mask)]
        return
    if isinstance(hdu, fits.BinTableHDU):
        data = hdu.data
        if data is None:
            return
        raw = np.ndarray.view(data, np.ndarray)
        seen = collections_counter([c.name for c in hdu.columns])
        for n, col in enumerate(hdu.columns):
            cname = f"{name}/{col.name or f'column {n + 1}'}"
            if seen[col.name] > 1:
                cname += f" (column {n + 1})"
            if col.format.format in "PQ":
                unverified.append(cname)
                continue
            try:
                values = data.field(n)
            except Exception:  # astropy 8 fails on a K column with a TZERO, for one
                unverified.append(cname)
                continue
            if values.dtype.kind not in "fc":
                continue
            stored = raw[raw.dtype.names[n]]
            if stored.dtype.kind == "f" or stored.dtype.kind == "c":
                mask = np.isnan(stored) if stored.dtype.kind == "f" else None
            elif isinstance(col.null, int):
                mask = stored == col.null
            else:
                mask = None
            if stored.dtype.kind == "c":
                tensors[cname] = [(0,) + counts(values)[1:]]  # every NaN a blank
            else:
                tensors[cname] = [_blank_counts(values.reshape(stored.shape), mask)]


def collections_counter(items):
    import collections
    return collections.Counter(items)


def judge(case_id, outcome):
    """fuzz_judge's judge, plus: a tensor fpclass calls not applicable holds no NaN or
    Inf by the reference."""
    s, orc = outcome.scan, outcome.oracle
    covered = []
    if orc.get("ok") and "tensors" in s:  # an HDU fpclass leaves unchecked covers its columns
        whole = {t[0] for t in s["tensors"] if t[1] == "unchecked"}
        def owner(name):  # the HDU of a column or header keyword, the node of an attribute
            return name.split("@")[0] if "@" in name else name.split("/")[0]

        kept = {k: v for k, v in orc["tensors"].items() if owner(k) not in whole or owner(k) == k}
        covered = [("HDU or node unchecked, oracle reads its columns or attributes", k)
                   for k in orc["tensors"] if k not in kept]
        outcome = Outcome(s, {**orc, "tensors": kept}, outcome.failure)
    fails, notes = judge_core(case_id, outcome)
    notes += covered[:1]
    if orc.get("ok") and "tensors" in s:
        na = {t[0] for t in s["tensors"] if t[1] == "not_applicable"}
        for name, expected in orc["tensors"].items():
            if name in na and any(map(sum, expected)):
                fails.append(("not applicable, but the reference reads NaN/Inf",
                              f"{name!r}: oracle {expected}"))
    return fails, notes


if __name__ == "__main__":
    if sys.argv[1:2] != ["worker"]:
        sys.exit(__doc__)
    serve(sys.argv[2], oracle, FORMATS)
