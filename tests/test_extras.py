"""Optional dependencies: every import of one that fails says which fpclass extra installs it, and
that extra exists in pyproject.toml. A missing module is simulated with sys.modules[name] = None,
which makes `import name` raise ModuleNotFoundError."""

import importlib
import os
import re
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hide(monkeypatch, *modules):
    """Make each of `modules` (and its submodules) unimportable for the rest of the test."""
    for name in [m for m in sys.modules if m in modules or m.startswith(tuple(p + "." for p in modules))]:
        monkeypatch.delitem(sys.modules, name)
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def forget(monkeypatch, *packages):
    """Drop modules from sys.modules so that the next import runs them again. The originals come
    back after the test, in sys.modules and as attributes of their parent packages. The parent's
    attribute goes too: `from package import name` takes it without importing otherwise."""
    for name in [m for m in sys.modules
                 if m in packages or m.startswith(tuple(p + "." for p in packages))]:
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], child):
            monkeypatch.delattr(sys.modules[parent], child)
        monkeypatch.delitem(sys.modules, name)


def extras() -> set:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([a-z0-9_-]+)\s*=", section, re.M))


def install_message(extra):
    """What every such ImportError says: the one wording of _optional.install_hint (the extra,
    and the command that installs it from the clone or wheel fpclass came from)."""
    from fpclass._optional import install_hint
    return re.escape(install_hint(extra))


def test_require_names_the_extra_and_the_cause(monkeypatch):
    from fpclass._optional import require
    hide(monkeypatch, "h5py")
    with pytest.raises(ModuleNotFoundError, match=install_message("hdf5")) as e:
        require("h5py", "hdf5", "the HDF5 reader")
    assert e.value.name == "h5py" and str(e.value).startswith("the HDF5 reader needs h5py")
    assert require("json", "cli").dumps([]) == "[]"


def test_every_extra_named_in_the_sources_exists():
    named = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "src")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    for extra in re.findall(r"require\(\s*\"[\w.]+\",\s*\"([\w-]+)\"", f.read()):
                        named.setdefault(extra, name)
    assert {"onnx", "dask"} <= set(named)
    assert set(named) <= extras(), {e: f for e, f in named.items() if e not in extras()}
    assert {"hdf5", "zarr", "fits", "cli", "dask", "onnx", "torch", "openvino", "all"} <= extras()


def test_fpclass_onnx_without_onnx(monkeypatch):
    hide(monkeypatch, "onnx")
    forget(monkeypatch, "fpclass.onnx", "fpclass.dialects.onnx")
    with pytest.raises(ImportError, match=install_message("onnx")):
        importlib.import_module("fpclass.onnx")
    with pytest.raises(ImportError, match=install_message("onnx")):
        importlib.import_module("fpclass.dialects.onnx")


def test_fpclass_dask_without_dask(monkeypatch):
    hide(monkeypatch, "dask")
    forget(monkeypatch, "fpclass.dask")
    import fpclass.dask   # importing the package needs no dask; its entry points do
    with pytest.raises(ImportError, match=install_message("dask")):
        fpclass.dask.isnan(np.zeros(2))


def test_distributed_scan_without_distributed(monkeypatch):
    hide(monkeypatch, "distributed")
    forget(monkeypatch, "fpclass.dask.distributed")
    with pytest.raises(ImportError, match=install_message("dask")):
        importlib.import_module("fpclass.dask.distributed")


def test_openvino_benchmark_without_openvino(monkeypatch):
    hide(monkeypatch, "openvino")
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    forget(monkeypatch, "bench_openvino")
    with pytest.raises(ImportError, match=install_message("openvino")):
        importlib.import_module("bench_openvino")


@pytest.mark.parametrize("kind, module, extra, name", [
    ("hdf5", "h5py", "hdf5", "w.h5"),
    ("fits", "astropy", "fits", "i.fits"), ("zarr", "zarr", "zarr", "s.zarr"),
    ("matlab", "scipy", "matlab", "a.mat"), ("idl", "scipy", "matlab", "a.sav")])
def test_scan_readers_without_their_library(tmp_path, monkeypatch, kind, module, extra, name):
    """A reader whose library is missing makes the file a problem (ReaderError) in require's
    wording: what needs it, the module, and the extra that installs it."""
    from fpclass.scan.readers import ReaderError
    from fpclass.scan.readers.registry import planner
    path = tmp_path / name
    if name.endswith(".zarr"):
        path.mkdir()
        (path / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    else:
        path.write_bytes(b"\0" * 2880)
    hide(monkeypatch, module)
    with pytest.raises(ReaderError, match=install_message(extra)) as e:
        planner(kind)(str(path))
    assert f" needs {module}" in str(e.value) and "which cannot be imported" in str(e.value)
