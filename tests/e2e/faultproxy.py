"""A fault-injecting HTTPS proxy on loopback, between one kaid and the API server.

It terminates TLS with a certificate of the cluster's CA (so kaid's kubeconfig only changes its ``server``),
forwards each request over its own TLS connection to the API server (the bearer token passes through), and
streams the answer back, watches included. Rules make it answer chosen requests itself (``429`` with a
``Retry-After``, ``500``, or a watch ``ERROR`` event of ``410 Gone``); ``partition`` makes it a black hole:
open streams are cut, new requests are held unanswered until ``heal``, then dropped without being forwarded
(as packets lost on a cut link are). Every request is logged with its time, so a test can tell what a kaid
sent and when.

    with FaultProxy(cp) as proxy:
        kubeconfig = proxy.kubeconfig(kai.kubeconfig)
        proxy.add(Rule("POST", r"/binding$", status=429, every=2))
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from .controlplane import ControlPlane

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "te",
               "trailer", "upgrade"}


@dataclass
class Rule:
    """Answer matching requests with ``status`` instead of forwarding them.

    ``every``: only every n-th match (1: all); ``limit``: at most this many answers (None: no limit).
    ``status == 410`` on a watch answers 200 with one ``ERROR`` event of code 410 (how the API server says a
    watch has expired), then ends the stream."""

    method: str
    path: str  # a regular expression searched in the path (without the query)
    status: int
    every: int = 1
    limit: int | None = None
    retry_after: int | None = None
    watch: bool | None = None  # only watches (True), only other requests (False), both (None)
    matched: int = 0
    answered: int = 0

    def applies(self, method: str, path: str, watch: bool) -> bool:
        if method != self.method or not re.search(self.path, path):
            return False
        if self.watch is not None and self.watch != watch:
            return False
        if self.limit is not None and self.answered >= self.limit:
            return False
        self.matched += 1
        if self.matched % self.every:
            return False
        self.answered += 1
        return True


@dataclass(frozen=True)
class Logged:
    at: float  # time.monotonic()
    method: str
    path: str
    status: int  # the answer's status; 0 when nothing was answered (dropped)
    injected: bool


@dataclass
class FaultProxy:
    cp: ControlPlane
    rules: list[Rule] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)
    port: int = 0
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _partitioned: threading.Event = field(default_factory=threading.Event)
    _healed: threading.Event = field(default_factory=threading.Event)
    _streams: set[socket.socket] = field(default_factory=set)

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FaultProxy:
        ca = self.cp._ca
        assert ca is not None, "the control plane is not started"
        pair = ca.issue(f"fault-proxy-{id(self)}", common_name="fault-proxy", server=True,
                        dns_names=["localhost"], ips=["127.0.0.1"])
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(str(pair.cert), str(pair.key))
        upstream_ctx = ssl.create_default_context(cafile=str(self.cp.ca_file))
        proxy = self

        class Handler(_Handler):
            owner = proxy
            upstream = upstream_ctx

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.socket = server_ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(target=server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.heal()
        self.cut()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def kubeconfig(self, original: Path) -> Path:
        """A copy of ``original`` whose cluster is reached through this proxy."""
        cfg = yaml.safe_load(original.read_text())
        for cluster in cfg["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path = original.with_name(f"{original.stem}-proxy-{self.port}.kubeconfig")
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        path.chmod(0o600)
        return path

    # -- faults ---------------------------------------------------------------------------------

    def add(self, *rules: Rule) -> None:
        with self._lock:
            self.rules.extend(rules)

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def partition(self) -> None:
        """From now on nothing passes: open streams are cut, new requests wait unanswered."""
        self._healed.clear()
        self._partitioned.set()
        self.cut()

    def heal(self) -> None:
        """Let traffic pass again; the requests held meanwhile are dropped (their connections closed)."""
        self._partitioned.clear()
        self._healed.set()

    def cut(self) -> None:
        """Close every stream in progress (watches): the client sees its connection drop."""
        with self._lock:
            streams = list(self._streams)
        for sock in streams:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def sent(self, method: str, pattern: str, since: float = 0.0) -> list[Logged]:
        """Requests forwarded (or answered here) since ``since`` whose path matches ``pattern``."""
        with self._lock:
            return [e for e in self.log if e.method == method and e.at >= since and re.search(pattern, e.path)]

    def _record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def _rule(self, method: str, path: str, watch: bool) -> Rule | None:
        with self._lock:
            return next((r for r in self.rules if r.applies(method, path, watch)), None)


class _Handler(BaseHTTPRequestHandler):
    owner: FaultProxy
    upstream: ssl.SSLContext
    protocol_version = "HTTP/1.1"
    timeout = 600

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self._conn: http.client.HTTPSConnection | None = None
        with contextlib.suppress(OSError, ssl.SSLError):
            self.connection.do_handshake()

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        if self._conn is not None:
            self._conn.close()

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        path, _, query = self.path.partition("?")
        watch = "watch=1" in query or "watch=true" in query
        if owner._partitioned.is_set():
            owner._healed.wait(600)
            owner._record(Logged(time.monotonic(), self.command, path, 0, True))
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        rule = owner._rule(self.command, path, watch)
        if rule is not None:
            self._inject(rule, path, watch)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "host"}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        try:
            if self._conn is None:
                self._conn = http.client.HTTPSConnection("127.0.0.1", owner.cp.ports["apiserver"],
                                                         context=self.upstream, timeout=600)
            self._conn.request(self.command, self.path, body=body, headers=headers)
            resp = self._conn.getresponse()
        except (OSError, http.client.HTTPException):
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            owner._record(Logged(time.monotonic(), self.command, path, 0, False))
            self.close_connection = True
            return
        owner._record(Logged(time.monotonic(), self.command, path, resp.status, False))
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP_BY_HOP:
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        upstream_sock = self._conn.sock
        with owner._lock:
            owner._streams.add(self.connection)
            if upstream_sock is not None:
                owner._streams.add(upstream_sock)
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    resp.close()  # read whole: the upstream connection takes the next request
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, http.client.HTTPException, ValueError):
            self.close_connection = True
            self._conn.close()
            self._conn = None
        finally:
            with owner._lock:
                owner._streams.discard(self.connection)
                if upstream_sock is not None:
                    owner._streams.discard(upstream_sock)
        if resp.will_close and self._conn is not None:
            self._conn.close()
            self._conn = None

    def _inject(self, rule: Rule, path: str, watch: bool) -> None:
        self.owner._record(Logged(time.monotonic(), self.command, path, rule.status, True))
        if rule.status == 410 and watch:
            event = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                 "message": "too old resource version (injected)",
                                                 "reason": "Expired", "code": 410}}
            data = json.dumps(event).encode() + b"\n"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 410: "Expired"}.get(
            rule.status, "Injected")
        status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": rule.status,
                                  "reason": reason, "message": f"injected by the fault proxy ({rule.status})"}
        if rule.retry_after is not None:  # as the API server says it, in the body too
            status["details"] = {"retryAfterSeconds": rule.retry_after}
        data = json.dumps(status).encode()
        self.send_response(rule.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if rule.retry_after is not None:
            self.send_header("Retry-After", str(rule.retry_after))
        self.end_headers()
        self.wfile.write(data)
