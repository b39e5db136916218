"""fpclass scan on the archive level of PyTorch files: TorchScript archives (constants.pkl and
every other pickle), storages no tensor refers to, byte order as torch applies it, member names
that differ only by case, legacy-format storage views and counts, and stride-0 / overlapping
views. Truth: torch.load(weights_only=True) (torch.jit.load for TorchScript) on the same file."""

import collections
import io
import json
import pickle
import struct
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

from fpclass.scan import ExitCode, scan

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


def counts(t):
    t = t.detach()
    v = (torch.view_as_real(t.resolve_conj()) if t.is_complex() else t.resolve_neg()).double()
    return int(torch.isnan(v).sum()), int(torch.isposinf(v).sum()), int(torch.isneginf(v).sum())


def totals(report):
    return tuple(sum(getattr(r, k) for r in report.tensors) for k in ("nan", "posinf", "neginf"))


def saved(obj, **kw) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def members(data: bytes) -> list:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def write_zip(path, items):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in items:
            z.writestr(name, data)
    return str(path)


# ---------------------------------------------------------------------------------------------
# TorchScript

class _Traced(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))

    def forward(self, x):
        return x * self.w.sum() + _CONSTANT


_CONSTANT = torch.tensor([INF, 2.0, -INF, NAN])


def test_torchscript_constants_are_read(tmp_path):
    path = str(tmp_path / "traced.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace's and load's
        torch.jit.save(torch.jit.trace(_Traced(), torch.ones(4)), path)
        graph = torch.jit.load(path).inlined_graph
    consts = [n.t("value") for n in graph.findAllNodes("prim::Constant")
              if n.hasAttribute("value") and n.kindOf("value") == "t"]
    assert consts and sum(map(sum, map(counts, consts)))
    report = scan(path)
    assert report.exit_code != ExitCode.CLEAN
    found = [r for r in report.tensors if r.name.startswith("constants.pkl:")]
    assert [(r.nan, r.posinf, r.neginf) for r in found] == [counts(c) for c in consts]
    # The traced example input is saved without its values (torch.jit.load returns none).
    assert not any("holds 0 bytes" in r.reason for r in report.tensors)
    assert report.files and report.files[0][1] == "pytorch"


def test_every_storage_is_accounted_for(tmp_path):
    data = saved({"w": torch.ones(3)})
    items = members(data) + [("archive/data/9", struct.pack("<2f", NAN, INF))]
    report = scan(write_zip(tmp_path / "orphan.pt", items))
    assert report.exit_code == ExitCode.INCONCLUSIVE
    (r,) = [r for r in report.tensors if r.name == "data/9"]
    assert "refers to this storage" in r.reason


def test_a_pickle_in_a_folder_is_not_passed_over(tmp_path):
    items = members(saved({"w": torch.ones(3)})) + [("archive/extra/more.pkl",
                                                     pickle.dumps([NAN]))]
    report = scan(write_zip(tmp_path / "extra.pt", items))
    assert report.exit_code == ExitCode.INCONCLUSIVE


# ---------------------------------------------------------------------------------------------
# Byte order

@pytest.mark.parametrize("record", ["byteorder", "BYTEORDER", "ByteOrder"])
def test_big_endian_storages_swapped_by_their_element_size(tmp_path, record):
    state = collections.OrderedDict(
        d=torch.tensor([NAN, 1.0, -INF], dtype=torch.float64),
        f=torch.tensor([INF, 2.0], dtype=torch.float32),
        h=torch.tensor([1.0, -INF, NAN], dtype=torch.float16),
        c=torch.tensor([complex(NAN, 0), complex(1, INF)], dtype=torch.complex64),
        i=torch.tensor([1, 2], dtype=torch.int32))
    items = []
    for name, b in members(saved(state)):
        if name.endswith("/byteorder"):
            continue
        if "/data/" in name:
            key = int(name.rsplit("/", 1)[1])
            t = list(state.values())[key]
            unit = t.element_size() // (2 if t.is_complex() else 1)
            b = np.frombuffer(b, f"<u{unit}").byteswap().tobytes()
        items.append((name, b))
    items.insert(1, (f"archive/{record}", b"big"))
    path = write_zip(tmp_path / "big.pt", items)
    loaded = torch.load(path, weights_only=True)
    report = scan(path)
    assert report.exit_code == ExitCode.FOUND
    for r in report.tensors:
        assert (r.nan, r.posinf, r.neginf) == counts(loaded[r.name]), r.name


@pytest.mark.parametrize("text", [b"big\n", b"BIG", b" little"])
def test_byteorder_record_torch_refuses_is_not_read(tmp_path, text):
    items = members(saved({"w": torch.ones(2)}))
    items = [(n, text if n.endswith("/byteorder") else b) for n, b in items]
    path = write_zip(tmp_path / "bad.pt", items)
    with pytest.raises(Exception):
        torch.load(path, weights_only=True)
    assert scan(path).exit_code == ExitCode.INCONCLUSIVE


def _legacy_with_flag(data: bytes, little: bool) -> bytes:
    pos = 0
    for _ in range(2):
        pos = _pickle_end(data, pos)
    end = _pickle_end(data, pos)
    info = pickle.loads(data[pos:end])
    info["little_endian"] = little
    return data[:pos] + pickle.dumps(info, protocol=2) + data[end:]


def _pickle_end(data, pos):
    import pickletools
    for op, _, at in pickletools.genops(io.BytesIO(data[pos:])):
        if op.name == "STOP":
            return pos + at + 1


def test_legacy_files_are_read_little_endian_whatever_their_flag(tmp_path):
    state = {"w": torch.tensor([NAN, 1.0, INF]), "d": torch.tensor([-INF, 2.0],
                                                                   dtype=torch.float64)}
    path = tmp_path / "legacy.pt"
    path.write_bytes(_legacy_with_flag(saved(state, _use_new_zipfile_serialization=False),
                                       little=False))
    loaded = torch.load(path, weights_only=True)
    report = scan(str(path))
    assert totals(report) == tuple(map(sum, zip(*map(counts, loaded.values())))) == (1, 1, 1)


# ---------------------------------------------------------------------------------------------
# Member names that differ only by case

def test_a_record_found_whatever_its_case(tmp_path):
    items = [(n.replace("/data/0", "/DATA/0"), b) for n, b in
             members(saved({"w": torch.tensor([NAN, INF, 1.0])}))]
    path = write_zip(tmp_path / "upper.pt", items)
    loaded = torch.load(path, weights_only=True)
    report = scan(path)
    assert report.exit_code == ExitCode.FOUND
    assert totals(report) == counts(loaded["w"]) == (1, 1, 0)


def test_members_differing_only_by_case_are_not_read_as_one(tmp_path):
    items = members(saved({"x": torch.tensor([1.0, 2.0])}))
    at = next(k for k, (n, _) in enumerate(items) if n == "archive/data/0")
    items.insert(at + 1, ("archive/DATA/0", struct.pack("<2f", NAN, 3.0)))
    path = write_zip(tmp_path / "twice.pt", items)
    assert counts(torch.load(path, weights_only=True)["x"]) == (1, 0, 0)  # torch reads DATA/0
    report = scan(path)
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "ambiguous" in report.tensors[0].reason


# ---------------------------------------------------------------------------------------------
# The legacy format: storage views and counts

class _Storage:
    pass


class _Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride)

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (*self.args, False, collections.OrderedDict())


def legacy_file(obj, storages, pids) -> bytes:
    """A legacy-format file: `obj` pickled with persistent ids `pids` {id(stand-in): pid},
    then `storages` [(key, element count, bytes)]."""
    buf = io.BytesIO()
    for value in (0x1950A86A20F9469CFC6C, 1001,
                  {"protocol_version": 1001, "little_endian": True,
                   "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(value, buf, protocol=2)

    class P(pickle.Pickler):
        def persistent_id(self, o):
            return pids.get(id(o))

    P(buf, protocol=2).dump(obj)
    pickle.dump([k for k, _, _ in storages], buf, protocol=2)
    for _, count, data in storages:
        buf.write(struct.pack("<q", count) + data)
    return buf.getvalue()


def test_legacy_view_metadata(tmp_path):
    s = _Storage()
    root = struct.pack("<6f", NAN, 1.0, 2.0, INF, -INF, 5.0)
    pid = ("storage", torch.FloatStorage, "0", "cpu", 6, ("v0", 2, 4))
    # The view is elements 2..5 of the storage; the tensor its elements 1..2: [inf, -inf].
    data = legacy_file({"t": _Tensor(s, 1, (2,), (1,))}, [("0", 6, root)], {id(s): pid})
    path = tmp_path / "view.pt"
    path.write_bytes(data)
    loaded = torch.load(path, weights_only=True)
    assert counts(loaded["t"]) == (0, 1, 1)
    report = scan(str(path))
    assert totals(report) == (0, 1, 1)
    assert report.exit_code == ExitCode.FOUND


@pytest.mark.parametrize("count", [1 << 62, (1 << 63) - 1, -1, 7])
def test_legacy_storage_count_torch_refuses_is_a_clean_problem(tmp_path, count):
    s, s2 = _Storage(), _Storage()
    pids = {id(s): ("storage", torch.FloatStorage, "0", "cpu", 2, None),
            id(s2): ("storage", torch.FloatStorage, "1", "cpu", 1, None)}
    data = legacy_file({"t": _Tensor(s, 0, (2,), (1,)), "u": _Tensor(s2, 0, (1,), (1,))},
                       [("0", count, struct.pack("<2f", 1, 2)), ("1", 1, struct.pack("<f", NAN))],
                       pids)
    path = tmp_path / "count.pt"
    path.write_bytes(data)
    with pytest.raises(Exception):
        torch.load(path, weights_only=True)
    report = scan(str(path))
    assert report.exit_code == ExitCode.INCONCLUSIVE
    reasons = [p.reason for p in report.problems] + [r.reason for r in report.tensors]
    assert reasons and not any("internal error" in r for r in reasons)


# ---------------------------------------------------------------------------------------------
# Stride-0 and overlapping views

WINDOW = [1.0, NAN, INF, 2.0, -INF, 3.0, NAN, 4.0]


@pytest.mark.parametrize("through_span", [False, True], ids=["blocks", "span"])
@pytest.mark.parametrize("make", [
    lambda: torch.tensor([NAN, 1.0, INF]).expand(700, 3),
    lambda: torch.tensor([[NAN], [-INF]]).expand(2, 500).t(),
    lambda: torch.tensor(WINDOW).as_strided((4, 3), (1, 1)),
    lambda: torch.tensor(WINDOW).as_strided((3, 2, 2), (2, 1, 2)),
    lambda: torch._neg_view(torch.tensor(WINDOW).as_strided((5, 3), (1, 1))),
    lambda: torch.tensor(WINDOW).as_strided((3, 4, 2), (1, 0, 2)),
    lambda: torch.tensor([NAN, 2.0]).as_strided((3, 5, 2), (0, 0, 1)),
    lambda: torch.tensor([complex(NAN, 1), complex(0, INF)]).expand(9, 2),
    lambda: torch.tensor([complex(NAN, 1), complex(0, INF), complex(-INF, 2)])
    .as_strided((2, 2), (1, 1)).conj(),
])
def test_stride0_and_overlapping_views_exact(tmp_path, monkeypatch, make, through_span):
    """Both ways an overlapping view is read: in blocks (small views) and from the values its
    span holds, each counted as often as the view reaches it (large ones)."""
    from fpclass.scan.readers import torch_checkpoint
    if through_span:
        monkeypatch.setattr(torch_checkpoint, "OVERLAP_LIMIT", 0)
    t = make()
    path = tmp_path / "view.pt"
    path.write_bytes(saved({"t": t}))
    loaded = torch.load(path, weights_only=True)["t"]
    report = scan(str(path))
    (r,) = report.tensors
    assert (r.nan, r.posinf, r.neginf) == counts(loaded)
    values = (torch.view_as_real(loaded.resolve_conj()) if loaded.is_complex()
              else loaded.resolve_neg()).double()
    for loc in r.locations:  # every location holds what it says
        x = values[loc.index]
        assert {"nan": torch.isnan, "posinf": torch.isposinf,
                "neginf": torch.isneginf}[loc.cls](x), loc


def test_a_huge_stride0_view_is_counted_without_materialising(tmp_path):
    t = torch.tensor([NAN]).expand(1 << 20, 1 << 20)  # one NaN, 2^40 times
    u = torch.tensor([1.0, NAN, -INF, 2.0]).as_strided((1 << 20, 1 << 20), (0, 0), 2)
    path = tmp_path / "huge.pt"
    path.write_bytes(saved({"t": t, "u": u}))
    assert path.stat().st_size < 4096
    loaded = torch.load(path, weights_only=True)
    rows = 1 << 20  # every row is the same stored values: torch counts one row, times the rows
    want = {k: tuple(c * rows for c in counts(v[:1])) for k, v in loaded.items()}
    code = ("import json, sys; from fpclass.scan import scan; r = scan(sys.argv[1]); "
            "print(json.dumps({t.name: [t.nan, t.posinf, t.neginf] for t in r.tensors}))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=60, check=True)
    got = {k: tuple(v) for k, v in json.loads(out.stdout).items()}
    assert got == want == {"t": (1 << 40, 0, 0), "u": (0, 0, 1 << 40)}


def test_a_large_overlapping_view_is_counted_from_its_span(tmp_path):
    base = torch.linspace(-1, 1, 1100)
    base[3], base[600], base[1000] = NAN, INF, -INF
    t = base.as_strided((256, 256, 512), (1, 1, 1))  # 2^25 values over 1022 stored ones
    path = tmp_path / "window.pt"
    path.write_bytes(saved({"t": t}))
    loaded = torch.load(path, weights_only=True)["t"]
    (r,) = scan(str(path)).tensors
    assert r.status == "checked" and r.values_checked == t.numel()
    assert (r.nan, r.posinf, r.neginf) == counts(loaded)
    for loc in r.locations:
        assert {"nan": torch.isnan, "posinf": torch.isposinf,
                "neginf": torch.isneginf}[loc.cls](loaded[loc.index]), loc


def test_a_huge_overlapping_view_is_counted_without_materialising(tmp_path):
    n = 1 << 20
    base = torch.zeros(2 * n - 1)
    base[5], base[n + 7], base[2 * n - 2] = NAN, INF, -INF
    path = tmp_path / "window.pt"
    path.write_bytes(saved({"t": base.as_strided((n, n), (1, 1))}))  # t[i, j] = base[i + j]
    loaded = torch.load(path, weights_only=True)["t"]
    assert counts(loaded[:2]) == (2, 0, 0)
    # base[p] is t[i, p - i] for every i that keeps both indices in range: min(p + 1, 2n - 1 - p)
    # of them.
    want = (6, n - 7 - 1, 1)
    code = ("import json, sys; from fpclass.scan import scan; r = scan(sys.argv[1]); "
            "print(json.dumps([[t.nan, t.posinf, t.neginf] for t in r.tensors]))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=60, check=True)
    assert [tuple(c) for c in json.loads(out.stdout)] == [want]


@pytest.mark.parametrize("name", ["CONSTANTS.PKL", "extra.pkl"])
def test_a_pickle_torch_load_does_not_read_is_not_counted(tmp_path, name):
    """Only an exact `constants.pkl` makes a TorchScript archive (whose pickles torch.jit.load
    all reads); beside it, torch.load reads data.pkl alone."""
    items = members(saved({"w": torch.tensor([1.0, INF])}))
    data_pkl = next(b for n, b in items if n.endswith("/data.pkl"))
    items.append((f"archive/{name}", data_pkl))
    path = write_zip(tmp_path / "two.pt", items)
    assert counts(torch.load(path, weights_only=True)["w"]) == (0, 1, 0)
    report = scan(path)
    assert totals(report) == (0, 1, 0)
    (other,) = [r for r in report.tensors if r.name == name]
    assert other.status == "unchecked"


def test_a_legacy_storage_no_tensor_uses_is_not_passed_over(tmp_path):
    s, s2 = _Storage(), _Storage()
    pids = {id(s): ("storage", torch.FloatStorage, "0", "cpu", 1, None),
            id(s2): ("storage", torch.FloatStorage, "1", "cpu", 2, None)}
    # The second storage is referred to (so listed and loaded) but no tensor returned uses it.
    obj = {"t": _Tensor(s, 0, (1,), (1,)), "gone": (s2,)}
    data = legacy_file(obj, [("0", 1, struct.pack("<f", 1.0)), ("1", 2, struct.pack("<2f", NAN, 1))],
                       pids)
    path = tmp_path / "orphan.pt"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        bare = torch.load(path, weights_only=True)["gone"][0]  # a storage, as torch returns it
        assert counts(torch.tensor(bare.tolist())) == (1, 0, 0)
    assert scan(str(path)).exit_code != ExitCode.CLEAN  # its NaN is read, or it is unchecked
