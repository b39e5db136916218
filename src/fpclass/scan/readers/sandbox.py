"""Run a library's decoding of one file in a separate process: scipy.io's MATLAB reader is C code
that a corrupt file can crash (a flipped byte in a 1 KB .mat file gave SIGSEGV), and a crash must
cost one file, never the whole scan. The reading process (a fresh one per file) calls
`<module>.load(path)`, which returns tasks, and sends them back as JSON plus raw bytes: nothing it
sends is unpickled or executed. Its address space is limited (MEMORY_LIMIT beyond what it had at
its start, where the platform allows), and its time per file (TIME_LIMIT)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import struct
from dataclasses import fields

from . import ReaderError
from ..tasks import CHECK, FILE, INLINE, NOT_APPLICABLE, UNCHECKED, Task

#: Address space the reading process may add (POSIX): scipy.io holds at most a few times the
#: 256 MiB of decoded values a file may declare.
MEMORY_LIMIT = 3 << 30
#: Seconds one file may take.
TIME_LIMIT = 120
_FIELDS = [f.name for f in fields(Task) if f.name not in ("data", "fields")]
_TUPLES = {"shape", "grid", "strides"}
_STATUSES = {CHECK, FILE, NOT_APPLICABLE, UNCHECKED}


def plan_in_child(module: str, path: str, what: str) -> list:
    """The tasks `module.load(path)` returns, computed in a fresh process. ReaderError when it
    fails, crashes, or runs out of time or memory (`what` names the library)."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(module, path, send), daemon=True)
    process.start()
    send.close()
    try:
        answer = receive.recv_bytes() if receive.poll(TIME_LIMIT) else None
    except (EOFError, OSError):
        answer = None
    finally:
        receive.close()
    if answer is None:
        process.kill()
    process.join()
    code = process.exitcode
    process.close()
    if answer is None:
        if code == -signal.SIGKILL:
            raise ReaderError(f"{what} took over {TIME_LIMIT} s reading the file; not checked")
        name = signal.Signals(-code).name if code is not None and code < 0 and -code in \
            signal.valid_signals() else f"exit status {code}"
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


def _context():
    """A fork server (POSIX: each file read in a fresh fork of a process that has imported the
    libraries once, so a file costs milliseconds, and memory a corrupt file damaged is never
    reused); spawned processes elsewhere."""
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(PRELOAD)
        else:
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


_CONTEXT = None
#: Modules the fork server imports once.
PRELOAD = ["numpy", "scipy.io", "scipy.sparse", f"{__package__}.matlab"]


def _child(module: str, path: str, send) -> None:
    """In the reading process: one file's answer, a kind byte (T tasks, E a ReaderError's
    message, X another error) and its bytes."""
    from importlib import import_module
    if os.name == "posix":
        _limit()
    try:
        answer = b"T" + _encode(import_module(f"{__package__}.{module}").load(path))
    except ReaderError as e:
        answer = b"E" + str(e).encode()
    except Exception as e:  # the reader's bug or the library's: this file only
        answer = b"X" + f"{type(e).__name__}: {e}".encode()
    send.send_bytes(answer)
    send.close()


def _limit() -> None:
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
        header.append({k: getattr(t, k) for k in _FIELDS} | {"data": len(t.data)})
        blobs.append(t.data)
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
            task = Task(**values, data=out[at:at + size])
            at += size
            if task.status not in _STATUSES or task.file != path or (
                    task.status == CHECK and (task.storage != INLINE or task.source != path)):
                raise ValueError(f"unexpected task {task.name!r} ({task.status}, {task.storage})")
            tasks.append(task)
        if at != len(out):
            raise ValueError("trailing bytes")
    except (ValueError, TypeError, struct.error, KeyError) as e:
        raise ReaderError(f"the reading process sent an unreadable answer ({e})") from None
    return tasks
