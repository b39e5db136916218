"""Run a library's decoding of one file in a separate process: scipy.io's MATLAB reader is C code
that a corrupt file can crash (a flipped byte in a 1 KB .mat file gave SIGSEGV), and a crash must
cost one file, never the whole scan. The reading process (a fresh one per file: memory a corrupt
file damaged is never reused; about 0.3 s of start-up) calls `<module>.load(path)`, which returns
tasks, and sends them back as JSON plus raw bytes: nothing it sends is unpickled or executed. Its
address space is limited (MEMORY_LIMIT beyond what it had at its start, where the platform
allows), and its time (TIME_LIMIT)."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from dataclasses import fields

from . import ReaderError
from ..storage.inline import Inline
from ..tasks import CHECK, FILE, NOT_APPLICABLE, UNCHECKED, Task

#: Address space the reading process may add (POSIX): scipy.io holds at most a few times the
#: 256 MiB of decoded values a file may declare.
MEMORY_LIMIT = 3 << 30
#: Seconds one file may take.
TIME_LIMIT = 120
_FIELDS = [f.name for f in fields(Task) if f.name not in ("storage", "fields")]
_TUPLES = {"shape", "grid"}
_STATUSES = {CHECK, FILE, NOT_APPLICABLE, UNCHECKED}


def plan_in_child(module: str, path: str, what: str) -> list:
    """The tasks `module.load(path)` returns, computed in a fresh process. ReaderError when it
    fails, crashes, or runs out of time or memory (`what` names the library)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        done = subprocess.run([sys.executable, "-m", __name__, module, path],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=TIME_LIMIT,
                              env=env, preexec_fn=limit_memory if os.name == "posix" else None)
    except subprocess.TimeoutExpired:
        raise ReaderError(f"{what} took over {TIME_LIMIT} s reading the file; not checked") \
            from None
    answer, code = done.stdout, done.returncode
    if code != 0 or not answer:
        name = signal.Signals(-code).name if code < 0 and -code in signal.valid_signals() \
            else f"exit status {code}"
        raise ReaderError(f"{what} crashed reading the file ({name}): a corrupt file? not checked")
    kind, payload = answer[:1], answer[1:]
    if kind == b"T":
        return _decode(payload, path)
    message = payload.decode("utf-8", "replace")
    if kind == b"E":
        raise ReaderError(message)
    if "MemoryError" in message:
        raise ReaderError(f"{what} ran out of memory reading the file; not checked")
    raise ReaderError(f"{what} failed reading the file: {message}")


def limit_memory() -> None:
    """Limit this process's address space to MEMORY_LIMIT beyond what it has now (POSIX; run
    in the reading process before it starts)."""
    import resource
    try:
        with open("/proc/self/statm") as f:  # the address space it starts with (Linux)
            start = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        start = 0
    resource.setrlimit(resource.RLIMIT_AS, (start + MEMORY_LIMIT, start + MEMORY_LIMIT))


def _encode(tasks) -> bytes:
    header, blobs = [], []
    for t in tasks:
        data = t.storage.data if isinstance(t.storage, Inline) else None
        header.append({k: getattr(t, k) for k in _FIELDS} | {"data": -1 if data is None
                                                             else len(data)})
        blobs.append(data or b"")
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def _decode(out: bytes, path: str) -> list:
    """Tasks from the child's output, checked to be in-memory values or markers of `path`."""
    try:
        (n,) = struct.unpack_from("<Q", out)
        header = json.loads(out[8:8 + n])
        tasks, at = [], 8 + n
        for item in header:
            size = item.pop("data")
            values = {k: tuple(v) if k in _TUPLES else v for k, v in item.items()}
            data = out[at:at + max(size, 0)]
            task = Task(**values, storage=None if size < 0 else Inline(data, len(data)))
            at += max(size, 0)
            if task.status not in _STATUSES or task.file != path or (
                    task.status == CHECK and not isinstance(task.storage, Inline)):
                raise ValueError(f"unexpected task {task.name!r} ({task.status}, "
                                 f"{getattr(task.storage, 'kind', 'no storage')})")
            tasks.append(task)
        if at != len(out):
            raise ValueError("trailing bytes")
    except (ValueError, TypeError, struct.error, KeyError) as e:
        raise ReaderError(f"the reading process sent an unreadable answer ({e})") from None
    return tasks


def _main(module: str, path: str) -> int:
    """The reading process: one file's answer on stdout, a kind byte (T tasks, E a ReaderError's
    message, X another error) and its bytes."""
    from importlib import import_module
    answer, sys.stdout = sys.stdout.buffer, sys.stderr  # whatever a library prints: not the answer
    try:
        data = b"T" + _encode(import_module(f"{__package__}.{module}").load(path))
    except ReaderError as e:
        data = b"E" + str(e).encode()
    except Exception as e:  # the reader's bug or the library's: this file only
        data = b"X" + f"{type(e).__name__}: {e}".encode()
    answer.write(data)
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:3]))
