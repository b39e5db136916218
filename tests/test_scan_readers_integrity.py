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

NAN_F32 = np.array([np.nan, np.nan], np.float32).tobytes()


def _safetensors(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _npy(header: str, data: bytes, version=(1, 0)) -> bytes:
    """An .npy file with the header dict literal `header` written as given (numpy's padding)."""
    text = header.encode("latin1")
    size_format = "<H" if version == (1, 0) else "<I"
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


# 4. .npz: CRC-32 of members


def _stored_member_bytes(path, member):
    """(start, end) of the stored bytes of `member` in the zip at `path`."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    raw = path.read_bytes()
    n, m = struct.unpack_from("<HH", raw, info.header_offset + 26)
    start = info.header_offset + 30 + n + m
    return start, start + info.compress_size


# 6. GGUF: block-quantized tensors need a dimension; empty ones are fine


def _q8_0_block(scale):
    return np.array([scale], "<f2").tobytes() + bytes(32)


def _onnx_with(tmp_path, *tensors, name="m.onnx"):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    model = helper.make_model(helper.make_graph([], "g", [], [], initializer=list(tensors)))
    onnx.save_model(model, str(tmp_path / name))
    return tmp_path / name


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


def _npy_cases():
    import ml_dtypes
    for dtype in ["<f4", ">f8", "<c16", "|b1", "<i8", "|u1", "<U3", "|S2", "<M8[ns]", "|V2",
                  ml_dtypes.bfloat16, [("a", "<f4"), ("b", "<i2")], ("<f4", (2,)), "O"]:
        for shape in [(), (0,), (3,), (2, 0, 5), (4, 3)]:
            for fortran in (False, True):
                yield np.dtype(dtype), shape, fortran


def test_tasks_stay_frozen_dataclasses():
    import dataclasses
    import pickle
    from fpclass.scan.tasks import Task
    t = Task("f", "n", "F32", (2,), source="f", nbytes=8, element="<f4", grid=(2,))
    assert t == dataclasses.replace(t) and hash(t) == hash(dataclasses.replace(t))
    assert pickle.loads(pickle.dumps(t)) == t
    assert not hasattr(t, "__dict__")
    assert dataclasses.replace(t, first=1).first == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = "m"
    defaults = Task("f")
    assert all(getattr(defaults, f.name) == f.default for f in dataclasses.fields(Task)
               if f.default is not dataclasses.MISSING)
