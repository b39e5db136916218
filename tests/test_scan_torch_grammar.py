"""fpclass scan reads a PyTorch pickle as torch.load(weights_only=True) builds it: every tensor,
attribute, dict key, set member, bare storage, quantization parameter and Python float torch
would return is counted, nothing torch would not return is. Files come from torch.save, or are
hand-built where torch.save cannot write them; each is judged against torch's own load of the
same file."""

import collections
import os
import pickle
import struct
import subprocess
import sys
import time
import warnings
import zipfile

import numpy as np

import pytest

from fpclass.scan import ExitCode, scan

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


# -- truth: what torch.load returns, walked --------------------------------------------------
def _parts(a):
    a = np.asarray(a)
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag], -1)
    return a.astype(np.float64) if a.dtype.kind == "f" else None


def truth(obj) -> tuple:
    """(NaN, +Inf, -Inf) counts over every float value reachable in a torch.load result."""
    counts = np.zeros(3, np.int64)
    stack, seen = [obj], {}   # id -> object: kept alive, so ids are not reused

    def count(a):
        v = _parts(a)
        if v is not None:
            counts[:] += (np.isnan(v).sum(), np.isposinf(v).sum(), np.isneginf(v).sum())

    while stack:
        x = stack.pop()
        if isinstance(x, (float, complex)):
            count(x)
            continue
        if id(x) in seen or isinstance(x, (int, str, bytes, type(None))):
            continue
        seen[id(x)] = x
        if isinstance(x, torch.Tensor):
            if x.is_quantized:
                if x.qscheme() == torch.per_tensor_affine:
                    count(x.q_scale())
                else:
                    stack.append(x.q_per_channel_scales())
                    stack.append(x.q_per_channel_zero_points())
            elif x.layout == torch.sparse_coo:
                stack.append(x._values())
            elif x.layout != torch.strided:
                stack.append(x.values())
            elif x.dtype.is_floating_point or x.dtype.is_complex:
                t = x.detach().resolve_conj().resolve_neg()
                count(torch.view_as_real(t).numpy() if t.is_complex() else t.double().numpy())
            stack.extend(v for k, v in vars(x).items() if k != "_backward_hooks" or v)
        elif isinstance(x, torch.storage.TypedStorage):
            stack.append(torch.tensor([], dtype=x.dtype).set_(x))
        elif isinstance(x, np.ndarray):
            count(x)
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
            stack.extend(getattr(x, "__dict__", {}).values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif hasattr(x, "__dict__"):
            stack.extend(vars(x).values())
    return tuple(int(c) for c in counts)


def found(report) -> tuple:
    return tuple(sum(getattr(t, c) for t in report.tensors) for c in ("nan", "posinf", "neginf"))


def judge(path, **load):
    """The scan of `path` agrees with torch.load: the same counts, exit 1 iff any."""
    expected = truth(torch.load(path, weights_only=True, **load))
    report = scan([path])
    assert not report.unchecked and not report.problems, (report.unchecked, report.problems)
    assert found(report) == expected
    assert report.exit_code == (ExitCode.FOUND if any(expected) else ExitCode.CLEAN)
    return report, expected


# -- hand-built pickles (protocol 2, the opcodes torch's weights-only unpickler takes) --------
def g(mod, name):
    return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


def s(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def i(n):
    return b"J" + struct.pack("<i", n)


def f(x):
    return b"G" + struct.pack(">d", x)


def t(*parts):
    return b"(" + b"".join(parts) + b"t"


def d(*kv):
    return b"}(" + b"".join(kv) + b"u"


def lst(*items):
    return b"](" + b"".join(items) + b"e"


def call(fn, args):
    return fn + args + b"R"


def new(cls, args):
    return cls + args + b"\x81"


def build(obj, state):
    return obj + state + b"b"


def pid(cls, key, numel, raw_key=None):
    key = raw_key if raw_key is not None else s(key)
    return t(s("storage"), g("torch", cls), key, s("cpu"), i(numel)) + b"Q"


def v2(storage, offset, size, stride):
    return call(g("torch._utils", "_rebuild_tensor_v2"),
                t(storage, i(offset), t(*map(i, size)), t(*map(i, stride)), b"\x89",
                  call(g("collections", "OrderedDict"), b")")))


def torch_zip(path, body, storages):
    """A torch zip checkpoint holding the pickle `body` and `storages` (key -> bytes)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02" + body + b".")
        z.writestr("archive/byteorder", "little")
        for k, v in storages.items():
            z.writestr(f"archive/data/{k}", v)
        z.writestr("archive/version", "3\n")
    return path


F32 = {"0": np.array([1.0, NAN, INF, -INF], np.float32).tobytes()}


def w():
    return v2(pid("FloatStorage", "0", 4), 0, (4,), (1,))


# -- torch.save -------------------------------------------------------------------------------
def test_tensor_attributes_of_parameters_and_tensors(tmp_path):
    p = torch.nn.Parameter(torch.ones(3))
    p.extra = torch.tensor([NAN, 1.0])
    x = torch.zeros(2)
    x.note, x.scale = torch.tensor([INF]), -INF
    torch.save({"p": p, "x": x}, tmp_path / "a.pt")
    report, _ = judge(tmp_path / "a.pt")
    names = {t.name: t.nan + t.posinf + t.neginf for t in report.tensors}
    assert names == {"p": 0, "p@extra": 1, "x": 0, "x@note": 1, "x@scale": 1}


def test_tensors_in_sets_as_dict_keys_and_in_counters(tmp_path):
    a, b = torch.tensor([NAN]), torch.tensor([INF, NAN])
    torch.save({"set": {a, b}, "keys": {a: 1, torch.tensor([-INF]): 2},
                "counter": collections.Counter({"x": 3, "y": torch.tensor([NAN])}),
                "tuple_key": {(1, torch.tensor([INF])): "k"}}, tmp_path / "a.pt")
    judge(tmp_path / "a.pt")


def test_equal_tensors_are_distinct_keys_and_members(tmp_path):
    a, b = torch.tensor([NAN]), torch.tensor([NAN])   # equal views, distinct objects
    torch.save({"keys": {a: 1, b: 2}, "set": {torch.tensor([INF]), torch.tensor([INF])}},
               tmp_path / "a.pt")
    report, expected = judge(tmp_path / "a.pt")
    assert expected == (2, 2, 0)


@pytest.mark.parametrize("kind", ["typed", "untyped"])
def test_storages_saved_bare(tmp_path, kind):
    x = torch.tensor([1.0, NAN, INF])
    with warnings.catch_warnings():  # TypedStorage's deprecation (torch warns once a process)
        warnings.simplefilter("ignore", UserWarning)
        storage = x.storage() if kind == "typed" else x.untyped_storage()
    torch.save({"s": storage}, tmp_path / "a.pt")
    report, expected = judge(tmp_path / "a.pt")
    (r,) = report.tensors
    assert (r.name, r.status) == ("s", "checked" if kind == "typed" else "not_applicable")
    assert expected == ((1, 1, 0) if kind == "typed" else (0, 0, 0))   # bytes hold no floats


def test_python_floats_and_complex_are_values_with_their_path(tmp_path):
    torch.save({"w": torch.ones(2), "best_loss": NAN, "lr": 1e-3, "betas": (0.9, INF),
                "c": complex(1.0, -INF), "epoch": 3, "name": "x"}, tmp_path / "a.pt")
    report, _ = judge(tmp_path / "a.pt")
    got = {t.name: (t.dtype, t.nan, t.posinf, t.neginf) for t in report.tensors}
    assert got["best_loss"] == ("float", 1, 0, 0) and got["lr"] == ("float", 0, 0, 0)
    assert got["betas"] == ("float", 0, 1, 0) and got["c"] == ("complex", 0, 0, 1)
    assert "epoch" not in got and "name" not in got
    assert scan([tmp_path / "a.pt"], fail_on="neginf").exit_code == ExitCode.FOUND


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_quantized_tensors_do_not_hide_the_others(tmp_path):
    x = torch.linspace(-1, 1, 8)
    q = torch.quantize_per_tensor(x, 0.1, 3, torch.quint8)
    qc = torch.quantize_per_channel(x.reshape(2, 4), torch.tensor([0.1, 0.2], dtype=torch.float64),
                                    torch.tensor([0, 1]), 0, torch.qint8)
    torch.save({"q": q, "qc": qc, "w": torch.tensor([NAN, INF])}, tmp_path / "a.pt")
    report, expected = judge(tmp_path / "a.pt")
    assert expected == (1, 1, 0)
    got = {t.name: t.status for t in report.tensors}
    assert got["q"] == got["qc"] == "not_applicable" and got["q@scale"] == "checked"
    assert got["qc@scales"] == "checked" and got["w"] == "checked"


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support:UserWarning")
def test_sparse_tensors_values_are_checked(tmp_path):
    dense = torch.tensor([[0.0, NAN], [INF, 0.0]])
    torch.save({"coo": dense.to_sparse(), "csr": dense.to_sparse_csr()}, tmp_path / "a.pt")
    report, expected = judge(tmp_path / "a.pt")
    assert expected == (2, 2, 0)
    assert {t.name for t in report.tensors if t.status == "checked"} == {"coo@values",
                                                                         "csr@values"}


def test_many_python_floats_are_pooled_past_the_first_thousands(tmp_path):
    from fpclass.scan.readers.torch_pickle import SCALARS_ONE_BY_ONE
    values = {f"v{k}": float(k) for k in range(SCALARS_ONE_BY_ONE + 500)}
    values["v10"], values[f"v{SCALARS_ONE_BY_ONE + 499}"] = NAN, -INF
    torch.save(values, tmp_path / "a.pt")
    report, expected = judge(tmp_path / "a.pt")
    assert expected == (1, 0, 1) and len(report.tensors) == SCALARS_ONE_BY_ONE + 1
    assert report.tensors[-1].name == f"v{SCALARS_ONE_BY_ONE} and 499 more Python float values"


def test_numpy_arrays_pickled_with_protocol_5(tmp_path):
    a = np.array([[1.0, NAN], [INF, 2.0]])
    torch.save({"a": a, "b": np.arange(3.0)[::2]}, tmp_path / "a.pt", pickle_protocol=5)
    # torch's weights-only unpickler takes protocol 2 opcodes only; its full load is the truth
    expected = truth(torch.load(tmp_path / "a.pt", weights_only=False))
    report = scan([tmp_path / "a.pt"])
    assert found(report) == expected == (1, 1, 0) and report.exit_code == ExitCode.FOUND


def test_numpy_out_of_band_buffers_are_not_clean(tmp_path):
    buffers = []
    body = pickle.dumps({"a": np.array([NAN])}, protocol=5, buffer_callback=buffers.append)
    with zipfile.ZipFile(tmp_path / "a.pt", "w") as z:
        z.writestr("archive/data.pkl", body)
    report = scan([tmp_path / "a.pt"])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "out-of-band" in report.problems[0].reason


def test_masked_arrays_are_unchecked_with_their_global(tmp_path):
    m = np.ma.masked_array([1.0, NAN], mask=[False, True])
    torch.save({"m": m}, tmp_path / "a.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "a.pt", weights_only=True)
    report = scan([tmp_path / "a.pt"])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "numpy.ma.core" in report.unchecked[0].reason
    # allowed, the masked array's state is walked, but its data are bytes: still not clean
    allowed = ["numpy.ma.core._mareconstruct", "numpy.ma.MaskedArray"]
    report = scan([tmp_path / "a.pt"], allow_globals=allowed)
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "raw bytes" in report.unchecked[0].reason


# -- hand-built pickles torch.load(weights_only=True) accepts ------------------------------------
CASES = {
    # BUILD on a rebuilt tensor: torch calls set_ onto the other storage
    "set_ after rebuild": (
        build(v2(pid("FloatStorage", "1", 2), 0, (2,), (1,)),
              t(pid("FloatStorage", "0", 4), i(1), t(i(3)), t(i(1)))),
        {"0": F32["0"], "1": np.zeros(2, np.float32).tobytes()}),
    "Parameter with state data": (
        call(g("torch._utils", "_rebuild_parameter_with_state"),
             t(v2(pid("FloatStorage", "1", 1), 0, (1,), (1,)), b"\x88",
               call(g("collections", "OrderedDict"), b")"),
               d(s("data"), w(), s("extra"), f(NAN)))),
        {"0": F32["0"], "1": np.zeros(1, np.float32).tobytes()}),
    "from_type_v2 state": (
        call(g("torch._tensor", "_rebuild_from_type_v2"),
             t(g("torch._utils", "_rebuild_tensor_v2"), g("torch", "Tensor"),
               t(pid("FloatStorage", "1", 1), i(0), t(i(1)), t(i(1)), b"\x89",
                 call(g("collections", "OrderedDict"), b")")),
               d(s("other"), w()))),
        {"0": F32["0"], "1": np.zeros(1, np.float32).tobytes()}),
    "Parameter BUILD": (
        build(new(g("torch.nn.parameter", "Parameter"), t(v2(pid("FloatStorage", "1", 1), 0,
                                                               (1,), (1,)), b"\x89")),
              t(pid("FloatStorage", "0", 4), i(0), t(i(4)), t(i(1)))),
        {"0": F32["0"], "1": np.zeros(1, np.float32).tobytes()}),
    "OrderedDict from a dict": (
        call(g("collections", "OrderedDict"), t(d(s("w"), w()))), F32),
    "OrderedDict NEWOBJ with a list": (   # cls.__new__ ignores the list: torch returns {}
        d(s("o"), new(g("collections", "OrderedDict"), t(lst(t(s("w"), w())))),
          s("ok"), f(1.0)), F32),
    "OrderedDict attributes": (
        build(call(g("collections", "OrderedDict"), b")"), d(s("_metadata"), w())), F32),
    "builtins.set": (call(g("builtins", "set"), t(lst(w()))), F32),
    "__builtin__.set": (call(g("__builtin__", "set"), t(lst(w(), f(INF)))), F32),
    "set NEWOBJ": (d(s("s"), new(g("builtins", "set"), t(lst(w()))), s("x"), f(0.0)), F32),
    "torch.Tensor from a list": (
        call(g("torch", "Tensor"), t(lst(lst(f(1.0), f(NAN)), lst(f(1e300), f(-1e300))))), {}),
    "torch.FloatTensor from a list": (call(g("torch", "FloatTensor"), t(lst(f(INF), i(2)))), {}),
    "torch.HalfTensor rounds": (call(g("torch", "HalfTensor"), t(lst(f(1e5), f(1.0)))), {}),
    "torch.DoubleTensor keeps": (call(g("torch", "DoubleTensor"), t(lst(f(1e300), f(NAN)))), {}),
    "torch.Tensor set_ (legacy)": (
        build(call(g("torch", "Tensor"), b")"), t(pid("FloatStorage", "0", 4), i(0), t(i(2)),
                                                    t(i(2)))), F32),
    "first dtype of a storage wins": (
        d(s("a"), v2(pid("DoubleStorage", "0", 2), 0, (2,), (1,)),
          s("b"), v2(pid("FloatStorage", "0", 4), 0, (2,), (1,))),
        {"0": np.array([1.0, NAN]).tobytes()}),
    "non-ASCII storage key": (
        v2(pid("FloatStorage", "", 4, raw_key=b"U\x02" + "é".encode()), 0, (4,), (1,)),
        {"é": F32["0"]}),
    "complex global": (d(s("c"), call(g("builtins", "complex"), t(f(NAN), f(1.0)))), {}),
    "Counter from a list": (call(g("collections", "Counter"), t(lst(f(NAN), f(NAN), w()))), F32),
    "per-tensor qtensor with a NaN scale": (
        call(g("torch._utils", "_rebuild_qtensor"),
             t(pid("QUInt8Storage", "0", 4), i(0), t(i(4)), t(i(1)),
               t(g("torch", "per_tensor_affine"), f(NAN), i(0)), b"\x89",
               call(g("collections", "OrderedDict"), b")"))), {"0": bytes(4)}),
}


@pytest.mark.filterwarnings("ignore::UserWarning")   # TypedStorage, quantized deprecations
@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_built_pickles_torch_accepts(tmp_path, case):
    body, storages = CASES[case]
    judge(torch_zip(tmp_path / "a.pt", body, storages))


# -- globals outside the allow-list, companions, --allow-global ---------------------------------
@pytest.mark.parametrize("global_", ["numpy.frombuffer", "os.system"])
def test_a_foreign_global_makes_the_file_unchecked(tmp_path, global_):
    mod, name = global_.rsplit(".", 1)
    body = d(s("a"), call(g(mod, name), t(call(g("_codecs", "encode"), t(
        s("\x00\x00\xc0\x7f"), s("latin1"))), s("<f4"))))
    path = torch_zip(tmp_path / "a.pt", body, {})
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    report = scan([path])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    (u,) = report.unchecked
    assert u.name == "" and global_ in u.reason
    # a user cannot allow a blocked module's global; numpy.frombuffer they can, but the bytes
    # it would read are not interpreted: still not clean
    report = scan([path], allow_globals=[global_])
    assert report.exit_code == ExitCode.INCONCLUSIVE
    (u,) = report.unchecked
    assert (global_ in u.reason) if mod == "os" else ("raw bytes" in u.reason and u.name == "a")


def _config(state):
    """A pickled object of an unknown class mypkg.Config holding `state`, with a NaN tensor."""
    return d(s("cfg"), build(new(g("mypkg", "Config"), b")"), state),
             s("w"), v2(pid("FloatStorage", "0", 4), 0, (4,), (1,)))


def test_allow_global_walks_an_object_like_a_dict(tmp_path):
    path = torch_zip(tmp_path / "a.pt", _config(d(s("lr"), f(NAN), s("steps"), i(3))), F32)
    assert scan([path]).exit_code == ExitCode.INCONCLUSIVE
    report = scan([path], allow_globals=["mypkg.Config"])
    got = {t.name: t.nan for t in report.tensors}
    assert got == {"cfg.lr": 1, "w": 1} and report.exit_code == ExitCode.FOUND
    from fpclass.cli import main
    import io
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", str(path), "--allow-global", "mypkg.Config", "--json"], stdout=out,
                stderr=err)
    assert code == ExitCode.FOUND, err.getvalue()
    with pytest.raises(ValueError):
        scan([path], allow_globals=["nodot"])
    code = main(["scan", str(path), "--allow-global", "nodot"], stdout=out, stderr=err)
    assert code == ExitCode.USAGE and "module.Name" in err.getvalue()


def test_training_arguments_companion_floats_are_checked(tmp_path):
    state = d(s("output_dir"), s("out"), s("learning_rate"), f(NAN),
              s("lr_scheduler_type"), call(g("transformers.trainer_utils", "SchedulerType"),
                                           t(s("linear"))),
              s("logging_dir"), call(g("pathlib", "PosixPath"), t(s("runs"))),
              s("_setup_devices"), call(g("torch", "device"), t(s("cpu"))))
    body = build(new(g("transformers.training_args", "TrainingArguments"), b")"), state)
    path = torch_zip(tmp_path / "training_args.bin", body, {})
    report = scan([path])
    assert report.exit_code == ExitCode.FOUND
    assert [(t.name, t.nan) for t in report.tensors] == [("learning_rate", 1)]


# -- bounded by construction -------------------------------------------------------------------
def _scan_in_subprocess(path, timeout):
    code = ("import sys, time; from fpclass.scan import scan\n"
            "t = time.perf_counter(); r = scan([sys.argv[1]])\n"
            "print(int(r.exit_code), round(time.perf_counter() - t, 2))")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             sys.path)})
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])   # no signal, no crash
    return int(out.stdout.split()[0]), time.perf_counter() - start


DEEP = 1_000_000


@pytest.mark.parametrize("shape", ["deep key", "shared key", "deep value"])
def test_hostile_nesting_is_linear_and_never_crashes(tmp_path, shape):
    if shape == "deep key":   # {((((None,),),)...): nan}
        body = b"}N" + b"\x85" * DEEP + f(NAN) + b"s"
    elif shape == "shared key":   # t = (t, t) 60 times: 2**60 leaves if hashed naively
        body = b"}Nq\x000" + b"h\x00h\x00\x86q\x000" * 60 + b"h\x00" + f(NAN) + b"s"
    else:   # a NaN at the bottom of lists nested 250,000 deep (PUT, POP, [], GET, APPEND)
        body = f(NAN) + b"q\x000]h\x00a" * (DEEP // 4)
    path = torch_zip(tmp_path / "a.pt", body, {})
    code, seconds = _scan_in_subprocess(path, timeout=300)
    assert code == ExitCode.FOUND
    assert seconds < 60


def test_names_of_deep_items_are_bounded(tmp_path):
    body = d(s("k" * 50), f(NAN) + b"\x85" * 10_000)
    (r,) = scan([torch_zip(tmp_path / "a.pt", body, {})]).tensors
    assert r.name.startswith("k" * 50 + ".0.0") and len(r.name) < 300 and r.nan == 1


def test_a_pickle_over_the_opcode_limit_is_not_clean(tmp_path):
    from fpclass.scan.readers import pickle_vm
    body = lst(*[b"N"] * 10)
    path = torch_zip(tmp_path / "a.pt", body, {})
    old = pickle_vm.MAX_OPS
    try:
        pickle_vm.MAX_OPS = 5
        report = scan([path])
    finally:
        pickle_vm.MAX_OPS = old
    assert report.exit_code == ExitCode.INCONCLUSIVE and "opcodes" in report.problems[0].reason


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # torch.jit.script
def test_torchscript_pickles_walk_module_classes(tmp_path):
    from fpclass.scan.readers.torch_pickle import describe

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([1.0, NAN]))
            self.c = INF

        def forward(self, x):
            return x * self.w.sum() * self.c

    torch.jit.save(torch.jit.script(M()), tmp_path / "ts.pt")
    with zipfile.ZipFile(tmp_path / "ts.pt") as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    plain, _ = describe(data)
    assert any(g.startswith("__torch__.") for g in plain.disallowed)   # not in torch.load
    desc, _ = describe(data, torchscript=True)
    assert not desc.disallowed
    assert {name: type(item).__name__ for name, item in desc.items} == {"w": "TensorView",
                                                                        "c": "Values"}
