"""Density maps (scan(maps=True), ScanReport.plot): each storage's chunks binned into the map of
the tensor's two trailing dimensions, against numpy's isnan / isposinf / isneginf of the values
as the formats' own libraries (numpy, ml_dtypes, torch, h5py, netCDF4) read them, binned here."""

import numpy as np
import pytest

import ml_dtypes

from fpclass.scan import scan
from density_truth import assert_map, plant, truth
from test_scan_support import gguf_bytes, write_safetensors


def by_name(report):
    """tensor name (a .npy file's name for its one tensor) -> result"""
    return {t.name or t.file.rsplit("/", 1)[-1]: t for t in report.tensors}


def test_npy_c_and_fortran_order_in_many_chunks_and_parts(tmp_path):
    c = plant((300, 517))
    f = np.asfortranarray(plant((5, 70, 200), seed=1))
    one = plant((1000,), seed=2)
    np.save(tmp_path / "c.npy", c)
    np.save(tmp_path / "f.npy", f)
    np.save(tmp_path / "one.npy", one)
    np.save(tmp_path / "scalar.npy", np.array(np.inf, np.float32))
    # small chunks and parts: a tensor's map is the sum of its chunks' and its parts'
    report = scan(tmp_path, maps=True, chunk_bytes=4096, task_bytes=64 << 10)
    t = {t.file.rsplit("/", 1)[-1]: t for t in report.tensors}
    assert_map(t["c.npy"], truth(c))
    assert_map(t["f.npy"], truth(f))
    assert_map(t["one.npy"], truth(one))
    assert_map(t["scalar.npy"], truth(np.array(np.inf)))
    assert t["c.npy"].density.counts.shape == (4, 128, 128)
    assert t["one.npy"].density.counts.shape == (4, 1, 128)


def test_without_maps_nothing_is_gathered_and_clean_tensors_have_none(tmp_path):
    np.save(tmp_path / "bad.npy", plant((20, 30)))
    np.save(tmp_path / "good.npy", np.ones((20, 30), np.float32))
    assert all(t.density is None for t in scan(tmp_path).tensors)
    mapped = {t.file.rsplit("/", 1)[-1]: t.density for t in scan(tmp_path, maps=True).tensors}
    assert mapped["good.npy"] is None and mapped["bad.npy"] is not None
    # kept small: the classes present only, each in the smallest type that holds its counts
    planes = mapped["bad.npy"].planes
    assert set(planes) == {"nan", "posinf", "neginf"}
    assert all(p.dtype == np.uint8 for p in planes.values())
    with pytest.raises(ValueError, match="maps must be True or False"):
        scan(tmp_path, maps="yes")


def test_bf16_float8_and_complex_in_safetensors_and_npy(tmp_path):
    bf = plant((64, 300)).astype(ml_dtypes.bfloat16)
    e5 = plant((33, 9), seed=3).astype(ml_dtypes.float8_e5m2)
    write_safetensors(tmp_path / "m.safetensors", {"bf": ("BF16", bf), "e5": ("F8_E5M2", e5)})
    z = np.empty((40, 50), np.complex64)
    z.real, z.imag = plant((40, 50), seed=4), plant((40, 50), seed=5)
    np.save(tmp_path / "z.npy", z)
    big_endian = plant((30, 20), seed=6).astype(">f4")
    np.save(tmp_path / "be.npy", big_endian)
    t = by_name(scan(tmp_path, maps=True, chunk_bytes=1000))
    assert_map(t["bf"], truth(bf.astype(np.float32)))
    assert_map(t["e5"], truth(e5.astype(np.float32)))
    assert_map(t["z.npy"], truth(z))
    assert_map(t["be.npy"], truth(big_endian))


def test_hdf5_chunks_netcdf_blanks_and_records(tmp_path):
    h5py = pytest.importorskip("h5py")
    netCDF4 = pytest.importorskip("netCDF4")
    field = plant((6, 90, 140), seed=7)
    z = np.empty((30, 45), np.complex64)
    z.real, z.imag = plant((30, 45), seed=19), plant((30, 45), seed=20)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_dataset("field", data=field, chunks=(2, 32, 50), compression="gzip")
        f.create_dataset("z", data=z, chunks=(7, 11))
    path = tmp_path / "n.nc"
    with netCDF4.Dataset(path, "w") as ds:  # a NaN _FillValue: every NaN is missing
        ds.createDimension("y", 40)
        ds.createDimension("x", 60)
        v = ds.createVariable("t", "f4", ("y", "x"), fill_value=np.float32(np.nan),
                              chunksizes=(16, 16))
        v[:] = plant((40, 60), seed=8)
    with netCDF4.Dataset(path) as ds:
        read = ds["t"][:]  # netCDF4's own masking decides the blanks
    records = plant((25, 8, 33), seed=21)
    with netCDF4.Dataset(tmp_path / "r.nc", "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)  # record variables: read in bands of rows
        ds.createDimension("y", 8)
        ds.createDimension("x", 33)
        ds.createVariable("rec", "f4", ("time", "y", "x"), fill_value=False)[:] = records
    t = by_name(scan(tmp_path, maps=True, chunk_bytes=8192))
    assert_map(t["field"], truth(field))
    assert_map(t["z"], truth(z))
    assert_map(t["rec"], truth(records))
    assert_map(t["t"], truth(np.ma.getdata(read), np.ma.getmaskarray(read)))


def test_torch_views_transposed_and_conjugated(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.from_numpy(plant((60, 45), seed=9))
    z = torch.complex(torch.from_numpy(plant((20, 30), seed=10)),
                      torch.from_numpy(plant((20, 30), seed=11)))
    torch.save({"t": base.t(), "step": base[::2, 1::3], "conj": z.conj()}, tmp_path / "v.pt")
    loaded = torch.load(tmp_path / "v.pt", weights_only=True)
    t = by_name(scan(tmp_path, maps=True, chunk_bytes=512))
    assert_map(t["t"], truth(loaded["t"].numpy()))
    assert_map(t["step"], truth(loaded["step"].numpy()))
    assert t["conj"].density is not None
    assert_map(t["conj"], truth(loaded["conj"].resolve_conj().numpy()))


def test_block_quantized_scales_sit_at_their_blocks_first_column(tmp_path):
    rows, blocks = 5, 6
    scales = plant((rows, blocks), np.float16, seed=12, rate=0.1)
    raw = b"".join(s.tobytes() + bytes(range(32)) for s in scales.reshape(-1))  # Q8_0 blocks
    (tmp_path / "q.gguf").write_bytes(gguf_bytes([("w", 8, (32 * blocks, rows), raw)]))
    (t,) = scan(tmp_path, maps=True).tensors
    placed = np.zeros((rows, 32 * blocks), np.float32)
    placed[:, ::32] = scales
    assert_map(t, truth(placed))


def test_plot_draws_the_counts(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = plant((200, 150), seed=13)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "ok.npy", np.zeros(3, np.float32))
    report = scan(tmp_path, maps=True)
    fig = report.plot("", file=str(tmp_path / "a.npy"))
    expected = truth(a)
    images = {ax.get_title().split(":")[0]: ax.images[0] for ax in fig.axes if ax.images}
    assert set(images) == {"NaN", "+Inf", "-Inf"}
    for title, cls in (("NaN", "nan"), ("+Inf", "posinf"), ("-Inf", "neginf")):
        np.testing.assert_array_equal(np.asarray(images[title].get_array()), expected[cls])
    plt.close(fig)
    with pytest.raises(ValueError, match="no findings"):
        report.plot("", file=str(tmp_path / "ok.npy"))
    with pytest.raises(ValueError, match="2 tensors are named"):
        report.plot("")
    with pytest.raises(ValueError, match="gathered no maps"):
        scan(tmp_path).plot("", file=str(tmp_path / "a.npy"))


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    import sys
    np.save(tmp_path / "a.npy", plant((4, 4)))
    report = scan(tmp_path, maps=True)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"fpclass\[plot\]"):
        report.plot("")


def test_dense_findings_in_every_layout(tmp_path):
    # every value non-finite: the kernel steps from one hit to the next across row, column and
    # bin boundaries and the wrap of the leading dimensions
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(14)
    dense = rng.choice(np.array([np.nan, np.inf, -np.inf, 1.0], np.float32), (3, 130, 257),
                       p=[0.4, 0.3, 0.2, 0.1])
    # long runs of one class: counted a cell at a time
    regions = np.full((3, 130, 257), np.nan, np.float32)
    regions[1, 40:90, :] = np.inf
    regions[2, :, 100:] = -np.inf
    regions[0, 7, 3:200] = 1.0
    regions.reshape(-1)[::97] = 2.0
    np.save(tmp_path / "c.npy", dense)
    np.save(tmp_path / "f.npy", np.asfortranarray(dense))
    np.save(tmp_path / "regions.npy", regions)
    np.save(tmp_path / "line.npy", regions.reshape(-1))
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f.create_dataset("d", data=dense, chunks=(2, 33, 70))
        f.create_dataset("r", data=regions, chunks=(2, 33, 70))
    names = ["c.npy", "f.npy", "d"]
    try:
        import zarr
    except ImportError:  # zarr 3 needs Python 3.11
        zarr = None
    if zarr is not None:
        z = zarr.create_array(tmp_path / "z.zarr", shape=dense.shape, chunks=(1, 40, 100),
                              dtype="float32", fill_value=0.0)
        z[:] = dense
        names.append("z.zarr")
    t = by_name(scan(tmp_path, maps=True, chunk_bytes=3000, task_bytes=50_000))
    for name in names:
        assert_map(t[name], truth(dense))
    for name in ("regions.npy", "r"):
        assert_map(t[name], truth(regions))
    assert_map(t["line.npy"], truth(regions.reshape(-1)))


def test_maps_gathered_on_a_dask_cluster(tmp_path):
    # the --scheduler path: each worker's run_task gathers its tensor's map
    distributed = pytest.importorskip("distributed")
    import functools
    from fpclass.dask.distributed import execute
    a = plant((120, 90), seed=15)
    np.save(tmp_path / "a.npy", a)
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=1,
                                  dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}
                                  ) as cluster, distributed.Client(cluster) as client:
        report = scan(tmp_path, maps=True, task_bytes=8192,
                      execute_on=functools.partial(execute, scheduler=client))
    (t,) = report.tensors
    assert_map(t, truth(a))


def test_broadcast_views_spread_their_values_over_every_place_they_stand_for(tmp_path):
    torch = pytest.importorskip("torch")
    row = torch.from_numpy(plant((1, 300), seed=16, rate=0.05))
    col = torch.from_numpy(plant((200, 1), seed=17, rate=0.05))
    cube = torch.from_numpy(plant((1, 40, 50), seed=18))
    torch.save({"rows": row.expand(200, 300), "cols": col.expand(200, 300),
                "lead": cube.expand(6, 40, 50), "scalar": torch.tensor(float("nan")).expand(9, 7)},
               tmp_path / "b.pt")
    loaded = torch.load(tmp_path / "b.pt", weights_only=True)
    t = by_name(scan(tmp_path, maps=True))
    for name in ("rows", "cols", "lead", "scalar"):
        assert_map(t[name], truth(loaded[name].numpy()))


def test_fits_image_nan_is_missing(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    image = plant((3, 60, 70), seed=22)
    fits.PrimaryHDU(image).writeto(tmp_path / "i.fits")
    (t,) = scan(tmp_path, maps=True, chunk_bytes=4096).tensors
    with fits.open(tmp_path / "i.fits") as f:
        read = np.asarray(f[0].data)
    assert_map(t, truth(read, np.isnan(read)))  # FITS's undefined value: a blank
