"""Is numba's on-disk cache warm (every kernel compiled), and what a large call does while it is
not: the compile policy (environment variable FPCLASS_COMPILE, docs/startup.md).

`fpclass warmup` writes a stamp file beside the cached kernels once every kernel is in the cache;
the stamp names the Python and numba versions and every kernel source's mtime and size, so a stamp
left by other sources or versions counts as cold. Policies:
  background (default)  while cold, large calls are answered by NumPy (numpy_bits, no compile)
                        and one `fpclass warmup` runs in a background process per machine (a
                        lock file beside the stamp); calls switch to the kernels once the stamp
                        appears (looked for at most every RECHECK_SECONDS)
  numpy                 the same NumPy answers while cold, but nothing is started
  inline                the kernels always, compiled on first use (the behaviour before)
Importing this module does not import numba.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

#: The environment variable naming the policy (read at each large call, so a change applies).
ENV = "FPCLASS_COMPILE"
POLICIES = ("background", "numpy", "inline")
STAMP, LOCK, LOG = "fpclass-warm.txt", "fpclass-warmup.lock", "fpclass-warmup.log"
#: While cold, the stamp is looked for at most this often (a stat per large call would show).
RECHECK_SECONDS = 0.2

# the kernels' folder as numba spells it (abspath: symlinks not resolved)
_KERNELS = Path(os.path.dirname(os.path.abspath(__file__)))
_forced: str | None = None   # set_policy's
_warm = False                # sticky: once warm, a process stays on the kernels
_next_check = 0.0
_started = False             # a background warm-up was asked for by this process
_notice = None               # called once when a large call first finds the cache cold
_start_lock = threading.Lock()


def policy() -> str:
    """The policy in force: set_policy's, else FPCLASS_COMPILE's, else "background"."""
    if _forced is not None:
        return _forced
    name = os.environ.get(ENV, "").strip().lower() or "background"
    if name not in POLICIES:
        raise ValueError(f"the environment variable {ENV} must be one of {', '.join(POLICIES)}, "
                         f"got {os.environ[ENV]!r}")
    return name


def set_policy(name: str | None) -> str | None:
    """Force a policy for this process (None: back to the environment's); the one forced
    before. The warm-up forces "inline": it must compile, never fall back."""
    global _forced
    if name is not None and name not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)} or None, got {name!r}")
    before, _forced = _forced, name
    return before


def set_notice(callback) -> None:
    """`callback(policy)` is called once, the first time a large call finds the cache cold and is
    answered by NumPy (the command line prints a line pointing to `fpclass warmup`)."""
    global _notice
    _notice = callback


def kernels_ready() -> bool:
    """Should a large call run the numba kernels now? Always under "inline"; otherwise once the
    cache is warm. Cheap: no filesystem call more often than every RECHECK_SECONDS."""
    global _warm, _next_check, _notice
    if _warm:
        return True
    mode = policy()
    if mode == "inline":
        return True
    now = time.monotonic()
    if now < _next_check:
        return False
    _next_check = now + RECHECK_SECONDS
    if is_warm():
        _warm = True
        return True
    if _notice is not None:
        notice, _notice = _notice, None
        notice(mode)
    if mode == "background":
        start_background()
    return False


def cache_dir() -> Path:
    """The folder numba caches the kernels in, found as numba's locators find it (without
    importing numba): NUMBA_CACHE_DIR's subfolder for this source folder, else the kernels'
    __pycache__ when writable, else numba's user-wide cache."""
    config = sys.modules.get("numba.core.config")
    root = config.CACHE_DIR if config is not None else os.environ.get("NUMBA_CACHE_DIR", "")
    found = _dirs.get(root)
    if found is None:
        found = _dirs[root] = _find_cache_dir(root)
    return found


_dirs: dict = {}   # NUMBA_CACHE_DIR -> cache_dir()


def _find_cache_dir(root: str) -> Path:
    subpath = cache_subpath()
    if root:
        return Path(root) / subpath
    in_tree = _KERNELS / "__pycache__"
    # numba writes a temporary file there to know; a first call cannot afford that
    if os.access(in_tree if in_tree.is_dir() else _KERNELS, os.W_OK):
        return in_tree
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "numba" / subpath


def cache_subpath() -> str:
    """The kernels' folder name inside a NUMBA_CACHE_DIR (numba's get_suitable_cache_subpath)."""
    return "_".join([_KERNELS.name, hashlib.sha1(str(_KERNELS).encode()).hexdigest()])


def source_key() -> str:
    """What the stamp must name to be valid: Python, numba (its files' stamps: no import) and
    every kernel source's mtime and size, hashed."""
    import platform
    parts = [sys.version, getattr(sys, "abiflags", ""), platform.machine()]
    spec = importlib.util.find_spec("numba")
    if spec is not None and spec.origin:
        numba_dir = Path(spec.origin).parent
        parts += [str(numba_dir)] + [_file_stamp(numba_dir / n)
                                     for n in ("__init__.py", "_version.py")]
    parts += [f"{p.name}:{_file_stamp(p)}" for p in sorted(_KERNELS.glob("*.py"))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _file_stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}"


def is_warm() -> bool:
    """Does a valid stamp say every kernel is in numba's cache? (The stamp's first line is the
    key: read without a parser, as a cold first call pays for every import.)"""
    try:
        with open(os.path.join(cache_dir(), STAMP), "rb") as f:
            return f.readline().strip() == source_key().encode()
    except (OSError, ValueError):
        return False


def write_stamp(units: int) -> Path:
    """Record that every kernel is in the cache (after a complete warm-up); the stamp's path."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STAMP
    tmp = folder / f"{STAMP}.{os.getpid()}.tmp"
    tmp.write_text(f"{source_key()}\nfpclass warmup: {units} units compiled or loaded, "
                   f"{time.strftime('%Y-%m-%d %H:%M:%S %z')}\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def purge_unstamped() -> int:
    """Remove numba's cached kernels (index and data files) from cache_dir() unless a valid stamp
    vouches for them; how many files. Numba checks only the stamp of the file that defines a
    kernel, not of the modules whose functions it inlines (reductions.py into slices.py, stats_vectors.py
    into stats.py): after such an edit it would keep serving the old code, so a full warm-up
    starts from nothing. Call it holding warmup_lock."""
    if is_warm():
        return 0
    removed = 0
    for path in cache_dir().glob("*.nb[ic]"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed


@contextlib.contextmanager
def warmup_lock(wait=None):
    """Held by a warm-up while it writes the cache, so two never write it at once (a second one
    waits; `wait(path)` is called first if it has to). Without fcntl (Windows) nothing is held."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(folder / LOCK, "a+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if wait is not None:
                wait(folder / LOCK)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _lock_free(folder: Path) -> bool:
    """Is no warm-up holding the lock now? (A probe: take it and let go.)"""
    try:
        import fcntl
    except ImportError:
        return True
    with open(folder / LOCK, "a+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def start_background() -> None:
    """Start `fpclass warmup` (one worker, quiet) in a detached background process, once per
    process, unless another warm-up holds the lock: from a thread at the first cold check after
    this one (RECHECK_SECONDS or more later), or at exit if none comes. Starting a process costs
    milliseconds of the interpreter, more than the first call's own work."""
    global _started
    with _start_lock:
        if _started:
            return
        if not _asked:
            _asked.append(time.monotonic())
            atexit.register(_spawn_at_exit)
            return
        _started = True
    thread = threading.Thread(target=_spawn, name="fpclass-warmup-start", daemon=True)
    thread.start()
    _threads.append(thread)


_asked: list = []     # when the first cold check asked for a background warm-up
_threads: list = []   # the starting thread, waited for at exit


def _spawn_at_exit() -> None:
    global _started
    with _start_lock:
        started, _started = _started, True
    if not started and not is_warm() and policy() == "background":
        _spawn()
    for thread in _threads:
        thread.join(5)


def _spawn():
    """The background `fpclass warmup` process, or None where none was started."""
    import subprocess
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        if not _lock_free(folder):
            return None
        src = str(_KERNELS.parent.parent)   # the folder fpclass was imported from
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, ENV: "inline",
               "PYTHONPATH": src if not path else src + os.pathsep + path}
        with open(folder / LOG, "ab") as log:
            return subprocess.Popen([sys.executable, "-m", "fpclass", "warmup", "-q",
                                     "--workers", "1"], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=log, env=env, start_new_session=True)
    except OSError:
        return None   # a read-only cache or no way to start Python: the NumPy answers stay


def reset() -> None:
    """Forget what this process learnt (warm, started, the next check): for tests."""
    global _warm, _next_check, _started
    _warm, _next_check, _started = False, 0.0, False
    _asked.clear()
    _dirs.clear()


# Found at import (string work and at most one access() call), not by a cold first call.
with contextlib.suppress(Exception):
    cache_dir()
