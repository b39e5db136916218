"""Differential fuzzing of the PyTorch reader: seeds written by torch.save (zip and legacy
format), mutations that know their structure (pickle opcodes, globals, storage keys, shapes,
strides, offsets, zip members, legacy storage counts), and torch.load(weights_only=True) as the
reference, run in the same sandboxed child as the scan (address-space limit, alarm, no core
dumps). The supervisor is scan_fuzz_support's. No tests here (see test_scan_fuzz_torch.py).

    python tests/torch_fuzz.py show INDEX [--seed S] [--out DIR]   # write one case's file

The promise checked per file: no crash, hang (SCAN_SECONDS) or blow-up (MEMORY_MB), no internal
error; never clean (exit 0) where the reference reads NaN/Inf; at exit 1, where the reference
loads and fpclass left nothing unchecked, the file's NaN/+Inf/-Inf totals equal the reference's
(with something unchecked, no count above the reference's).
"""

from __future__ import annotations

import collections
import io
import json
import os
import pickletools
import random
import re
import struct
import sys
import time
import warnings
import zipfile
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from scan_fuzz_support import (ADDRESS_SLACK, MEMORY_MB, ORACLE_SECONDS, SCAN_SECONDS,  # noqa: E402
                               _reset_peak, _status_mb, _vm_bytes, peak_rss_mb, run_cases,
                               zip_bytes)

FMT = "torch"
NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------------------------
# Seeds: small checkpoints with planted NaN/±Inf (and clean ones), written by torch itself.

def _save(obj, legacy=False) -> bytes:
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def _planted():
    import torch
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 4, generator=g)
    w[0, 1], w[2, 3] = NAN, INF
    base = torch.randn(6, generator=g, dtype=torch.float64)
    base[4] = -INF
    h = torch.randn(8, generator=g).half()
    h[5] = -INF
    b = torch.randn(4, generator=g).bfloat16()
    b[0] = NAN
    c = torch.randn(3, generator=g, dtype=torch.complex64)
    c[1] = complex(NAN, 1.0)
    return collections.OrderedDict([
        ("w", w), ("wt", w.t()), ("tail", base[3:]), ("base", base), ("h", h), ("b", b),
        ("c", c), ("i", torch.arange(5)), ("every2", base[::2])])


def _clean():
    import torch
    g = torch.Generator().manual_seed(1)
    w = torch.randn(4, 4, generator=g)
    return collections.OrderedDict([("w", w), ("wt", w.t()), ("h", torch.randn(6, generator=g)
                                    .half()), ("n", torch.arange(3))])


def seeds() -> dict:
    """{seed name: file bytes}."""
    import torch
    planted, clean = _planted(), _clean()
    nested = {"model": planted, "opt": {"step": 3, "lr": 0.1, "buf": [planted["w"] * 2]},
              "p": torch.nn.Parameter(torch.tensor([1.0, INF]))}
    return {
        "zip_planted": _save(planted), "zip_clean": _save(clean), "zip_nested": _save(nested),
        "legacy_planted": _save(planted, legacy=True), "legacy_clean": _save(clean, legacy=True),
        "legacy_nested": _save(nested, legacy=True),
    }


# ---------------------------------------------------------------------------------------------
# The two containers: a zip of members, and the legacy format's five pickles then storages.

def zip_members(b: bytes) -> list:
    with zipfile.ZipFile(io.BytesIO(b)) as z:
        return [[i.filename, z.read(i), i.compress_type] for i in z.infolist()]


def zip_join(members) -> bytes:
    return zip_bytes([(n, d, m, False) for n, d, m in members])


def pickle_ends(b: bytes, start: int = 0) -> int:
    """The byte after the pickle starting at `start`."""
    for op, _, pos in pickletools.genops(io.BytesIO(b[start:])):
        if op.name == "STOP":
            return start + pos + 1
    raise ValueError("no STOP")


def legacy_split(b: bytes) -> tuple:
    """(the five pickles' bytes, storage region)."""
    parts, pos = [], 0
    for _ in range(5):
        end = pickle_ends(b, pos)
        parts.append(b[pos:end])
        pos = end
    return parts, b[pos:]


def _is_zip(b: bytes) -> bool:
    return b[:4] == b"PK\x03\x04"


# ---------------------------------------------------------------------------------------------
# Pickle opcode mutations: ops are re-emitted as their raw bytes, the mutated one re-encoded.

def ops_of(p: bytes) -> list:
    """[(opcode name, argument, raw bytes)] of one pickle."""
    out = []
    listed = list(pickletools.genops(io.BytesIO(p)))
    for k, (op, arg, pos) in enumerate(listed):
        end = listed[k + 1][2] if k + 1 < len(listed) else len(p)
        out.append((op.name, arg, p[pos:end]))
    return out


def enc_int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(1 << 31) <= v < (1 << 31):
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def enc_str(s: str) -> bytes:
    raw = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


INTS = ("BININT1", "BININT2", "BININT", "LONG1", "INT", "LONG")
STRS = ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8")
INTERESTING_INTS = (0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 16, 255, 256, 1 << 20, 1 << 31, (1 << 31) - 1,
                    1 << 40, (1 << 62), -1, -2)
GLOBALS = [
    ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_qtensor"),
    ("torch._utils", "_rebuild_sparse_tensor"), ("torch", "FloatStorage"),
    ("torch", "DoubleStorage"), ("torch", "HalfStorage"), ("torch", "BFloat16Storage"),
    ("torch", "LongStorage"), ("torch", "ByteStorage"), ("torch", "ComplexFloatStorage"),
    ("torch", "BoolStorage"), ("torch", "float32"), ("torch", "float16"),
    ("collections", "OrderedDict"), ("collections", "Counter"), ("builtins", "set"),
    ("torch.nn.parameter", "Parameter"), ("numpy", "frombuffer"), ("os", "system"),
    ("torch", "Size"), ("torch", "tensor"), ("builtins", "float"),
]
STORAGE_KEYS = ["0", "1", "2", "3", "4", "5", "6", "7", "00", "a", "10", "é", "0 "]


def m_pickle(rng, p: bytes) -> tuple:
    """(mutated pickle, description)."""
    ops = ops_of(p)
    kind = rng.choice(["int", "int", "int", "int", "str", "global", "delete", "dup", "swap",
                       "insert", "float"])
    idx = list(range(len(ops) - 1))  # never the STOP
    if kind == "int":
        cands = [k for k in idx if ops[k][0] in INTS]
        if cands:
            k = rng.choice(cands)
            v = ops[k][1]
            new = rng.choice([rng.choice(INTERESTING_INTS), v + 1, v - 1, v * 2, v + 4,
                              rng.randrange(0, 64)])
            ops[k] = (ops[k][0], new, enc_int(new))
            return _emit(ops), f"int #{k} {v} -> {new}"
        kind = "str"
    if kind == "str":
        cands = [k for k in idx if ops[k][0] in STRS]
        if cands:
            k = rng.choice(cands)
            v = ops[k][1]
            new = rng.choice([rng.choice(STORAGE_KEYS), v.upper(), v + "x", "", "storage", "cpu",
                              "meta", "neg", "conj", v[:-1]])
            ops[k] = (ops[k][0], new, enc_str(new))
            return _emit(ops), f"str #{k} {v!r} -> {new!r}"
        kind = "global"
    if kind == "global":
        cands = [k for k in idx if ops[k][0] in ("GLOBAL", "STACK_GLOBAL")]
        cands = [k for k in cands if ops[k][0] == "GLOBAL"]
        if cands:
            k = rng.choice(cands)
            mod, name = rng.choice(GLOBALS)
            ops[k] = ("GLOBAL", f"{mod} {name}", b"c" + f"{mod}\n{name}\n".encode())
            return _emit(ops), f"global #{k} {ops[k][1]!r} -> {mod}.{name}"
        kind = "delete"
    k = rng.choice(idx) if idx else 0
    if kind == "delete":
        del ops[k]
        return _emit(ops), f"delete op #{k}"
    if kind == "dup":
        ops.insert(k, ops[k])
        return _emit(ops), f"duplicate op #{k} {ops[k][0]}"
    if kind == "swap" and k + 2 < len(ops):
        ops[k], ops[k + 1] = ops[k + 1], ops[k]
        return _emit(ops), f"swap ops #{k} and #{k + 1}"
    if kind == "float":
        cands = [k for k in idx if ops[k][0] in INTS]
        if cands:
            k = rng.choice(cands)
            v = rng.choice([NAN, INF, -INF, 0.5])
            ops[k] = ("BINFLOAT", v, b"G" + struct.pack(">d", v))
            return _emit(ops), f"int #{k} -> float {v}"
    extra = rng.choice([b"N", b"}", b")", b"]", b"G" + struct.pack(">d", NAN), b"\x88", b"K\x01",
                        b"0", b"1", b"t"])
    ops.insert(k, ("?", None, extra))
    return _emit(ops), f"insert {extra!r} before op #{k}"


def _emit(ops) -> bytes:
    return b"".join(raw for _, _, raw in ops)


# ---------------------------------------------------------------------------------------------
# Mutators: each takes (rng, data) and returns (new data, description).

def m_main_pickle(rng, b):
    if _is_zip(b):
        members = zip_members(b)
        ks = [k for k, m in enumerate(members) if m[0].endswith(".pkl")]
        k = rng.choice(ks)
        members[k][1], what = m_pickle(rng, members[k][1])
        return zip_join(members), f"{members[k][0]}: {what}"
    parts, rest = legacy_split(b)
    k = rng.choice([3, 3, 3, 3, 4, 2])
    parts[k], what = m_pickle(rng, parts[k])
    return b"".join(parts) + rest, f"legacy pickle {k}: {what}"


def _patterns(width):
    return [{1: 0x7F, 2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000},
            {1: 0x7C, 2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000},
            {1: 0xFC, 2: 0xFC00, 4: 0xFF800000, 8: 0xFFF0000000000000},
            {1: 0x3C, 2: 0x3C00, 4: 0x3F800000, 8: 0x3FF0000000000000}]


def _poke(rng, data: bytes) -> tuple:
    if not data:
        return data, "empty"
    width = rng.choice([w for w in (1, 2, 4, 8) if w <= len(data)])
    i = rng.randrange(0, len(data) - width + 1)
    i -= i % width
    pattern = rng.choice(_patterns(width))[width]
    order = rng.choice(["little", "little", "big"])
    b = bytearray(data)
    b[i:i + width] = pattern.to_bytes(width, order)
    return bytes(b), f"{width}-byte {pattern:#x} ({order}) at {i}"


def m_storage_value(rng, b):
    """Write a NaN/Inf/finite pattern into a storage: a value change both readers see."""
    if _is_zip(b):
        members = zip_members(b)
        ks = [k for k, m in enumerate(members) if "/data/" in m[0] or "/constants/" in m[0]]
        if not ks:
            return b, "no storage"
        k = rng.choice(ks)
        members[k][1], what = _poke(rng, members[k][1])
        return zip_join(members), f"storage {members[k][0]}: {what}"
    parts, rest = legacy_split(b)
    if len(rest) < 8:
        return b, "no storage"
    # The first storage's count is in elements of at least a byte: its first `count` bytes are
    # its own (the next storage's count lies further on).
    count = max(0, min(struct.unpack("<q", rest[:8])[0], len(rest) - 8))
    new, what = _poke(rng, rest[8:8 + count])
    return b"".join(parts) + rest[:8] + new + rest[8 + count:], f"legacy storage 0: {what}"


def m_zip_member(rng, b):
    if not _is_zip(b):
        return m_legacy_layout(rng, b)
    members = zip_members(b)
    names = [m[0] for m in members]
    prefix = names[0].split("/")[0]
    kind = rng.choice(["case", "byteorder", "byteorder", "delete", "dup_case", "first",
                       "deflate", "constants", "truncate", "prefix", "add_storage"])
    k = rng.randrange(len(members))
    if kind == "case":
        name = members[k][0]
        head, _, tail = name.rpartition("/")
        members[k][0] = f"{head}/{tail.upper()}" if tail.upper() != tail else f"{head.upper()}/{tail}"
        what = f"rename {name} -> {members[k][0]}"
    elif kind == "byteorder":
        text = rng.choice([b"big", b"little", b"BIG", b"big\n", b"middle", b""])
        name = rng.choice([f"{prefix}/byteorder", f"{prefix}/BYTEORDER", f"{prefix}/ByteOrder"])
        members = [m for m in members if m[0].lower() != f"{prefix}/byteorder"]
        members.insert(rng.randrange(1, len(members) + 1), [name, text, zipfile.ZIP_STORED])
        what = f"byteorder record {name} = {text!r}"
    elif kind == "delete" and len(members) > 1:
        what = f"delete {members[k][0]}"
        del members[k]
    elif kind == "dup_case":
        name = members[k][0]
        head, _, tail = name.rpartition("/")
        other = f"{head}/{tail.upper()}" if tail.upper() != tail else f"{head.upper()}/{tail}"
        data, _ = _poke(rng, members[k][1])
        members.insert(rng.randrange(len(members) + 1), [other, data, zipfile.ZIP_STORED])
        what = f"add {other} beside {name}"
    elif kind == "first":
        members.insert(0, members.pop(k))
        what = f"move {members[0][0]} first"
    elif kind == "deflate":
        members[k][2] = zipfile.ZIP_DEFLATED
        what = f"deflate {members[k][0]}"
    elif kind == "constants":
        pk = next(m for m in members if m[0].endswith("data.pkl"))
        members.append([f"{prefix}/constants.pkl", pk[1], zipfile.ZIP_STORED])
        for m in list(members):
            if "/data/" in m[0]:
                members.append([m[0].replace("/data/", "/constants/"), m[1], zipfile.ZIP_STORED])
        what = "add constants.pkl (a TorchScript archive's)"
    elif kind == "truncate":
        cut = rng.randrange(len(members[k][1]) + 1)
        members[k][1] = members[k][1][:cut]
        what = f"truncate {members[k][0]} to {cut}"
    elif kind == "prefix":
        new = rng.choice(["other", "a/b", ""])
        members[k][0] = (new + "/" if new else "") + members[k][0].split("/", 1)[-1]
        what = f"member {k} -> {members[k][0]}"
    else:
        members.append([f"{prefix}/data/{rng.choice(STORAGE_KEYS)}",
                        struct.pack("<4f", NAN, 1.0, INF, -INF), zipfile.ZIP_STORED])
        what = f"add storage {members[-1][0]}"
    return zip_join(members), what


def m_legacy_layout(rng, b):
    """The legacy storage counts, the key list and the little_endian flag."""
    if _is_zip(b):
        return m_zip_member(rng, b)
    parts, rest = legacy_split(b)
    kind = rng.choice(["count", "count", "flag", "keys"])
    if kind == "flag":
        p = parts[2]
        flip = p.replace(b"\x88", b"\x89", 1) if b"\x88" in p else p.replace(b"\x89", b"\x88", 1)
        parts[2] = flip
        return b"".join(parts) + rest, "flip the little_endian flag"
    if kind == "keys":
        parts[4], what = m_pickle(rng, parts[4])
        return b"".join(parts) + rest, f"key list: {what}"
    if len(rest) < 8:
        return b, "no storage"
    v = struct.unpack("<q", rest[:8])[0]
    new = rng.choice([0, v - 1, v + 1, v * 2, 1 << 40, (1 << 62), -1, 1 << 31])
    return b"".join(parts) + struct.pack("<q", new) + rest[8:], f"first count {v} -> {new}"


def m_bytes(rng, b):
    kind = rng.choice(["truncate", "flip", "extend"])
    if kind == "truncate":
        cut = rng.randrange(len(b) + 1)
        return b[:cut], f"truncate to {cut} of {len(b)}"
    if kind == "extend":
        return b + b"\0" * rng.choice([1, 8, 100]), "append zeros"
    a = bytearray(b)
    i = rng.randrange(len(a))
    a[i] ^= 1 << rng.randrange(8)
    return bytes(a), f"flip a bit at {i}"


MUTATORS = [(m_main_pickle, 8), (m_storage_value, 4), (m_zip_member, 4), (m_legacy_layout, 3),
            (m_bytes, 1)]


# ---------------------------------------------------------------------------------------------
# Cases

@dataclass
class Case:
    index: int
    seed_name: str
    steps: list
    data: bytes

    @property
    def id(self) -> str:
        return f"{FMT}#{self.index}"


_SEEDS: dict = {}


def make_case(index: int, base_seed: int = 0) -> Case:
    """Case `index`: a seed and 1-3 mutations, deterministic in (base_seed, index)."""
    if not _SEEDS:
        _SEEDS.update(seeds())
    rng = random.Random(f"{base_seed}:{FMT}:{index}")
    seed_name = rng.choice(sorted(_SEEDS))
    data = _SEEDS[seed_name]
    steps = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        mutator = rng.choices([m for m, _ in MUTATORS], [w for _, w in MUTATORS])[0]
        try:
            data, what = mutator(rng, data)
            steps.append(f"{mutator.__name__}: {what}")
        except Exception as e:
            data, what = m_bytes(rng, data)
            steps.append(f"({mutator.__name__} n/a: {type(e).__name__}) {what}")
    return Case(index, seed_name, steps, data)


def write_case(case: Case, root: str) -> str:
    d = os.path.join(root, FMT)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{case.index}.pt")
    with open(path, "wb") as f:
        f.write(case.data)
    return path


# ---------------------------------------------------------------------------------------------
# The reference: torch.load(weights_only=True), every NaN/+Inf/-Inf of what it returns.

def reference(path: str) -> dict:
    """{"ok": True, "counts": [nan, +inf, -inf], "unverified": [type names]} or
    {"ok": False, "reason": ...} when torch refuses the file."""
    import torch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:
        return {"ok": False, "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                if str(e) else type(e).__name__}
    counts, unverified = count_values(obj)
    return {"ok": True, "counts": counts, "unverified": unverified}


def count_values(obj) -> tuple:
    """([nan, +inf, -inf], [type names not counted]) of every value reachable from `obj`:
    tensors (each time it is reached), Python floats and complex numbers, NumPy arrays; containers
    are walked once each."""
    import numpy as np
    import torch
    total = [0, 0, 0]
    unverified = []
    seen: set = set()
    stack = [obj]

    def add(c):
        for k in range(3):
            total[k] += c[k]

    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            add(tensor_counts(o, unverified))
            extra = getattr(o, "__dict__", None)
            if extra:
                stack.append(dict(extra))
        elif isinstance(o, bool) or o is None or isinstance(o, (int, str, bytes, bytearray)):
            continue
        elif isinstance(o, (float, complex)):
            add(_counts_np(np.asarray(o)))
        elif isinstance(o, (dict, list, tuple, set, frozenset)):
            if id(o) in seen:
                continue
            seen.add(id(o))
            stack.extend(list(o.keys()) + list(o.values()) if isinstance(o, dict) else list(o))
        elif isinstance(o, np.ndarray) or isinstance(o, np.generic):
            add(_counts_np(np.asarray(o)))
        elif isinstance(o, torch.storage.TypedStorage):
            t = torch.tensor([], dtype=o.dtype).set_(o._untyped_storage) if o.dtype not in (
                torch.quint8, torch.qint8, torch.qint32) else torch.tensor([], dtype=torch.uint8)
            add(tensor_counts(t, unverified))
        elif isinstance(o, (torch.UntypedStorage, torch.dtype, torch.device, torch.layout,
                            torch.memory_format)):
            continue
        else:
            unverified.append(type(o).__name__)
    return total, unverified


def tensor_counts(t, unverified) -> list:
    import torch
    if t.device.type == "meta":
        return [0, 0, 0]
    if t.is_quantized:
        scales = (torch.tensor([t.q_scale()], dtype=torch.float64)
                  if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric)
                  else t.q_per_channel_scales())
        return tensor_counts(scales, unverified)
    if t.layout != torch.strided:
        if t.layout == torch.sparse_coo:
            return tensor_counts(t._values(), unverified)
        unverified.append(f"tensor layout {t.layout}")
        return [0, 0, 0]
    if getattr(t, "is_nested", False):
        unverified.append("nested tensor")
        return [0, 0, 0]
    if t.dtype.is_complex:
        t = torch.view_as_real(t.resolve_conj().resolve_neg())
    elif not t.dtype.is_floating_point:
        return [0, 0, 0]
    x = t.resolve_neg().to(torch.float64)
    return [int(torch.isnan(x).sum()), int(torch.isposinf(x).sum()), int(torch.isneginf(x).sum())]


def _counts_np(a) -> list:
    import numpy as np
    if a.dtype.kind == "c":
        parts = [a.real, a.imag]
    elif a.dtype.kind == "f":
        parts = [a]
    else:
        return [0, 0, 0]
    out = [0, 0, 0]
    for p in parts:
        p = p.astype(np.float64)
        out[0] += int(np.isnan(p).sum())
        out[1] += int(np.isposinf(p).sum())
        out[2] += int(np.isneginf(p).sum())
    return out


# ---------------------------------------------------------------------------------------------
# The worker (spawned by scan_fuzz_support's supervisor): scan, then the reference, per case.

def _worker(batch_file: str) -> None:
    import resource
    import signal

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def say(**msg):
        proto.write(json.dumps(msg) + "\n")

    with open(batch_file) as f:
        batch = json.load(f)
    from fpclass.scan import scan
    for path in batch["warmup"]:
        scan([path])
    warm = _status_mb("VmRSS")  # what an fpclass-only worker holds: scans are charged from here
    reference(batch["warmup"][0])  # imports torch
    vms = _vm_bytes()
    resource.setrlimit(resource.RLIMIT_AS, (vms + ADDRESS_SLACK, vms + ADDRESS_SLACK))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    say(ready=True, vms_mb=vms / 2 ** 20, rss_mb=warm)
    resets = _reset_peak()

    class Timeout(Exception):
        pass

    def alarm(*_):
        raise Timeout

    signal.signal(signal.SIGALRM, alarm)
    for case_id, path, _ in batch["cases"]:
        say(id=case_id, phase="scan")
        _reset_peak()
        before = _status_mb("VmRSS")
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                report = scan([path])
                out = {"exit": int(report.exit_code),
                       "tensors": [[r.name, r.status, r.nan, r.posinf, r.neginf, r.reason]
                                   for r in report.tensors],
                       "problems": [p.reason for p in report.problems]}
            except BaseException as e:
                out = {"raised": f"{type(e).__name__}: {e}"}
        out.update(seconds=time.perf_counter() - t,
                   maxrss_mb=warm + peak_rss_mb() - before if resets else peak_rss_mb())
        say(id=case_id, scan=out)
        say(id=case_id, phase="oracle")
        signal.setitimer(signal.ITIMER_REAL, ORACLE_SECONDS)
        try:
            ref = reference(path)
        except Timeout:
            ref = {"ok": None, "reason": f"reference ran past {ORACLE_SECONDS} s"}
        except BaseException as e:
            ref = {"ok": None, "reason": f"reference raised {type(e).__name__}: {e}"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        say(id=case_id, oracle=ref)
        if peak_rss_mb() > 3 * MEMORY_MB and not resets:
            say(restart=f"{case_id}: peak RSS {peak_rss_mb():.0f} MB")
            return


def run(cases: list, workdir: str, warmup: list, workers: int = 2) -> tuple:
    """({case id: Outcome}, stats) for [(id, path, "torch")]."""
    return run_cases(cases, workdir, warmup, workers, script=os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------
# Judging one file.

def judge(o) -> tuple[list, list]:
    """([(failure kind, detail)], [(note kind, detail)])."""
    s, ref = o.scan, o.oracle
    if o.failure:
        return [("crash or hang", o.failure)], []
    if "raised" in s:
        return [("scan raised", s["raised"])], []
    fails, notes = [], []
    if s.get("maxrss_mb", 0) > MEMORY_MB:
        fails.append(("memory", f"peak RSS {s['maxrss_mb']:.0f} MB"))
    if s.get("seconds", 0) > SCAN_SECONDS:
        fails.append(("slow", f"{s['seconds']:.1f} s"))
    reasons = s["problems"] + [t[5] for t in s["tensors"]]
    internal = [r for r in reasons if r and "internal error" in r]
    if internal:
        fails.append(("internal error", internal[0]))
    code = s["exit"]
    if code not in (0, 1, 2):
        fails.append(("exit code", str(code)))
    ours = [sum(t[k] for t in s["tensors"]) for k in (2, 3, 4)]
    partial = bool(s["problems"]) or any(t[1] == "unchecked" for t in s["tensors"])
    if ref.get("ok") is None:
        notes.append((f"exit {code}, reference unavailable", ref.get("reason", "")))
        return fails, notes
    if ref["ok"] is False:
        notes.append((f"exit {code}, reference refuses", ref["reason"]))
        return fails, notes
    theirs = ref["counts"]
    if ref["unverified"]:
        notes.append(("reference holds uncounted objects", ", ".join(ref["unverified"][:3])))
    if code == 0 and sum(theirs) and not ref["unverified"]:
        fails.append(("clean but the reference reads NaN/Inf", f"reference {theirs}"))
    elif code == 0 and sum(theirs):
        fails.append(("clean but the reference reads NaN/Inf", f"reference {theirs} "
                      f"(and uncounted {ref['unverified'][:3]})"))
    elif code == 1 and not partial and not ref["unverified"] and ours != theirs:
        fails.append(("counts differ", f"fpclass {ours}, reference {theirs}"))
    elif code == 1 and any(a > b for a, b in zip(ours, theirs)):
        fails.append(("counts above the reference's", f"fpclass {ours}, reference {theirs}"))
    elif code == 2:
        first = (s["problems"] + [t[5] for t in s["tensors"] if t[1] == "unchecked"])[0:1]
        notes.append(("inconclusive, reference loads", first[0] if first else ""))
    return fails, notes


def failure_kind(cls: str, detail: str) -> str:
    gist = re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"", "X", detail))
    if cls in ("internal error", "scan raised"):
        return f"{cls}: {gist[:60]}"
    return cls


def _show(argv):
    import argparse
    p = argparse.ArgumentParser(prog="torch_fuzz.py show")
    p.add_argument("index", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    args = p.parse_args(argv)
    case = make_case(args.index, args.seed)
    path = write_case(case, args.out)
    print(f"{case.id} from seed {case.seed_name!r}:")
    for step in case.steps:
        print("  " + step)
    print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        _worker(sys.argv[2])
    elif sys.argv[1:2] == ["show"]:
        _show(sys.argv[2:])
    else:
        sys.exit(__doc__)
