"""HDF5 / NetCDF-4 planning through h5py's low-level ids (issue 22): each attribute opened and
typed once (readers/hdf5_attributes.py), its value read as h5py's `obj.attrs[name]` reads it,
CLASS and NAME of one plain string compared on their bytes, and type answers remembered per file
(hdf5_types.Types). Each shortcut against h5py's own reading of the same file."""

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from fpclass.scan.readers.hdf5_attributes import (  # noqa: E402
    SCALE, Attributes, class_of, float_attributes)
from fpclass.scan.readers.hdf5_netcdf import BARE, is_bare_dimension  # noqa: E402
from fpclass.scan.readers.hdf5_types import Types, holds_no_floats, parts  # noqa: E402
from fpclass.scan.readers.hdf5_walk import attribute_names  # noqa: E402

NAN, INF = float("nan"), float("inf")
h5t, h5s, h5a = h5py.h5t, h5py.h5s, h5py.h5a


def _attrs(obj):
    return Attributes(h5py, obj.id, attribute_names(h5py, obj.id)[0])


def _text_type(size, pad, cset=h5t.CSET_ASCII):
    t = h5t.C_S1.copy()
    t.set_size(size)
    t.set_strpad(pad)
    t.set_cset(cset)
    return t


def _put(obj, name, tid, data, shape=()):
    """Attribute `name` of HDF5 type `tid` holding the bytes of `data` (a scalar where shape is
    ())."""
    space = h5s.create(h5s.SCALAR) if shape == () else h5s.create_simple(shape)
    aid = h5a.create(obj.id, name.encode(), tid, space)
    aid.write(np.asarray(data), mtype=tid)


def _same(ours, theirs, f) -> bool:
    """Whether two values read from file `f` are the same (references: naming one object)."""
    if isinstance(theirs, h5py.Empty):
        return isinstance(ours, h5py.Empty) and ours.dtype == theirs.dtype
    if isinstance(theirs, h5py.Reference):
        return isinstance(ours, h5py.Reference) and f[ours].name == f[theirs].name
    if type(ours) is not type(theirs):
        return False
    a, b = np.asarray(ours), np.asarray(theirs)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.names:
        return all(_same(a[k], b[k], f) for k in b.dtype.names)
    if a.dtype.kind == "O":
        return all(_same(x, y, f) for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
    return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def test_values_are_what_h5py_reads(tmp_path):
    path = tmp_path / "values.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.ones(3))
        a = d.attrs
        a["f4"] = np.float32(NAN)
        a["f8s"] = np.array([1.0, INF, NAN])
        a["i2"] = np.arange(6, dtype=">i2").reshape(2, 3)
        a["u1"] = np.uint8(7)
        a["bool"] = np.array([True, False])
        a["c16"] = np.array([1 + 2j, NAN])
        a["fixed"] = np.bytes_(b"abc")
        a["fixed_array"] = np.array([b"a", b"bcd"])
        a["vlen"] = "t\u00e9xt"
        a["vlen_array"] = np.array(["x", "yz"], dtype=h5py.string_dtype())
        a["empty"] = h5py.Empty("f4")
        a["compound"] = np.array([(1, NAN), (2, 3.0)], dtype=[("a", "<i4"), ("b", "<f8")])
        _put(d, "array_type", h5t.array_create(h5t.IEEE_F32LE, (3,)),
             np.array([[1, NAN, 3], [INF, 5, 6]], "<f4"), (2,))
        a["enum"] = np.array([0, 1], dtype=h5py.enum_dtype({"x": 0, "y": 1}, basetype="i1"))
        a["ref"] = d.ref
        a["reference_list"] = np.array([(d.ref, 0)], dtype=[("dataset", h5py.ref_dtype),
                                                            ("dimension", "<u4")])
        vlen = np.empty(2, dtype=h5py.vlen_dtype(np.float64))
        vlen[0], vlen[1] = np.array([1.0, NAN]), np.array([INF])
        a["vlen_floats"] = vlen
        for pad in (h5t.STR_NULLTERM, h5t.STR_NULLPAD, h5t.STR_SPACEPAD):
            _put(d, f"pad{pad}", _text_type(8, pad), np.bytes_(b"ab\0c   "))
    with h5py.File(path, "r") as f:
        d = f["d"]
        attrs = _attrs(d)
        assert attrs.names == list(d.attrs) and len(attrs.names) == 20
        for name in attrs.names:
            ours, theirs = attrs.value(name), d.attrs[name]
            assert _same(ours, theirs, f), (name, ours, theirs)


def _class_file(path):
    """Datasets whose CLASS is written in many ways: HDF5's own (16-byte NUL-terminated),
    other paddings, sizes and character sets, trailing junk, variable-length text, arrays,
    numbers."""
    cases = {
        "hdf5": (_text_type(16, h5t.STR_NULLTERM), b"DIMENSION_SCALE\0", ()),
        "exact": (_text_type(15, h5t.STR_NULLTERM), b"DIMENSION_SCALE", ()),
        "nullpad": (_text_type(20, h5t.STR_NULLPAD), b"DIMENSION_SCALE".ljust(20, b"\0"), ()),
        "spacepad": (_text_type(20, h5t.STR_SPACEPAD), b"DIMENSION_SCALE".ljust(20), ()),
        "utf8": (_text_type(16, h5t.STR_NULLTERM, h5t.CSET_UTF8), b"DIMENSION_SCALE\0", ()),
        "junk": (_text_type(20, h5t.STR_NULLTERM), b"DIMENSION_SCALE\0junk", ()),
        "junk_nullpad": (_text_type(20, h5t.STR_NULLPAD), b"DIMENSION_SCALE\0junk", ()),
        "longer": (_text_type(16, h5t.STR_NULLPAD), b"DIMENSION_SCALEX", ()),
        "shorter": (_text_type(14, h5t.STR_NULLPAD), b"DIMENSION_SCAL", ()),
        "image": (_text_type(16, h5t.STR_NULLTERM), b"IMAGE".ljust(16, b"\0"), ()),
        "one_element": (_text_type(16, h5t.STR_NULLTERM),
                        np.array([b"DIMENSION_SCALE\0"], "S16"), (1,)),
        "two_elements": (_text_type(16, h5t.STR_NULLTERM),
                         np.array([b"DIMENSION_SCALE\0"] * 2, "S16"), (2,)),
    }
    with h5py.File(path, "w") as f:
        for name, (tid, data, shape) in cases.items():
            _put(f.create_dataset(name, shape=(3,), dtype="<f4"), "CLASS", tid, data, shape)
        f.create_dataset("vlen", shape=(3,), dtype="<f4").attrs["CLASS"] = "DIMENSION_SCALE"
        f.create_dataset("number", shape=(3,), dtype="<f4").attrs["CLASS"] = 7
        f.create_dataset("none", shape=(3,), dtype="<f4")
    return list(cases) + ["vlen", "number", "none"]


def _says_scale(value):
    try:
        return not (value != SCALE)
    except ValueError as e:  # h5py's value an array of several: no truth value
        return type(e)


def test_class_is_h5pys(tmp_path):
    path = tmp_path / "class.h5"
    names = _class_file(path)
    with h5py.File(path, "r") as f:
        fast = 0
        for name in names:
            attrs = _attrs(f[name])
            assert _says_scale(class_of(attrs)) == _says_scale(f[name].attrs.get("CLASS", b"")), \
                name
            fast += "CLASS" in attrs and attrs.one_text("CLASS") is not None
        assert fast == 11  # the fixed-length strings of one element: compared on their bytes
        assert [n for n in names if _says_scale(class_of(_attrs(f[n]))) is True] == \
            ["hdf5", "exact", "nullpad", "spacepad", "utf8", "junk", "one_element"]


def test_bare_dimensions_are_told_by_h5pys_name(tmp_path):
    path = tmp_path / "name.h5"
    text = BARE + b".      3"
    cases = {
        "netcdf": (_text_type(64, h5t.STR_NULLTERM), text.ljust(64, b"\0"), ()),
        "spacepad": (_text_type(64, h5t.STR_SPACEPAD), text.ljust(64), ()),
        "cut": (_text_type(20, h5t.STR_NULLTERM), text[:20], ()),
        "nul_inside": (_text_type(64, h5t.STR_NULLPAD), (b"This\0" + text).ljust(64, b"\0"),
                       ()),
        "other": (_text_type(16, h5t.STR_NULLTERM), b"x".ljust(16, b"\0"), ()),
        "one_element": (_text_type(64, h5t.STR_NULLTERM),
                        np.array([text.ljust(64, b"\0")], "S64"), (1,)),
    }
    with h5py.File(path, "w") as f:
        for name, (tid, data, shape) in cases.items():
            d = f.create_dataset(name, shape=(3,), dtype="<f4")  # never written
            d.attrs["CLASS"] = np.bytes_(SCALE)
            _put(d, "NAME", tid, data, shape)
        d = f.create_dataset("vlen", shape=(3,), dtype="<f4")
        d.attrs["CLASS"] = np.bytes_(SCALE)
        d.attrs["NAME"] = text.decode()
        f.create_dataset("no_name", shape=(3,), dtype="<f4").attrs["CLASS"] = np.bytes_(SCALE)
        written = f.create_dataset("written", data=np.ones(3, "<f4"))
        written.attrs["CLASS"] = np.bytes_(SCALE)
        written.attrs["NAME"] = np.bytes_(text)
    with h5py.File(path, "r") as f:
        got = {}
        for name in f:
            d = f[name]
            value = d.attrs.get("NAME", b"")
            value = value if isinstance(value, bytes) else str(value).encode()
            truth = d.id.get_storage_size() == 0 and value.startswith(BARE)
            got[name] = is_bare_dimension(d.id, SCALE, _attrs(d))
            assert got[name] == truth, name
        assert sorted(n for n, bare in got.items() if bare) == ["netcdf", "spacepad", "vlen"]


def _types():
    cpx = np.dtype([("r", "<f4"), ("i", "<f4")])
    out = [h5t.py_create(np.dtype(dt), logical=True) for dt in (
        "<f4", ">f4", "<f8", "<f2", "<i4", "u1", "?", "S5", "<c8", cpx,
        [("a", "<i4"), ("b", "S2")], [("a", "<i4"), ("b", "<f8")], [("b", "<i4"), ("a", "<f8")],
        [("a", "<i4"), ("b", "<i8")], ("<f4", (3,)), ("<i4", (3,)), ("<f4", (2, 2)))]
    out += [h5t.py_create(h5py.vlen_dtype(np.float32), logical=True),
            h5t.py_create(h5py.vlen_dtype(np.int32), logical=True),
            h5t.py_create(h5py.ref_dtype, logical=True)]
    for dim in (h5t.STD_U32LE, h5t.STD_I64LE):  # REFERENCE_LIST records, and a wider one
        t = h5t.create(h5t.COMPOUND, 16)
        t.insert(b"dataset", 0, h5t.STD_REF_OBJ)
        t.insert(b"dimension", 8, dim)
        out.append(t)
    # compounds H5Tequal finds equal whatever their members' order, whose parts differ:
    # complex only as (r, i), the leaves in the members' order
    for names in (["r", "i"], ["i", "r"], ["a", "b"], ["b", "a"]):
        dt = np.dtype({"names": names, "formats": ["<f4", "<f4"],
                       "offsets": [0, 4] if names[0] < names[1] else [4, 0], "itemsize": 8})
        out += [h5t.py_create(dt), h5t.py_create(np.dtype((dt, (2,)))),
                h5t.py_create(h5py.vlen_dtype(dt), logical=True)]
    return out


def test_type_answers_remembered_are_those_of_each_type():
    types = Types(h5py)
    for _ in range(2):  # remembered the second time, and for equal copies
        for tid in _types() + [t.copy() for t in _types()]:
            assert types.parts(tid) == parts(h5py, tid)
            assert types.holds_no_floats(tid) == holds_no_floats(h5py, tid)


def test_attributes_are_not_held_open(tmp_path):
    # HDF5 looks through every open attribute at each open: an object's attributes are
    # opened one at a time, whatever their number
    path = tmp_path / "many.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.ones(2))
        for i in range(50):
            d.attrs[f"a{i}"] = np.float32(i) if i % 2 else np.int32(i)
    with h5py.File(path, "r") as f:
        attrs = _attrs(f["d"])
        tasks = float_attributes(h5py, attrs, str(path), "d", Types(h5py))
        assert [t.name for t in tasks] == [f"d@a{i}" for i in sorted(range(1, 50, 2), key=str)]
        assert h5py.h5f.get_obj_count(f.id, h5py.h5f.OBJ_ATTR) == 0


def test_a_compound_like_an_earlier_complex_type_keeps_its_own_parts(tmp_path):
    # {i@4, r@0} is H5Tequal to h5py's complex64 {r@0, i@4}: a float attribute of that type
    # holding NaN after a complex dataset must still be read as its two fields
    from fpclass.scan import scan
    ir = np.dtype({"names": ["i", "r"], "formats": ["<f4", "<f4"], "offsets": [4, 0],
                   "itemsize": 8})
    path = tmp_path / "fill.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.array([1 + 1j], np.complex64)
        f.create_group("g").attrs["_FillValue"] = np.array([(np.nan, np.nan)], ir)
    with h5py.File(path, "r") as f:  # h5py's own reading: NaN in both fields
        held = f["g"].attrs["_FillValue"]
        assert np.isnan(held["r"]).all() and np.isnan(held["i"]).all()
    report = scan([str(path)])
    assert report.exit_code == 1
    assert report.summary()["nan"] == 2
