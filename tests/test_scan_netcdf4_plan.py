"""NetCDF-4 / HDF5 planning at its cost (issue 22): attribute names listed without h5py's
high-level machinery, attributes holding no float skipped without building their leaves, a
dimension scale's REFERENCE_LIST read as HDF5 gives object references in memory (addresses)
without opening each dataset. Each shortcut against h5py's own answer, and whole files of many
variables (packed, NaN attributes, short record variables with a NaN fill, groups) against
netCDF4's read + numpy."""

import warnings

import numpy as np
import pytest

from cf_fuzz import oracle_netcdf
from fpclass.scan import scan

h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")

from fpclass.scan.readers.hdf5_attributes import Attributes, class_of  # noqa: E402
from fpclass.scan.readers.hdf5_netcdf import Dimensions  # noqa: E402
from fpclass.scan.readers.hdf5_types import holds_no_floats, parts  # noqa: E402
from fpclass.scan.readers.hdf5_walk import attribute_names, name_of, walk  # noqa: E402
from fpclass.scan.tasks import NOT_APPLICABLE  # noqa: E402

NAN, INF = float("nan"), float("inf")


def many(path, n=12):
    """A NetCDF-4 file of `n` variables of each kind, in the root and a group: plain floats with
    NaN/Inf planted, packed integers (one with a NaN scale), float attributes holding NaN and
    Inf, record variables along an unlimited dimension, some shorter than it (a NaN fill netCDF
    reads past their end, masked; an unmasked -Inf fill: unchecked), coordinate variables."""
    rng = np.random.default_rng(0)
    with netCDF4.Dataset(path, "w") as d:
        d.setncattr("global_nan", np.array([1.0, NAN, INF]))
        for g in (d, d.createGroup("sub")):
            g.createDimension("x", 5)
            g.createDimension("t", None)
            g.createVariable("x", "f8", ("x",))[:] = np.arange(5.0)  # coordinate variable
            for i in range(n):
                a = rng.standard_normal((3, 5)).astype("f4")
                a.flat[i % 15] = (NAN, INF, -INF)[i % 3]
                v = g.createVariable(f"plain{i}", "f4", ("t", "x"), fill_value=np.float32(NAN))
                v.setncattr("valid_max", np.float32(INF) if i % 4 == 0 else np.float32(1e30))
                v.setncattr("note", np.array([NAN, 2.0, -INF][: 1 + i % 3]))
                v[0:3 if i % 2 else 2] = a[:3 if i % 2 else 2]
                p = g.createVariable(f"packed{i}", "i2", ("x",), fill_value=np.int16(-1))
                p.set_auto_maskandscale(False)
                p.setncattr("scale_factor", np.float32(NAN if i == 3 else 0.5))
                p.setncattr("add_offset", np.float32(INF if i == 5 else 1.0))
                p[:] = np.array([1, -1, 3, 4, 5], "i2")
                s = g.createVariable(f"short{i}", "f4", ("t", "x"),
                                     fill_value=np.float32(7.0))
                s[0:1] = np.ones((1, 5), "f4")
                if i % 4 == 1:  # its default fill, unsigned, scaled by -Inf: -Inf, unmasked
                    u = g.createVariable(f"unwritten{i}", "i4", ("t", "x"))
                    u.set_auto_maskandscale(False)
                    u.setncattr("_Unsigned", "true")
                    u.setncattr("scale_factor", np.float32(-INF))
                    u[0:1] = np.zeros((1, 5), "i4")
    return str(path)


def test_many_variables_agree_with_netcdf4(tmp_path):
    path = many(tmp_path / "many.nc")
    report = scan([path])
    ours = {t.name: t for t in report.tensors}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth = oracle_netcdf(path)
    assert truth["ok"] and not truth["unverified"], truth
    with netCDF4.Dataset(path) as d:
        lengths = {g.path.strip("/"): len(g.dimensions["t"]) for g in (d, d["sub"])}
    unwritten = 0
    for name, [(nan, posinf, neginf, *_)] in truth["tensors"].items():
        t = ours[name]
        if name.rpartition("/")[2].startswith("unwritten") and "@" not in name:
            # records past those written read as the fill, -Inf: not stored, so not counted
            assert lengths[name.rpartition("/")[0]] == 3 and neginf == 10
            assert t.status == "unchecked" and "fill value" in t.reason, (name, t.reason)
            unwritten += 1
            continue
        assert t.status == "checked", (name, t.status, t.reason)
        assert (t.nan, t.posinf, t.neginf) == (nan, posinf, neginf), name
    assert unwritten == 6
    # every float attribute netCDF4 reads is a tensor of the report, and no other tensor
    floats = {n for n in truth["tensors"]}
    assert {n for n in ours if "@" in n} == {n for n in floats if "@" in n}


def test_attribute_names_are_h5pys(tmp_path):
    path = tmp_path / "a.h5"
    with h5py.File(path, "w", track_order=True) as f:
        f.attrs["z"], f.attrs["a"] = 1.0, 2
        g = f.create_group("tracked", track_order=True)
        plain = f.create_group("plain", track_order=False)
        for obj in (g, plain, f.create_dataset("d", data=np.ones(3)),
                    f.create_dataset("t", data=np.ones(3), track_order=True)):
            for name in ("zeta", "alpha", "mid", "ünï", "b"):
                obj.attrs[name] = np.nan
        f.create_group("none")
    with h5py.File(path, "r") as f:
        seen = 0
        for node, oid, _, count in walk(h5py, f, str(path), "", []):
            obj = f["/" + name_of(node)]
            assert count == len(obj.attrs)
            for known in (count, None):
                names, _ = attribute_names(h5py, oid, known)
                assert names == list(obj.attrs), obj.name
            seen += 1
        assert seen == 6
        # both orders occur: creation order where tracked, else name order
        assert list(f["tracked"].attrs) != sorted(f["tracked"].attrs)
        assert list(f["plain"].attrs) == sorted(f["plain"].attrs)


def test_attribute_names_not_utf8_are_bytes_as_in_h5py(tmp_path):
    path = tmp_path / "b.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.ones(2))
        aid = h5py.h5a.create(d.id, b"ok\xff", h5py.h5t.IEEE_F64LE,
                              h5py.h5s.create(h5py.h5s.SCALAR))
        aid.write(np.array(np.nan))
    with h5py.File(path, "r") as f:
        assert attribute_names(h5py, f["d"].id)[0] == list(f["d"].attrs) == [b"ok\xff"]


def _types():
    h5t = h5py.h5t
    cpx = np.dtype([("r", "<f4"), ("i", "<f4")])
    out = {name: h5t.py_create(np.dtype(dt), logical=True) for name, dt in {
        "f4": "<f4", ">f8": ">f8", "f2": "<f2", "i4": "<i4", "u1": "u1", "bool": "?",
        "S5": "S5", "c8": "<c8", "complex compound": cpx,
        "ints": [("a", "<i4"), ("b", "S2")], "mixed": [("a", "<i4"), ("b", "<f8")],
        "nested ints": [("a", [("x", "<i2"), ("y", "u1")]), ("b", "<i8")],
        "nested float": [("a", [("x", "<i2"), ("y", "<f4")]), ("b", "<i8")],
        "int array": ("<i4", (3,)), "float array": ("<f4", (2, 2)),
    }.items()}
    out["vlen str"] = h5t.py_create(h5py.string_dtype(), logical=True)
    out["vlen f4"] = h5t.py_create(h5py.vlen_dtype(np.float32), logical=True)
    out["vlen i4"] = h5t.py_create(h5py.vlen_dtype(np.int32), logical=True)
    out["ref"] = h5t.py_create(h5py.ref_dtype, logical=True)
    out["region ref"] = h5t.py_create(h5py.regionref_dtype, logical=True)
    out["opaque"] = h5t.py_create(np.dtype("V4"), logical=True)
    out["enum"] = h5t.py_create(h5py.enum_dtype({"a": 0, "b": 1}, basetype="i1"), logical=True)
    ref_list = h5t.create(h5t.COMPOUND, 16)
    ref_list.insert(b"dataset", 0, h5t.STD_REF_OBJ)
    ref_list.insert(b"dimension", 8, h5t.STD_U32LE)
    out["REFERENCE_LIST"] = ref_list
    out["empty compound"] = h5t.create(h5t.COMPOUND, 4)
    out["bitfield"] = h5t.STD_B16LE.copy()
    return out


@pytest.mark.parametrize("name", sorted(_types()))
def test_holds_no_floats_is_what_the_leaves_say(name):
    tid = _types()[name]
    assert holds_no_floats(h5py, tid) == all(p.status == NOT_APPLICABLE
                                             for p in parts(h5py, tid)), name


def _scale_file(path, n=6):
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("t", None)
        d.createDimension("x", 4)
        for i in range(n):
            d.createVariable(f"v{i}", "f4", ("t", "x") if i % 2 else ("x", "t"))[...] = \
                np.ones((2, 4) if i % 2 else (4, 2), "f4")
    return path


def _dereferenced(f, scale):
    """[(address, axis)] of a scale's REFERENCE_LIST as h5py reads it, each reference opened."""
    listed = scale.attrs["REFERENCE_LIST"]
    return [(h5py.h5o.get_info(h5py.h5r.dereference(r, f.id)).addr, int(a))
            for r, a in zip(listed["dataset"], listed["dimension"])]


def _attributes(obj):
    """The planner's Attributes of h5py object `obj`."""
    return Attributes(h5py, obj.id, attribute_names(h5py, obj.id)[0])


def _add(dims, f, name, address=None):
    """Dimensions.add of dataset `name` as the plan adds it."""
    d = f[name]
    attrs = _attributes(d)
    dims.add(name, 0, 0, h5py.h5o.get_info(d.id).addr if address is None else address,
             d.shape, class_of(attrs), attrs)


def test_reference_lists_read_as_addresses_are_h5pys_dereferenced(tmp_path):
    path = _scale_file(tmp_path / "s.nc")
    with h5py.File(path, "r") as f:
        dims = Dimensions(h5py, f)
        walked = {}
        for node, oid, address, _ in walk(h5py, f, str(path), "", []):
            if isinstance(oid, h5py.h5d.DatasetID):
                walked["/" + name_of(node)] = address
                assert address == h5py.h5o.get_info(oid).addr
        for name in ("t", "x"):
            got = dims._attached(_attributes(f[name]))
            assert got == _dereferenced(f, f[name]) and len(got) == 6
            assert {a for a, _ in got} == {walked[f"/v{i}"] for i in range(6)}


def test_a_reference_list_of_another_layout_is_dereferenced(tmp_path):
    # a compound HDF5's dimension scales do not write (a 64-bit axis, other member names):
    # h5py reads it and each reference is opened, as before
    path = tmp_path / "o.h5"
    with h5py.File(path, "w") as f:
        a, b = f.create_dataset("a", data=np.ones(3)), f.create_dataset("b", data=np.ones(3))
        s = f.create_dataset("s", data=np.arange(3.0))
        s.attrs["CLASS"] = np.bytes_(b"DIMENSION_SCALE")
        wide = np.dtype([("dataset", h5py.ref_dtype), ("dimension", "<i8")])
        s.attrs["REFERENCE_LIST"] = np.array([(a.ref, 0), (b.ref, 0)], wide)
        t = f.create_dataset("t", data=np.arange(3.0))
        t.attrs["CLASS"] = np.bytes_(b"DIMENSION_SCALE")
        named = np.dtype([("ds", h5py.ref_dtype), ("dim", "<u4")])
        t.attrs["REFERENCE_LIST"] = np.array([(a.ref, 0)], named)
    with h5py.File(path, "r") as f:
        dims = Dimensions(h5py, f)
        assert dims._attached(_attributes(f["s"])) == _dereferenced(f, f["s"])
        with pytest.raises(ValueError):  # no field "dataset": h5py refuses, nothing recorded
            dims._attached(_attributes(f["t"]))
        _add(dims, f, "t")
        assert dims.scales == []


def test_a_short_variable_behind_a_scale_of_another_layout_is_still_found(tmp_path):
    # netCDF's own file, its REFERENCE_LIST rewritten with a 64-bit axis (the dereferencing
    # path): the short variable whose fill decodes to an unmasked -Inf is still unchecked
    path = tmp_path / "r.nc"
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("t", None)
        d.createVariable("long", "f4", ("t",))[0:5] = np.ones(5, "f4")
        u = d.createVariable("short", "i4", ("t",))
        u.set_auto_maskandscale(False)
        u.setncattr("_Unsigned", "true")
        u.setncattr("scale_factor", np.float32(-INF))
        u[0:2] = np.zeros(2, "i4")
    with h5py.File(path, "r+") as f:
        listed = f["t"].attrs["REFERENCE_LIST"]
        wide = np.dtype([("dataset", h5py.ref_dtype), ("dimension", "<i8")])
        del f["t"].attrs["REFERENCE_LIST"]
        f["t"].attrs["REFERENCE_LIST"] = np.array(
            [(r, a) for r, a in zip(listed["dataset"], listed["dimension"])], wide)
    with warnings.catch_warnings(), netCDF4.Dataset(path) as d:
        warnings.simplefilter("ignore")
        assert np.isneginf(np.ma.getdata(d["short"][...])[2:]).all()
    ours = {t.name: t for t in scan([path]).tensors}
    assert ours["long"].status == "checked"
    assert ours["short"].status == "unchecked" and "fill value" in ours["short"].reason
