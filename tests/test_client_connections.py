"""kaid's client speaks HTTP/1.1 itself (``kaid.kube.client._Connection``) for requests, lists and watches: against
a server on loopback that answers each way HTTP allows (a Content-Length, chunks with extensions and trailers, up to
the end of the connection, no body), closes connections when it likes, and counts the connections it was sent
requests on."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from kaid.kube.client import ApiError, KubeClient

from .http_requests import read_request


class Server:
    """One answer per request, as ``answers[path]`` says: (style, status, body). Styles: ``length``, ``chunked``,
    ``http10`` (no length, the connection closed after), ``close`` (a length, then the connection closed),
    ``empty`` (204)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.answers: dict[str, tuple[str, int, bytes]] = {}
        self.requests: list[tuple[str, str, bytes, dict[str, str]]] = []
        self.connections = 0
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while True:
                request = read_request(conn, buf)
                if request is None:
                    return
                method, path, headers, body, buf = request
                self.requests.append((method, path, body, headers))
                style, status, answer = self.answers[path.split("?")[0]]
                if style == "chunked":
                    out = f"HTTP/1.1 {status} Whatever\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
                    for i in range(0, len(answer), 7):
                        piece = answer[i:i + 7]
                        out += f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n"
                    out += b"0\r\nX-Trailer: yes\r\n\r\n"
                    conn.sendall(out)
                elif style == "http10":
                    conn.sendall(f"HTTP/1.0 {status} Whatever\r\n\r\n".encode() + answer)
                    conn.close()
                    return
                elif style == "empty":
                    conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
                else:
                    close = "Connection: close\r\n" if style == "close" else ""
                    conn.sendall(f"HTTP/1.1 {status} Whatever\r\nContent-Length: {len(answer)}\r\n{close}\r\n"
                                 .encode() + answer)
                    if style == "close":
                        conn.close()
                        return
        except OSError:
            return

    def close_idle(self) -> None:
        """The server ends every connection it holds (as an API server does with idle ones)."""
        for conn in self.open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self.open.clear()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close_idle()
    s.sock.close()


def _client(server: Server) -> KubeClient:
    return KubeClient(f"http://127.0.0.1:{server.port}", token="t0k3n", verify=False, qps=1000, burst=1000)


def test_every_way_of_answering_and_one_connection_kept(server: Server) -> None:
    obj = {"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b" * 3000}}, "n": [1, 2.5, None, True]}
    data = json.dumps(obj).encode()
    server.answers = {"/len": ("length", 200, data), "/chunked": ("chunked", 201, data),
                      "/empty": ("empty", 204, b""), "/missing": ("chunked", 404, b'{"reason": "NotFound",'
                                                                       b' "message": "pods \\"x\\" not found"}')}
    client = _client(server)
    for _ in range(5):
        assert client.request("GET", "/len", params={"limit": 3}) == obj
        assert client.create("/chunked", {"kind": "Binding", "target": {"name": "n"}}) == obj
        assert client.request("DELETE", "/empty") == {}
        with pytest.raises(ApiError) as err:
            client.get("/missing")
        assert err.value.status == 404 and err.value.message == 'pods "x" not found'
    assert server.connections == 1, "requests one after another share one kept connection"
    method, path, body, headers = server.requests[1]
    assert (method, path, json.loads(body)) == ("POST", "/chunked", {"kind": "Binding", "target": {"name": "n"}})
    assert headers["authorization"] == "Bearer t0k3n" and headers["content-type"] == "application/json"
    assert server.requests[0][1] == "/len?limit=3" and server.requests[0][3]["host"] == f"127.0.0.1:{server.port}"
    client.close()


def test_connections_the_server_ends_are_not_used_again(server: Server) -> None:
    server.answers = {"/close": ("close", 200, b'{"a": 1}'), "/old": ("http10", 200, b'{"b": 2}'),
                      "/len": ("length", 200, b'{"c": 3}')}
    client = _client(server)
    assert client.request("GET", "/close") == {"a": 1}  # Connection: close
    assert client.request("GET", "/old") == {"b": 2}  # HTTP/1.0, read to the end
    assert client.request("GET", "/len") == {"c": 3}
    assert server.connections == 3
    server.close_idle()  # the kept one ends while idle: the next request goes over a new one, not into it
    assert client.request("GET", "/len") == {"c": 3}
    assert server.connections == 4
    client.close()


def test_many_threads_share_the_kept_connections(server: Server) -> None:
    server.answers = {"/len": ("length", 200, b'{"ok": true}')}
    client = _client(server)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                assert client.request("POST", "/len", {"x": 1}) == {"ok": True}
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors[:2]
    assert len(server.requests) == 800 and server.connections <= 16
    client.close()


def _pod(i: int) -> dict[str, object]:
    return {"metadata": {"name": f"p{i}", "managedFields": [{"manager": "m"}], "labels": {"a": "b" * 50}},
            "spec": {"nodeName": "n", "x": [i, 2.5e16, None]}}


def test_lists_and_watches_stream_every_way_and_keep_their_connection(server: Server) -> None:
    """A list (decoded while it arrives, in 7-byte chunks here) and a watch's events, over each way of answering;
    a whole answer leaves its connection to the next request, one read in part (a watch left early) closes it."""
    items = [_pod(i) for i in range(300)]
    listed = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "42"}, "items": items}).encode()
    events = b"".join(json.dumps({"type": "ADDED", "object": p}).encode() + b"\n" for p in items[:20])
    want = [{**p, "metadata": {k: v for k, v in p["metadata"].items() if k != "managedFields"}}  # type: ignore[attr-defined]
            for p in items]
    for style in ("chunked", "length", "close", "http10"):
        server.answers = {"/list": (style, 200, listed), "/watch": (style, 200, events),
                          "/len": ("length", 200, b'{"c": 3}')}
        client = _client(server)
        before = server.connections
        got: list[dict[str, object]] = []
        head = client.list("/list", got.append, limit=500)
        assert head == {"kind": "PodList", "metadata": {"resourceVersion": "42"}} and got == want, style
        assert [e["object"] for e in client.watch("/watch", "42", timeout_seconds=5)] == want[:20], style
        assert client.request("GET", "/len") == {"c": 3}
        kept = style in ("chunked", "length")
        assert server.connections - before == (1 if kept else 3), style
        client.close()
    method, path, _, headers = server.requests[-2]
    assert method == "GET" and path.startswith("/watch?") and "resourceVersion=42" in path and \
        "timeoutSeconds=5" in path and headers["authorization"] == "Bearer t0k3n"

    server.answers["/watch"] = ("chunked", 200, events)
    client = _client(server)
    before = server.connections
    watch = client.watch("/watch", "42")
    assert next(watch)["object"] == want[0]
    watch.close()  # left before its end: that connection is not handed out again
    assert client.request("GET", "/len") == {"c": 3}
    assert server.connections - before == 2
    client.close()


def test_a_list_or_watch_refused_says_why_and_keeps_the_connection(server: Server) -> None:
    server.answers = {"/gone": ("chunked", 410, b'{"kind": "Status", "reason": "Expired", "message": "too old"}'),
                      "/denied": ("length", 403, b'{"reason": "Forbidden", "message": "no"}'),
                      "/len": ("length", 200, b'{"c": 3}')}
    client = _client(server)
    with pytest.raises(ApiError) as err:
        list(client.watch("/gone", "1"))
    assert (err.value.status, err.value.reason, err.value.message) == (410, "Expired", "too old")
    with pytest.raises(ApiError) as err:
        client.list("/denied", lambda _: None)
    assert (err.value.status, err.value.message) == (403, "no")
    assert client.request("GET", "/len") == {"c": 3}
    assert server.connections == 1
    client.close()
