"""ONNX TensorProto files (`test_data_set_0/input_0.pb`, as in ONNX's backend test data): read
as tensors, judged against onnx.load_tensor + onnx.numpy_helper.to_array; a `.pb` file that is
not strictly a TensorProto stays what it was."""

import glob
import os

import numpy as np
import pytest

from fpclass.scan import ExitCode, scan
from protobuf_writer import field as pb_field

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

BACKEND_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _counts(a) -> tuple:
    a = np.asarray(a)
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag])
    a = a.astype(np.float64)   # ml_dtypes (bfloat16, float8) through float64: NaN/Inf kept
    return int(np.isnan(a).sum()), int(np.isposinf(a).sum()), int(np.isneginf(a).sum())


def _truth(path):
    """(whether it can hold NaN/Inf, counts) of the tensor onnx reads from `path`."""
    a = numpy_helper.to_array(onnx.load_tensor(str(path)), base_dir=os.path.dirname(path))
    floating = a.dtype.kind in "fc" or a.dtype.name in ("bfloat16",) or "float8" in a.dtype.name
    return floating, (_counts(a) if floating else (0, 0, 0))


def _only(report):
    [t] = report.tensors
    return t


def test_every_tensor_file_of_onnx_backend_test_data_is_read_exactly():
    paths = sorted(glob.glob(os.path.join(BACKEND_DATA, "**", "*.pb"), recursive=True))
    if not paths:
        pytest.skip("this onnx ships no backend test data")
    report = scan(paths)
    assert not report.problems, report.problems[:3]
    results = {t.file: t for t in report.tensors}
    assert sorted(results) == paths
    floats = nonfinite = 0
    for path in paths:
        floating, counts = _truth(path)
        t = results[path]
        if floating:
            floats += 1
            assert t.status == "checked", (path, t.reason)
            assert (t.nan, t.posinf, t.neginf) == counts, path
            nonfinite += any(counts)
        else:
            assert t.status == "not_applicable", (path, t.status, t.reason)
    assert floats > 0.9 * len(paths) and nonfinite >= 2   # 304 of 327, 2 with NaN (onnx 1.23)
    assert report.exit_code == ExitCode.FOUND
    # each file alone: clean exactly where onnx reads no NaN/Inf
    for path in [p for p in paths if any(_truth(p)[1])]:
        assert scan([path]).exit_code == ExitCode.FOUND, path


def _typed(elem, values, dims):
    return helper.make_tensor("x", elem, dims, values, raw=False)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("make", [
    lambda: numpy_helper.from_array(np.array([[1, NAN], [INF, -INF]], np.float32), "x"),
    lambda: _typed(TensorProto.FLOAT, [1, NAN, INF], [3]),                    # float_data
    lambda: _typed(TensorProto.DOUBLE, [NAN, -INF], [2, 1]),                  # double_data
    lambda: _typed(TensorProto.FLOAT16, np.array([NAN, 1, -INF], np.float16), [3]),  # int32_data
    lambda: _typed(TensorProto.BFLOAT16, [INF, NAN, 2.0], [3]),
    lambda: _typed(TensorProto.FLOAT8E5M2, [INF, NAN, 2.0], [3]),
    lambda: _typed(TensorProto.COMPLEX64, [complex(NAN, 1), complex(2, INF)], [2]),
    lambda: numpy_helper.from_array(np.zeros((0, 3), np.float32), "x"),
    lambda: numpy_helper.from_array(np.array(NAN, np.float64), ""),           # 0-d, no name
], ids=["raw", "float_data", "double_data", "float16", "bfloat16", "float8e5m2", "complex64",
        "empty", "0-d"])
def test_tensor_files_of_every_storage_match_onnx(tmp_path, make):
    path = tmp_path / "input_0.pb"
    path.write_bytes(make().SerializeToString())
    floating, counts = _truth(path)
    t = _only(scan([path]))
    assert floating and t.status == "checked", t.reason
    assert (t.nan, t.posinf, t.neginf) == counts
    assert t.name == onnx.load_tensor(str(path)).name


def test_integer_and_string_tensor_files_are_not_applicable(tmp_path):
    ints = tmp_path / "ints.pb"
    ints.write_bytes(_typed(TensorProto.INT64, [1, 2, 3], [3]).SerializeToString())
    strings = tmp_path / "strings.pb"
    strings.write_bytes(helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"nan"])
                        .SerializeToString())
    report = scan([ints, strings])
    assert [t.status for t in report.tensors] == ["not_applicable"] * 2
    assert report.exit_code == ExitCode.CLEAN


def test_tensor_file_with_external_data_is_read_beside_it(tmp_path):
    (tmp_path / "x.bin").write_bytes(np.array([NAN, 1, INF], np.float32).tobytes())
    t = TensorProto(name="x", data_type=TensorProto.FLOAT, dims=[3],
                    data_location=TensorProto.EXTERNAL)
    t.external_data.add(key="location", value="x.bin")
    (tmp_path / "input_0.pb").write_bytes(t.SerializeToString())
    assert _truth(tmp_path / "input_0.pb") == (True, (1, 1, 0))
    r = _only(scan([tmp_path / "input_0.pb"]))
    assert (r.status, r.nan, r.posinf) == ("checked", 1, 1)
    os.remove(tmp_path / "x.bin")
    r = _only(scan([tmp_path / "input_0.pb"]))
    assert r.status == "unchecked" and "x.bin" in r.reason


@pytest.mark.parametrize("data", [
    # a TensorFlow GraphDef: node { name: "a" op: "Const" }, versions { producer: 1 }
    pb_field(1, 2, pb_field(1, 2, b"a") + pb_field(2, 2, b"Const"))
    + pb_field(4, 2, pb_field(1, 0, 1)),
    # a FLOAT TensorProto whose raw_data is not what its dims need
    pb_field(1, 0, 3) + pb_field(2, 0, 1) + pb_field(9, 2, bytes(8)),
    # no data_type
    pb_field(1, 0, 2) + pb_field(9, 2, bytes(8)),
    # a field TensorProto does not have
    pb_field(1, 0, 2) + pb_field(2, 0, 1) + pb_field(9, 2, bytes(8)) + pb_field(20, 0, 1),
    b"\x08\x96\x01\xff\xff",   # truncated
], ids=["graphdef", "raw size", "no type", "unknown field", "truncated"])
def test_pb_files_that_are_not_tensor_protos_stay_unread(tmp_path, data):
    path = tmp_path / "model.pb"
    path.write_bytes(data)
    report = scan([path])
    assert not report.tensors
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "TensorFlow protobuf" in str(report.problems)


def test_an_onnx_model_named_pb_is_still_read_as_a_model(tmp_path):
    w = numpy_helper.from_array(np.array([NAN], np.float32), "W")
    model = helper.make_model(helper.make_graph([], "g", [], [], initializer=[w]))
    (tmp_path / "model.pb").write_bytes(model.SerializeToString())
    report = scan([tmp_path / "model.pb"])
    assert [(t.name, t.nan) for t in report.tensors] == [("W", 1)]


def test_a_directory_of_test_data_is_found_not_clean(tmp_path):
    data = tmp_path / "test_data_set_0"
    data.mkdir()
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(
        np.ones(3, np.float32), "x").SerializeToString())
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(
        np.array([1, np.nan], np.float32), "y").SerializeToString())
    report = scan([tmp_path])
    assert sorted((t.name, t.nan) for t in report.tensors) == [("x", 0), ("y", 1)]
    assert report.exit_code == ExitCode.FOUND


def test_a_sequence_or_optional_of_tensors_is_read_as_onnx_reads_it(tmp_path):
    arrays = [np.array([1, NAN], np.float32), np.array([[INF]], np.float64),
              np.array([1, 2], np.int64)]
    (tmp_path / "input_0.pb").write_bytes(numpy_helper.from_list(arrays, "seq").SerializeToString())
    (tmp_path / "input_1.pb").write_bytes(numpy_helper.from_optional(
        np.array([NAN, -INF], np.float16), "opt").SerializeToString())
    seq = onnx.SequenceProto.FromString((tmp_path / "input_0.pb").read_bytes())
    opt = onnx.OptionalProto.FromString((tmp_path / "input_1.pb").read_bytes())
    truth = {f"seq[{i}]": a for i, a in enumerate(numpy_helper.to_list(seq))}
    truth["opt[0]"] = numpy_helper.to_optional(opt)
    report = scan([tmp_path / "input_0.pb", tmp_path / "input_1.pb"])
    found = {t.name: t for t in report.tensors}
    assert sorted(found) == sorted(truth)
    for name, a in truth.items():
        if a.dtype.kind == "f":
            assert found[name].status == "checked"
            assert (found[name].nan, found[name].posinf, found[name].neginf) == _counts(a), name
        else:
            assert found[name].status == "not_applicable"
    assert report.exit_code == ExitCode.FOUND


def test_a_map_stays_unread_and_never_clean(tmp_path):
    (tmp_path / "input_0.pb").write_bytes(numpy_helper.from_dict(
        {1: np.array([NAN], np.float32)}, "m").SerializeToString())
    report = scan([tmp_path / "input_0.pb"])
    assert not report.tensors and report.exit_code == ExitCode.INCONCLUSIVE


def test_tensor_wire_types_are_the_installed_onnx_tensorproto():
    from google.protobuf.descriptor import FieldDescriptor as F
    from fpclass.scan.readers.onnx_schema import TENSOR_WIRES
    wire = {F.TYPE_FLOAT: 5, F.TYPE_DOUBLE: 1, F.TYPE_STRING: 2, F.TYPE_BYTES: 2,
            F.TYPE_MESSAGE: 2}
    expected = {}
    for field in TensorProto.DESCRIPTOR.fields:
        one = wire.get(field.type, 0)
        packable = field.is_repeated and field.type not in (F.TYPE_STRING, F.TYPE_BYTES,
                                                            F.TYPE_MESSAGE)
        expected[field.number] = (one, 2) if packable else (one,)
    assert TENSOR_WIRES == expected


@pytest.mark.parametrize("field, values, wire", [
    (4, [NAN, 1.0, INF], "single"), (4, [NAN, 1.0, INF], "split"),
    (10, [-INF, NAN], "single"), (10, [2.0, NAN, 1.0, INF], "split"),
], ids=["float_data unpacked", "float_data split", "double_data unpacked", "double_data split"])
def test_typed_data_not_in_one_packed_field_is_read_as_protobuf_reads_it(tmp_path, field, values,
                                                                         wire):
    fmt, data_type = ("<f4", TensorProto.FLOAT) if field == 4 else ("<f8", TensorProto.DOUBLE)
    one = [np.array([v], fmt).tobytes() for v in values]
    if wire == "single":   # one value per field
        body = b"".join(pb_field(field, 5 if field == 4 else 1, v) for v in one)
    else:                  # a packed run, a value alone, a packed run
        body = (pb_field(field, 2, one[0]) + pb_field(field, 5 if field == 4 else 1, one[1])
                + pb_field(field, 2, b"".join(one[2:])))
    path = tmp_path / "input_0.pb"
    path.write_bytes(pb_field(1, 0, len(values)) + pb_field(2, 0, data_type) + body)
    floating, counts = _truth(path)
    t = _only(scan([path]))
    assert t.status == "checked", t.reason
    assert (t.nan, t.posinf, t.neginf) == counts
