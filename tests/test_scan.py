"""fpclass scan: every format and float dtype against an independent numpy count, with NaN/±Inf
at the first and last element and at chunk boundaries (tiny chunks), plus split tensors."""

import os

import ml_dtypes
import numpy as np
import pytest

from fpclass.scan import ExitCode, scan
from test_scan_support import gguf_bytes, safetensors_bytes, write_safetensors

CHUNK = 64          # bytes per chunk in these tests: boundaries every few elements
SMALL = dict(chunk_bytes=CHUNK, task_bytes=160, max_locations=1000, threads=2)

#: safetensors dtype → (numpy dtype, has NaN, has Inf)
ST_FLOATS = {
    "F64": (np.dtype("<f8"), True, True), "F32": (np.dtype("<f4"), True, True),
    "F16": (np.dtype("<f2"), True, True), "BF16": (np.dtype(ml_dtypes.bfloat16), True, True),
    "F8_E5M2": (np.dtype(ml_dtypes.float8_e5m2), True, True),
    "F8_E4M3": (np.dtype(ml_dtypes.float8_e4m3fn), True, False),
    "F8_E8M0": (np.dtype(ml_dtypes.float8_e8m0fnu), True, False),
}


def truth(a, order="C"):
    """(nan, +inf, -inf, sorted [(index, class)]) of `a` by plain numpy on float64 values, in
    the storage order (`order`)."""
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag], axis=-1)
    f = a.astype(np.float64)
    classes = np.full(f.shape, "", dtype=object)
    classes[np.isnan(f)] = "nan"
    classes[np.isposinf(f)] = "posinf"
    classes[np.isneginf(f)] = "neginf"
    bad = np.argwhere(classes != "") if order == "C" else np.argwhere((classes != "").T)[:, ::-1]
    locs = [(tuple(int(i) for i in ix), classes[tuple(ix)]) for ix in bad]
    return (int(np.isnan(f).sum()), int(np.isposinf(f).sum()), int(np.isneginf(f).sum()), locs)


def planted(dtype, shape, has_nan=True, has_inf=True, seed=0):
    """Finite random values with NaN/±Inf at the first and last element and around each
    chunk boundary."""
    rng = np.random.default_rng(seed)
    a = (np.abs(rng.standard_normal(shape)) + 0.5).astype(dtype)
    flat = a.reshape(-1)
    per = CHUNK // dtype.itemsize
    spots = sorted({0, flat.size - 1, per - 1, per, 2 * per, 3 * per - 1} & set(range(flat.size)))
    kinds = ([np.nan] if has_nan else []) + ([np.inf, -np.inf] if has_inf else [])
    for k, i in enumerate(spots):
        flat[i] = kinds[k % len(kinds)]
    return a


def result_of(report, name, file=None):
    [t] = [t for t in report.tensors if t.name == name and (file is None or t.file == str(file))]
    return t


def assert_matches(t, a, order="C"):
    nan, pinf, ninf, locs = truth(a, order)
    assert (t.status, t.nan, t.posinf, t.neginf) == ("checked", nan, pinf, ninf)
    assert [(loc.index, loc.cls) for loc in t.locations] == locs
    assert t.values_checked == a.size * (2 if a.dtype.kind == "c" else 1)


@pytest.mark.parametrize("st_dtype", list(ST_FLOATS))
def test_safetensors_float_dtypes(tmp_path, st_dtype):
    dtype, has_nan, has_inf = ST_FLOATS[st_dtype]
    a = planted(dtype, (10, 13), has_nan, has_inf)
    b = planted(dtype, (0, 3))
    path = write_safetensors(tmp_path / "m.safetensors", {"a": (st_dtype, a), "empty": (st_dtype, b)})
    report = scan([path], **SMALL)
    assert_matches(result_of(report, "a"), a)
    assert_matches(result_of(report, "empty"), b)
    assert report.exit_code == ExitCode.FOUND


def test_safetensors_scalar_and_clean(tmp_path):
    a = np.array(np.nan, np.float32)
    path = write_safetensors(tmp_path / "m.safetensors", {"s": ("F32", a)})
    t = result_of(scan([path]), "s")
    assert (t.nan, [loc.index for loc in t.locations]) == (1, [()])
    clean = write_safetensors(tmp_path / "c.safetensors", {"x": ("F16", np.ones(5, np.float16))})
    assert scan([clean]).exit_code == ExitCode.CLEAN


def test_safetensors_formats_without_specials_and_integers(tmp_path):
    """F6/F4 (packed) hold no NaN or Inf: checked without reading; integers are not applicable."""
    tensors = {
        "f4": ("F4", b"\xff" * 3, (6,)), "f6": ("F6_E2M3", b"\xff" * 6, (8,)),
        "f6b": ("F6_E3M2", b"\xff" * 3, (4,)),
        "i": ("I32", np.arange(4, dtype=np.int32), (4,)), "b": ("BOOL", b"\x01\x00", (2,)),
        "u": ("U8", b"\xff", (1,)),
    }
    (tmp_path / "m.safetensors").write_bytes(safetensors_bytes(tensors))
    report = scan([tmp_path / "m.safetensors"])
    status = {t.name: t.status for t in report.tensors}
    assert status == {"f4": "checked", "f6": "checked", "f6b": "checked", "i": "not_applicable",
                      "b": "not_applicable", "u": "not_applicable"}
    assert report.exit_code == ExitCode.CLEAN


def test_sharded_checkpoint(tmp_path):
    a = planted(np.dtype("<f4"), (5, 7))
    b = planted(np.dtype("<f2"), (9,), seed=1)
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a": ("F32", a)})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b": ("F16", b)})
    index = {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                            "b": "model-00002-of-00002.safetensors"}}
    import json
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text("{}")
    report = scan([tmp_path], **SMALL)   # index and shards found together: each tensor once
    assert sorted(t.name for t in report.tensors) == ["a", "b"]
    assert_matches(result_of(report, "a"), a)
    assert_matches(result_of(report, "b"), b)
    assert not report.problems
    index["weight_map"]["c"] = "model-00002-of-00002.safetensors"
    index["weight_map"]["d"] = "missing.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    report = scan([tmp_path / "model.safetensors.index.json"])
    reasons = " | ".join(p.reason for p in report.problems)
    assert "'c' is listed in shard" in reasons and "No such file" in reasons
    assert report.exit_code == ExitCode.FOUND   # findings win over inconclusive


def test_npy_layouts(tmp_path):
    cases = {
        "c.npy": (planted(np.dtype("<f4"), (6, 7)), "C"),
        "f.npy": (np.asfortranarray(planted(np.dtype("<f8"), (5, 6))), "F"),
        "be.npy": (planted(np.dtype(">f4"), (40,)), "C"),
        "h.npy": (planted(np.dtype("<f2"), (3, 4, 5)), "C"),
        "ld.npy": (planted(np.dtype(np.longdouble), (9,)), "C"),
        "zero_d.npy": (np.array(np.inf, np.float32), "C"),
    }
    z = np.zeros((4, 3), np.complex64)
    z[1, 2] = complex(0, np.nan)
    z[3, 0] = complex(-np.inf, 1)
    cases["cx.npy"] = (z, "C")
    for name, (a, _) in cases.items():
        np.save(tmp_path / name, a)
    report = scan([tmp_path], **SMALL)
    for name, (a, order) in cases.items():
        assert_matches(result_of(report, "", tmp_path / name), a, order)
    assert [loc.index for loc in result_of(report, "", tmp_path / "cx.npy").locations] == [
        (1, 2, 1), (3, 0, 0)]


def test_npy_of_opaque_void_is_unchecked(tmp_path):
    np.save(tmp_path / "bf.npy", np.ones(3, ml_dtypes.bfloat16))   # stored as '|V2'
    report = scan([tmp_path / "bf.npy"])
    assert [t.status for t in report.tensors] == ["unchecked"]
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_npz_stored_and_compressed(tmp_path):
    x = planted(np.dtype("<f4"), (8, 9))
    y = planted(np.dtype("<f2"), (300,), seed=2)
    ints = np.arange(5)
    f8 = np.ones(3, ml_dtypes.float8_e5m2)   # NumPy records it as '<f1', which names no format
    np.savez(tmp_path / "plain.npz", x=x, y=y, ints=ints, f8=f8)
    np.savez_compressed(tmp_path / "packed.npz", x=x, y=y, ints=ints, f8=f8)
    report = scan([tmp_path], **SMALL)
    for f in ("plain.npz", "packed.npz"):
        assert_matches(result_of(report, "x", tmp_path / f), x)
        assert_matches(result_of(report, "y", tmp_path / f), y)
        assert result_of(report, "ints", tmp_path / f).status == "not_applicable"
        assert result_of(report, "f8", tmp_path / f).status == "unchecked"


def test_object_arrays_are_never_unpickled(tmp_path):
    marker = tmp_path / "executed"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    np.save(tmp_path / "obj.npy", np.array([Evil()], dtype=object), allow_pickle=True)
    np.savez_compressed(tmp_path / "obj.npz", a=np.array([Evil()], dtype=object), b=np.ones(2))
    report = scan([tmp_path])
    assert not marker.exists()
    assert {t.status for t in report.tensors if t.dtype == "object"} == {"unchecked"}
    assert all("never unpickled" in t.reason for t in report.unchecked)
    assert report.exit_code == ExitCode.INCONCLUSIVE


def _onnx_model(tmp_path, w, half, d):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    big = numpy_helper.from_array(w, "W")                       # goes to external data
    typed = helper.make_tensor("T", TensorProto.FLOAT, list(d.shape), d.ravel().tolist())  # float_data
    fp16 = helper.make_tensor("H", TensorProto.FLOAT16, [half.size], half)  # int32_data
    raw = numpy_helper.from_array(np.array([1.0, np.nan], np.float32), "R")
    node = helper.make_node("Constant", [], ["K"], name="k",
                            value=numpy_helper.from_array(np.array([-np.inf], np.float64), "K"))
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info(
        "K", TensorProto.DOUBLE, [1])], initializer=[big, typed, fp16, raw])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=100)
    return tmp_path / "m.onnx"


def test_onnx_initializers_everywhere(tmp_path):
    w = planted(np.dtype("<f4"), (12, 10))
    h = planted(np.dtype("<f2"), (40,), seed=3)
    d = np.array([[1.0, np.inf], [np.nan, 2.0]], np.float32)
    path = _onnx_model(tmp_path, w, h, d)
    report = scan([path], **SMALL)
    assert_matches(result_of(report, "W"), w)
    assert_matches(result_of(report, "T"), d)
    assert_matches(result_of(report, "H"), h)
    assert_matches(result_of(report, "R"), np.array([1.0, np.nan], np.float32))
    assert_matches(result_of(report, "k@value"), np.array([-np.inf]))   # NODE@ATTRIBUTE
    assert [f for _, f in report.files] == ["onnx"]
    os.remove(tmp_path / "m.data")
    report = scan([path])
    assert result_of(report, "W").status == "unchecked" and "m.data" in result_of(report, "W").reason
    assert report.exit_code == ExitCode.FOUND


def _blocks(n_blocks, block_bytes, fields, seed):
    """Random block bytes with finite fields; fields: [(offset, dtype)]."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    for off, dt in fields:
        raw[:, off:off + dt.itemsize] = np.full(n_blocks, 0.25, dt).view(np.uint8).reshape(n_blocks, -1)
    return raw


def test_gguf_plain_and_quantized(tmp_path):
    f32 = planted(np.dtype("<f4"), (4, 24))
    f16 = planted(np.dtype("<f2"), (50,), seed=4)
    bf16 = planted(np.dtype(ml_dtypes.bfloat16), (2, 30), seed=5)
    f64 = planted(np.dtype("<f8"), (17,), seed=6)
    h = np.dtype("<f2")
    # Q4_K: 256 elements per 144-byte block, fp16 d at 0 and dmin at 2; shape (3 rows, 512).
    q4k = _blocks(6, 144, [(0, h), (2, h)], 7)
    q4k[0, 0:2] = np.array([np.nan], h).view(np.uint8)        # row 0, block 0, d
    q4k[5, 2:4] = np.array([-np.inf], h).view(np.uint8)       # row 2, block 1, dmin
    q4k[3, 2:4] = np.array([np.inf], h).view(np.uint8)        # row 1, block 1, dmin
    # Q2_K: d at 80, dmin at 82.
    q2k = _blocks(2, 84, [(80, h), (82, h)], 8)
    q2k[1, 80:82] = np.array([np.nan], h).view(np.uint8)
    # MXFP4: 32 elements per 17-byte block, e8m0 exponent at 0; NaN is 0xFF.
    e8 = np.dtype(ml_dtypes.float8_e8m0fnu)
    mx = _blocks(4, 17, [(0, e8)], 9)
    mx[3, 0] = 0xFF
    tensors = [("f32", 0, [24, 4], f32.tobytes()), ("f16", 1, [50], f16.tobytes()),
               ("bf16", 30, [30, 2], bf16.tobytes()), ("f64", 28, [17], f64.tobytes()),
               ("q4k", 12, [512, 3], q4k.tobytes()), ("q2k", 10, [256, 2], q2k.tobytes()),
               ("mx", 39, [128], mx.tobytes()), ("ints", 26, [3], b"\0" * 12)]
    (tmp_path / "m.gguf").write_bytes(gguf_bytes(tensors))
    report = scan([tmp_path / "m.gguf"], **SMALL)
    for name, a in [("f32", f32), ("f16", f16), ("bf16", bf16), ("f64", f64)]:
        assert_matches(result_of(report, name), a)
    q = result_of(report, "q4k")
    assert (q.nan, q.posinf, q.neginf, q.values_checked) == (1, 1, 1, 12)
    assert [(loc.index, loc.field, loc.cls) for loc in q.locations] == [
        ((0, 0), "d", "nan"), ((1, 256), "dmin", "posinf"), ((2, 256), "dmin", "neginf")]
    q2 = result_of(report, "q2k")
    assert [(loc.index, loc.field) for loc in q2.locations] == [((1, 0), "d")]
    m = result_of(report, "mx")
    assert (m.nan, [(loc.index, loc.field) for loc in m.locations]) == (1, [((96,), "e")])
    assert result_of(report, "ints").status == "not_applicable"


def test_threads_and_parts_agree(tmp_path):
    a = planted(np.dtype("<f4"), (64, 33))
    path = write_safetensors(tmp_path / "m.safetensors", {"a": ("F32", a)})
    one = scan([path], chunk_bytes=CHUNK, max_locations=3, threads=1)
    many = scan([path], chunk_bytes=CHUNK, max_locations=3, threads=3, task_bytes=100)
    whole = scan([path], max_locations=3, threads=2)  # one chunk
    nan, pinf, ninf, locs = truth(a)
    for r in (one, many, whole):
        t = result_of(r, "a")
        assert (t.nan, t.posinf, t.neginf) == (nan, pinf, ninf)
        assert [(loc.index, loc.cls) for loc in t.locations] == locs[:3]


def test_fail_on_selects_classes(tmp_path):
    a = np.array([1.0, np.inf], np.float32)
    path = write_safetensors(tmp_path / "m.safetensors", {"a": ("F32", a)})
    assert scan([path], fail_on="nan").exit_code == ExitCode.CLEAN
    assert scan([path], fail_on="posinf").exit_code == ExitCode.FOUND
    assert scan([path], fail_on=["neginf"]).exit_code == ExitCode.CLEAN
    with pytest.raises(ValueError, match="accepted"):
        scan([path], fail_on="nope")


def test_interrupt_returns_partial_results(tmp_path):
    from fpclass.scan import engine
    paths = [write_safetensors(tmp_path / f"m{i}.safetensors", {"a": ("F32", np.ones(4, np.float32))})
             for i in range(3)]
    tasks = engine.plan(paths)
    seen = []

    def progress(task, result):
        seen.append(result)
        if len(seen) == 1:  # called for the tasks that read: one tensor per file here
            raise KeyboardInterrupt

    results, interrupted = engine.execute(tasks, threads=1, progress=progress)
    report = engine.assemble(tasks, results, interrupted=interrupted)
    assert interrupted and report.exit_code == ExitCode.INTERRUPTED
    assert len(report.checked) == 1 and len(report.unchecked) == 2


@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_split_parts_cover_the_tensor_bytes_once(tmp_path, dtype):
    # the progress bar's total is the parts' bytes: a split tensor must add up to its own size
    from fpclass.scan import engine
    np_dtype = ST_FLOATS[dtype][0]
    a = np.arange(1001, dtype=np.float32).astype(np_dtype).reshape(7, 143)
    path = write_safetensors(tmp_path / "m.safetensors", {"w": (dtype, a)})
    parts = [t for t in engine.plan([path], task_bytes=160) if t.status == "check"]
    assert len(parts) > 1
    assert sum(t.part_bytes for t in parts) == a.nbytes


def test_onnx_packed_float4_is_checked_without_reading(tmp_path):
    # FLOAT4E2M1 packs two values per byte; the format table says it holds no NaN or Inf
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    if not hasattr(TensorProto, "FLOAT4E2M1"):
        pytest.skip("onnx without FLOAT4E2M1")
    packed = helper.make_tensor("P", TensorProto.FLOAT4E2M1, [6], b"\xff" * 3, raw=True)
    graph = helper.make_graph([], "g", [], [], initializer=[packed])
    onnx.save_model(helper.make_model(graph), str(tmp_path / "p.onnx"))
    report = scan([tmp_path / "p.onnx"])
    result = result_of(report, "P")
    assert result.status == "checked" and (result.nan, result.posinf, result.neginf) == (0, 0, 0)
    assert report.exit_code == ExitCode.CLEAN
