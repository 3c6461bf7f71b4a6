"""A small Kubernetes REST client that keeps raw JSON dicts, over HTTP/1.1 connections of its own (``_Connection``):
requests, and lists and watches, whose answers stream.

The generated client models of the ``kubernetes`` package are too slow for a scheduler's hot path; its
config loaders are still used to read a kubeconfig or the in-cluster service account. Every request
goes through one token bucket (client QPS and burst).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, AnyStr
from urllib.parse import quote, urlencode, urlsplit

import orjson

from kaid.kube.auth import Auth, AuthError

Obj = dict[str, Any]
log = logging.getLogger("kaid.kube.client")
# Connections kept open to the API server. kaid's one client has, at once, a watch per informer (up to 18, each held
# for minutes), its bind workers (up to 32: kaid.kube.actuator.bind_workers) and a few more (leader election, reads); a
# connection handed back beyond this many is closed (urllib3, which served lists and watches before, warned "Connection
# pool is full, discarding connection" 13-14 times per bench_kube run at 32), and later requests pay a new TLS
# handshake.
POOL_CONNECTIONS = 64


class ApiError(Exception):
    def __init__(self, status: int, reason: str, body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body or {}

    @property
    def message(self) -> str:
        return str(self.body.get("message") or self.reason)


class RateLimiter:
    """Token bucket: ``qps`` tokens per second, at most ``burst`` saved."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
                self.last = now
                if self.tokens >= 1 - 1e-9:  # (a refill of exactly one token may round below it)
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.qps
            time.sleep(wait)

    def try_take(self) -> float:
        """A token now (0.0), else how long until one is due (nothing taken): ``take`` for a thread that may not
        sleep."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
            self.last = now
            if self.tokens >= 1 - 1e-9:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.qps

    def configure(self, qps: float, burst: int) -> None:
        """New limits (``kaid run`` sends its lists before it has read its config): what was taken so far counts
        against the new burst."""
        with self.lock:
            now = time.monotonic()
            tokens = min(self.burst, self.tokens + (now - self.last) * self.qps) + burst - self.burst
            self.tokens = max(0.0, min(float(burst), tokens))
            self.last = now
            self.qps, self.burst = qps, burst


def parse_head(head: bytes) -> tuple[int, str, int | str, bool]:
    """The head of an answer (up to its empty line, not included): status, reason, how its body comes (``"chunked"``,
    its length, ``"to-end"`` of the connection, or ``"none"``) and whether the connection may serve another once the
    body is read."""
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    status = int(code)
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    keep = version == b"HTTP/1.1" and headers.get(b"connection", b"").lower() != b"close"
    if status < 200:
        raise ValueError(f"the API server answered {status} {reason!r}, an interim answer never asked for")
    framing: int | str
    if status in (204, 304):
        framing = "none"
    elif b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        framing = "chunked"
    elif b"content-length" in headers:
        framing = int(headers[b"content-length"])
    else:
        framing, keep = "to-end", False
    return status, reason.decode("latin-1"), framing, keep


def parse_answer(buf: bytes, ended: bool) -> tuple[int, str, bytes, bool, bytes] | None:
    """A whole answer at the start of ``buf`` (``ended``: the connection has closed after it): status, reason, body,
    whether the connection may serve another, and the bytes after it; None while it is not all in. For a reader
    that waits for many connections at once (``kaid.kube.sender``), where ``_Connection`` blocks on one."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if ended:
            raise ConnectionError("the API server closed the connection without a whole answer")
        return None
    status, reason, framing, keep = parse_head(buf[:end])
    pos = end + 4
    if framing == "none":
        return status, reason, b"", keep, buf[pos:]
    if isinstance(framing, int):
        if len(buf) - pos < framing:
            if ended:
                raise ConnectionError("the API server closed the connection without a whole answer")
            return None
        return status, reason, buf[pos:pos + framing], keep, buf[pos + framing:]
    if framing == "to-end":
        return (status, reason, buf[pos:], False, b"") if ended else None
    parts: list[bytes] = []
    while True:  # chunked: every chunk in, then the trailers up to an empty line
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            break
        size = int(buf[pos:line_end].split(b";", 1)[0], 16)
        pos = line_end + 2
        if not size:
            while (line_end := buf.find(b"\r\n", pos)) >= 0:
                line, pos = buf[pos:line_end], line_end + 2
                if not line:
                    return status, reason, b"".join(parts), keep, buf[pos:]
            break
        if len(buf) - pos < size + 2:
            break
        parts.append(buf[pos:pos + size])
        pos += size + 2
    if ended:
        raise ConnectionError("the API server closed the connection without a whole answer")
    return None


class _Connection:
    """One HTTP/1.1 connection to the API server, kept open from one request to the next (``KubeClient.request``):
    the request goes out in one write and the answer is read with little more than a search for its end. urllib3
    (which kaid used before) spends three to four times the CPU per request: 1.0-1.2 ms against 0.27-0.29 ms a bind,
    32 threads binding 1,000 pods; bench_kube's backlog is 4,000 binds on 2 CPUs that the API server needs. Answers
    come with a Content-Length, chunked, or until the connection ends; a list's or a watch's is read as it arrives
    (``begin``, ``pieces``)."""

    def __init__(self, sock: socket.socket, generation: int) -> None:
        self.sock = sock
        self.generation = generation  # of the client's credentials when it was made (a new certificate: a new one)
        self.buf = b""
        self.gather = 0.0  # while a watch is read with ``gather`` (``KubeClient.watch``): see ``_recv``
        self.last_read = 0.0  # (time.monotonic) when a read last returned

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def dropped(self) -> bool:
        """The server closed it (or wrote unasked) while it was idle."""
        if self.buf:
            return True
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def exchange(self, request: bytes, timeout: float) -> tuple[int, str, bytes, bool]:
        """Send ``request``: the answer's status, reason, body, and whether the connection may serve another."""
        status, reason, framing, keep = self.begin(request, timeout)
        if framing == "chunked":
            body = self._chunked()
        elif isinstance(framing, int):
            body = self._exactly(framing)
        elif framing == "to-end":
            body = self._to_end()
        else:
            body = b""
        return status, reason, body, keep

    def begin(self, request: bytes, timeout: float) -> tuple[int, str, int | str, bool]:
        """Send ``request`` and read the head of its answer: status, reason, how its body comes (``"chunked"``, its
        length, ``"to-end"`` of the connection, or ``"none"``) and whether the connection may serve another once
        the body is read. ``timeout``: for each read."""
        self.sock.settimeout(timeout)
        self.sock.sendall(request)
        return parse_head(self._until(b"\r\n\r\n"))

    def pieces(self, framing: int | str) -> Iterator[bytes]:
        """The body of the answer ``begin`` read the head of, in pieces as they arrive (a watch's events as the
        server sends them; a list's items while the server still encodes the rest)."""
        if framing == "chunked":
            yield from self._chunks()
        elif isinstance(framing, int):
            yield from self._upto(framing)
        elif framing == "to-end":
            yield self._to_end()

    def _chunks(self) -> Iterator[bytes]:
        """A chunked body's chunks, each whole when it is all in (a watch's event is one chunk), else in the pieces
        it arrives in. Read from the buffer at an offset: a loaded reader finds many events in one read, and
        cutting the buffer's head off per chunk copied the rest of it each time."""
        buf, pos = self.buf, 0
        try:
            while True:
                while (end := buf.find(b"\r\n", pos)) < 0:
                    if len(buf) - pos > 1 << 20:
                        raise ValueError("an answer of the API server with a chunk size line that never ends")
                    buf, pos = buf[pos:] + self._recv(), 0
                size = int(buf[pos:end].split(b";", 1)[0], 16)
                pos = end + 2
                if not size:
                    break
                while size:
                    if pos >= len(buf):
                        buf, pos = self._recv(), 0
                    take = min(size, len(buf) - pos)
                    piece = buf[pos:pos + take]
                    pos += take
                    size -= take
                    yield piece
                while len(buf) - pos < 2:  # the chunk's CRLF
                    buf, pos = buf[pos:] + self._recv(), 0
                pos += 2
            while True:  # trailers, up to an empty line
                while (end := buf.find(b"\r\n", pos)) < 0:
                    buf, pos = buf[pos:] + self._recv(), 0
                line, pos = buf[pos:end], end + 2
                if not line:
                    break
        finally:
            self.buf = buf[pos:]

    def _recv(self) -> bytes:
        if self.gather and time.monotonic() - self.last_read < self.gather and not self._waiting():
            time.sleep(self.gather)  # (a watch whose events come often: see KubeClient.watch)
        chunk = self.sock.recv(65536)
        self.last_read = time.monotonic()
        if not chunk:
            raise ConnectionError("the API server closed the connection without a whole answer")
        return chunk

    def _waiting(self) -> bool:
        """Bytes have come that a read would return now."""
        sock = self.sock
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        try:
            return bool(select.select([sock], [], [], 0)[0])
        except (OSError, ValueError, TypeError):
            return True  # (the read says what is wrong)

    def _upto(self, size: int) -> Iterator[bytes]:
        """The next ``size`` bytes, in the pieces they arrive in."""
        while size:
            if not self.buf:
                self._fill()
            piece, self.buf = self.buf[:size], self.buf[size:]
            size -= len(piece)
            yield piece

    def _fill(self) -> None:
        self.buf += self._recv()

    def _until(self, mark: bytes) -> bytes:
        while (end := self.buf.find(mark)) < 0:
            if len(self.buf) > 1 << 20:
                raise ValueError("an answer of the API server without the end of its head")
            self._fill()
        out, self.buf = self.buf[:end], self.buf[end + len(mark):]
        return out

    def _exactly(self, size: int) -> bytes:
        while len(self.buf) < size:
            self._fill()
        out, self.buf = self.buf[:size], self.buf[size:]
        return out

    def _chunked(self) -> bytes:
        return b"".join(self._chunks())

    def _to_end(self) -> bytes:
        parts = [self.buf]
        self.buf = b""
        while chunk := self.sock.recv(65536):
            parts.append(chunk)
        return b"".join(parts)


class KubeClient:
    def __init__(self, host: str, *, ca_file: str | None = None, cert_file: str | None = None,
                 key_file: str | None = None, token: str | None = None, verify: bool = True,
                 qps: float = 50.0, burst: int = 100, auth: Auth | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host = host.rstrip("/")
        self.auth = auth if auth is not None else Auth(token)
        self._ca, self._cert, self._key, self._verify = ca_file, cert_file, key_file, verify
        self._ssl = ssl_context
        self._ca_pem: bytes | None = None  # kept for an exec plugin's new client certificates (the file may be gone)
        if ca_file and verify:
            with contextlib.suppress(OSError):  # (unreadable: _tls_context says so)
                self._ca_pem = Path(ca_file).read_bytes()
        self._tls_generation = -1
        self._tls_lock = threading.Lock()
        self._load_tls()
        self.limiter = RateLimiter(qps, burst)
        url = urlsplit(self.host)
        self._tls = url.scheme == "https"
        self._address = (url.hostname or "localhost", url.port or (443 if self._tls else 80))
        self._prefix = url.path.rstrip("/")  # a server behind a path (a proxy's)
        self._head_fields = f"Host: {url.netloc}\r\nUser-Agent: kaid/0.1\r\nAccept: application/json\r\n"
        self._idle: list[_Connection] = []  # kept connections for requests (``request``), the last used on top
        self._idle_lock = threading.Lock()

    def _load_tls(self) -> None:
        """The TLS context of new connections: made from the kubeconfig's files once, and again when an exec plugin
        hands out a new client certificate (``Auth.tls``; connections of an older one are not used again)."""
        pem = self.auth.tls()
        self._tls_generation = self.auth.generation
        if pem is not None:
            self._ssl = _tls_context_pem(self._ca_pem, self._ca, pem, self._verify)
        elif self._ssl is None:
            self._ssl = _tls_context(self._ca, self._cert, self._key, self._verify)

    def _current_tls(self) -> None:
        if self.auth.generation != self._tls_generation:
            with self._tls_lock:
                if self.auth.generation != self._tls_generation:
                    self._load_tls()

    def with_limits(self, qps: float, burst: int) -> KubeClient:
        """The same identity (and credentials, reloaded together) with its own connections and rate limit (for status
        and events, so they never hold up binds)."""
        twin = KubeClient(self.host, ca_file=None, cert_file=self._cert, key_file=self._key, verify=self._verify,
                          qps=qps, burst=burst, auth=self.auth, ssl_context=self._ssl)
        twin._ca, twin._ca_pem = self._ca, self._ca_pem
        return twin

    def close(self) -> None:
        """Close the idle connections (temporary key and certificate files were removed once loaded)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    @classmethod
    def from_config(cls, kubeconfig: str | None = None, context: str | None = None, qps: float = 50.0,
                    burst: int = 100) -> KubeClient:
        """A kubeconfig file (or $KUBECONFIG, ~/.kube/config), else the in-cluster service account."""
        from kaid.kube.kubeconfig import NeedsPlugin, from_kubeconfig, in_cluster

        try:
            creds = from_kubeconfig(kubeconfig, context)
        except NeedsPlugin:
            return cls._with_plugins(kubeconfig, context, qps, burst)
        except (FileNotFoundError, ValueError, KeyError, OSError) as err:
            if kubeconfig or isinstance(err, ValueError):
                raise ValueError(f"cannot load kubeconfig {kubeconfig or ''}: {err}".replace("  ", " ")) from None
            try:
                creds = in_cluster()
            except (FileNotFoundError, OSError):
                raise ValueError(f"{err} and not running in a cluster: pass --kubeconfig") from None
        try:  # the TLS context loads the files once: temporary ones go at once
            return cls(creds.host, ca_file=creds.ca_file, cert_file=creds.cert_file, key_file=creds.key_file,
                       verify=creds.verify, qps=qps, burst=burst, auth=creds.auth())
        finally:
            creds.remove_temp_files()

    @classmethod
    def _with_plugins(cls, kubeconfig: str | None, context: str | None, qps: float, burst: int) -> KubeClient:
        """Legacy auth-provider plugins: the kubernetes package knows how to run them (its token is not renewed)."""
        from kubernetes import client as kclient
        from kubernetes import config as kconfig

        cfg = kclient.Configuration()
        kconfig.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=cfg)
        auth = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
        token = auth.removeprefix("Bearer ").strip() if auth else None
        return cls(cfg.host, ca_file=cfg.ssl_ca_cert, cert_file=cfg.cert_file, key_file=cfg.key_file, token=token,
                   verify=cfg.verify_ssl, qps=qps, burst=burst)

    def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
                content_type: str | None = None, timeout: float = 30.0) -> Obj:
        """One request and its answer decoded, over a kept connection (``_Connection``); ApiError from 400 on."""
        target = path + (("?" + urlencode(params)) if params else "")
        data = None if body is None else dumps(body)
        ctype = content_type or ("application/json" if body is not None else None)
        status, reason, answer = self._exchange(method, target, data, ctype, timeout)
        if status >= 400:
            raise _error(status, reason, answer)
        try:
            return loads(answer) if answer else {}
        except ValueError:
            return {"message": answer[:500].decode(errors="replace")}

    def _exchange(self, method: str, target: str, body: bytes | None, content_type: str | None,
                  timeout: float) -> tuple[int, str, bytes]:
        """Status, reason and body of one request with the current credentials; after a 401, fresh credentials
        and, when they differ, the request once more."""
        for attempt in (0, 1):
            token = self._credentials()
            request = self._head(method, target, body, content_type, token) + (body or b"")
            status, reason, answer = self._over_connection(request, timeout)
            if status != 401 or attempt == 1 or not self._fresh_credentials(token, method, target):
                return status, reason, answer
        raise AssertionError("unreachable")

    def _credentials(self) -> str | None:
        """A token of the rate limit, then the bearer token to send (None: none) with the TLS context current."""
        self.limiter.take()
        try:
            token = self.auth.token()
            self._current_tls()  # the TLS context of the current client certificate
        except AuthError as err:  # an exec plugin that fails now: this request cannot be authenticated
            raise ApiError(401, "Unauthorized", {"message": str(err)}) from None
        return token

    def _head(self, method: str, target: str, body: bytes | None, content_type: str | None,
              token: str | None) -> bytes:
        head = f"{method} {self._prefix}{target} HTTP/1.1\r\n{self._head_fields}"
        if content_type:
            head += f"Content-Type: {content_type}\r\n"
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body or b'')}\r\n"
        if token:
            head += f"Authorization: Bearer {token}\r\n"
        return (head + "\r\n").encode()

    def _fresh_credentials(self, token: str | None, method: str, target: str) -> bool:
        """After a 401: whether fresh credentials differ from ``token`` (then the request goes once more)."""
        try:
            fresh = self.auth.refresh(token)
        except AuthError as err:
            log.warning("%s %s: 401 Unauthorized, and no fresh credentials: %s", method, target.split("?", 1)[0], err)
            return False
        if fresh:
            log.info("%s %s: 401 Unauthorized; sent again with fresh credentials", method, target.split("?", 1)[0])
        return bool(fresh)

    def _stream(self, target: str, timeout: float, gather: float = 0.0) -> Iterator[bytes]:
        """GET ``target`` (a list or a watch) over a kept connection, or a new one: the pieces of the answer's body as
        they arrive; ApiError from 400 on; after a 401, as ``_exchange``. ``timeout``: for each read. The connection
        is kept for another request once the whole answer is read, closed if the reader stops before. ``gather``:
        see ``watch``."""
        for attempt in (0, 1):
            token = self._credentials()
            request = self._head("GET", target, None, None, token)
            conn = self._checkout()
            whole = keep = False
            try:
                status, reason, framing, keep = conn.begin(request, timeout)
                if status < 400:
                    conn.gather = gather
                    yield from conn.pieces(framing)
                    whole = True
                    return
                answer = b"".join(conn.pieces(framing))
                whole = True
            finally:
                conn.gather = 0.0
                if whole and keep:
                    self._checkin(conn)
                else:
                    conn.close()
            if status == 401 and attempt == 0 and self._fresh_credentials(token, "GET", target):
                continue
            raise _error(status, reason, answer)
        raise AssertionError("unreachable")

    def _over_connection(self, request: bytes, timeout: float) -> tuple[int, str, bytes]:
        """``request`` over a kept connection (one the server closed meanwhile is not used), or a new one. A
        connection that fails is not tried again here: the server may have read the request (the caller decides,
        as the actuator does, whether it may still send it)."""
        conn = self._checkout()
        try:
            status, reason, answer, keep = conn.exchange(request, timeout)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._checkin(conn)
        else:
            conn.close()
        return status, reason, answer

    def _checkout(self) -> _Connection:
        while True:
            with self._idle_lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect()
            if conn.generation == self._tls_generation and not conn.dropped():
                return conn
            conn.close()

    def _checkin(self, conn: _Connection) -> None:
        with self._idle_lock:
            if len(self._idle) < POOL_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self) -> _Connection:
        sock = socket.create_connection(self._address, timeout=10.0)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls:
                assert self._ssl is not None
                sock = self._ssl.wrap_socket(sock, server_hostname=self._address[0])
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, self._tls_generation)

    def get(self, path: str, retries: int = 4, **params: Any) -> Obj:
        """GET, retried on what passes: 429, 5xx (a CRD's storage initialising) and dropped connections."""
        delay = 0.25
        for attempt in range(retries + 1):
            try:
                return self.request("GET", path, params=params or None)
            except ApiError as err:
                if attempt == retries or not (err.status == 429 or err.status >= 500):
                    raise
            except OSError:  # (a dropped connection, a timeout)
                if attempt == retries:
                    raise
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def list(self, path: str, on_item: Callable[[Obj], None], timeout: float = 120.0, **params: Any) -> Obj:
        """GET a collection, handing each item to ``on_item`` as soon as its bytes have arrived (so the
        decoding overlaps the server's streaming of the rest); returns the list without ``items``. Items come
        without ``metadata.managedFields`` (see ``without_managed_fields``)."""
        decoder = ListDecoder(on_item)
        for piece in self._stream(path + (("?" + urlencode(params)) if params else ""), timeout):
            decoder.feed(piece)
        return decoder.close()

    def create(self, path: str, obj: Obj) -> Obj:
        return self.request("POST", path, obj)

    def merge_patch(self, path: str, patch: Obj) -> Obj:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def strategic_patch(self, path: str, patch: Obj) -> Obj:
        return self.request("PATCH", path, patch, content_type="application/strategic-merge-patch+json")

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
              gather: float = 0.0) -> Generator[Obj, None, None]:
        """Events of a watch from ``resource_version``; ends when the server closes the stream. Objects come
        without ``metadata.managedFields``, as a list's items do. ``gather``: a read within this many seconds of the
        last one (the events come often) waits this long first, unless bytes are there already, so that it takes
        what came meanwhile at once: while events come often they are seen up to this much later, after a quiet
        spell at once (see ``kaid.kube.cache.WATCH_GATHER_S``)."""
        params = {"watch": "1", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(timeout_seconds)}
        rest = b""  # the start of an event whose end has not come yet
        for piece in self._stream(f"{path}?{urlencode(params)}", timeout_seconds + 30, gather):
            if rest:  # (as a rule each piece is one whole event: an HTTP chunk, which the API server writes per event)
                piece, rest = rest + piece, b""
            start = 0
            while (end := piece.find(b"\n", start)) >= 0:
                line = piece[start:end]
                start = end + 1
                if line.strip():  # cut and decoded as bytes: orjson reads UTF-8 itself
                    event = loads(without_managed_fields(line))
                    _drop_managed_fields(event.get("object"))
                    yield event
            if start < len(piece):
                rest = piece[start:]


def _tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool) -> ssl.SSLContext:
    """One TLS context for every connection of a client, its CA and client certificate loaded once (a starting kaid
    opens about 40 connections at once, a list and a watch per resource; with a context per connection, reading the
    files again was a quarter of their threads' time). urllib3's settings: TLS 1.2 at least, no compression, no
    session tickets, the host name checked (not the subject's common name) when the certificate is."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_TICKET
    ctx.post_handshake_auth = True
    ctx.check_hostname = verify
    ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    ctx.hostname_checks_common_name = False
    try:
        if verify:
            if ca_file:
                ctx.load_verify_locations(cafile=ca_file)
            else:
                ctx.load_default_certs()
        if cert_file:
            ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:  # (SSLError is an OSError; named for the reader)
        files = ", ".join(f for f in (ca_file, cert_file, key_file) if f) or "the system's CA certificates"
        raise ValueError(f"cannot load the TLS files of the kubeconfig ({files}): {err.strerror or err}; "
                         "check the certificate-authority and client-certificate paths") from None
    return ctx


def _tls_context_pem(ca_pem: bytes | None, ca_file: str | None, pem: tuple[bytes, bytes],
                     verify: bool) -> ssl.SSLContext:
    """A TLS context with a client certificate and key given as PEM (an exec plugin's): written to private
    temporary files for OpenSSL to load, removed at once; the CA from memory when it was read before."""
    from kaid.kube.kubeconfig import remove_files, write_temp

    files = [write_temp(pem[0], ".crt"), write_temp(pem[1], ".key")]
    if ca_pem is not None:
        files.append(write_temp(ca_pem, ".crt"))
        ca_file = files[2]
    try:
        return _tls_context(ca_file, files[0], files[1], verify)
    finally:
        remove_files(files)


def loads(text: str | bytes) -> Any:
    """JSON text -> Python, with orjson (a third less time than ``json`` on a large list); ``json`` for what
    orjson refuses and Python's parser takes (lone surrogates in strings). orjson reads an integer beyond 64
    bits as a float: the API server never writes one (Go decodes JSON integers into int64)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def dumps(obj: Any) -> bytes:
    """Python -> JSON bytes, with orjson; ``json`` for what orjson refuses (keys that are not strings, integers
    beyond 64 bits)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj).encode()


def _error(status: int, reason: str, answer: bytes) -> ApiError:
    """The ApiError of an answer from 400 on (its body: a Status object, as a rule)."""
    try:
        payload = loads(answer) if answer else {}
    except ValueError:
        payload = {"message": answer[:500].decode(errors="replace")}
    return ApiError(status, str(payload.get("reason") or reason), payload)


# the marks ``without_managed_fields`` looks for, in text and in bytes (a watch's events are cut before decoding)
_MARKS: dict[type, tuple[Any, Any, Any, Any]] = {str: (',"managedFields":[', '"spec":', ']},', '['),
                                                 bytes: (b',"managedFields":[', b'"spec":', b']},', b'[')}


def without_managed_fields(text: AnyStr) -> AnyStr:
    """``text`` (JSON, possibly cut short) without the ``managedFields`` of its objects' metadata, cut out
    before decoding: a third of a pod's bytes that nothing in kai reads (kube-scheduler's informers drop
    them too). Cut only where the API server writes them for built-in kinds, last in ``metadata`` with
    ``spec`` next (Go field order): ``,"managedFields":[...]},"spec":``, with no ``[`` inside (its entries
    hold objects only). A quote inside a JSON string is always escaped, so neither marker can occur in a
    string; anywhere else, or not all in yet, nothing is cut, and ``_drop_managed_fields`` removes them
    once decoded."""
    managed, spec_mark, close, bracket = _MARKS[type(text)]
    found = text.find(managed)
    if found < 0:
        return text
    parts: list[AnyStr] = []
    copied = 0
    while found >= 0:
        spec = text.find(spec_mark, found)
        if spec < 0:
            break  # the rest has not arrived yet
        start = found + len(managed)
        if text.startswith(close, spec - 3) and text.find(bracket, start, spec - 3) < 0:
            parts.append(text[copied:found])
            copied = spec - 2  # from "}," on: the metadata closes, spec follows
        found = text.find(managed, spec)
    if not parts:
        return text
    parts.append(text[copied:])
    return text[:0].join(parts)


def _drop_managed_fields(obj: Any) -> None:
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)


class ListDecoder:
    """Incremental decoder of a list response (``{"kind": ..., "metadata": ..., "items": [...]}``): each
    element of ``items`` goes to ``on_item`` once its last byte is in, without ``metadata.managedFields``;
    the other fields are kept."""

    _WS = " \t\r\n"
    _AFTER_NUMBER = frozenset(",]} \t\r\n")

    def __init__(self, on_item: Callable[[Obj], None]) -> None:
        self.on_item = on_item
        self.head: Obj = {}
        self.buf = ""
        self.pos = 0
        self.state = "start"  # start -> key -> value | items -> ... -> end
        self.key = ""
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.decoder = json.JSONDecoder()
        self.look_alike = -1  # where a batch last failed: an item start inside an item (see _batch)
        self.gathered: list[bytes] = []  # bytes fed but not decoded yet (see GATHER)
        self.gathered_size = 0

    # The API server sends a list in HTTP chunks of about one item: decoded one by one, a pod list would take
    # twice as long. Bytes are gathered up to this much, then decoded in batches (see _batch).
    GATHER = 1 << 16

    def feed(self, chunk: bytes, final: bool = False) -> None:
        self.gathered.append(chunk)
        self.gathered_size += len(chunk)
        if self.gathered_size < self.GATHER and not final:
            return
        data = b"".join(self.gathered)
        self.gathered.clear()
        self.gathered_size = 0
        rest = self.buf[self.pos:]
        self.buf = without_managed_fields(rest + self.utf8.decode(data, final))
        # (a cut in the kept text may leave this mark off by its length: that costs a batch, never an item)
        self.look_alike = -1 if self.look_alike < self.pos else self.look_alike - self.pos
        self.pos = 0
        while self._step(final):
            pass

    def close(self) -> Obj:
        self.feed(b"", final=True)
        if self.state != "end":
            raise ValueError("the list response ended early")
        return self.head

    def _skip(self, extra: str = "") -> str | None:
        """The next character that is not white space (or in ``extra``), without consuming it."""
        buf, n, skip = self.buf, len(self.buf), self._WS + extra
        while self.pos < n and buf[self.pos] in skip:
            self.pos += 1
        return buf[self.pos] if self.pos < n else None

    def _value(self, final: bool) -> tuple[bool, Any]:
        """One JSON value at ``pos``: (True, value) once it is complete, (False, None) to wait for more."""
        try:
            value, end = self.decoder.raw_decode(self.buf, self.pos)
        except json.JSONDecodeError:
            if final:
                raise
            return False, None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                (end == len(self.buf) or self.buf[end] not in self._AFTER_NUMBER):
            if not final:  # "1.5" of "1.5e+16": the number may go on in the next chunk
                return False, None
            if end < len(self.buf):
                raise ValueError(f"a list response has {self.buf[end]!r} after a number")
        self.pos = end
        return True, value

    _ITEM_STARTS = ('},{"metadata":{', '},{"apiVersion":')  # how the API server starts the items of a list

    def _batch(self) -> bool:
        """Every item now complete but the first of them at once, as one JSON array (the decoder shares its
        keys across the batch, and Python's work per item is gone): the batch ends before the last place
        where an item seems to start, and it is one only if it decodes, since a proper prefix of a JSON
        object is never an object. False (nothing consumed) when there is no such place or it is not one."""
        buf, pos = self.buf, self.pos
        end = max(buf.rfind(mark, pos) for mark in self._ITEM_STARTS)
        if end < 0 or end <= self.look_alike:
            return False
        try:
            items = loads("[" + buf[pos:end + 1] + "]")
        except ValueError:
            self.look_alike = end  # inside an item: one by one up to there
            return False
        for item in items:
            _drop_managed_fields(item)
            self.on_item(item)
        self.pos = end + 2  # at the next item's "{"
        return True

    def _step(self, final: bool) -> bool:
        """Consume one token or value; False when more bytes are needed (or the list has ended)."""
        ch = self._skip("," if self.state in ("key", "items") else "")
        if ch is None or self.state == "end":
            return False
        if self.state == "start":
            if ch != "{":
                raise ValueError("a list response must be a JSON object")
            self.pos += 1
            self.state = "key"
        elif self.state == "key":
            if ch == "}":
                self.pos += 1
                self.state = "end"
                return False
            start = self.pos
            done, key = self._value(final)
            if not done:
                return False
            colon = self._skip()
            if colon is None:  # the key is in, its colon not yet
                if final:
                    raise ValueError(f"a list response has key {key!r} without a value")
                self.pos = start
                return False
            if colon != ":":
                raise ValueError(f"a list response has {colon!r} after key {key!r}, not ':'")
            self.pos += 1
            self.key = str(key)
            self.state = "value"
        elif self.state == "value":
            if self.key == "items" and ch == "[":
                self.pos += 1
                self.state = "items"
                return True
            done, value = self._value(final)
            if not done:
                return False
            self.head[self.key] = value
            self.state = "key"
        elif self.state == "items":
            if ch == "]":
                self.pos += 1
                self.state = "key"
                return True
            if self._batch():
                return True
            done, item = self._value(final)
            if not done:
                return False
            _drop_managed_fields(item)
            self.on_item(item)
        return True


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}" + (f"/{sub}" if sub else "")
