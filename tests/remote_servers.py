"""Real servers on 127.0.0.1 for the remote-source tests: nginx serving a folder (range requests,
ETags, autoindex), a fault-injecting HTTP proxy in front of it, moto's S3 server and a minimal
Hugging Face Hub. Each is a context manager that starts on a free port and stops on exit."""

from __future__ import annotations

import contextlib
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


def write_json(path: str, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f)
