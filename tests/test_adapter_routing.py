"""The routing in front of the public functions: foreign arrays are recognized by their type's
module without importing any framework, and everything else takes the NumPy path as before."""

import subprocess
import sys

import numpy as np
import pytest

import fpclass
from fpclass.adapters import adapter_for


def test_numpy_input_imports_no_framework():
    code = ("import sys, numpy as np, fpclass\n"
            "fpclass.isnan(np.ones(3)); fpclass.any_nan([1.0, 2.0]); fpclass.count_nan(3.0)\n"
            "fpclass.isinf(np.ma.MaskedArray([1.0]).data); fpclass.first_nan(np.float32(1))\n"
            "import fpclass.torch\n"
            "print(sorted(m for m in ('torch', 'jax', 'xarray', 'pandas', 'dask', 'cupy')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("x", [np.ones(2), np.ma.MaskedArray([1.0]), np.float64(1), [1.0], 3.0,
                               np.memmap], ids=type)
def test_numpy_and_array_likes_take_the_numpy_path(x, tmp_path):
    if x is np.memmap:
        x = np.memmap(tmp_path / "m", np.float32, "w+", shape=(2,))
    assert adapter_for(x) is None


def test_a_torch_subclass_defined_elsewhere_is_still_torch():
    torch = pytest.importorskip("torch")

    class Mine(torch.Tensor):
        pass

    t = torch.tensor([1.0, float("nan")], dtype=torch.bfloat16).as_subclass(Mine)
    assert fpclass.isnan(t).tolist() == [False, True]


def test_masked_arrays_are_still_refused():
    with pytest.raises(TypeError, match="masked"):
        fpclass.isnan(np.ma.MaskedArray([1.0, 2.0], mask=[0, 1]))


def test_public_functions_keep_their_signatures_and_docs():
    import inspect
    from fpclass.operators import elementwise, queries
    for name in ("isnan", "isinf", "count_inf", "locate_nonfinite", "class_counts"):
        impl = getattr(elementwise, name, None) or getattr(queries, name)
        public = getattr(fpclass, name)
        assert public.__doc__ == impl.__doc__ and public.__name__ == name
        assert inspect.signature(public) == inspect.signature(impl)
