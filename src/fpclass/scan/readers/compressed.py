"""Files inside a gzip, bzip2 or xz stream (`x.fits.gz`, `x.nc.bz2`, `x.npy.xz`), and compress
(`.Z`, LZW) streams: the stream is decompressed once, sequentially, into a temporary file (memory:
one 1 MiB buffer), which the reader of the format found inside then plans like any file; its
tasks and reasons name the compressed file. The engine's readers read by positioned reads, so a
seekable copy is the one bounded way to read every format inside.

Limits, each a problem (exit 2), never a partial answer: more than MAX_BYTES decompressed, a
ratio over MAX_RATIO (a bomb: deflate cannot exceed 1032:1, and real arrays stay far below),
less free space in the temporary directory than the output plus FREE_RESERVE, a corrupt or
truncated stream, a compressed file inside (one layer is read). The copy lives in
scratch.directory() and is removed when the scan ends."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import zlib
from dataclasses import replace

from . import ReaderError
from .. import scratch
from ..signatures import compression
from ..tasks import FILE, skipped
from .lzw import LZWError, LZWReader
from ..storage.source import is_url

#: Most bytes a stream may decompress to.
MAX_BYTES = 16 << 30
#: Largest ratio of decompressed to compressed bytes (beyond a small first MiB).
MAX_RATIO = 1100
#: Free space left in the temporary directory after the copy.
FREE_RESERVE = 1 << 30
#: Largest .Z file decoded, and most bytes decoded from one: its pure-Python decoder holds the
#: compressed bytes and reads about 4 MB/s of them (3.5-45 MB/s of output).
MAX_LZW_INPUT = 32 << 20
MAX_LZW_BYTES = 1 << 30
_SUFFIXES = {"gzip": (".gz", ".gzip", ".tgz"), "bzip2": (".bz2", ".bz", ".tbz2"),
             "xz": (".xz", ".txz"), "compress": (".z",)}
_OPEN = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open, "compress": LZWReader}
_BLOCK = 1 << 20


def plan(path: str, *, identify, skip_by_head, planner) -> list:
    """The tasks of the file inside the stream at `path`: `identify`, `skip_by_head` and
    `planner` are the scan's detection and registry (scan/reader_options.py)."""
    if is_url(path):
        raise ReaderError("compressed files are not read from URLs (the decompressed copy would "
                          "be stored on this machine); not checked")
    with open(path, "rb") as f:
        kind = compression(f.read(6))
    if not kind:
        raise ReaderError("not a gzip, bzip2, xz or compress stream")
    inner = os.path.join(scratch.directory(), str(len(os.listdir(scratch.directory()))))
    os.mkdir(inner)
    copy = os.path.join(inner, _inner_name(os.path.basename(path), kind))
    if kind == "compress" and os.path.getsize(path) > MAX_LZW_INPUT:
        raise ReaderError(f"compress (.Z) file over {MAX_LZW_INPUT} bytes, the limit of fpclass's "
                          "pure-Python decoder (uncompress it first); not checked")
    what = f"{kind}-compressed"
    try:
        skip = _decompress(path, kind, copy, skip_by_head)
    except BaseException:
        if os.path.exists(copy):
            os.remove(copy)
        raise
    if skip:
        os.remove(copy)
        return [skipped(path, f"{what} {skip}")]
    ident = identify(copy)
    if ident.kind == "compressed":
        raise ReaderError(f"{what} file holding another compressed stream; only one layer is read")
    if not ident.kind:
        os.remove(copy)
        if ident.claims:
            raise ReaderError(f"{what} {ident.claims}: holds data in a form fpclass does not "
                              "read, so not checked")
        return [skipped(path, f"{what} {ident.skip}")]
    tasks = planner(ident.kind)(copy)
    return [_renamed(t, copy, path, what) for t in tasks]


def _renamed(task, copy: str, path: str, what: str):
    """`task` of the copy, as a task of the compressed file (its bytes still read from the copy)."""
    changes = {}
    if task.file == copy:
        changes["file"] = path
        if task.status == FILE:
            changes["dtype"] = f"{task.dtype} ({what})"
    if copy in task.reason:
        changes["reason"] = task.reason.replace(copy, path)
    return replace(task, **changes) if changes else task


def _inner_name(name: str, kind: str) -> str:
    """The name the compressed file had before compression (`x.fits.gz` -> `x.fits`)."""
    lower = name.lower()
    for suffix in _SUFFIXES[kind]:
        if lower.endswith(suffix) and len(name) > len(suffix):
            stem = name[:-len(suffix)]
            return stem + ".tar" if suffix.startswith(".t") and len(suffix) > 3 else stem
    return name + ".decompressed"


def _decompress(path: str, kind: str, copy: str, skip_by_head) -> str:
    """Decompress `path` into `copy`; or, when its first block already shows a file that holds no
    tensors (text, an image), stop there and return why."""
    packed = os.path.getsize(path)
    free = shutil.disk_usage(os.path.dirname(copy)).free - FREE_RESERVE
    written = 0
    most = MAX_LZW_BYTES if kind == "compress" else MAX_BYTES
    try:
        with _OPEN[kind](path, "rb") as src, open(copy, "wb") as out:
            while True:
                block = src.read(_BLOCK)
                if not block:
                    break
                if not written:
                    skip = skip_by_head(block, os.path.basename(copy))
                    if skip:
                        return skip
                written += len(block)
                if written > most:
                    raise ReaderError(f"{kind} stream decompresses to over {most} bytes, "
                                      "the limit; not checked")
                if written > _BLOCK and written > MAX_RATIO * packed:
                    raise ReaderError(f"{kind} stream decompresses to over {MAX_RATIO} times "
                                      f"its {packed} bytes (a decompression bomb?); not checked")
                if written > free:
                    raise ReaderError(f"{kind} stream decompresses to more than the free space "
                                      f"of the temporary directory {os.path.dirname(copy)} "
                                      "allows; not checked")
                out.write(block)
    except (OSError, EOFError, lzma.LZMAError, zlib.error, LZWError, ValueError) as e:
        if isinstance(e, OSError) and e.errno is not None:
            raise
        raise ReaderError(f"corrupt {kind} stream after {written} decompressed bytes "
                          f"({type(e).__name__}: {e}); not checked") from None
    return ""
