"""The public package as a user meets it: `import fpclass` alone gives every public subpackage
on attribute access (PEP 562) without loading any of them, or any optional extra, up front; the
wheel ships its types (py.typed) and its licence."""

import subprocess
import sys
from pathlib import Path

import pytest

import fpclass

ROOT = Path(__file__).resolve().parents[1]
#: Public subpackages and modules, and a public name each must give after a plain `import fpclass`.
SUBMODULES = {"scan": "scan", "results": "ScanReport", "torch": "watch", "dask": "count_nan",
              "onnx": "IsNaN", "openvino": "read_model", "directml": "is_nan",
              "dialects": "__doc__"}
#: Optional extras and heavy parts that `import fpclass` must not import.
EXTRAS = ("torch", "jax", "dask", "xarray", "pandas", "onnx", "openvino", "rich", "h5py",
          "netCDF4", "zarr", "astropy", "scipy", "numba")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_fpclass_loads_no_subpackage_and_no_extra():
    code = ("import sys, fpclass\n"
            f"subs = {sorted(SUBMODULES)!r}\n"
            f"extras = {EXTRAS!r}\n"
            "print(sorted(s for s in subs if 'fpclass.' + s in sys.modules),"
            " sorted(e for e in extras if e in sys.modules))")
    assert _run(code) == "[] []"


@pytest.mark.parametrize("name", sorted(SUBMODULES))
def test_each_subpackage_loads_on_attribute_access(name):
    if name == "onnx":
        pytest.importorskip("onnx")   # fpclass.onnx reads ONNX's operator schemas
    code = (f"import fpclass\nm = fpclass.{name}\n"
            f"print(m.__name__, hasattr(m, {SUBMODULES[name]!r}), '{name}' in dir(fpclass))")
    assert _run(code) == f"fpclass.{name} True True"


def test_scan_runs_after_a_plain_import(tmp_path):
    import numpy as np
    np.save(tmp_path / "a.npy", np.array([1.0, np.nan], np.float32))
    code = (f"import fpclass\nr = fpclass.scan.scan([{str(tmp_path / 'a.npy')!r}])\n"
            "print(int(r.exit_code), r.summary()['nan'])")
    assert _run(code) == "1 1"


def test_unknown_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fpclass.nope  # noqa: B018


def test_the_wheel_metadata_names_its_licence_types_and_urls():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    assert meta["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "Typing :: Typed" in meta["classifiers"] and meta["urls"]["Repository"]
    assert (ROOT / "src" / "fpclass" / "py.typed").exists()
    assert {"py.typed", "*.pyi"} <= set(project["tool"]["setuptools"]["package-data"]["fpclass"])
    assert any(dep.startswith("mypy") for dep in meta["optional-dependencies"]["test"])
