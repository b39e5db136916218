"""fpclass scan on PyTorch checkpoints written by torch itself: every dtype, views of shared
storages, nested optimizer state, the legacy format, a Hugging Face Trainer directory, and
hostile pickles that must run nothing. Truth comes from torch's own load of the same file."""

import dataclasses
import enum
import io
import json
import os
import pathlib
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from fpclass.scan import ExitCode, scan
from test_scan_support import safetensors_bytes

torch = pytest.importorskip("torch")

FLOATS = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "float8_e4m3fnuz", "float8_e5m2fnuz", "complex64", "complex128"]


def planted(dtype, shape=(6, 5)):
    """A tensor of `dtype` with NaN, +Inf and -Inf where the format has them."""
    t = torch.linspace(-1, 1, int(np.prod(shape))).reshape(shape)
    t[1, 2], t[4, 0], t[5, 4] = float("nan"), float("inf"), -float("inf")
    if dtype.startswith("complex"):
        c = t.to(getattr(torch, dtype))
        c[2, 3] = complex(1.0, float("inf"))
        return c
    return t.to(getattr(torch, dtype))


def parts(t):
    """The tensor as float64 numpy values: complex as (..., 2) real/imag parts."""
    t = t.detach()
    if t.is_complex():
        return torch.view_as_real(t.resolve_conj().resolve_neg()).double().numpy()
    return t.resolve_neg().double().numpy()


def truth(t):
    v = parts(t)
    return int(np.isnan(v).sum()), int(np.isposinf(v).sum()), int(np.isneginf(v).sum())


def check_against_torch(report, loaded, name):
    (r,) = [x for x in report.tensors if x.name == name]
    t = loaded
    for key in [name] if name in loaded else name.split("."):
        t = t[int(key)] if isinstance(t, (list, tuple)) else t[key if key in t else int(key)]
    assert (r.nan, r.posinf, r.neginf) == truth(t), name
    v = parts(t)
    for loc in r.locations:  # every reported location holds what it says
        x = v[loc.index]
        assert {"nan": np.isnan, "posinf": np.isposinf, "neginf": np.isneginf}[loc.cls](x), \
            (name, loc)
    assert len(r.locations) == min(5, sum(truth(t)))
    return r


@pytest.mark.parametrize("legacy", [False, True])
def test_every_float_dtype_and_views(tmp_path, legacy):
    # torch's own legacy loader cannot read the float8 dtypes back (untyped storages)
    dtypes = [d for d in FLOATS if not (legacy and d.startswith("float8"))]
    state = {dtype: planted(dtype) for dtype in dtypes}
    base = planted("float32", (8, 7))
    state.update({"view.t": base.t(), "view.col": base[:, 2], "view.rows": base[3:],
                  "view.step": base[::2, 1::3], "view.whole": base,
                  "ints": torch.arange(10), "flags": torch.tensor([True, False]),
                  "bytes": torch.tensor([1, 2], dtype=torch.uint8)})
    if not legacy:  # the legacy format predates these dtypes
        state["e8m0"] = torch.tensor([1.0, 2.0, 4.0]).to(torch.float8_e8m0fnu)
    path = tmp_path / "state.pt"
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    report = scan([path])
    loaded = torch.load(path, weights_only=True)
    for name in dtypes + ["view.t", "view.col", "view.rows", "view.step", "view.whole"]:
        check_against_torch(report, loaded, name)
    status = {t.name: t.status for t in report.tensors}
    assert status["ints"] == status["flags"] == status["bytes"] == "not_applicable"
    assert report.exit_code == ExitCode.FOUND
    assert not report.problems and not report.unchecked


def test_locations_of_a_contiguous_tensor_are_the_first_in_c_order(tmp_path):
    t = torch.zeros(50, 40)
    t.view(-1)[[7, 300, 1999]] = float("nan")
    t.view(-1)[[5, 1000]] = float("inf")
    torch.save({"w": t}, tmp_path / "w.pt")
    (r,) = scan([tmp_path / "w.pt"], max_locations=4).tensors
    expected = [tuple(map(int, i)) for i in np.argwhere(~np.isfinite(t.numpy()))][:4]
    assert [loc.index for loc in r.locations] == expected


def test_transposed_view_reads_its_storage_once(tmp_path):
    base = torch.zeros(300, 200)
    base[299, 0] = float("nan")
    torch.save({"t": base.t()}, tmp_path / "t.pt")
    (r,) = scan([tmp_path / "t.pt"], chunk_bytes=4096).tensors
    assert (r.nan, r.locations[0].index) == (1, (0, 299))
    assert r.bytes_checked == base.numel() * 4   # each byte once, not once per row of the view


def test_shared_storage_views_are_each_checked(tmp_path):
    w = torch.ones(4, 4)
    w[0, 0] = float("nan")
    torch.save({"a": w, "b": w[1:], "c": w[:1]}, tmp_path / "s.pt")
    report = scan([tmp_path / "s.pt"])
    assert {t.name: t.nan for t in report.tensors} == {"a": 1, "b": 0, "c": 1}


def adam_checkpoint(tmp_path, poison=False):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    if poison:
        opt.state[model[2].weight]["exp_avg"][1, 2] = float("nan")
    return model, opt


class IntervalStrategy(str, enum.Enum):   # transformers.trainer_utils.IntervalStrategy
    STEPS = "steps"


IntervalStrategy.__module__ = "transformers.trainer_utils"


@dataclasses.dataclass
class TrainingArguments:   # pickled by the name transformers' own has (see trainer_checkpoint)
    output_dir: str = "out"
    learning_rate: float = 5e-5
    adam_betas: tuple = (0.9, 0.999)
    eval_strategy: IntervalStrategy = IntervalStrategy.STEPS
    logging_dir: pathlib.PurePosixPath = pathlib.PurePosixPath("out/runs")
    fsdp_config: dict = dataclasses.field(default_factory=lambda: {"min_num_params": 0})

    def __post_init__(self):
        self._setup_devices = torch.device("cpu")   # transformers' cached property


TrainingArguments.__module__ = "transformers.training_args"


@pytest.fixture(autouse=True)
def _transformers_names(monkeypatch):
    """Lets pickle find TrainingArguments as transformers.training_args.TrainingArguments."""
    import types
    package = types.ModuleType("transformers")
    module = types.ModuleType("transformers.training_args")
    utils = types.ModuleType("transformers.trainer_utils")
    module.TrainingArguments, utils.IntervalStrategy = TrainingArguments, IntervalStrategy
    package.training_args, package.trainer_utils = module, utils
    monkeypatch.setitem(sys.modules, "transformers", package)
    monkeypatch.setitem(sys.modules, "transformers.training_args", module)
    monkeypatch.setitem(sys.modules, "transformers.trainer_utils", utils)


def trainer_checkpoint(directory, poison=False):
    """The files a Hugging Face Trainer writes into checkpoint-N/."""
    import random
    directory.mkdir()
    model, opt = adam_checkpoint(directory, poison)
    weights = {k: (("F32", v.detach().numpy(), tuple(v.shape))) for k, v in model.state_dict().items()}
    (directory / "model.safetensors").write_bytes(safetensors_bytes(weights))
    torch.save(opt.state_dict(), directory / "optimizer.pt")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    torch.save(sched.state_dict(), directory / "scheduler.pt")
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                "cpu": torch.random.get_rng_state()}, directory / "rng_state.pth")
    torch.save(TrainingArguments(), directory / "training_args.bin")
    (directory / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
    (directory / "config.json").write_text(json.dumps({"model_type": "mlp"}))
    return opt


def test_hugging_face_trainer_checkpoint_scans_clean(tmp_path):
    trainer_checkpoint(tmp_path / "checkpoint-10")
    report = scan([tmp_path / "checkpoint-10"])
    assert report.exit_code == ExitCode.CLEAN, (report.problems, report.unchecked)
    by_file = {}
    for t in report.tensors:
        by_file.setdefault(os.path.basename(t.file), set()).add(t.status)
    assert by_file["optimizer.pt"] == by_file["scheduler.pt"] == {"checked"}   # lr: floats
    assert by_file["training_args.bin"] == {"checked"}   # learning_rate, walked like a dict
    # a byte tensor, a uint32 state and a float (numpy's cached Gaussian)
    assert by_file["rng_state.pth"] == {"not_applicable", "checked"}
    assert sorted(os.path.basename(p.path) for p in report.skipped) == [
        "config.json", "trainer_state.json"]


def test_nan_in_optimizer_state_is_found_and_located(tmp_path):
    trainer_checkpoint(tmp_path / "checkpoint-10", poison=True)
    report = scan([tmp_path / "checkpoint-10"])
    assert report.exit_code == ExitCode.FOUND
    (bad,) = report.with_findings
    assert os.path.basename(bad.file) == "optimizer.pt"
    assert (bad.name, bad.nan, [loc.index for loc in bad.locations]) == (
        "state.2.exp_avg", 1, [(1, 2)])


class Evil:
    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return os.system, (f"touch {self.sentinel}",)


@pytest.mark.parametrize("with_tensor", [True, False])
def test_hostile_pickle_runs_nothing(tmp_path, with_tensor):
    sentinel = tmp_path / "pwned"
    obj = {"evil": Evil(sentinel)}
    if with_tensor:
        obj["w"] = torch.full((3,), float("nan"))
    torch.save(obj, tmp_path / "evil.pt")
    report = scan([tmp_path / "evil.pt"])
    assert not sentinel.exists()
    global_name = os.system.__module__ + ".system"   # posix.system
    # what the call would have built is unknown: the file is unchecked, the global named
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert [t.name for t in report.unchecked] == ([""] + ["w"] * with_tensor)
    assert all(global_name in t.reason and "allow" in t.reason for t in report.unchecked)
    torch.load(tmp_path / "evil.pt", weights_only=False)   # the pickle is really hostile
    assert sentinel.exists()


def test_scan_needs_no_torch(tmp_path):
    w = torch.tensor([1.0, float("nan")])
    torch.save({"w": w}, tmp_path / "w.pt")
    code = ("import sys; sys.modules['torch'] = None\n"
            "from fpclass.scan import scan\n"
            f"r = scan([{str(tmp_path / 'w.pt')!r}])\n"
            "print(r.exit_code, r.tensors[0].nan, 'torch' in sys.modules and sys.modules['torch'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["1", "1", "None"], out.stderr


def zip_checkpoint(tmp_path, mutate):
    """A torch.save zip, with its members rewritten by `mutate(name, data) -> data`."""
    torch.save({"w": torch.tensor([1.0, 2.0, float("inf")])}, tmp_path / "src.pt")
    out = tmp_path / "bad.pt"
    with zipfile.ZipFile(tmp_path / "src.pt") as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = mutate(info.filename, src.read(info))
            if data is not None:
                dst.writestr(info.filename, data)
    return out


@pytest.mark.parametrize("case, reason", [
    ("missing storage", "missing from the archive"),
    ("short storage", "holds 8 bytes"),
    ("truncated pickle", "data.pkl"),
    ("bad byteorder", "byteorder"),
])
def test_damaged_zip_checkpoints_are_not_clean(tmp_path, case, reason):
    def mutate(name, data):
        if case == "missing storage" and "/data/" in name:
            return None
        if case == "short storage" and "/data/" in name:
            return data[:8]
        if case == "truncated pickle" and name.endswith("data.pkl"):
            return data[:-5]
        if case == "bad byteorder" and name.endswith("byteorder"):
            return b"middle"
        return data
    report = scan([zip_checkpoint(tmp_path, mutate)])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    reasons = [t.reason for t in report.unchecked] + [p.reason for p in report.problems]
    assert any(reason in r for r in reasons), reasons


def test_storages_are_read_as_torch_reads_them_crc_unchecked(tmp_path):
    torch.save({"w": torch.ones(64)}, tmp_path / "w.pt")
    data = bytearray((tmp_path / "w.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "w.pt") as z:
        info = z.getinfo(next(n for n in z.namelist() if "/data/" in n))
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[at + 10: at + 12] = b"\xc0\x7f"   # element 2 becomes NaN; the CRC no longer matches
    (tmp_path / "w.pt").write_bytes(bytes(data))
    with pytest.raises(zipfile.BadZipFile):
        with zipfile.ZipFile(tmp_path / "w.pt") as z:
            z.read(info.filename)
    loaded = torch.load(tmp_path / "w.pt", weights_only=True)["w"]   # torch takes it as it is
    (t,) = scan([tmp_path / "w.pt"]).tensors
    assert (t.status, t.nan) == ("checked", int(torch.isnan(loaded).sum())) == ("checked", 1)


def test_a_plain_pickle_of_numpy_arrays_inside_a_torch_zip(tmp_path):
    a = np.array([[1.0, np.nan], [np.inf, 2.0]], order="F")
    torch.save({"arr": a, "scalar": np.float32(np.nan), "ints": np.arange(3)}, tmp_path / "n.pt")
    report = scan([tmp_path / "n.pt"])
    got = {t.name: (t.status, t.nan, t.posinf, [loc.index for loc in t.locations])
           for t in report.tensors}
    assert got["arr"] == ("checked", 1, 1, [(1, 0), (0, 1)])   # Fortran storage order
    assert got["scalar"] == ("checked", 1, 0, [()])
    assert got["ints"][0] == "not_applicable"


def test_pickle_interpreter_refuses_malformed_input():
    from fpclass.scan.readers.pickle_vm import Machine, PickleError, run
    for data in [b"", b"\x80\x02", b"\x80\x02]", b"\x80\x02N", b"\x80\x02(t", b"\xff.",
                 b"\x80\x02h\x05.", b"\x80\x02}]]s.", b"\x80\x06N."]:
        with pytest.raises(PickleError):
            run(data, Machine(rules={}))
    value, end = run(pickle.dumps({"a": [1, 2.5, "x", (True, None)]}, protocol=5),
                     Machine(rules={}))
    assert value == {"a": [1, 2.5, "x", (True, None)]}
    for protocol in range(6):   # below 3, bytes and sets need globals: the torch rules
        obj = {"k": [1, -2 ** 70, 3.25, "é", (), [None]], 2: False}
        assert run(pickle.dumps(obj, protocol=protocol), Machine(rules={}))[0] == obj
        # builtins.frozenset is outside torch's allow-list: only protocol 4's opcode makes one
        obj = {"k": [b"by", {2}, bytearray(b"z"), complex(1, 2)]
               + ([frozenset({1})] if protocol >= 4 else [])}
        from fpclass.scan.readers.pickle_objects import rename
        from fpclass.scan.readers.torch_rules import CONSTANTS, RULES
        machine = Machine(rules=RULES, constants=CONSTANTS, rename=rename)
        assert run(pickle.dumps(obj, protocol=protocol), machine)[0] == obj, protocol
        assert not machine.disallowed


def test_pickle_interpreter_never_imports_or_calls():
    from fpclass.scan.readers.pickle_vm import Machine, Opaque, run
    machine = Machine(rules={})
    data = pickle.dumps(io.BytesIO(b"abc"), protocol=2)
    value, _ = run(data, machine)
    assert isinstance(value, Opaque) and "_io.BytesIO" in machine.disallowed


def test_shipped_example_checkpoint_reads_as_torch_reads_it():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "optimizer.pt")
    loaded = torch.load(path, weights_only=True)
    report = scan([path])
    assert {t.name for t in report.tensors} == set(loaded)
    for name in loaded:
        check_against_torch(report, loaded, name)
