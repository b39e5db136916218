"""fpclass scan readers on files whose damage used to pass as clean: every case either gives the
findings numpy (or onnx, gguf-py) would see, or is unchecked / a problem with a one-line reason."""

import io
import json
import os
import struct
import warnings
import zipfile

import numpy as np
import pytest

from fpclass.scan import ExitCode, engine, scan
from test_scan_support import gguf_bytes, safetensors_bytes
from protobuf_writer import field as pb_field

NAN_F32 = np.array([np.nan, np.nan], np.float32).tobytes()


def _safetensors(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _npy(header: str, data: bytes, version=(1, 0)) -> bytes:
    """An .npy file with the header dict literal `header` written as given (numpy's padding)."""
    text = header.encode("latin1")
    size_format = "<H" if version[0] == 1 else "<I"
    prefix = 6 + 2 + struct.calcsize(size_format)
    text += b" " * (-(prefix + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(size_format, len(text)) + text + data


def _npy_of(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _reasons(report) -> str:
    return " | ".join([p.reason for p in report.problems] + [t.reason for t in report.unchecked])


def _result(report, name):
    [t] = [t for t in report.tensors if t.name == name]
    return t


# 1. safetensors: data-section bytes that belong to no tensor


@pytest.mark.parametrize("header", [{}, {"__metadata__": {"format": "pt"}}])
def test_safetensors_data_section_without_tensors_is_a_problem(tmp_path, header):
    path = tmp_path / "m.safetensors"
    path.write_bytes(_safetensors(header, NAN_F32))
    report = scan([path])
    assert "data section bytes 0..8 belong to no tensor" in _reasons(report)
    assert report.exit_code == ExitCode.INCONCLUSIVE
    path.write_bytes(_safetensors(header, b""))
    empty = scan([path])   # nothing uncovered, but nothing checked: never clean
    assert not empty.problems and empty.exit_code == ExitCode.INCONCLUSIVE


def test_safetensors_uncovered_bytes_beside_a_malformed_entry_are_a_problem(tmp_path):
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32"}}
    path = tmp_path / "m.safetensors"
    path.write_bytes(_safetensors(header, np.ones(2, np.float32).tobytes() + NAN_F32))
    report = scan([path])
    assert "data section bytes 8..16 belong to no tensor" in _reasons(report)
    assert report.exit_code == ExitCode.INCONCLUSIVE


# 2. .npy: negative and boolean dimensions


@pytest.mark.parametrize("shape", ["(-1,)", "(True, 3)", "(3, -2)", "(False,)"])
def test_npy_shape_with_a_negative_or_boolean_dimension_is_refused(tmp_path, shape):
    data = np.array([np.nan, 1, 2], "<f4").tobytes()
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    (tmp_path / "a.npy").write_bytes(_npy(header, data))
    with zipfile.ZipFile(tmp_path / "a.npz", "w") as z:
        z.writestr("x.npy", _npy(header, data))
    for name in ("a.npy", "a.npz"):
        report = scan([tmp_path / name])
        assert "non-negative integers" in _reasons(report), name
        assert report.exit_code == ExitCode.INCONCLUSIVE, name


# 3. .npz: two members of one name


@pytest.mark.parametrize("names", [("a.npy", "a.npy"), ("a.npy", "a")])
def test_npz_members_of_the_same_name_are_all_unchecked(tmp_path, names):
    path = tmp_path / "d.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # zipfile warns about the duplicate name, and writes it
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(names[0], _npy_of(np.array([np.nan], np.float32)))
            z.writestr(names[1], _npy_of(np.ones(2, np.float32)))
            z.writestr("b.npy", _npy_of(np.ones(3)))
    report = scan([path])
    assert any("2 members are named 'a'" in p.reason for p in report.problems), _reasons(report)
    # both members are unchecked, each its own result
    assert [t.status for t in report.tensors if t.name == "a"] == ["unchecked"] * 2
    assert [t.status for t in engine.plan([path]) if t.name == "a"] == ["unchecked"] * 2
    assert _result(report, "b").status == "checked"
    assert report.exit_code == ExitCode.INCONCLUSIVE


# 4. .npz: CRC-32 of members


def _stored_member_bytes(path, member):
    """(start, end) of the stored bytes of `member` in the zip at `path`."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    raw = path.read_bytes()
    n, m = struct.unpack_from("<HH", raw, info.header_offset + 26)
    start = info.header_offset + 30 + n + m
    return start, start + info.compress_size


@pytest.mark.parametrize("where", ["data", "header", "last byte"])
def test_npz_stored_member_with_a_wrong_crc_is_unchecked(tmp_path, where):
    path = tmp_path / "s.npz"
    np.savez(path, x=np.ones(64, "<f4"), y=np.ones(3))
    start, end = _stored_member_bytes(path, "x.npy")
    raw = bytearray(path.read_bytes())
    data_at = raw.index(b"\n", start) + 1
    if where == "header":   # a padding space made a tab: the header still parses the same
        at = raw.index(b" \n", start)
        raw[at] = ord("\t")
    else:                   # 1.0 becomes 1.0000001: still finite
        raw[data_at if where == "data" else end - 4] ^= 1
    path.write_bytes(bytes(raw))
    for task_bytes in (engine.TASK_BYTES, 16):   # a CRC-checked member is never split
        report = scan([path], task_bytes=task_bytes, chunk_bytes=32)
        x = _result(report, "x")
        assert x.status == "unchecked" and "member x.npy: CRC-32 mismatch" in x.reason
        assert _result(report, "y").status == "checked"
        assert report.exit_code == ExitCode.INCONCLUSIVE


def test_npz_stored_member_task_stays_whole(tmp_path):
    np.savez(tmp_path / "s.npz", x=np.ones(1000, "<f4"))
    tasks = [t for t in engine.plan([tmp_path / "s.npz"], task_bytes=64) if t.name == "x"]
    assert [(t.storage.kind, t.count) for t in tasks] == [("stored", -1)]


def test_npz_deflate_member_with_a_wrong_crc_is_unchecked(tmp_path):
    path = tmp_path / "c.npz"
    np.savez_compressed(path, x=np.ones(64, "<f4"))
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("x.npy")
    raw = bytearray(path.read_bytes())
    crc = struct.pack("<I", info.CRC)
    bad = struct.pack("<I", info.CRC ^ 1)
    raw[info.header_offset:] = bytes(raw[info.header_offset:]).replace(crc, bad)  # both headers
    path.write_bytes(bytes(raw))
    report = scan([path])
    assert "CRC-32" in _result(report, "x").reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_npz_deflate_members_are_read_without_reopening_the_archive(tmp_path, monkeypatch):
    # reopening parses the whole central directory per member: quadratic in the member count
    arrays = {f"a{i}": np.full(5, i, np.float32) for i in range(20)}
    arrays["a7"][3] = np.nan
    np.savez_compressed(tmp_path / "c.npz", **arrays)
    tasks = engine.plan([tmp_path / "c.npz"])
    opened = []
    real = zipfile.ZipFile

    def counting(*args, **kwargs):
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(zipfile, "ZipFile", counting)
    results, _ = engine.execute(tasks, threads=1)
    report = engine.assemble(tasks, results)
    assert not opened
    assert [(t.name, t.nan) for t in report.tensors if t.nan] == [("a7", 1)]
    assert len(report.checked) == 20


# 5. ONNX: initializers of training_info graphs


def test_onnx_training_info_initializers_are_read(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph([], "g", [], [], initializer=[
        numpy_helper.from_array(np.ones(2, np.float32), "W")])
    model = helper.make_model(graph)
    info = model.training_info.add()
    info.initialization.CopyFrom(helper.make_graph([], "init", [], [], initializer=[
        numpy_helper.from_array(np.array([1, np.nan], np.float32), "I")]))
    constant = helper.make_node("Constant", [], ["K"], name="k", value=numpy_helper.from_array(
        np.array([-np.inf], np.float64), "K"))
    info.algorithm.CopyFrom(helper.make_graph(
        [constant], "algo", [], [helper.make_tensor_value_info("K", TensorProto.DOUBLE, [1])],
        initializer=[numpy_helper.from_array(np.array([np.inf], np.float16), "A")]))
    onnx.save_model(model, str(tmp_path / "t.onnx"))
    report = scan([tmp_path / "t.onnx"])
    found = {t.name: (t.nan, t.posinf, t.neginf) for t in report.tensors}
    assert found == {"W": (0, 0, 0), "I": (1, 0, 0), "A": (0, 1, 0), "k@value": (0, 0, 1)}
    assert report.exit_code == ExitCode.FOUND


# 6. GGUF: block-quantized tensors need a dimension; empty ones are fine


def _q8_0_block(scale):
    return np.array([scale], "<f2").tobytes() + bytes(32)


def test_gguf_quantized_tensor_without_dimensions_is_unchecked(tmp_path):
    path = tmp_path / "q.gguf"
    path.write_bytes(gguf_bytes([("q", 8, [], _q8_0_block(np.nan))]))
    report = scan([path])
    q = _result(report, "q")
    assert q.status == "unchecked" and "at least one dimension" in q.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


@pytest.mark.parametrize("dims", [[32, 0], [0], [0, 5]])
def test_gguf_quantized_tensor_with_a_zero_dimension_is_empty(tmp_path, dims):
    path = tmp_path / "q.gguf"
    path.write_bytes(gguf_bytes([("q", 8, dims, b""), ("t", 0, [1], b"\0" * 4)]))
    report = scan([path])
    q = _result(report, "q")
    assert (q.status, q.values_checked, q.bytes_checked) == ("checked", 0, 0)
    assert report.exit_code == ExitCode.CLEAN


# 7. integer and bool tensors: the byte count is checked before "not applicable"


def test_npy_integer_array_with_the_wrong_byte_count_is_unchecked(tmp_path):
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"
    (tmp_path / "i.npy").write_bytes(_npy(header, bytes(8)))
    (tmp_path / "b.npy").write_bytes(_npy(header.replace("<i4", "|b1"), bytes(2)))
    with zipfile.ZipFile(tmp_path / "s.npz", "w") as z:
        z.writestr("i.npy", _npy(header, bytes(8)))
    with zipfile.ZipFile(tmp_path / "c.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("i.npy", _npy(header, bytes(8)))
    for name in ("i.npy", "b.npy", "s.npz", "c.npz"):
        report = scan([tmp_path / name])
        assert [t.status for t in report.tensors] == ["unchecked"], name
        assert "needs" in report.unchecked[0].reason, name
        assert report.exit_code == ExitCode.INCONCLUSIVE


def _onnx_with(tmp_path, *tensors, name="m.onnx"):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    model = helper.make_model(helper.make_graph([], "g", [], [], initializer=list(tensors)))
    onnx.save_model(model, str(tmp_path / name))
    return tmp_path / name


def test_onnx_integer_tensors_with_the_wrong_data_size_are_unchecked(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    raw = TensorProto(name="raw", data_type=TensorProto.INT64, dims=[3], raw_data=bytes(16))
    typed = TensorProto(name="typed", data_type=TensorProto.INT32, dims=[3], int32_data=[1, 2])
    wide = TensorProto(name="wide", data_type=TensorProto.UINT64, dims=[2], uint64_data=[1, 2, 3])
    boolean = TensorProto(name="bool", data_type=TensorProto.BOOL, dims=[4], raw_data=bytes(3))
    nibbles = TensorProto(name="int4", data_type=TensorProto.INT4, dims=[5], raw_data=bytes(2))
    external = TensorProto(name="ext", data_type=TensorProto.INT32, dims=[2],
                           data_location=TensorProto.EXTERNAL)
    external.external_data.add(key="location", value="missing.bin")
    good = TensorProto(name="good", data_type=TensorProto.INT32, dims=[3], int32_data=[1, 2, 3])
    path = _onnx_with(tmp_path, raw, typed, wide, boolean, nibbles, external, good)
    report = scan([path])
    status = {t.name: t.status for t in report.tensors}
    assert status == {"raw": "unchecked", "typed": "unchecked", "wide": "unchecked",
                      "bool": "unchecked", "int4": "unchecked", "ext": "unchecked",
                      "good": "not_applicable"}, _reasons(report)
    assert "raw_data holds 16 bytes" in _result(report, "raw").reason
    assert "2 values" in _result(report, "typed").reason
    assert "missing.bin" in _result(report, "ext").reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_onnx_packed_float4_with_the_wrong_data_size_is_unchecked(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    if not hasattr(TensorProto, "FLOAT4E2M1"):
        pytest.skip("onnx without FLOAT4E2M1")
    packed = TensorProto(name="P", data_type=TensorProto.FLOAT4E2M1, dims=[6], raw_data=b"\xff" * 2)
    report = scan([_onnx_with(tmp_path, packed)])
    assert _result(report, "P").status == "unchecked"
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_safetensors_and_gguf_integer_sizes_are_checked(tmp_path):
    (tmp_path / "m.safetensors").write_bytes(safetensors_bytes({"i": ("I32", bytes(8), (3,))}))
    (tmp_path / "m.gguf").write_bytes(gguf_bytes([("i", 26, [3], bytes(12))])[:-4])
    for name in ("m.safetensors", "m.gguf"):
        report = scan([tmp_path / name])
        assert [t.status for t in report.tensors] == ["unchecked"], name


# 8. GGUF: general.alignment must be a UINT32


@pytest.mark.parametrize("vtype, name", [(5, "INT32"), (10, "UINT64"), (8, "STRING")])
def test_gguf_alignment_of_another_type_is_refused(tmp_path, vtype, name):
    path = tmp_path / "a.gguf"
    path.write_bytes(gguf_bytes([("t", 0, [4], np.full(4, np.nan, "<f4").tobytes())],
                                alignment_type=vtype))
    report = scan([path])
    [problem] = report.problems
    assert "general.alignment" in problem.reason and name in problem.reason
    assert "UINT32" in problem.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_gguf_alignment_not_a_power_of_two_is_refused(tmp_path):
    path = tmp_path / "a.gguf"
    path.write_bytes(gguf_bytes([("t", 0, [4], bytes(16))], alignment=24))
    assert "power of two" in scan([path]).problems[0].reason


# 9. ONNX: external data reached through a symbolic link


def _external_model(folder, location="w.data"):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    (folder / os.path.dirname(location)).mkdir(parents=True, exist_ok=True)
    w = numpy_helper.from_array(np.array([1, np.nan], np.float32), "W")
    model = helper.make_model(helper.make_graph([], "g", [], [], initializer=[w]))
    onnx.save_model(model, str(folder / "m.onnx"), save_as_external_data=True, location=location,
                    size_threshold=0)
    return folder / "m.onnx"


def test_onnx_external_data_through_a_symlink_to_outside_is_refused(tmp_path):
    model = _external_model(tmp_path / "model")
    (tmp_path / "outside").mkdir()
    os.rename(tmp_path / "model" / "w.data", tmp_path / "outside" / "w.data")
    os.symlink(tmp_path / "outside" / "w.data", tmp_path / "model" / "w.data")
    w = _result(scan([model]), "W")
    assert w.status == "unchecked"
    assert w.reason == "external data location 'w.data' resolves outside the model's directory"


def test_onnx_external_data_in_a_symlinked_folder_outside_is_refused(tmp_path):
    model = _external_model(tmp_path / "model", location="sub/w.data")
    os.rename(tmp_path / "model" / "sub", tmp_path / "outside")
    os.symlink(tmp_path / "outside", tmp_path / "model" / "sub")
    w = _result(scan([model]), "W")
    assert w.status == "unchecked" and "resolves outside the model's directory" in w.reason


def test_onnx_external_data_through_a_symlink_inside_is_read(tmp_path):
    model = _external_model(tmp_path / "model")
    os.rename(tmp_path / "model" / "w.data", tmp_path / "model" / "real.data")
    os.symlink("real.data", tmp_path / "model" / "w.data")
    report = scan([model])
    assert (_result(report, "W").status, _result(report, "W").nan) == ("checked", 1)
    # a model reached through a symlinked folder reads data inside that folder
    os.symlink(tmp_path / "model", tmp_path / "alias")
    assert _result(scan([tmp_path / "alias" / "m.onnx"]), "W").nan == 1


# 10. locations in tensors of more than 64 dimensions


def test_nan_in_a_tensor_of_70_dimensions_is_located(tmp_path):
    shape = (1,) * 69 + (2,)
    data = np.array([1, np.nan], np.float32).tobytes()
    (tmp_path / "m.safetensors").write_bytes(safetensors_bytes({"t": ("F32", data, shape)}))
    report = scan([tmp_path / "m.safetensors"])
    t = _result(report, "t")
    assert (t.status, t.nan) == ("checked", 1)
    assert [loc.index for loc in t.locations] == [(0,) * 69 + (1,)]
    assert report.exit_code == ExitCode.FOUND


# 11. complex locations: the element's index, then the part, in Fortran order too


def _complex_truth(a, order):
    """[(index + (part,), class)] of the non-finite parts of `a` in storage order: the elements
    in `order`, the real part before the imaginary one."""
    parts = np.stack([a.real, a.imag], axis=-1)
    found = []
    for *index, part in np.argwhere(~np.isfinite(parts)):
        v = parts[tuple(index) + (part,)]
        cls = "nan" if np.isnan(v) else ("posinf" if v > 0 else "neginf")
        flat = np.ravel_multi_index(tuple(index), a.shape, order=order)
        found.append((flat, int(part), tuple(int(i) for i in index) + (int(part),), cls))
    return [(index, cls) for _, _, index, cls in sorted(found)]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("container", ["npy", "npz", "npz-deflate"])
def test_complex_locations_name_the_element_then_the_part(tmp_path, order, container):
    a = np.zeros((3, 4), np.complex128)
    a[2, 1] = complex(0, np.nan)
    a[0, 3] = complex(np.inf, 0)
    a[1, 2] = complex(-np.inf, np.nan)
    a[2, 3] = complex(np.nan, 1)
    stored = np.asfortranarray(a) if order == "F" else a
    if container == "npy":
        path = tmp_path / "a.npy"
        np.save(path, stored)
    else:
        path = tmp_path / "a.npz"
        (np.savez if container == "npz" else np.savez_compressed)(path, a=stored)
    report = scan([path], max_locations=100, chunk_bytes=16)
    [t] = report.tensors
    expected = _complex_truth(a, order)
    assert [(loc.index, loc.cls) for loc in t.locations] == expected
    assert ((2, 1, 1), "nan") in expected
    assert (t.nan, t.posinf, t.neginf) == (3, 1, 1)


# Also found on the way: tensors that were never read or misread


def test_onnx_function_attribute_defaults_are_read(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    default = helper.make_attribute("value", numpy_helper.from_array(
        np.array([np.nan], np.float32), "D"))
    function = helper.make_function("custom", "F", ["x"], ["y"], [helper.make_node(
        "Identity", ["x"], ["y"])], [helper.make_opsetid("", 17)])
    function.attribute_proto.append(default)
    model = helper.make_model(helper.make_graph([], "g", [], []), functions=[function],
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("custom", 1)])
    onnx.save_model(model, str(tmp_path / "f.onnx"))
    report = scan([tmp_path / "f.onnx"])
    assert [(t.name, t.nan) for t in report.tensors] == [("F@value", 1)]   # FUNCTION@ATTRIBUTE
    assert report.exit_code == ExitCode.FOUND


def test_onnx_external_data_that_is_not_a_regular_file_is_refused(tmp_path):
    model = _external_model(tmp_path / "model")
    os.remove(tmp_path / "model" / "w.data")
    os.mkdir(tmp_path / "model" / "w.data")
    w = _result(scan([model]), "W")
    assert w.status == "unchecked" and "not a regular file" in w.reason


def test_npz_member_whose_local_header_names_another_file_is_a_problem(tmp_path):
    path = tmp_path / "n.npz"
    np.savez(path, a=np.array([np.nan]))
    raw = path.read_bytes()
    local = raw.index(b"PK\x03\x04")
    path.write_bytes(raw[:local + 30] + b"b" + raw[local + 31:])   # the local name: b.npy
    report = scan([path])
    assert "local file header names 'b.npy'" in _reasons(report)
    assert not report.tensors and report.exit_code == ExitCode.INCONCLUSIVE


def test_gguf_alignment_given_twice_is_refused(tmp_path):
    data = gguf_bytes([("t", 0, [4], bytes(16))])
    entry = data.index(b"\x11\x00\x00\x00\x00\x00\x00\x00general.alignment")
    entry = data[entry:entry + 8 + 17 + 4 + 4]
    doubled = data[:24] + entry + data[24:]
    doubled = doubled[:16] + struct.pack("<Q", 3) + doubled[24:]   # three metadata entries
    (tmp_path / "a.gguf").write_bytes(doubled)
    assert "appears twice" in scan([tmp_path / "a.gguf"]).problems[0].reason


# Headers claiming more than the scan should grind through


def test_headers_declaring_more_tensors_than_the_limit_are_refused(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from fpclass.scan.readers import bounds
    monkeypatch.setattr(bounds, "MAX_TENSORS", 3)
    (tmp_path / "m.safetensors").write_bytes(safetensors_bytes(
        {f"t{i}": ("F32", bytes(4), (1,)) for i in range(5)}))
    (tmp_path / "m.gguf").write_bytes(gguf_bytes([(f"t{i}", 0, [1], bytes(4)) for i in range(5)]))
    np.savez(tmp_path / "m.npz", **{f"t{i}": np.ones(1) for i in range(5)})
    tensors = [helper.make_tensor(f"t{i}", TensorProto.FLOAT, [1], [1.0]) for i in range(5)]
    _onnx_with(tmp_path, *tensors)
    report = scan([tmp_path])
    assert sorted(os.path.basename(p.path) for p in report.problems
                  if "over the limit of 3" in p.reason) == [
        "m.gguf", "m.npz", "m.onnx", "m.safetensors"]
    assert not report.tensors


def test_gguf_claiming_more_tensors_than_its_bytes_hold_is_refused(tmp_path):
    data = bytearray(gguf_bytes([("t", 0, [4], bytes(16))]))
    data[8:16] = struct.pack("<Q", 1 << 40)
    (tmp_path / "m.gguf").write_bytes(bytes(data))
    assert "more than a" in scan([tmp_path / "m.gguf"]).problems[0].reason


# The fast paths agree with the general ones


JSON_DOCUMENTS = [
    '{}', ' { } ', '{"a": 1}', '{"a": {"b": [1, 2]}, "c": "x"}  ', '{"a": 1,}', '{"a" 1}',
    '{"a": 1 "b": 2}', '{"a": 1}}', '{"a": 1} x', '', 'x', '{', '{"a":', '{"a": NaN}',
    '{"a\\u0041": 1}', '{"\x01": 1}', ' {"a":1}\n\t ', '{"a":1 , "b" :2 }', '{"a":1,',
    '{"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"u":{"dtype":"I8","shape":[],'
    '"data_offsets":[24,25]}}', '{"t":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}',
    '{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]} , "u\\n":{"dtype":"F32","shape":[1],'
    '"data_offsets":[4,8]}}',
]


@pytest.mark.parametrize("text", JSON_DOCUMENTS)
def test_safetensors_header_members_are_what_json_reads(text):
    from fpclass.scan.readers import ReaderError
    from fpclass.scan.readers.safetensors import _members
    try:
        expected = json.loads(text)
    except ValueError as e:
        with pytest.raises(ReaderError, match="not valid JSON") as error:
            dict(_members(text))
        assert str(e) in str(error.value)
        return
    got = dict(_members(text))
    assert got.keys() == expected.keys()
    for name, value in got.items():
        if isinstance(value, tuple):   # a tensor entry, read by the fast path
            entry = expected[name]
            value = {"dtype": value[0], "shape": list(value[1]), "data_offsets": list(value[2:])}
            assert value == entry
        elif value == value:           # NaN is not equal to itself
            assert value == expected[name]


def _npy_cases():
    import ml_dtypes
    for dtype in ["<f4", ">f8", "<c16", "|b1", "<i8", "|u1", "<U3", "|S2", "<M8[ns]", "|V2",
                  ml_dtypes.bfloat16, [("a", "<f4"), ("b", "<i2")], ("<f4", (2,)), "O"]:
        for shape in [(), (0,), (3,), (2, 0, 5), (4, 3)]:
            for fortran in (False, True):
                yield np.dtype(dtype), shape, fortran


def test_npy_written_headers_read_as_numpy_reads_them():
    from fpclass.scan.readers.npy import _parse_header
    for dtype, shape, fortran in _npy_cases():
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                   "fortran_order": fortran, "shape": shape})
        head = buf.getvalue()
        f = io.BytesIO(head)
        np.lib.format.read_magic(f)
        expected = np.lib.format.read_array_header_1_0(f, max_header_size=10 ** 6)
        got = _parse_header(head)
        assert (got[0], got[1], got[2]) == (expected[2], expected[0], expected[1])


@pytest.mark.parametrize("header", [
    "{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}",    # another key order
    "{'descr': '<f4', 'fortran_order': False, 'shape': (3, ), }",  # another spacing
    "{'descr': '<f4','fortran_order':False,'shape':(3,)}",
])
def test_npy_headers_numpy_did_not_write_are_still_read(tmp_path, header):
    (tmp_path / "a.npy").write_bytes(_npy(header, np.array([1, np.nan, 2], "<f4").tobytes()))
    t = scan([tmp_path / "a.npy"]).tensors[0]
    assert (t.shape, t.nan) == ((3,), 1)


def test_ranges_find_what_a_byte_map_finds():
    from fpclass.scan.readers.bounds import Ranges
    rng = np.random.default_rng(0)
    for _ in range(300):
        size = int(rng.integers(1, 40))
        ranges = Ranges(size)
        owner = [None] * size
        overlapping = set()
        spans = []
        for i in range(int(rng.integers(0, 6))):
            begin = int(rng.integers(0, size + 5))
            end = begin + int(rng.integers(0, 10))
            ranges.add(f"r{i}", begin, end)
            spans.append((f"r{i}", begin, min(end, size)))
        for name, begin, end in sorted(spans, key=lambda s: (s[1], s[2])):
            for byte in range(begin, end):
                if owner[byte] is not None:
                    overlapping.add(name)
                owner[byte] = name
        gaps, start = [], None
        for byte in range(size + 1):
            free = byte < size and owner[byte] is None
            if free and start is None:
                start = byte
            elif not free and start is not None:
                gaps.append((start, byte))
                start = None
        assert ranges.uncovered() == gaps
        assert {name for name, _ in ranges.overlaps()} == overlapping


def test_tasks_stay_frozen_dataclasses():
    import dataclasses
    import pickle
    from fpclass.scan.storage.ranges import Range
    from fpclass.scan.tasks import Task
    t = Task("f", "n", "F32", (2,), element="<f4", grid=(2,), storage=Range("f", 0, 8))
    assert t == dataclasses.replace(t) and hash(t) == hash(dataclasses.replace(t))
    assert pickle.loads(pickle.dumps(t)) == t
    assert not hasattr(t, "__dict__")
    assert dataclasses.replace(t, first=1).first == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = "m"
    defaults = Task("f")
    assert all(getattr(defaults, f.name) == f.default for f in dataclasses.fields(Task)
               if f.default is not dataclasses.MISSING)


def test_npz_declaring_too_many_members_is_refused_before_zipfile_reads_them(tmp_path, monkeypatch):
    from fpclass.scan.readers import bounds
    path = tmp_path / "many.npz"
    with zipfile.ZipFile(path, "w") as z:
        for i in range(5):
            z.writestr(f"a{i}.npy", _npy_of(np.ones(1, np.float32)))
    monkeypatch.setattr(bounds, "MAX_TENSORS", 4)
    opened = []
    monkeypatch.setattr(zipfile, "ZipFile", lambda *a, **k: opened.append(a) or 1 / 0)
    report = scan([path])
    assert not opened   # refused from the end-of-directory record alone
    assert any("declares 5 zip members, over the limit of 4" in p.reason for p in report.problems)

# 12. Found by the structural fuzz test (tests/test_scan_fuzz.py): each case is refused by the
# independent reader, so the scan may not end clean, nor with an internal error.


def _gguf(kv, tensors):
    """GGUF v3 bytes with metadata `kv` [(key bytes, value type, value bytes)] and F32 tensors
    `tensors` [(name bytes, values)], 32-byte aligned."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, vtype, value in kv:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype) + value
    data = b""
    for name, values in tensors:
        data += b"\0" * (-len(data) % 32)
        out += (struct.pack("<Q", len(name)) + name
                + struct.pack("<IQIQ", 1, len(values), 0, len(data)))
        data += np.asarray(values, "<f4").tobytes()
    return out + b"\0" * (-len(out) % 32) + data


def _gguf_verdicts(path):
    """(what gguf-py says of the file at `path`: None when it reads it, else the error; the
    scan's report)."""
    gguf = pytest.importorskip("gguf")
    try:
        gguf.GGUFReader(path)
        refused = None
    except (KeyError, ValueError) as e:
        refused = e
    return refused, scan([path])


_NAME = (b"general.name", 8, struct.pack("<Q", 1) + b"m")


@pytest.mark.parametrize("kv, tensors, reason", [
    ([_NAME, _NAME], [(b"w", [1.0])], "metadata key 'general.name' appears twice"),
    ([(b"general.\xff", 4, bytes(4))], [(b"w", [1.0])], "metadata key b'general.\\xff' is not "
                                                         "valid UTF-8"),
    ([_NAME], [(b"\xff\xfe", [1.0])], "tensor name b'\\xff\\xfe' is not valid UTF-8"),
    ([_NAME], [(b"w", [1.0]), (b"w", [2.0])], "two tensors are named 'w'"),
], ids=["duplicate key", "key not UTF-8", "name not UTF-8", "duplicate name"])
def test_gguf_names_gguf_py_refuses_are_refused(tmp_path, kv, tensors, reason):
    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf(kv, tensors))
    refused, report = _gguf_verdicts(path)
    assert refused is not None
    [problem] = report.problems
    assert reason in problem.reason
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_gguf_q8_1_is_unchecked_as_its_readers_disagree_on_the_block_size(tmp_path):
    block = np.array([np.nan, 0], "<f2").tobytes() + bytes(32)   # ggml's 36-byte block_q8_1
    path = tmp_path / "q.gguf"
    path.write_bytes(gguf_bytes([("q", 9, [32], block)]))
    gguf = pytest.importorskip("gguf")
    with pytest.raises(ValueError):   # gguf-py reads 40 bytes, past the end of the file
        gguf.GGUFReader(path)
    q = _result(scan([path]), "q")
    assert q.status == "unchecked" and "36 bytes, gguf-py's 40" in q.reason


def _npz_of(members, compression=zipfile.ZIP_STORED) -> bytes:
    """A zip of `members` {name or ZipInfo: bytes}."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(buf, "w", compression) as z:
            for name, data in members.items():
                z.writestr(name, data)
    return buf.getvalue()


def _npy_and_npz_verdicts(tmp_path, npy: bytes):
    """[(file name, what NumPy says: None when it reads the array, else the error, the scan's
    report)] for `npy` as an .npy file and as a stored and a deflated .npz member."""
    files = {"a.npy": npy, "s.npz": _npz_of({"x.npy": npy}),
             "d.npz": _npz_of({"x.npy": npy}, zipfile.ZIP_DEFLATED)}
    out = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if name.endswith(".npy"):
                    np.load(tmp_path / name)
                else:
                    with zipfile.ZipFile(tmp_path / name) as z, z.open("x.npy") as f:
                        np.lib.format.read_array(f)
            refused = None
        except Exception as e:   # whatever NumPy raises: the truth is only that it refuses
            refused = e
        out.append((name, refused, scan([tmp_path / name])))
    return out


_F4 = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }"


@pytest.mark.parametrize("header, version, data, reason", [
    (_F4 % "(9223372036854775808, 0)", (1, 0), b"", "over NumPy's limit of 2**63 - 1"),
    (_F4 % "(18446744073709551616, 0)", (1, 0), b"", "over NumPy's limit of 2**63 - 1"),
    (_F4 % "(4611686018427387904, 0)", (2, 0), b"", "too big for NumPy"),
    (_F4 % "(4294967296, 4294967296, 0)", (1, 0), b"", "too big for NumPy"),
    (_F4 % "(2,)", (1, 1), NAN_F32, "unsupported .npy format version (1, 1)"),
    (_F4 % "(2,)", (3, 1), NAN_F32, "unsupported .npy format version (3, 1)"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", (1, 0), NAN_F32,
     "EOF in multi-line statement"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': [(2,), }", (1, 0), NAN_F32,
     "EOF in multi-line statement"),
    ("{'descr': '<U1', 'fortran_order': False, 'shape': (7,), }", (1, 0), bytes(4), "needs 28"),
    ("{'descr': '<i8', 'fortran_order': True, 'shape': (1,), }", (1, 0), bytes(4), "needs 8"),
], ids=["dim 2**63", "dim 2**64", "bytes 2**64", "elements 2**64", "version 1.1",
        "version 3.1", "unclosed brace", "unclosed bracket", "U1 short", "i8 short"])
def test_npy_headers_numpy_refuses_are_not_clean(tmp_path, header, version, data, reason):
    for name, refused, report in _npy_and_npz_verdicts(tmp_path, _npy(header, data, version)):
        assert refused is not None, name
        assert report.exit_code == ExitCode.INCONCLUSIVE, name
        assert reason in _reasons(report), (name, _reasons(report))
        assert "internal error" not in _reasons(report), name


def test_npy_shape_numpy_reads_with_a_huge_dimension_is_empty(tmp_path):
    header = _F4 % "(2305843009213693951, 0)"   # 2**61 - 1 rows of none: 2**63 - 4 bytes a row
    for name, refused, report in _npy_and_npz_verdicts(tmp_path, _npy(header, b"")):
        assert refused is None
        assert [t.status for t in report.tensors] == ["checked"], name


def _patched_zip(data: bytes, field: str, value: int) -> bytes:
    """`data` (a zip of one member) with `field` of both the local and the central header set
    to `value`: "version" (needed to extract) or "flags"."""
    local, central = {"version": (4, 6), "flags": (6, 8)}[field]
    raw = bytearray(data)
    at = raw.index(b"PK\x01\x02")
    struct.pack_into("<H", raw, local, value)
    struct.pack_into("<H", raw, at + central, value)
    return bytes(raw)


def _zipfile_verdict(path):
    """None when zipfile lists and reads every member of the archive at `path`, else its error."""
    try:
        with zipfile.ZipFile(path) as z:
            z.testzip()
            for info in z.infolist():
                z.read(info)
    except Exception as e:   # whatever zipfile raises: the truth is only that it refuses
        return e
    return None


@pytest.mark.parametrize("case, reason", [
    ("version needed 9.9", "zip file version 9.9"),
    ("strong encryption", "encrypted zip member"),
    ("folder with a CRC", "folder entry sub/ holds data"),
])
def test_npz_archives_zipfile_refuses_are_not_clean(tmp_path, case, reason):
    member = _npy_of(np.ones(3, np.float32))
    if case == "version needed 9.9":
        data = _patched_zip(_npz_of({"a.npy": member}), "version", 99)
    elif case == "strong encryption":
        data = _patched_zip(_npz_of({"a.npy": member}), "flags", 0x40)
    elif case == "folder with a CRC":
        data = _npz_of({"a.npy": member, "sub/": b""})
        at = data.index(b"PK\x01\x02sub/"[:4], data.index(b"PK\x01\x02") + 1)
        data = data[:at + 16] + b"\x01\x02\x03\x04" + data[at + 20:]
    path = tmp_path / "z.npz"
    path.write_bytes(data)
    assert _zipfile_verdict(path) is not None
    report = scan([path])
    assert reason in _reasons(report), _reasons(report)
    assert "internal error" not in _reasons(report)
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_npz_member_of_an_empty_name_is_a_problem(tmp_path):
    # zipfile writes no such member: rename a one-letter one
    data = _npz_of({"a.npy": _npy_of(np.ones(3, np.float32)), "b": _npy_of(np.ones(2))})
    for signature, length_at, header in ((b"PK\x03\x04", 26, 30), (b"PK\x01\x02", 28, 46)):
        at = data.rindex(signature)
        assert data[at + header:at + header + 1] == b"b"
        data = (data[:at + length_at] + struct.pack("<H", 0) + data[at + length_at + 2:at + header]
                + data[at + header + 1:])
    eocd = data.rindex(b"PK\x05\x06")   # the central directory moved 1 byte and shrank 1
    size, offset = struct.unpack_from("<II", data, eocd + 12)
    data = data[:eocd + 12] + struct.pack("<II", size - 1, offset - 1) + data[eocd + 20:]
    path = tmp_path / "z.npz"
    path.write_bytes(data)
    with zipfile.ZipFile(path) as z:   # np.load reads it, but ZipInfo.is_dir() fails on it
        with pytest.raises(IndexError):
            [info.is_dir() for info in z.infolist()]
    report = scan([path])
    assert "a zip member has an empty name" in _reasons(report)
    assert report.exit_code == ExitCode.INCONCLUSIVE


def test_npz_empty_folders_are_read_as_zipfile_reads_them(tmp_path):
    member = _npy_of(np.ones(3, np.float32))
    for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        path = tmp_path / "z.npz"
        path.write_bytes(_npz_of({"sub/": b"", "a.npy": member}, compression))
        assert _zipfile_verdict(path) is None
        report = scan([path])
        assert report.exit_code == ExitCode.CLEAN and not report.problems, _reasons(report)
    # zipfile reads a folder holding data too (np.load skips it); the scan says it is not read
    path.write_bytes(_npz_of({"sub/": b"x", "a.npy": member}))
    assert _zipfile_verdict(path) is None
    report = scan([path])
    assert "folder entry sub/ holds data" in _reasons(report)
    assert report.exit_code == ExitCode.INCONCLUSIVE


@pytest.mark.parametrize("at", [0, 1, 7, 40, -9])
def test_npz_corrupt_deflate_stream_is_unchecked(tmp_path, at):
    a = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
    path = tmp_path / "c.npz"
    np.savez_compressed(path, x=a)
    start, end = _stored_member_bytes(path, "x.npy")
    raw = bytearray(path.read_bytes())
    raw[(start if at >= 0 else end) + at] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert _zipfile_verdict(path) is not None
    report = scan([path])
    assert [t.status for t in report.tensors] == ["unchecked"], _reasons(report)
    assert "internal error" not in _reasons(report)


def _safetensors_verdicts(path):
    """(None when the safetensors library reads the file at `path`, else its error; the scan's
    report)."""
    safetensors = pytest.importorskip("safetensors")
    try:
        safetensors.deserialize(path.read_bytes())
        refused = None
    except Exception as e:   # SafetensorError: the truth is only that it refuses
        refused = e
    return refused, scan([path])


_W = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
_V = {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}


def _zero(at):
    return {"dtype": "F32", "shape": [0, 3], "data_offsets": [at, at]}


@pytest.mark.parametrize("header, refused, reason", [
    ({"__metadata__": {"a": {"b": "c"}}, "w": _W, "v": _V}, True, "__metadata__ must be"),
    ({"__metadata__": {"a": 1}, "w": _W, "v": _V}, True, "__metadata__ must be"),
    ({"__metadata__": {"a": None}, "w": _W, "v": _V}, True, "__metadata__ must be"),
    ({"__metadata__": {"dtype": "F32", "shape": [1], "data_offsets": [0, 0]}, "w": _W, "v": _V}, True,
     "__metadata__ must be"),
    ({"__metadata__": [], "w": _W, "v": _V}, True, "__metadata__ must be"),
    ({"__metadata__": None, "w": _W, "v": _V}, False, ""),
    ({"__metadata__": {"a": "b"}, "w": _W, "v": _V}, False, ""),
    ({"w": _W, "v": _V, "zero": _zero(4)}, True, "zero-size tensor 'zero' at data offset 4"),
    ({"w": _W, "v": _V, "zero": _zero(9)}, True, "zero-size tensor 'zero' at data offset 9"),
    ({"w": _W, "v": _V, "zero": _zero(0)}, False, ""),
    ({"w": _W, "v": _V, "zero": _zero(8)}, False, ""),
    ({"w": _W, "v": _V, "zero": _zero(12)}, False, ""),
])
def test_safetensors_headers_are_judged_as_the_safetensors_library_does(tmp_path, header,
                                                                        refused, reason):
    path = tmp_path / "m.safetensors"
    path.write_bytes(_safetensors(header, np.ones(3, np.float32).tobytes()))
    error, report = _safetensors_verdicts(path)
    assert (error is not None) == refused, error
    if refused:
        assert reason in _reasons(report), _reasons(report)
        assert report.exit_code == ExitCode.INCONCLUSIVE
    else:
        assert report.exit_code == ExitCode.CLEAN, _reasons(report)


def test_onnx_schema_is_the_installed_onnx_schema():
    onnx = pytest.importorskip("onnx")
    from google.protobuf.descriptor import FieldDescriptor as F
    from fpclass.scan.readers import protobuf
    from fpclass.scan.readers.onnx_model import SCHEMA
    packed = {F.TYPE_FLOAT: protobuf.PACKED_FIXED32, F.TYPE_FIXED32: protobuf.PACKED_FIXED32,
              F.TYPE_SFIXED32: protobuf.PACKED_FIXED32, F.TYPE_DOUBLE: protobuf.PACKED_FIXED64,
              F.TYPE_FIXED64: protobuf.PACKED_FIXED64, F.TYPE_SFIXED64: protobuf.PACKED_FIXED64}
    expected, todo = {}, [onnx.ModelProto.DESCRIPTOR]
    while todo:
        message = todo.pop()
        name = message.full_name.removeprefix("onnx.")
        if name in expected:
            continue
        expected[name] = {}
        for field in message.fields:
            if field.type == F.TYPE_MESSAGE:
                expected[name][field.number] = field.message_type.full_name.removeprefix("onnx.")
                todo.append(field.message_type)
            elif field.is_repeated and field.type not in (F.TYPE_STRING, F.TYPE_BYTES):
                expected[name][field.number] = packed.get(field.type, protobuf.PACKED_VARINT)
    assert SCHEMA == expected


def _onnx_verdicts(path):
    """(None when onnx.load reads the model at `path`, else its error; the scan's report)."""
    onnx = pytest.importorskip("onnx")
    try:
        onnx.load(path)
        refused = None
    except Exception as e:   # DecodeError and others: the truth is only that it refuses
        refused = e
    return refused, scan([path])


def _nested_types(sequences, shape=False) -> bytes:
    """A TypeProto of `sequences` nested sequence types of a tensor type (with a shape): in a
    graph input, its innermost message is 4 + 2 * sequences (+ 1) levels below the model."""
    t = pb_field(1, 2, pb_field(2, 2, b"") if shape else b"")   # tensor_type { shape {} }
    for _ in range(sequences):
        t = pb_field(4, 2, pb_field(1, 2, t))                   # sequence_type { elem_type { ... } }
    return t


_INIT = pb_field(5, 2, pb_field(1, 0, 2) + pb_field(2, 0, 1) + pb_field(8, 2, b"W")
            + pb_field(9, 2, np.array([1, np.nan], np.float32).tobytes()))


def _model(*graph_fields, top=b"") -> bytes:
    """A ModelProto: opset 18, a graph of `graph_fields` and the NaN initializer W."""
    return (pb_field(1, 0, 8) + pb_field(8, 2, pb_field(2, 0, 18)) + top
            + pb_field(7, 2, pb_field(2, 2, b"g") + b"".join(graph_fields) + _INIT))


ONNX_WIRE_CASES = {   # name: (model bytes, whether onnx.load reads it)
    "output type truncated": (_model(pb_field(12, 2, pb_field(1, 2, b"y") + pb_field(2, 2, b"\x0a"))), False),
    "value_info type garbage": (_model(pb_field(13, 2, pb_field(2, 2, b"\xff"))), False),
    "opset_import runs past": (_model(top=pb_field(8, 2, b"\x0a\x05ab")), False),
    "metadata_props bad key": (_model(top=pb_field(14, 2, b"\x00\x01")), False),
    "doc string of a node's attribute's graph": (_model(pb_field(1, 2, pb_field(5, 2, pb_field(1, 2, b"a") + pb_field(
        6, 2, pb_field(10, 2, b"doc") + pb_field(13, 2, b"\x12"))))), False),
    "node device configuration sharding": (_model(pb_field(1, 2, pb_field(10, 2, pb_field(2, 2, pb_field(
        2, 2, b"\x80"))))), False),
    "attribute ints packed": (_model(pb_field(1, 2, pb_field(5, 2, pb_field(8, 2, b"\x80")))), False),
    "attribute floats packed": (_model(pb_field(1, 2, pb_field(5, 2, pb_field(7, 2, b"abc")))), False),
    "sparse indices": (_model(pb_field(15, 2, pb_field(2, 2, b"\x0a\x05"))), False),
    "tensor segment": (_model(pb_field(5, 2, pb_field(3, 2, b"\x08"))), False),
    "tensor float_data of 5 bytes": (_model(pb_field(5, 2, pb_field(4, 2, bytes(5)))), False),
    "tensor int64_data unterminated": (_model(pb_field(5, 2, pb_field(7, 2, b"\x01\x80"))), False),
    "tensor int32_data varint of 11 bytes": (_model(pb_field(5, 2, pb_field(5, 2, b"\x80" * 10 + b"\x01"))),
                                             False),
    "key of 6 bytes": (_model(bytes([0x80 | 0x50, 0x80, 0x80, 0x80, 0x80, 0, 1])), False),
    "key over 32 bits": (_model(bytes([0xF8, 0xFF, 0xFF, 0xFF, 0x1F, 0])), False),
    "length of 6 bytes": (_model(pb_field(99, 2, b"")[:-1] + b"\x80\x80\x80\x80\x80\x00"), False),
    "types nested 101 deep": (_model(pb_field(11, 2, pb_field(2, 2, _nested_types(48, True)))), False),
    "types nested 100 deep": (_model(pb_field(11, 2, pb_field(2, 2, _nested_types(48)))), True),
    "graph as a varint": (_model(top=pb_field(7, 0, 5)), True),
    "ir_version as bytes": (_model(top=pb_field(1, 2, b"\xff\xff")), True),
    "float_data as a varint too": (_model(pb_field(5, 2, pb_field(1, 0, 1) + pb_field(2, 0, 1) + pb_field(8, 2, b"F")
                                             + pb_field(4, 0, 3)
                                             + pb_field(4, 2, np.float32(np.inf).tobytes()))), True),
    "opaque type with an unknown field": (_model(pb_field(11, 2, pb_field(2, 2, pb_field(7, 2, pb_field(
        3, 2, b"\xff"))))), True),
}


@pytest.mark.parametrize("case", list(ONNX_WIRE_CASES))
def test_onnx_wire_format_is_judged_as_protobuf_does(tmp_path, case):
    data, reads = ONNX_WIRE_CASES[case]
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    refused, report = _onnx_verdicts(path)
    assert (refused is None) == reads, refused
    assert "internal error" not in _reasons(report)
    if reads:   # all read, nothing unchecked (a float_data varint is an unknown field)
        assert report.exit_code == ExitCode.FOUND and not _reasons(report), _reasons(report)
        assert _result(report, "W").nan == 1
        assert case != "float_data as a varint too" or _result(report, "F").posinf == 1
    else:       # W's NaN is found, and the damage is a problem
        assert report.problems, _reasons(report)


def _external_with(folder, data: bytes, **entries):
    """A model whose FLOAT initializer W of shape [2] has its data in w.data (holding `data`),
    with the external_data `entries` (location="w.data" unless given)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    folder.mkdir(exist_ok=True)
    (folder / "w.data").write_bytes(data)
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2],
                    data_location=TensorProto.EXTERNAL)
    for key, value in {"location": "w.data", **entries}.items():
        w.external_data.add(key=key, value=value)
    model = helper.make_model(helper.make_graph([], "g", [], [], initializer=[w]))
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    return folder / "m.onnx"


def _external_verdicts(path):
    """(None when onnx.load reads the model at `path` and its data, else its error; the scan's
    result for W)."""
    from onnx import numpy_helper
    refused, report = _onnx_verdicts(path)
    if refused is None:
        import onnx
        try:
            numpy_helper.to_array(onnx.load(path).graph.initializer[0])
        except Exception as e:   # the data is not the tensor's size
            refused = e
    return refused, _result(report, "W")


_NAN2 = np.array([np.nan, 1], np.float32).tobytes()


@pytest.mark.parametrize("data, entries, reads", [
    (_NAN2, {}, True),                                        # no length: to the end, 8 bytes
    (_NAN2 + bytes(4), {}, False),                            # no length: 12 bytes
    (bytes(4) + _NAN2, {"offset": "4"}, True),
    (bytes(4) + _NAN2 + bytes(4), {"offset": "4"}, False),
    (_NAN2 + bytes(4), {"length": "8"}, True),
    (_NAN2, {"length": "0"}, False),                          # reads 0 bytes
    (_NAN2, {"length": ""}, False),                           # int("") fails
    (_NAN2, {"offset": ""}, False),
], ids=["no length", "no length, longer file", "offset", "offset, longer file", "length",
        "length 0", "empty length", "empty offset"])
def test_onnx_external_data_is_read_as_onnx_reads_it(tmp_path, data, entries, reads):
    refused, w = _external_verdicts(_external_with(tmp_path / "m", data, **entries))
    assert (refused is None) == reads, refused
    if reads:
        assert (w.status, w.nan) == ("checked", 1)
    else:
        assert w.status == "unchecked", w.reason


def test_onnx_external_data_location_with_a_nul_byte_is_unchecked(tmp_path):
    # onnx reads "w" (the name up to the NUL); the scan names the oddity instead
    path = _external_with(tmp_path / "m", _NAN2, location="w\0.data")
    (tmp_path / "m" / "w").write_bytes(_NAN2)
    w = _result(scan([path]), "W")
    assert w.status == "unchecked" and "holds a NUL byte" in w.reason


def test_onnx_tensors_of_one_name_are_each_their_own_result(tmp_path):
    pytest.importorskip("onnx")
    from onnx import numpy_helper
    path = _onnx_with(tmp_path, numpy_helper.from_array(np.ones(2, np.float32), "W"),
                      numpy_helper.from_array(np.array([np.inf], np.float32), "W"))
    report = scan([path])
    assert sorted((t.name, t.posinf) for t in report.tensors) == [("W", 0), ("W", 1)]
    assert report.exit_code == ExitCode.FOUND


@pytest.mark.parametrize("header, data", [
    ('{"v": {"dtype": "F32", "shape": [2], "data_offsets": [-0, 8]}}', NAN_F32),
    ('{"v": {"dtype": "F32", "shape": [-0, 2], "data_offsets": [0, 0]}}', b""),
])
def test_safetensors_minus_zero_is_no_integer(tmp_path, header, data):
    # serde_json reads -0 as the float -0.0, which is no size or offset; Python's json reads 0
    text = header.encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    refused, report = _safetensors_verdicts(path)
    assert refused is not None and "-0.0" in str(refused)
    assert "non-negative integers, got [-0.0" in _reasons(report)
    assert report.exit_code == ExitCode.INCONCLUSIVE


@pytest.mark.parametrize("chunk", [16, 1 << 20])
def test_packed_varints_are_counted_and_checked_as_protobuf_reads_them(monkeypatch, chunk):
    from fpclass.scan.readers import protobuf
    monkeypatch.setattr(protobuf, "_CHUNK", chunk)

    def reference(data):   # a varint is at most 10 bytes, the last one ends with the field
        count = run = 0
        for b in data:
            run += 1
            if run > 10:
                return None
            if b < 0x80:
                count, run = count + 1, 0
        return None if run else count

    rng = np.random.default_rng(0)
    for _ in range(3000):
        size = int(rng.integers(0, 80))
        high = rng.random(size) < rng.choice([0.1, 0.5, 0.85, 0.95])   # continuation bytes
        data = bytes((rng.integers(0, 128, size) | (high * 0x80)).astype(np.uint8))
        pad = bytes(int(rng.integers(0, 5)))
        buf = pad + data + b"\xff" * 3
        expected = reference(data)
        if expected is None:
            with pytest.raises(protobuf.ProtobufError):
                protobuf.packed_varints(buf, len(pad), len(pad) + size)
        else:
            assert protobuf.packed_varints(buf, len(pad), len(pad) + size) == expected, data
