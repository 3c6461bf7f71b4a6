"""The actuator's bind loop (``kaid.kube.sender.RequestLoop``, ``actuator._FirstTry``): a plain bind's first try goes
out on one thread over kept connections, answers read as they come, against a server on loopback; what the first try
cannot settle (a 5xx, a dropped connection, a 401, a 409 "already") goes to the pool's threads, which retry as
``Actuator._bind_one`` always did; the lease, a node's problem and the rate limit hold before each send."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kaid.cycle import Bind
from kaid.kube.actuator import LOST_LEASE, Actuator
from kaid.kube.client import KubeClient, parse_answer
from kaid.webhook.certs import new_authority, serving_certificate

from .http_requests import read_request

Answer = Callable[[str, str, bytes, int], bytes | None]  # method, path, body, nth request to that path -> bytes


def _http(status: int, body: dict[str, object] | None = None, extra: str = "") -> bytes:
    data = json.dumps(body or {"kind": "Status", "code": status}).encode()
    return f"HTTP/1.1 {status} X\r\nContent-Length: {len(data)}\r\n{extra}\r\n".encode() + data


class Server:
    """Answers each request as ``answer`` says (None: the connection is closed without an answer); ``hold``: paths
    answered only after this many seconds."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.seen: Counter[str] = Counter()
        self.requests: list[tuple[str, str, bytes]] = []
        self.connections = 0
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while True:
                request = read_request(conn, buf)
                if request is None:
                    return
                method, path, _, body, buf = request
                with self.lock:
                    self.seen[path] += 1
                    nth = self.seen[path]
                    self.requests.append((method, path, body))
                out = self.answer(method, path, body, nth)
                if out is None:
                    conn.close()
                    return
                conn.sendall(out)
        except OSError:
            return

    def close_all(self) -> None:
        with self.lock:
            for conn in self.open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self.open.clear()

    def stop(self) -> None:
        self.sock.close()
        self.close_all()


def _bind(i: int | str, node: str = "node-0") -> Bind:
    return Bind(f"ns/p{i}", node, f"ns/job-{i}", "q", (i % 8,) if isinstance(i, int) else (), None, 1000)


def _binding(path: str) -> bool:
    return path.endswith("/binding")


@pytest.fixture
def ok_server() -> Iterator[Server]:
    server = Server(lambda method, path, body, nth: _http(201))
    yield server
    server.stop()


def _actuator(server: Server, workers: int = 4, qps: float = 10000, burst: int = 10000, **kw: object) -> Actuator:
    client = KubeClient(f"http://127.0.0.1:{server.port}", token="t", verify=False, qps=qps, burst=burst)
    return Actuator(client, workers=workers, **kw)  # type: ignore[arg-type]


def test_parse_answer_every_framing_and_only_when_whole() -> None:
    body = b'{"kind":"Status"}'
    length = b"HTTP/1.1 201 Created\r\nContent-Length: 17\r\n\r\n" + body
    chunked = (b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\n" + body[:5] + b"\r\n"
               b"c\r\n" + body[5:] + b"\r\n0\r\nX-T: 1\r\n\r\n")
    for whole, status in ((length, 201), (chunked, 500)):
        for cut in range(len(whole)):
            assert parse_answer(whole[:cut], False) is None, cut
        assert parse_answer(whole + b"NEXT", False) == (status, whole.split(b" ", 2)[2].split(b"\r\n")[0].decode(),
                                                         body, True, b"NEXT")
        with pytest.raises(ConnectionError):
            parse_answer(whole[:-1], True)
    to_end = b"HTTP/1.0 200 OK\r\n\r\n" + body
    assert parse_answer(to_end, False) is None
    assert parse_answer(to_end, True) == (200, "OK", body, False, b"")
    assert parse_answer(b"HTTP/1.1 204 No Content\r\n\r\n", False) == (204, "No Content", b"", True, b"")
    closing = b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    assert parse_answer(closing, False) == (201, "Created", b"", False, b"")


def test_binds_go_out_on_one_thread_over_kept_connections(ok_server: Server) -> None:
    actuator = _actuator(ok_server, workers=4)
    try:
        out = actuator.bind([_bind(i, f"node-{i % 3}") for i in range(40)])
        again = actuator.bind([_bind(i) for i in range(40, 60)])
        assert not actuator.pool._threads, "no thread of the pool was needed"
    finally:
        actuator.close()
    assert len(out.bound) == 40 and not out.failed and len(again.bound) == 20
    assert ok_server.connections <= 4  # kept from one request to the next, one batch to the next
    sent = {path: json.loads(body) for method, path, body in ok_server.requests if method == "POST"}
    assert len(sent) == 60
    five = sent["/api/v1/namespaces/ns/pods/p5/binding"]
    assert (five["kind"], five["metadata"]["name"], five["metadata"]["namespace"]) == ("Binding", "p5", "ns")
    assert five["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-2"}
    assert list(five["metadata"]["annotations"].values()) == ["5"]  # its device


def test_what_the_first_try_cannot_settle_is_tried_again_as_before() -> None:
    def answer(method: str, path: str, body: bytes, nth: int) -> bytes | None:
        pod = path.split("/")[6]
        if method == "GET":  # the 409's check: is it bound there already?
            return _http(200, {"spec": {"nodeName": "node-0"}})
        if pod == "p-busy":
            return _http(500, extra="") if nth == 1 else _http(201)
        if pod == "p-throttled":
            return _http(429, {"message": "slow down", "details": {"retryAfterSeconds": 0}}) if nth < 3 else _http(201)
        if pod == "p-bad":
            return _http(422, {"message": "invalid binding"})
        if pod == "p-done":
            return _http(409, {"message": "pod p-done is already assigned to node node-0"})
        if pod == "p-dropped":
            return None if nth == 1 else _http(201)
        if pod == "p-unauthorized":
            return _http(401, {"message": "Unauthorized"}) if nth == 1 else _http(201)
        return _http(201)

    server = Server(answer)
    actuator = _actuator(server, workers=3, retry_for=5.0)
    names = ["busy", "throttled", "bad", "done", "dropped", "unauthorized", "fine"]
    try:
        out = actuator.bind([_bind(f"-{name}") for name in names])
    finally:
        actuator.close()
        server.stop()
    assert sorted(b.pod for b in out.bound) == sorted(f"ns/p-{n}" for n in names if n != "bad")
    assert [(b.pod, why) for b, why in out.failed] == [("ns/p-bad", "422 invalid binding")]
    posts = Counter(path.split("/")[6] for method, path, _ in server.requests if method == "POST")
    assert posts == {"p-busy": 2, "p-throttled": 3, "p-bad": 1, "p-done": 1, "p-dropped": 2, "p-unauthorized": 2,
                     "p-fine": 1}
    gets = [path for method, path, _ in server.requests if method == "GET"]
    assert gets == ["/api/v1/namespaces/ns/pods/p-done"]


def test_nothing_goes_out_without_the_lease_or_to_a_node_gone(ok_server: Server) -> None:
    leading = [False]
    gone = {"node-9": "node node-9 no longer exists"}
    actuator = _actuator(ok_server, may_act=lambda: leading[0], node_problem=gone.get)
    try:
        out = actuator.bind([_bind(1), _bind(2, "node-9")])
        assert [why for _, why in out.failed] == [LOST_LEASE, LOST_LEASE]
        leading[0] = True
        out = actuator.bind([_bind(1), _bind(2, "node-9")])
    finally:
        actuator.close()
    assert [b.pod for b in out.bound] == ["ns/p1"]
    assert [why for _, why in out.failed] == ["node node-9 no longer exists"]
    assert [path for _, path, _ in ok_server.requests] == ["/api/v1/namespaces/ns/pods/p1/binding"]


def test_the_rate_limit_holds_without_the_loop_sleeping(ok_server: Server) -> None:
    actuator = _actuator(ok_server, workers=4, qps=20, burst=2)
    try:
        start = time.monotonic()
        out = actuator.bind([_bind(i) for i in range(8)])
        took = time.monotonic() - start
    finally:
        actuator.close()
    assert len(out.bound) == 8
    assert took >= (8 - 2) / 20 - 0.02


def test_connections_the_server_closes_are_made_again(ok_server: Server) -> None:
    actuator = _actuator(ok_server, workers=2)
    try:
        assert len(actuator.bind([_bind(i) for i in range(6)]).bound) == 6
        ok_server.close_all()  # the idle connections end (an API server restarted, an idle timeout)
        time.sleep(0.1)
        out = actuator.bind([_bind(i) for i in range(6, 12)])
    finally:
        actuator.close()
    assert len(out.bound) == 6 and not out.failed
    assert sum(1 for method, _, _ in ok_server.requests if method == "POST") == 12  # none was sent twice


def test_an_answer_that_never_comes_times_out_and_is_tried_again() -> None:
    release = threading.Event()

    def answer(method: str, path: str, body: bytes, nth: int) -> bytes | None:
        if nth == 1 and path.endswith("/p0/binding"):
            release.wait(10)  # this connection hangs
        return _http(201)

    server = Server(answer)
    actuator = _actuator(server, workers=2, retry_for=10.0)
    assert actuator.sender is not None
    actuator.sender._timeout = 0.3
    try:
        out = actuator.bind([_bind(0), _bind(1)])
    finally:
        release.set()
        actuator.close()
        server.stop()
    assert len(out.bound) == 2 and not out.failed
    assert [path for _, path, _ in server.requests].count("/api/v1/namespaces/ns/pods/p0/binding") == 2


def test_over_tls_answers_of_many_records_and_chunks(tmp_path: Path) -> None:
    """TLS: a read may return part of what came (the rest decrypted and pending) or nothing (half a record); an
    answer of several records, chunked, is read whole."""
    now = dt.datetime.now(dt.UTC)
    ca = new_authority(1, now)
    cert, key = serving_certificate(ca, ["127.0.0.1"], 1, now)
    (tmp_path / "srv.crt").write_bytes(cert)
    (tmp_path / "srv.key").write_bytes(key)
    (tmp_path / "ca.crt").write_bytes(ca.cert)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "srv.crt", tmp_path / "srv.key")
    big = json.dumps({"kind": "Status", "code": 201, "details": {"pad": "x" * 70000}}).encode()

    def answer(method: str, path: str, body: bytes, nth: int) -> bytes | None:
        if path.endswith("0/binding"):  # every tenth: a large answer, chunked, and the connection kept
            out = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
            for i in range(0, len(big), 5000):
                out += f"{len(big[i:i + 5000]):x}\r\n".encode() + big[i:i + 5000] + b"\r\n"
            return out + b"0\r\n\r\n"
        return _http(201)

    server = Server(answer, ctx)
    client = KubeClient(f"https://127.0.0.1:{server.port}", ca_file=str(tmp_path / "ca.crt"), token="t",
                        qps=10000, burst=10000)
    actuator = Actuator(client, workers=4)
    try:
        out = actuator.bind([_bind(i) for i in range(60)])
        assert not actuator.pool._threads
    finally:
        actuator.close()
        server.stop()
    assert len(out.bound) == 60 and not out.failed
    assert server.connections <= 4


def test_a_loop_that_stops_on_a_bug_hands_every_bind_to_the_threads(ok_server: Server,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from kaid.kube import sender

    def broken(buf: bytes, ended: bool) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(sender, "parse_answer", broken)
    actuator = _actuator(ok_server, workers=2, retry_for=5.0)
    try:
        out = actuator.bind([_bind(i) for i in range(6)])  # in flight or waiting when it stopped: sent again
        later = actuator.bind([_bind(i) for i in range(6, 9)])  # sent by the threads from the start
    finally:
        actuator.close()
    assert len(out.bound) == 6 and len(later.bound) == 3 and not out.failed and not later.failed
    assert actuator.sender is not None and actuator.sender._broken


def test_bench_kube_waits_for_the_api_servers_count_of_every_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_kube reads the API server's counters after the last bind: a request is counted once its handler returns,
    a moment after its answer went out, so the reading waits (briefly) until every bind is counted."""
    from benchmarks import bench_kube

    readings = iter([39.0, 39.0, 40.0, 41.0])
    monkeypatch.setattr(bench_kube, "scrape_apiserver", lambda cp: "")
    monkeypatch.setattr(bench_kube, "apiserver_counters",
                        lambda text: {"requests POST pods/binding": next(readings)})
    result: dict[str, object] = {"pods_bound": 40}
    bench_kube._apiserver_work(None, {"requests POST pods/binding": 0.0}, result)  # type: ignore[arg-type]
    assert result["apiserver"] == {"requests POST pods/binding": 40.0}
