"""Differential fuzzing of fpclass.scan on NetCDF classic ("nc3"), NetCDF-4 ("nc4") and HDF5
("h5") files, against netCDF4-python (its default auto mask and scale) and h5py. No tests here.

A case is a random small file *specification* (variables of random dtype, shape, values with
planted NaN/±Inf, CF attributes: scale_factor, add_offset, _FillValue, missing_value, valid_*,
_Unsigned; float attributes on variables, groups and the file; chunking and filters), written by
netCDF4 or h5py, then sometimes a few header bytes changed. The same (base seed, format, index)
always gives the same file. Cases run in fuzz_supervisor's child processes (time and memory
limits), each `python cf_fuzz.py worker BATCH`: this module is the worker, with the oracles below.

    python tests/cf_fuzz.py show nc4 17 [--seed S] [--out DIR]   # one case's file and steps
"""

from __future__ import annotations

import os
import random
import sys
import warnings

import numpy as np

from fuzz_judge import judge as judge_core
from fuzz_oracles_core import counts, reject
from fuzz_supervisor import run_cases as run_in_workers, serve

FORMATS = ("nc3", "nc4", "h5")
NAN, INF = float("nan"), float("inf")
BLANKS = ("_FillValue", "missing_value")
_FLOATS = {"nc3": ["f4", "f8"], "nc4": ["f4", "f8"], "h5": ["<f2", "<f4", ">f4", "<f8", ">f8",
                                                           "<c8"]}
_INTS = {"nc3": ["i1", "i2", "i4"], "nc4": ["i1", "u1", "i2", "u2", "i4", "u4", "i8"],
         "h5": ["<i2", ">i4"]}


# -- specifications ---------------------------------------------------------------------------

def _values(rng, nrng, dtype, n):
    """n values of `dtype` with a few planted specials (NaN/±Inf; integer extremes)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        a = nrng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dt)
        specials = [info.min, info.max, info.min + 1, info.max - 1, 0]
    else:
        a = (nrng.standard_normal(n) * rng.choice([1, 1e3, 1e30])).astype(dt)
        specials = [NAN, INF, -INF, 0.0]
    for _ in range(rng.choice([0, 1, 2, 4])):
        if n:
            a[rng.randrange(n)] = rng.choice(specials)
    return a


def _float_attr(rng, dtype=None):
    dtype = dtype or rng.choice(["f4", "f8"])
    k = rng.choice([1, 1, 1, 2, 3])
    return np.array([rng.choice([1.5, -2.0, NAN, INF, -INF, 0.0, 1e38]) for _ in range(k)],
                    dtype)


def _cf_attrs(rng, nrng, fmt, dtype, data):
    """Random CF attributes for a variable of `dtype` holding `data`."""
    attrs, steps = {}, []
    dt = np.dtype(dtype)
    fdt = rng.choice(["f4", "f8"])
    pick = rng.random

    def some_value():
        return data.reshape(-1)[rng.randrange(data.size)] if data.size else 0

    if pick() < 0.6:
        attrs["scale_factor"] = rng.choice([
            np.array(rng.choice([NAN, INF, -INF, 0.5, 1.0, 1e38, 1e300, 0.0, -3.0]), fdt),
            np.array(2, "i2"), "0.5", np.array([1.0, 2.0], fdt)])
    if pick() < 0.4:
        attrs["add_offset"] = np.array(rng.choice([NAN, INF, -INF, 0.0, 1.5, 1e38, -1e308]), fdt)
    if pick() < 0.4:
        attrs["missing_value"] = rng.choice([
            np.array(some_value(), dt), np.array([some_value(), some_value()], dt),
            np.array(NAN, fdt), np.array(INF, fdt), np.array(1e10, fdt)])
    r = pick()
    if r < 0.2:
        attrs["valid_range"] = np.array(sorted([some_value(), some_value()]), dt)
    elif r < 0.35:
        attrs["valid_min" if pick() < 0.5 else "valid_max"] = rng.choice(
            [np.array(some_value(), dt), np.array(NAN, fdt), np.array(1e10, fdt)])
    if dt.kind == "i" and pick() < 0.2:
        attrs["_Unsigned"] = "true"
    if pick() < 0.3:
        attrs["note"] = _float_attr(rng)
    steps.append("attrs " + ", ".join(f"{k}={_short(v)}" for k, v in attrs.items()))
    return attrs, steps


def _short(v):
    return repr(v.tolist()) if isinstance(v, np.ndarray) else repr(v)


def _fill(rng, dtype, data):
    dt = np.dtype(dtype)
    r = rng.random()
    if r < 0.1:
        return False  # netCDF4: fill mode off
    if r < 0.5:
        return None
    if dt.kind == "f" and r < 0.7:
        return np.array(rng.choice([NAN, INF, -INF]), dt)
    if data.size and r < 0.9:
        return np.array(data.reshape(-1)[rng.randrange(data.size)], dt)
    return np.array(1 if dt.kind in "iu" else 9.5, dt)


def write_netcdf(rng, fmt, path) -> list:
    """Writes a random NetCDF file (classic or NETCDF4); returns the steps taken."""
    import netCDF4
    nrng = np.random.default_rng(rng.randrange(1 << 30))
    form = "NETCDF3_CLASSIC" if fmt == "nc3" else "NETCDF4"
    steps = [form]
    with netCDF4.Dataset(path, "w", format=form) as ds:
        ds.createDimension("x", rng.choice([1, 3, 8]))
        ds.createDimension("y", rng.choice([2, 5]))
        ds.createDimension("t", None)
        groups = [ds]
        if fmt == "nc4" and rng.random() < 0.3:
            groups.append(ds.createGroup("grp"))
        if rng.random() < 0.4:
            ds.setncattr("gnote", _float_attr(rng))
        for i in range(rng.choice([1, 2, 3])):
            g = rng.choice(groups)
            dtype = rng.choice(_INTS[fmt] + _FLOATS[fmt])
            dims = rng.choice([("x",), ("x", "y"), ("t", "y"), ("t",), ()])
            shape = [len(ds.dimensions[d]) if d != "t" else rng.choice([0, 1, 4]) for d in dims]
            data = _values(rng, nrng, dtype, int(np.prod(shape))).reshape(shape)
            fill = _fill(rng, dtype, data)
            opts = {}
            if fmt == "nc4":
                opts = rng.choice([{}, {"zlib": True}, {"zlib": True, "shuffle": True},
                                   {"contiguous": True} if "t" not in dims else {},
                                   {"fletcher32": True}])
            v = g.createVariable(f"v{i}", dtype, dims, fill_value=fill, **opts)
            v.set_auto_maskandscale(False)
            attrs, more = _cf_attrs(rng, nrng, fmt, dtype, data)
            for k, a in attrs.items():
                v.setncattr(k, a)
            if data.size:  # a record variable of 0 records: netCDF reads the fill up to t
                v[...] = data
            steps.append(f"{g.path}v{i}: {dtype}{shape} fill={_short(fill)} {opts}")
            steps += more
    return steps


def write_hdf5(rng, path) -> list:
    """Writes a random HDF5 file with h5py (no CF attributes: h5py applies none)."""
    import h5py
    nrng = np.random.default_rng(rng.randrange(1 << 30))
    steps = []
    with h5py.File(path, "w") as f:
        groups = [f]
        for k in range(rng.choice([0, 1, 3])):
            groups.append(rng.choice(groups).create_group(f"g{k}"))
        for i in range(rng.choice([1, 2, 3])):
            g = rng.choice(groups)
            dtype = rng.choice(_FLOATS["h5"] + _INTS["h5"])
            shape = rng.choice([(), (5,), (4, 6), (0,), (3, 1, 7)])
            data = _values(rng, nrng, dtype, int(np.prod(shape))).reshape(shape)
            opts = {}
            if shape and 0 not in shape:
                opts = rng.choice([{}, {"chunks": True}, {"compression": "gzip", "shuffle": True},
                                   {"compression": "lzf"}, {"fletcher32": True, "chunks": True},
                                   {"chunks": tuple(max(1, s // 2) for s in shape),
                                    "fillvalue": rng.choice([NAN, INF, 0.0])
                                    if np.dtype(dtype).kind == "f" else 0}])
            if np.dtype(dtype).kind == "c":
                opts.pop("fillvalue", None)
            d = g.create_dataset(f"d{i}", shape=shape, dtype=dtype, **opts)
            if "fillvalue" in opts and shape:
                d[(0,) * len(shape)] = data[(0,) * len(shape)]  # other chunks hold the fill
                steps.append(f"{d.name}: {dtype}{shape} {opts} one value written")
            else:
                d[()] = data
                steps.append(f"{d.name}: {dtype}{shape} {opts}")
            if rng.random() < 0.4:
                d.attrs["note"] = _float_attr(rng)
        for g in groups:
            if rng.random() < 0.3:
                g.attrs["gnote"] = _float_attr(rng, rng.choice(["f4", ">f8", "c8"]))
                steps.append(f"attribute on {g.name}")
        if rng.random() < 0.2 and len(groups) > 1:
            f["hard"] = groups[-1]
            steps.append("hard link to " + groups[-1].name)
    return steps


def _mutate_bytes(rng, path, fmt) -> list:
    with open(path, "rb") as fh:
        b = bytearray(fh.read())
    steps = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        r = rng.random()
        head = min(len(b), 512 if fmt == "nc3" else 4096)
        if r < 0.6 and head:
            i = rng.randrange(head)
            b[i] = rng.choice([0, 0xFF, 0x7F, 0x80, b[i] ^ (1 << rng.randrange(8))])
            steps.append(f"byte {i} = {b[i]:#x}")
        elif r < 0.8 and len(b) > 8:
            n = rng.randrange(len(b) // 2, len(b))
            del b[n:]
            steps.append(f"truncated to {n}")
        else:
            i = rng.randrange(max(1, len(b) - 4))
            b[i:i + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x7f\xc0\x00\x00", b"\x7f\x80\x00\x00",
                                     b"\x00\x00\x00\x00"])
            steps.append(f"4 bytes at {i} = {bytes(b[i:i + 4]).hex()}")
    with open(path, "wb") as fh:
        fh.write(b)
    return steps


def make_case(fmt: str, index: int, root: str, base_seed: int = 0) -> tuple:
    """(case id, path, steps): case `index` of `fmt` written under `root`."""
    rng = random.Random(f"{base_seed}:{fmt}:{index}")
    d = os.path.join(root, fmt, str(index))
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "case.nc" if fmt != "h5" else "case.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = write_hdf5(rng, path) if fmt == "h5" else write_netcdf(rng, fmt, path)
    if rng.random() < 0.3:
        steps += _mutate_bytes(rng, path, fmt)
    return f"{fmt}#{index}", path, steps


# -- oracles ------------------------------------------------------------------------------------

def _attr_counts(name, value):
    a = np.asarray(value)
    if a.dtype.kind not in "fc":
        return None
    if name.rsplit("@", 1)[-1] in BLANKS and a.dtype.kind == "f":
        a = np.where(np.isnan(a), 0, a)  # the declared blank: not counted
    return counts(a)


def oracle_netcdf(path) -> dict:
    """netCDF4 with its defaults: every variable's unmasked values after unpacking."""
    import netCDF4
    try:
        ds = netCDF4.Dataset(path)
    except Exception as e:
        return reject(f"netCDF4.Dataset: {type(e).__name__}: {e}")
    tensors, unverified = {}, []
    with ds:
        stack = [ds]
        while stack:
            g = stack.pop()
            stack += list(g.groups.values())
            owner = g.path.strip("/")
            prefix = owner + "/" if owner else ""
            for a in g.ncattrs():
                c = _attr_counts(f"{owner}@{a}", g.getncattr(a))
                if c is not None:
                    tensors.setdefault(f"{owner}@{a}", []).append(c)
            for v in g.variables.values():
                name = prefix + v.name
                for a in v.ncattrs():
                    try:
                        c = _attr_counts(f"{name}@{a}", v.getncattr(a))
                    except Exception:
                        unverified.append(f"{name}@{a}")
                        continue
                    if c is not None:
                        tensors.setdefault(f"{name}@{a}", []).append(c)
                try:
                    data = v[...]
                except Exception:
                    unverified.append(name)
                    continue
                a = np.ma.asarray(data)
                if a.dtype.kind not in "fc":
                    continue
                tensors.setdefault(name, []).append(
                    counts(np.ma.getdata(a)[~np.ma.getmaskarray(a)]))
    return {"ok": True, "tensors": tensors, "unverified": unverified}


def oracle_hdf5(path) -> dict:
    """h5py: every float dataset's values and every float attribute, by their first path."""
    import h5py
    try:
        f = h5py.File(path, "r")
    except Exception as e:
        return reject(f"h5py.File: {type(e).__name__}: {e}")
    tensors, unverified = {}, []
    objects = [("", f)]
    with f:
        try:
            f.visititems(lambda name, obj: objects.append((
                name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name,
                obj)))  # h5py gives bytes for a name that is not UTF-8
        except Exception as e:
            return reject(f"h5py visititems: {type(e).__name__}: {e}")
        for name, obj in objects:
            try:
                for a, value in obj.attrs.items():
                    c = _attr_counts(f"{name}@{a}", value)
                    if c is not None:
                        tensors.setdefault(f"{name}@{a}", []).append(c)
            except Exception:
                unverified.append(f"{name}@")
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "fc":
                try:
                    c = counts(obj[()])
                except Exception:
                    unverified.append(name)
                else:
                    tensors.setdefault(name, []).append(c)
    return {"ok": True, "tensors": tensors, "unverified": unverified}


def oracle(fmt: str, path: str) -> dict:
    try:
        return oracle_hdf5(path) if fmt == "h5" else oracle_netcdf(path)
    except Exception as e:  # never fails the worker: the case is then judged without an oracle
        return {"ok": None, "reason": f"oracle raised {type(e).__name__}: {e}"}


# -- running and judging ----------------------------------------------------------------------

def run_cases(cases, workdir, warmup, workers=2):
    """fuzz_supervisor.run_cases with workers that run this module (and its oracles)."""
    return run_in_workers(cases, workdir, warmup, worker=os.path.abspath(__file__),
                          workers=workers)


def judge(case_id, outcome) -> tuple:
    """fuzz_judge.judge, plus: a variable reported not applicable where the reference reads
    NaN/Inf breaks the promise."""
    fails, notes = judge_core(case_id, outcome)
    orc, s = outcome.oracle, outcome.scan
    if orc.get("ok") and "tensors" in s:
        status = {}
        for t in s["tensors"]:
            status.setdefault(t[0], set()).add(t[1])
        for name, expected in orc["tensors"].items():
            if status.get(name) == {"not_applicable"} and any(map(sum, expected)):
                fails.append(("not applicable where the reference reads NaN/Inf",
                              f"{name!r}: oracle counts {expected}"))
    return fails, notes


def _show(argv):
    import argparse
    p = argparse.ArgumentParser(prog="cf_fuzz.py show")
    p.add_argument("fmt", choices=FORMATS)
    p.add_argument("index", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    case_id, path, steps = make_case(args.fmt, args.index, args.out, args.seed)
    print(case_id)
    for step in steps:
        print("  " + step)
    print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        serve(sys.argv[2], oracle, FORMATS)
    elif sys.argv[1:2] == ["show"]:
        _show(sys.argv[2:])
    else:
        sys.exit(__doc__)
