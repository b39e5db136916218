"""CF packed variables, missing values and float attributes in NetCDF classic, NetCDF-4 and HDF5
files, judged against netCDF4 (its default auto mask and scale) and h5py reading the same file."""

import json
import time
import warnings

import numpy as np
import pytest

from cf_fuzz import oracle_hdf5, oracle_netcdf

h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")

from fpclass.scan import ExitCode, scan  # noqa: E402
from fpclass.scan.missing import cf  # noqa: E402
from fpclass.scan.engine import run_task  # noqa: E402
from fpclass.scan.engine import plan as plan_paths  # noqa: E402

NAN, INF = float("nan"), float("inf")
FORMATS = ["NETCDF3_CLASSIC", "NETCDF3_64BIT_DATA", "NETCDF4"]


def _ours(path, **kw):
    report = scan([path], **kw)
    return report, {t.name: t for t in report.tensors}


def _agree(path, names=None):
    """Every variable and float attribute netCDF4 reads has the same NaN/+Inf/-Inf counts in
    fpclass's report, checked; returns (report, {name: result})."""
    report, ours = _ours(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # netCDF4 warns of the overflows it returns
        truth = oracle_netcdf(path)
    assert truth["ok"], truth
    for name, [expected] in truth["tensors"].items():
        if names is not None and name not in names:
            continue
        assert name in ours, (name, sorted(ours))
        t = ours[name]
        assert t.status == "checked", (name, t.status, t.reason)
        assert (t.nan, t.posinf, t.neginf) == tuple(expected), (name, t.dtype, expected)
    return report, ours


def _netcdf(path, fmt, build):
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("x", 6)
        ds.createDimension("t", None)
        build(ds)
    return str(path)


def _packed(ds, name, dtype, values, dims=("x",), fill=None, **attrs):
    v = ds.createVariable(name, dtype, dims, fill_value=fill)
    v.set_auto_maskandscale(False)
    for k, a in attrs.items():
        v.setncattr(k, a)
    v[...] = np.asarray(values, dtype)
    return v


@pytest.mark.parametrize("fmt", FORMATS)
def test_non_finite_scale_or_offset_makes_every_unmasked_value_non_finite(tmp_path, fmt):
    def build(ds):
        _packed(ds, "nan_scale", "i2", [1, 2, -999, 4, 5, 6], fill=np.int16(-999),
                scale_factor=np.float32(NAN))
        _packed(ds, "inf_offset", "i2", [1, 2, 3, 4, 5, 6], add_offset=np.float32(INF),
                scale_factor=np.float32(0.5), missing_value=np.int16(3))
        _packed(ds, "neg_inf_scale", "i4", [0, 2, -2, 7, 8, 9], scale_factor=np.float64(-INF),
                valid_range=np.array([-5, 7], "i4"))
    path = _netcdf(tmp_path / "p.nc", fmt, build)
    _, ours = _agree(path)
    assert ours["nan_scale"].nan == 5 and ours["nan_scale"].missing == 1
    assert ours["nan_scale"].dtype == "int16 packed as float32"
    assert ours["inf_offset"].posinf == 5 and ours["inf_offset"].missing == 1
    # 0 * -inf is NaN; 8 and 9 lie outside the valid range (masked: out of range, not missing)
    assert (ours["neg_inf_scale"].nan, ours["neg_inf_scale"].posinf,
            ours["neg_inf_scale"].neginf, ours["neg_inf_scale"].missing,
            ours["neg_inf_scale"].out_of_range) == (1, 1, 2, 0, 2)
    assert ours["neg_inf_scale"].dtype == "int32 packed as float64"
    assert scan([path]).exit_code == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_overflowing_products_are_counted_exactly(tmp_path, fmt):
    values = np.arange(-5, 13, dtype="i2").reshape(3, 6)

    def build(ds):
        _packed(ds, "big", "i2", values, dims=("t", "x"), fill=np.int16(3),
                scale_factor=np.float32(1e38), add_offset=np.float32(1.0))
        _packed(ds, "plain", "i2", values[0], scale_factor=np.float32(0.01))
    path = _netcdf(tmp_path / "o.nc", fmt, build)
    _, ours = _agree(path)
    # |v| >= 4 overflows float32; 3 is the fill value: missing
    assert (ours["big"].posinf, ours["big"].neginf, ours["big"].missing) == (9, 2, 1)
    assert ours["plain"].status == "checked" and ours["plain"].nonfinite == 0


def test_packed_data_is_decoded_in_bounded_blocks(tmp_path):
    values = np.arange(40_000, dtype="i2").reshape(200, 200)

    def build(ds):
        ds.createDimension("y", 200)
        ds.createDimension("z", 200)
        _packed(ds, "v", "i2", values, dims=("y", "z"), scale_factor=np.float32(1e36))
    path = _netcdf(tmp_path / "b.nc", "NETCDF3_CLASSIC", build)
    seen = []
    p = cf.Policy(">i2", scale=(1e36, "<f4"))
    for origin, block in cf.decode_blocks([((0, 0), values.astype(">i2"))], p, 4096):
        seen.append((origin, block.shape))
        assert block.nbytes <= 4096
    assert seen[1][0] == (seen[0][1][0], 0) and sum(s[0] for _, s in seen) == 200
    _, small = _ours(path, chunk_bytes=4096)
    _, whole = _agree(path)
    v = small["v"]
    assert (v.nan, v.posinf, v.neginf, v.missing) == (whole["v"].nan, whole["v"].posinf,
                                                      whole["v"].neginf, whole["v"].missing)
    assert v.posinf > 0 and v.neginf > 0 and v.missing == 1  # -32767: the default fill


@pytest.mark.parametrize("fmt", FORMATS)
def test_masked_infinities_are_missing_as_netcdf4_reads_them(tmp_path, fmt):
    def build(ds):
        v = ds.createVariable("f", "f4", ("x",))
        v.valid_max = np.float32(10)
        v[:] = [1, INF, -INF, NAN, 3, 4]
        w = ds.createVariable("g", "f8", ("x",), fill_value=np.float64(-INF))
        w[:] = [1, INF, -INF, NAN, 3, 4]
    path = _netcdf(tmp_path / "m.nc", fmt, build)
    _, ours = _agree(path)
    # +Inf lies above valid_max: masked, counted out of range
    assert (ours["f"].nan, ours["f"].posinf, ours["f"].neginf, ours["f"].missing,
            ours["f"].out_of_range) == (1, 0, 1, 0, 1)
    assert (ours["g"].nan, ours["g"].posinf, ours["g"].neginf, ours["g"].missing) == (1, 1, 0, 1)


def test_unsigned_and_integer_scales(tmp_path):
    def build(ds):
        _packed(ds, "u", "i2", [-1, 0, 1, 2, 3, 4], _Unsigned="true", add_offset=np.float32(INF))
        _packed(ds, "int_scale", "i2", [1, 2, 3, 4, 5, 6], scale_factor=np.int16(2))
        _packed(ds, "text_scale", "i2", [1, 2, 3, 4, 5, 6], scale_factor="0.5")
    path = _netcdf(tmp_path / "u.nc", "NETCDF4", build)
    _, ours = _agree(path, names={"u"})
    assert ours["u"].posinf == 6
    assert ours["int_scale"].status == "not_applicable"
    assert ours["text_scale"].status == "unchecked"  # netCDF4 fails reading it
    with netCDF4.Dataset(path) as ds, pytest.raises(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds["text_scale"][:]


@pytest.mark.parametrize("fmt", FORMATS)
def test_float_attributes_are_checked(tmp_path, fmt):
    def build(ds):
        ds.history_value = np.float64(INF)
        v = ds.createVariable("v", "f4", ("x",), fill_value=np.float32(NAN))
        v[:] = np.arange(6)
        v.coefficients = np.array([1.0, NAN, -INF], "f8")
        v.missing_value = np.array([NAN, INF], "f4")
        v.units = "K"
        v.count = np.int32(3)
    path = _netcdf(tmp_path / "a.nc", fmt, build)
    report, ours = _agree(path)
    assert (ours["@history_value"].posinf, ours["v@coefficients"].nan,
            ours["v@coefficients"].neginf) == (1, 1, 1)
    # a NaN fill or missing value is the declared blank, not a finding; an infinite one is
    assert ours["v@_FillValue"].nonfinite == 0 and ours["v@_FillValue"].status == "checked"
    assert (ours["v@missing_value"].nan, ours["v@missing_value"].posinf) == (0, 1)
    assert "v@units" not in ours and "v@count" not in ours
    assert report.exit_code == 1


def test_hdf5_attributes_of_file_groups_and_datasets(tmp_path):
    path = str(tmp_path / "a.h5")
    with h5py.File(path, "w") as f:
        f.attrs["lr"] = np.float32(NAN)
        g = f.create_group("g/h")
        g.attrs["scale"] = np.array([1.0, INF], ">f8")
        d = g.create_dataset("d", data=np.ones(3, "f4"))
        d.attrs["c"] = np.complex64(complex(1, -INF))
        d.attrs["name"] = "text"
        d.attrs["ints"] = np.arange(3)
        cmp = np.zeros(2, [("a", "<f4"), ("b", "<i4")])
        cmp["a"] = [NAN, 1]
        d.attrs["rec"] = cmp
    report, ours = _ours(path)
    truth = oracle_hdf5(path)
    for name, [expected] in truth["tensors"].items():
        assert (ours[name].nan, ours[name].posinf, ours[name].neginf) == expected, name
    assert {"@lr", "g/h@scale", "g/h/d@c", "g/h/d@rec.a"} <= set(ours)
    assert ours["g/h/d@rec.a"].nan == 1 and ours["g/h/d@c"].neginf == 1
    assert not {"g/h/d@name", "g/h/d@ints", "g/h/d@rec.b"} & set(ours)
    assert report.exit_code == 1


def test_classic_names_end_at_their_nul(tmp_path):
    path = _netcdf(tmp_path / "n.nc", "NETCDF3_CLASSIC",
                   lambda ds: ds.createVariable("abc", "f4", ("x",)).__setitem__(
                       slice(None), [NAN] * 6))
    with open(path, "r+b") as f:
        at = f.read().index(b"\x00\x00\x00\x03abc\x00")
        f.seek(at)
        f.write(b"\x00\x00\x00\x04")  # the name's length now counts its padding NUL
    with netCDF4.Dataset(path) as ds:
        assert list(ds.variables) == ["abc"]
    _, ours = _agree(path)
    assert list(ours) == ["abc"]


def test_nested_groups_are_walked_in_linear_time(tmp_path):
    path = str(tmp_path / "deep.h5")
    with h5py.File(path, "w") as f:
        g = f
        for _ in range(2000):
            g = g.create_group("g")
        g["d"] = np.array([1.0, NAN])
        g.attrs["a"] = np.float64(INF)
    start = time.perf_counter()
    report = scan([path])
    assert time.perf_counter() - start < 5  # was 30 s (a path lookup per object)
    found = {t.name: t for t in report.tensors}
    assert len(found) == 2
    assert found["/".join(["g"] * 2000) + "/d"].nan == 1
    assert found["/".join(["g"] * 2000) + "@a"].posinf == 1


def test_bare_netcdf4_dimensions_are_not_tensors(tmp_path):
    def build(ds):
        ds.createVariable("v", "f4", ("t", "x"))[0:2] = np.ones((2, 6))
        ds.createVariable("x", "f8", ("x",))[:] = np.arange(6)  # a coordinate variable
    path = _netcdf(tmp_path / "d.nc", "NETCDF4", build)
    _, ours = _ours(path)
    with netCDF4.Dataset(path) as ds:
        assert set(ours) == set(ds.variables) == {"v", "x"}


def test_records_past_a_short_variable_read_as_its_fill(tmp_path):
    def build(ds):
        ds.createVariable("long", "f4", ("t", "x"))[0:3] = np.ones((3, 6))
        _packed(ds, "short", "i4", np.zeros((0, 6)), dims=("t", "x"), _Unsigned="true",
                scale_factor=np.float32(-INF))
        _packed(ds, "masked", "i2", np.zeros((1, 6)), dims=("t", "x"),
                scale_factor=np.float32(NAN))
    path = _netcdf(tmp_path / "r.nc", "NETCDF4", build)
    with netCDF4.Dataset(path) as ds:
        assert np.isneginf(ds["short"][:]).sum() == 18  # never written: the fill value
    _, ours = _agree(path, names={"long", "masked"})
    assert ours["short"].status == "unchecked" and "fill value" in ours["short"].reason


def test_policy_matches_netcdf4_on_edge_attributes():
    # a NaN missing_value of an integer variable does not convert: it declares nothing
    p, missing, why = cf.policy({"missing_value": np.array([NAN]),
                                 "scale_factor": np.array([2.0], "f4")}, "<i2")
    assert p.blanks == ((-32767, "<i2"),) and not missing and not why
    # scale 1 and offset 0 only cast; a lone scale of 1 changes nothing
    assert cf.policy({"scale_factor": np.float32(1), "add_offset": np.float32(0)},
                     "<i2")[0].physical == np.float32
    assert cf.policy({"scale_factor": np.float32(1)}, "<i2")[0] is None
    # a scale of several values is not applied (netCDF4 warns and does not unpack)
    assert cf.policy({"scale_factor": np.array([1.0, 2.0])}, "<i2")[0] is None
    # a float variable whose only blank is NaN needs no decoding
    assert cf.policy({"_FillValue": np.float32(NAN)}, "<f4") == (None, True, "")


def test_tasks_of_packed_variables_carry_their_policy(tmp_path):
    path = _netcdf(tmp_path / "t.nc", "NETCDF3_CLASSIC",
                   lambda ds: _packed(ds, "v", "i2", np.arange(6),
                                      scale_factor=np.float32(INF)))
    (task,) = [t for t in plan_paths([path]) if t.name == "v"]
    assert task.storage.decode is not None and task.element == "<f4"
    assert run_task(task).posinf == 5 and run_task(task).nan == 1


def test_attribute_counts_are_bounded_and_never_dropped_silently(tmp_path, monkeypatch):
    from fpclass.scan.readers import hdf5
    monkeypatch.setattr(cf, "ATTRIBUTE_LIMIT", 3)
    monkeypatch.setattr(hdf5, "OBJECT_ATTRIBUTES", 5)

    def build(ds):
        for i in range(5):
            ds.setncattr(f"a{i}", np.float32(NAN))
    path = _netcdf(tmp_path / "many.nc", "NETCDF3_CLASSIC", build)
    report = scan([path])
    assert len(report.tensors) == 3 and report.exit_code == 1
    assert "2 float attributes beyond the first 3" in report.problems[0].reason
    h5 = str(tmp_path / "many.h5")
    with h5py.File(h5, "w") as f:
        for i in range(6):
            f.attrs[f"a{i}"] = np.float32(1)
        f.create_dataset("d", data=np.ones(2))
    (attrs, d) = scan([h5]).tensors
    assert attrs.status == "unchecked" and "6 attributes are not read" in attrs.reason
    assert d.status == "checked"


def test_deep_nesting_stays_within_time_and_memory(tmp_path):
    """20,000 nested groups (2.6 MB): HDF5's own visit overflows its C stack here, and holding
    every ancestor group open cost 1.4 GB; the walk reopens groups by reference instead."""
    import subprocess
    import sys
    path = str(tmp_path / "deep.h5")
    with h5py.File(path, "w", libver="latest") as f:
        g = f
        for _ in range(20_000):
            g = g.create_group("g")
        g["d"] = np.array([1.0, NAN])
    # the child's own peak (VmHWM): ru_maxrss carries over the parent's (pytest's) across exec
    code = ("import sys, time\n"
            "from fpclass.scan import scan\n"
            "t = time.perf_counter(); r = scan([sys.argv[1]])\n"
            "peak = next(int(line.split()[1]) for line in open('/proc/self/status')\n"
            "            if line.startswith('VmHWM:'))\n"
            "print(r.exit_code, r.tensors[0].nan, time.perf_counter() - t, peak / 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    exit_code, nan, seconds, peak_mb = out.stdout.split()
    assert (exit_code, nan) == ("1", "1")
    assert float(seconds) < 10 and float(peak_mb) < 512, out.stdout


def test_a_file_of_more_objects_than_the_limit_is_refused(tmp_path, monkeypatch):
    # each HDF5 object costs the walk ~70 us: past MAX_OBJECTS a file could exceed the time bound
    from fpclass.scan.readers import hdf5 as reader
    path = tmp_path / "many.h5"
    with h5py.File(path, "w") as f:
        for i in range(30):
            f[f"d{i}"] = np.array([1.0, 2.0])
    monkeypatch.setattr(reader, "MAX_OBJECTS", 20)
    report = scan([str(path)])
    assert report.exit_code == ExitCode.INCONCLUSIVE and len(report.checked) < 30
    assert "more than 20 groups and datasets" in report.problems[0].reason
    monkeypatch.setattr(reader, "MAX_OBJECTS", 31)
    report = scan([str(path)])
    assert report.exit_code == ExitCode.CLEAN and len(report.checked) == 30


@pytest.mark.parametrize("code", ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"])
def test_the_value_of_elements_never_written_is_netcdfs(code):
    # netCDF reads an element never written as the variable's _FillValue, else its default fill
    stored = np.dtype(code).newbyteorder(">")
    assert cf.unwritten_value(None, stored).tolist() == [netCDF4.default_fillvals[code]]
    assert cf.unwritten_value(None, stored).dtype == stored
    given = np.array([7, 9], np.int64)
    assert cf.unwritten_value(given, stored).tolist() == [7]


def test_a_classic_header_of_more_attributes_than_the_limit_is_refused(tmp_path, monkeypatch):
    # each classic attribute costs ~4 us to parse: past MAX_ATTRIBUTES a 64 MB header is too slow
    from fpclass.scan.readers import netcdf3
    path = str(tmp_path / "attrs.nc")
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as d:
        d.createDimension("x", 2)
        v = d.createVariable("v", "f4", ("x",))
        v[:] = [1.0, NAN]
        for i in range(30):
            v.setncattr(f"a{i}", i)
    monkeypatch.setattr(netcdf3, "MAX_ATTRIBUTES", 20)
    report = scan([path])
    assert report.exit_code == ExitCode.INCONCLUSIVE and not report.checked
    assert "more than 20 attributes" in report.problems[0].reason
    monkeypatch.setattr(netcdf3, "MAX_ATTRIBUTES", 30)
    assert scan([path]).summary()["nan"] == 1


# -- valid ranges (out_of_range) and actual_range ----------------------------------------------

def _masked_count(path, name) -> int:
    with netCDF4.Dataset(path) as ds, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return int(np.ma.count_masked(ds[name][...]))


def _unmasked_finite(path, name) -> np.ndarray:
    with netCDF4.Dataset(path) as ds, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = ds[name][...]
    v = np.ma.compressed(v).astype(np.float64)
    return v[np.isfinite(v)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_out_of_range_counts_are_what_netcdf4_masks_for_the_valid_range(tmp_path, fmt):
    data = np.array([1, 50, -7, INF, NAN, -999, 12, 3, -INF, 0.5, -1], np.float32)

    def build(ds):
        ds.createDimension("n", data.size)
        for name, attrs in (("ranged", {"valid_min": np.float32(-5), "valid_max": np.float32(10)}),
                            ("vrange", {"valid_range": np.array([0, 20], np.float32)}),
                            ("plain", {})):
            v = ds.createVariable(name, "f4", ("n",), fill_value=np.float32(-999))
            v.set_auto_maskandscale(False)
            for k, a in attrs.items():
                v.setncattr(k, a)
            v[:] = data
        p = ds.createVariable("packed", "i2", ("n",), fill_value=np.int16(-999))
        p.set_auto_maskandscale(False)
        p.scale_factor, p.valid_range = np.float32(0.5), np.array([-4, 30], "i2")
        p[:] = np.array([1, 50, -7, 4, 2, -999, 12, 3, -9, 0, -1], "i2")
    path = _netcdf(tmp_path / "r.nc", fmt, build)
    _, ours = _agree(path)
    ours = _ours(path)[1]
    blanks = _masked_count(path, "plain")  # the fill value alone
    for name in ("ranged", "vrange"):
        t = ours[name]
        assert t.missing == blanks
        assert t.out_of_range == _masked_count(path, name) - blanks > 0, name
        finite = _unmasked_finite(path, name)
        assert (t.stats.min, t.stats.max) == (finite.min(), finite.max()), name
    assert ours["plain"].out_of_range == 0
    t = ours["packed"]
    assert t.missing == 1 and t.out_of_range == _masked_count(path, "packed") - 1 == 3
    finite = _unmasked_finite(path, "packed")
    assert (t.stats.min, t.stats.max) == (finite.min(), finite.max())
    report = scan([path])
    assert report.exit_code == ExitCode.FOUND  # the Inf outside any range is NaN/Inf anyway
    assert report.summary()["out_of_range"] == sum(t.out_of_range for t in report.tensors)
    assert any(loc.cls == "out_of_range" for loc in ours["ranged"].locations)


@pytest.mark.parametrize("fmt", FORMATS)
def test_out_of_range_has_its_own_fail_on_class(tmp_path, fmt):
    def build(ds):
        v = ds.createVariable("v", "f8", ("x",))
        v.valid_max = 1.0
        v[:] = [0.0, 0.5, 2.0, 0.1, 0.2, 0.3]
    path = _netcdf(tmp_path / "o.nc", fmt, build)
    assert scan([path]).exit_code == ExitCode.CLEAN
    found = scan([path], fail_on="out-of-range")
    assert found.exit_code == ExitCode.FOUND and found.tensors[0].out_of_range == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_data_contradicting_actual_range_is_reported(tmp_path, fmt):
    data = np.array([0.25, 3.5, -1.75, 2.0, NAN, 0.0])
    finite = data[np.isfinite(data)]

    def build(ds):
        for name, declared, kind in (("honest", [finite.min(), finite.max()], "f8"),
                                     ("honest32", [finite.min(), finite.max()], "f4"),
                                     ("liar", [0.0, 1.0], "f8")):
            v = ds.createVariable(name, kind, ("x",))
            v.actual_range = np.array(declared, kind)
            v[:] = data.astype(kind)
    path = _netcdf(tmp_path / "a.nc", fmt, build)
    report, ours = _ours(path, fail_on="out-of-range")
    assert not ours["honest"].range_contradiction and not ours["honest32"].range_contradiction
    assert ours["liar"].range_contradiction
    assert [t.name for t in report.failing] == ["liar"]
    assert any("contradict actual_range" in line and "liar" in line for line in str(report).split("\n"))
    doc = {t["name"]: t for t in json.loads(report.to_json())["tensors"]}
    assert doc["liar"]["actual_range"] == {"declared": [0.0, 1.0], "contradicted": True}
    assert doc["honest"]["actual_range"]["contradicted"] is False
    assert scan([path]).exit_code == ExitCode.FOUND  # the NaN


def test_hdf5_valid_range_attributes(tmp_path):
    path = tmp_path / "h.h5"
    data = np.array([1.0, 20.0, -3.0, np.inf, 5.0], np.float32)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("v", data=data)
        d.attrs["valid_range"] = np.array([0.0, 10.0], np.float32)
    t = scan([path]).tensors[0]
    inside = data[(data >= 0) & (data <= 10)]
    assert t.out_of_range == data.size - inside.size == 3 and t.posinf == 0
    assert (t.stats.min, t.stats.max) == (inside.min(), inside.max())


def test_zarr_valid_range_and_actual_range_attributes(tmp_path):
    zarr = pytest.importorskip("zarr")
    data = np.array([[1.0, 20.0, -3.0], [np.inf, 5.0, np.nan]], np.float32)
    store = str(tmp_path / "s.zarr")
    g = zarr.open_group(store, mode="w")
    a = g.create_array("ranged", shape=data.shape, dtype="f4", chunks=(1, 3))
    a[...] = data
    a.attrs["valid_min"], a.attrs["valid_max"] = 0.0, 10.0
    b = g.create_array("liar", shape=data.shape, dtype="f4", chunks=(2, 2))
    b[...] = data
    b.attrs["actual_range"] = [0.0, 1.0]
    report = scan([store], fail_on="out-of-range")
    got = {t.name: t for t in report.tensors}
    inside = (data >= 0) & (data <= 10)
    outside = ~inside & ~np.isnan(data)
    assert got["ranged"].out_of_range == int(outside.sum()) == 3
    assert got["ranged"].nan == 1 and got["ranged"].posinf == 0
    assert got["liar"].range_contradiction and not got["ranged"].declared_range
    finite = data[np.isfinite(data)]
    assert (got["liar"].stats.min, got["liar"].stats.max) == (finite.min(), finite.max())
    assert {t.name for t in report.failing} == {"ranged", "liar"}
