"""Remote files through fsspec (the `remote` extra): positioned reads of byte ranges with retries,
and the consistency of what is read.

A file's identity (size plus ETag / version id / content hash / Last-Modified, whichever the
server gives) is taken the first time a scan sees the file (its listing or its first open). Every
range read carries it as a precondition where the protocol has one (HTTP If-Match, S3 IfMatch or
VersionId); elsewhere it is fetched again and compared when a handle closes. So a file replaced
while it is scanned is a SourceError naming it, never a partial clean. A read that returns fewer
(or more) bytes than asked, or fails transiently, is retried with backoff, then a SourceError.
Credentials come from fsspec's usual places or `storage_options`; no message names them. One scan
at a time per process: `configured` holds the options and identities of the scan running."""

from __future__ import annotations

import contextlib
import threading
import time

from ..._optional import require
from .errors import SourceError

#: Attempts of a read that fails with a transient error (a reset, a timeout, a short body).
ATTEMPTS = 4
#: Seconds before the first retry; doubled for each next one.
BACKOFF = 0.25
#: Seconds an HTTP read may wait for the next bytes before it is retried (aiohttp's sock_read),
#: unless storage_options give client_kwargs={"timeout": ...}.
READ_TIMEOUT = 30.0

#: Keys of fsspec's info naming the version of a file's bytes, strongest first.
_IDENTITY_KEYS = ("VersionId", "version_id", "ETag", "etag", "blob_id", "sha256",
                  "Content-MD5", "Digest")
_WEAK_KEYS = ("Last-Modified", "LastModified", "mtime")

_LOCK = threading.Lock()
_OPTIONS: dict = {}
_FILESYSTEMS: dict = {}
_SEEN: dict = {}  # url -> the identity first seen in this process


def fsspec():
    """fsspec, or ImportError naming the `remote` extra."""
    return require("fsspec", "remote", "scanning a URL")


@contextlib.contextmanager
def configured(storage_options):
    """Use `storage_options` (a dict of fsspec filesystem arguments, or a dict of such dicts keyed
    by protocol) for the URLs opened inside the block; identities seen are forgotten after it."""
    global _OPTIONS
    if storage_options is not None and not isinstance(storage_options, dict):
        raise ValueError(f"storage_options must be a dict, got {type(storage_options).__name__}")
    with _LOCK:
        before, _OPTIONS = _OPTIONS, dict(storage_options or {})
        _FILESYSTEMS.clear()
        _SEEN.clear()
    try:
        yield
    finally:
        with _LOCK:
            _OPTIONS = before
            _FILESYSTEMS.clear()
            _SEEN.clear()


def options() -> dict:
    """The storage options in force (for a scheduler that sends them to its workers)."""
    return dict(_OPTIONS)


def seen() -> dict:
    """The identities of the files seen so far (url -> identity), for workers to check."""
    with _LOCK:
        return dict(_SEEN)


def run_with(run, storage_options: dict, identities: dict, task, *args, **kwargs):
    """`run(task, ...)` on a worker, with the client's storage options and the identities it saw
    (the options are kept for the worker's next tasks)."""
    global _OPTIONS
    with _LOCK:
        if _OPTIONS != storage_options:
            _OPTIONS = dict(storage_options)
            _FILESYSTEMS.clear()
        _SEEN.update(identities)
    return run(task, *args, **kwargs)


def _protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def _options_for(protocol: str) -> dict:
    opts = _OPTIONS
    known = set(fsspec().available_protocols())
    if opts and all(isinstance(v, dict) and k in known for k, v in opts.items()):
        opts = opts.get(protocol, {})  # keyed by protocol
    opts = dict(opts)
    if protocol in ("http", "https") and "timeout" not in opts.get("client_kwargs", {}):
        aiohttp = require("aiohttp", "remote", "scanning an http(s) URL")
        opts["client_kwargs"] = {**opts.get("client_kwargs", {}),
                                 "timeout": aiohttp.ClientTimeout(total=None,
                                                                  sock_read=READ_TIMEOUT)}
    return opts


def options_for(url: str) -> dict:
    """The fsspec filesystem arguments for `url` in this scan."""
    return _options_for(_protocol(url))


def filesystem(url: str):
    """(fsspec filesystem, path inside it) for `url`, one filesystem per protocol and scan."""
    protocol = _protocol(url)
    with _LOCK:
        fs = _FILESYSTEMS.get(protocol)
    if fs is None:
        fs = fsspec().filesystem(protocol, **_options_for(protocol))
        # fsspec shares instances between callers with the same options: listings cached by an
        # earlier scan (or by the caller) must not stand for the files now
        fs.invalidate_cache()
        with _LOCK:
            fs = _FILESYSTEMS.setdefault(protocol, fs)
    return fs, fs._strip_protocol(url) if protocol not in ("http", "https") else url


def url_of(path: str, like: str) -> str:
    """The URL of `path`, a name a listing of the URL `like` gave (with or without protocol)."""
    if "://" in path:
        return path
    return f"{_protocol(like)}://{path}"


def identity(info: dict) -> tuple:
    """(size, ((key, value), ...)): what tells one version of a file's bytes from another."""
    keys = [k for k in _IDENTITY_KEYS if info.get(k)]
    if not keys:
        keys = [k for k in _WEAK_KEYS if info.get(k)]
    lfs = info.get("lfs")
    marks = tuple((k, str(info[k])) for k in keys)
    if isinstance(lfs, dict) and lfs.get("sha256"):
        marks += (("lfs", str(lfs["sha256"])),)
    return int(info.get("size") or 0), marks


def _changed(seen: tuple, now: tuple) -> str:
    """'' when `now` is the same version as `seen`, else what differs."""
    if seen[0] != now[0]:
        return f"its size changed from {seen[0]} to {now[0]} bytes"
    a, b = dict(seen[1]), dict(now[1])
    for k in a:
        if k in b and a[k] != b[k]:
            return f"its {k} changed from {a[k]} to {b[k]}"
    return ""


def remember(url: str, info: dict) -> None:
    """Record the identity of `url` from a listing (the first one seen wins)."""
    if info.get("type", "file") == "file" and info.get("size") is not None:
        with _LOCK:
            _SEEN.setdefault(url, identity(info))


def _precondition_failed(e: BaseException) -> bool:
    # aiohttp gives the status; s3fs turns botocore's PreconditionFailed into an OSError
    # raised from it
    while e is not None:
        code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code") \
            if isinstance(getattr(e, "response", None), dict) else None
        if getattr(e, "status", None) == 412 or code == "PreconditionFailed":
            return True
        e = e.__cause__ or e.__context__
    return False


def _transient(e: BaseException) -> bool:
    if _precondition_failed(e):
        return False
    if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError, SourceError)):
        return False
    status = getattr(e, "status", None) or getattr(e, "code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
        return False
    return isinstance(e, Exception)


def describe(e: BaseException) -> str:
    """A one-line account of a read error (the exception's type and text, never its request)."""
    text = " ".join(str(e).split())
    name = type(e).__name__
    if name in ("TimeoutError", "ServerTimeoutError", "SocketTimeoutError") or \
            isinstance(e, TimeoutError):
        return f"timed out waiting for data ({name})"
    return f"{name}: {text[:200]}" if text else name


#: Protocols whose filesystem retries on its own (huggingface_hub backs off up to 5 times).
_RETRIED_BELOW = {"hf": 1}


def _retrying(url: str, what: str, call):
    delay = BACKOFF
    attempts = _RETRIED_BELOW.get(_protocol(url), ATTEMPTS)
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (FileNotFoundError, SourceError):
            raise
        except Exception as e:
            if not _transient(e) or attempt == attempts:
                if _precondition_failed(e):
                    raise SourceError(f"{url} changed during the scan (the server refused the "
                                      "version first seen: precondition failed)") from None
                raise SourceError(f"{url}: {what} failed after {attempt} attempt"
                                  f"{'s' if attempt > 1 else ''}: {describe(e)}") from None
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def info(url: str, fresh: bool = True) -> dict:
    """fsspec's info of `url` (with `fresh`, not from a listing cached by the filesystem)."""
    fs, path = filesystem(url)
    if fresh:
        fs.invalidate_cache(path)
    return _retrying(url, "stat", lambda: fs.info(path))


class RemoteFile:
    """A remote file open for positioned reads (`read_into`) of the version this process saw
    first. Where the protocol has a precondition (HTTP If-Match, S3 IfMatch / VersionId) every
    read carries it, and the server refuses a changed file; elsewhere the file's identity is
    checked again when the handle closes."""

    def __init__(self, url: str):
        self.url = url
        self.fs, self.path = filesystem(url)
        with _LOCK:
            first = _SEEN.get(url)
        if first is None:
            found = info(url)
            if found.get("type", "file") != "file":
                raise IsADirectoryError(f"{url} is a directory")
            with _LOCK:
                first = _SEEN.setdefault(url, identity(found))
        self.identity = first
        self.size = first[0]
        marks = dict(first[1])
        protocol = _protocol(url)
        self._fetch, self._checked = self._cat, False
        if protocol in ("http", "https") and marks.get("ETag"):
            self._kw, self._checked = {"headers": {"If-Match": marks["ETag"]}}, True
        elif protocol in ("s3", "s3a") and (marks.get("ETag") or marks.get("VersionId")):
            self._fetch, self._checked = self._s3, True
            self._kw = {"VersionId": marks["VersionId"]} if marks.get("VersionId") \
                else {"IfMatch": marks["ETag"]}
        else:
            self._kw = {}

    def _cat(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.path, start=start, end=end, **self._kw)

    def _s3(self, start: int, end: int) -> bytes:
        from fsspec.asyn import sync
        bucket, key, _ = self.fs.split_path(self.path)
        return sync(self.fs.loop, _s3_range, self.fs, bucket, key, start, end, self._kw)

    def read_into(self, view: memoryview, position: int) -> None:
        """Fill `view` from byte `position`; SourceError (naming the file) when the file ends
        first, changed, or the read keeps failing."""
        n = len(view)
        if position + n > self.size:
            raise SourceError(f"{self.url} ended at byte {self.size} while being read "
                              f"(bytes {position}..{position + n} asked)")

        def fetch():
            data = self._fetch(position, position + n)
            if len(data) > n:
                raise SourceError(f"{self.url}: the server sent {len(data)} bytes for a range "
                                  f"of {n} (it does not serve byte ranges?)")
            if len(data) != n:
                raise _ShortRead(f"short read: {len(data)} of {n} bytes at byte {position}")
            return data

        view[:] = _retrying(self.url, f"reading bytes {position}..{position + n}", fetch)

    def close(self) -> None:
        """SourceError when the file changed since it was first seen (checked here only where
        the reads carried no precondition)."""
        if not self._checked:
            change = _changed(self.identity, identity(info(self.url)))
            if change:
                raise SourceError(f"{self.url} changed during the scan ({change})")


async def _s3_range(fs, bucket: str, key: str, start: int, end: int, kw: dict) -> bytes:
    # s3fs's cat_file takes no precondition, so the GetObject is made here, through s3fs's own
    # client call (its credentials, retries and error translation)
    resp = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                             Range=f"bytes={start}-{end - 1}", **kw)
    body = resp["Body"]
    try:
        return await body.read()
    finally:
        body.close()


class _ShortRead(Exception):
    """A response with fewer (or more) bytes than the range asked (retried)."""


def listing(url: str) -> list:
    """(url, info) of every file under the directory or prefix `url`, sorted (their identities
    remembered); None when `url` is a file. FileNotFoundError when nothing is there."""
    fs, path = filesystem(url)
    found = _retrying(url, "stat", lambda: fs.info(path))
    # An HTTP server's folder is a page of links: a URL ending in / names one.
    folder = found.get("type") == "directory" or (
        url.endswith("/") and _protocol(url) in ("http", "https"))
    if not folder:
        remember(url, found)
        return None
    entries = _retrying(url, "listing", lambda: fs.find(path, detail=True, withdirs=False))
    out = []
    for name, entry in sorted(entries.items()):
        child = url_of(name, url)
        remember(child, entry)
        out.append((child, entry))
    return out

