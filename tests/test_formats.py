"""The format table against ml_dtypes / numpy: layouts and which special values exist."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import samples
from fpclass import formats, twin
from fpclass.formats import BitTest, Query, bit_test
from fpclass.formats.describe import markdown_table

#: Every test runs through both launchers (NumPy bit tests and the numba kernels).
pytestmark = pytest.mark.usefixtures("both_launchers")


@pytest.mark.parametrize("dtype", samples.NARROW, ids=str)
def test_capabilities_match_the_values(dtype):
    f = formats.format_of(dtype)
    v = twin.values(samples.all_patterns(dtype))
    assert f.has_nan == bool(np.isnan(v).any())
    assert f.has_inf == bool(np.isinf(v).any())
    assert f.has_zero == bool((v == 0).any())
    info = ml_dtypes.finfo(dtype)
    assert (f.exponent_bits, f.mantissa_bits) == (info.nexp, info.nmant)
    assert f.itemsize == dtype.itemsize


def test_complex_capabilities_are_their_parts():
    for name, part in [("complex64", np.float32), ("complex128", np.float64), ("complex32", np.float16),
                       ("bcomplex32", ml_dtypes.bfloat16)]:
        f, p = formats.FORMATS[name], formats.format_of(part)
        assert (f.has_nan, f.has_inf) == (p.has_nan, p.has_inf) == (True, True)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
def test_numpy_layouts(dtype):
    f = formats.format_of(dtype)
    info = np.finfo(dtype)
    assert (f.bits, f.exponent_bits, f.mantissa_bits) == (info.bits, info.nexp, info.nmant)


def test_byteswapped_test_reads_swapped_words():
    t = BitTest(0x7C00, 0x7C00, 0x03FF, 0)
    s = t.byteswapped(2)
    words = np.arange(1 << 16, dtype=np.uint16)
    native = ((words & t.mask) == t.value) & ((words & t.mask2) != t.value2)
    swapped = words.byteswap()
    assert np.array_equal(native, ((swapped & s.mask) == s.value) & ((swapped & s.mask2) != s.value2))


def test_fnuz_has_no_negative_zero():
    f = formats.format_of(ml_dtypes.float8_e4m3fnuz)
    assert bit_test(f, Query.ZERO).with_sign(f.sign_mask) is None   # fnuz has no -0


def test_table_names_need_no_ml_dtypes_import():
    import subprocess
    import sys
    code = ("import sys; from fpclass import formats; f = formats.format_of('float8_e4m3fn'); "
            "print(f.has_inf, f.has_nan, 'ml_dtypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "False"]


def test_lookup_errors_and_kinds():
    assert formats.format_of(">f8").name == "float64"
    assert formats.format_of(np.int8).kind is formats.Kind.INTEGER
    assert formats.format_of(np.clongdouble).kind is formats.Kind.COMPLEX
    with pytest.raises(TypeError, match="cannot classify dtype <U1"):
        formats.format_of("U1")


def test_readme_shows_the_table():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert markdown_table() in readme, "regenerate: python -c 'from fpclass.formats.describe import " \
                                       "markdown_table; print(markdown_table())'"


@pytest.mark.parametrize("dtype", samples.REAL + [np.dtype(">f2"), np.dtype(">f4"), np.dtype(">f8")],
                         ids=str)
def test_histogram_kernel_contracts_hold(dtype):
    # kernels/histogram.py counts NaN and ±Inf only on runs holding a non-finite value, and takes
    # the signed tiny/zero counts as ANDs with the negative test: sound only if, on every word,
    # NaN/±Inf imply non-finite and each signed test is its test AND negative.
    from fpclass.formats.bit_tests import Query
    from fpclass.operators.inputs import as_source
    src = as_source(np.empty(0, dtype))
    native = dtype.newbyteorder("=")
    values = samples.all_patterns(native) if native.itemsize <= 2 else np.concatenate(
        [samples.specials(native), samples.random_bits(native, 100_000, seed=3)])
    w = values.astype(dtype).view(src.word)
    never = np.zeros(w.shape, bool)
    match = lambda t: never if t is None else ((w & t.mask) == t.value) & ((w & t.mask2) != t.value2)
    nonfinite = match(src.test(Query.NONFINITE))
    for q, negative in [(Query.NAN, False), (Query.NAN, True), (Query.POSINF, False), (Query.NEGINF, False)]:
        assert not (match(src.test(q, negative)) & ~nonfinite).any(), (q, negative)
    sign = match(src.test(Query.NEGATIVE))
    for q in (Query.TINY, Query.ZERO):
        np.testing.assert_array_equal(match(src.test(q, True)), match(src.test(q)) & sign, err_msg=str(q))
