"""Real servers on 127.0.0.1 for the remote-source tests: nginx serving a folder (range requests,
ETags, autoindex), a fault-injecting HTTP proxy in front of it, moto's S3 server and a minimal
Hugging Face Hub. Each is a context manager that starts on a free port and stops on exit."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc=None, seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def nginx_missing() -> str:
    """'' when nginx can run here, else why not."""
    return "" if os.access(NGINX, os.X_OK) else f"nginx is not installed ({NGINX})"


@contextlib.contextmanager
def nginx(root: str):
    """nginx serving `root` at http://127.0.0.1:<port>/ (one process, as the current user);
    yields the base URL."""
    port = free_port()
    prefix = tempfile.mkdtemp(prefix="fpclass-nginx-")
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        autoindex on;
    }}
}}
""")
    proc = subprocess.Popen([NGINX, "-c", conf, "-p", prefix], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(prefix, ignore_errors=True)


class FaultProxy:
    """An HTTP proxy in front of `upstream` (host, port). Requests pass through unchanged, except
    ranged GETs whose first byte is at or past `from_byte` and that ask for more than
    `longer_than` bytes, while `fault` is set:
    "reset" (connection reset before any answer), "stall" (headers, then silence for `stall`
    seconds), "short" (the headers promise the whole range, half of it is sent, then the
    connection closes), "shrunk" (a 206 whose Content-Length and body are half the range),
    "replace" (the callable `on_replace` runs once, then the request passes: the file changes
    under the scan). `times` limits how many requests are hit (None: all)."""

    def __init__(self, upstream: tuple):
        self.upstream = upstream
        self.fault, self.from_byte, self.times, self.stall = "", 0, None, 5.0
        self.longer_than = 0
        self.on_replace = None
        self.hits = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                proxy._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _take(self, method: str, headers: dict) -> str:
        rng = headers.get("range", "")
        if method != "GET" or not rng.startswith("bytes=") or not self.fault:
            return ""
        first, _, last = rng[6:].partition("-")
        start = int(first or 0)
        length = int(last) + 1 - start if last else 1 << 62
        with self._lock:
            if start < self.from_byte or length <= self.longer_than or \
                    (self.times is not None and self.hits >= self.times):
                return ""
            self.hits += 1
        return self.fault

    def _handle(self, sock: socket.socket) -> None:
        with sock.makefile("rb") as f:
            self._serve(sock, f)

    def _serve(self, sock: socket.socket, f) -> None:
        while True:
            line = f.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers = {}
            while True:
                h = f.readline().decode("latin-1")
                if h in ("\r\n", "\n", ""):
                    break
                k, _, v = h.partition(":")
                headers[k.strip().lower()] = v.strip()
            fault = self._take(method, headers)
            if fault == "reset":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                sock.close()
                return
            if fault == "replace" and self.on_replace is not None:
                replace, self.on_replace = self.on_replace, None
                replace()
            conn = http.client.HTTPConnection(*self.upstream, timeout=30)
            conn.request(method, target, headers={k: v for k, v in headers.items()
                                                  if k not in ("connection", "host")})
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            out_headers = [(k, v) for k, v in resp.getheaders()
                           if k.lower() not in ("connection", "transfer-encoding",
                                                "content-length")]
            length = len(body) if method != "HEAD" else int(resp.getheader("content-length", 0))
            send = body
            if fault == "shrunk" and resp.status == 206:
                send = body[: len(body) // 2]
                length = len(send)
            elif fault in ("short", "stall"):
                send = body[: len(body) // 2]
            head = [f"HTTP/1.1 {resp.status} {resp.reason}"]
            head += [f"{k}: {v}" for k, v in out_headers]
            head += [f"Content-Length: {length}", "Connection: keep-alive", "", ""]
            try:
                sock.sendall("\r\n".join(head).encode("latin-1") + (send if method != "HEAD"
                                                                    else b""))
                if fault == "stall":
                    time.sleep(self.stall)
                if fault in ("short", "stall"):
                    sock.close()
                    return
            except OSError:
                return


@contextlib.contextmanager
def moto_s3():
    """moto's S3 server on 127.0.0.1; yields (endpoint URL, storage_options for s3fs)."""
    from moto.server import ThreadedMotoServer
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        _wait_port(port)
        endpoint = f"http://127.0.0.1:{port}"
        yield endpoint, {"key": "testing-key-id", "secret": "testing-secret-value",
                         "endpoint_url": endpoint}
    finally:
        server.stop()


def found_by_file(report, base: str) -> dict:
    """{file name below `base` (a prefix of every file): {tensor: (nan, posinf, neginf)}}."""
    out: dict = {}
    for t in report.tensors:
        assert t.file.startswith(base), t.file
        out.setdefault(t.file[len(base):], {})[t.name] = (t.nan, t.posinf, t.neginf)
    return out


def write_json(path: str, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f)


class HubServer:
    """A minimal Hugging Face Hub on 127.0.0.1 for HfFileSystem (HF_ENDPOINT pointed at `url`):
    repo_info (/api/models/{repo}/revision/{rev}), the tree listing
    (/api/models/{repo}/tree/{rev}[/{path}]), paths-info, and /{repo}/resolve/{rev}/{path} with
    ranges. `repos` maps "org/name" to {path in repo: bytes}; any revision name serves them."""

    SHA = "0123456789abcdef0123456789abcdef01234567"

    def __init__(self, repos: dict):
        import http.server
        import urllib.parse
        hub = self
        self.repos = repos
        self.requests: list = []
        self.authorizations: set = set()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body=b"", headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _json(self, doc):
                self._send(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])

            def _missing(self):
                self._send(404, b'{"error": "Entry not found"}',
                           [("Content-Type", "application/json"),
                            ("X-Error-Code", "EntryNotFound")])

            def do_HEAD(self):
                self.do_GET()

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(n).decode())
                parts = urllib.parse.urlsplit(self.path).path.split("/")
                # /api/models/{org}/{name}/paths-info/{rev}
                hub.requests.append(("POST", self.path))
                repo = hub.repos.get(f"{parts[3]}/{parts[4]}")
                if parts[5] != "paths-info" or repo is None:
                    return self._missing()
                self._json([e for p in form.get("paths", [])
                            for e in hub.entries(repo, p, exact=True)])

            def do_GET(self):
                split = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(split.query)
                parts = [urllib.parse.unquote(p) for p in split.path.split("/")]
                hub.requests.append((self.command, self.path, self.headers.get("Range")))
                hub.authorizations.add(self.headers.get("Authorization"))
                if parts[1:3] == ["api", "models"]:
                    repo = hub.repos.get(f"{parts[3]}/{parts[4]}")
                    if repo is None:
                        return self._send(404, b'{"error": "Repository not found"}',
                                          [("X-Error-Code", "RepoNotFound")])
                    if len(parts) < 6 or parts[5] == "revision":
                        return self._json({"id": f"{parts[3]}/{parts[4]}", "sha": hub.SHA,
                                           "siblings": [{"rfilename": p} for p in repo]})
                    if parts[5] == "tree":
                        inside = "/".join(parts[7:]).strip("/")
                        recursive = query.get("recursive", ["False"])[0].lower() == "true"
                        return self._json(hub.entries(repo, inside, recursive=recursive))
                    return self._missing()
                # /{org}/{name}/resolve/{rev}/{path}
                if len(parts) > 5 and parts[3] == "resolve":
                    repo = hub.repos.get(f"{parts[1]}/{parts[2]}")
                    data = None if repo is None else repo.get("/".join(parts[5:]))
                    if data is None:
                        return self._missing()
                    head = [("ETag", f'"{hashlib.sha256(data).hexdigest()}"'),
                            ("X-Repo-Commit", hub.SHA), ("Accept-Ranges", "bytes")]
                    rng = self.headers.get("Range")
                    if rng and rng.startswith("bytes="):
                        a, _, b = rng[6:].partition("-")
                        a, b = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
                        return self._send(206, data[a:b + 1], head + [
                            ("Content-Range", f"bytes {a}-{b}/{len(data)}")])
                    return self._send(200, data, head)
                return self._missing()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def entries(self, repo: dict, inside: str, recursive: bool = False, exact: bool = False):
        """Tree entries (the Hub's JSON) of folder `inside` of `repo`, or of the path itself."""
        out, folders = [], set()
        for path in sorted(repo):
            data = repo[path]
            if exact:
                if path == inside:
                    out.append(self._file(path, data))
                elif path.startswith(inside + "/"):
                    folders.add(inside)
                continue
            if inside and not path.startswith(inside + "/"):
                continue
            rest = path[len(inside) + 1:] if inside else path
            if "/" in rest and not recursive:
                folders.add((inside + "/" if inside else "") + rest.split("/")[0])
                continue
            if recursive:
                bits = rest.split("/")
                for k in range(1, len(bits)):
                    folders.add((inside + "/" if inside else "") + "/".join(bits[:k]))
            out.append(self._file(path, data))
        out += [{"type": "directory", "path": f, "oid": hashlib.sha1(f.encode()).hexdigest()}
                for f in sorted(folders)]
        return out

    @staticmethod
    def _file(path: str, data: bytes) -> dict:
        sha = hashlib.sha256(data).hexdigest()
        return {"type": "file", "path": path, "size": len(data),
                "oid": hashlib.sha1(data).hexdigest(),
                "lfs": {"oid": sha, "size": len(data), "pointerSize": 134}}

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
