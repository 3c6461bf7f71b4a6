"""A watch whose events come often is read several events at a time (``KubeClient.watch``'s ``gather``; kaid's
informers: ``cache.WATCH_GATHER_S``): a read within that long of the last one waits that long first, unless bytes
are there already; after a quiet spell an event is read at once. Lists, plain requests and watches without
``gather`` never wait."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

from kaid.kube import client as kc
from kaid.kube.cache import WATCH_GATHER_S, ApiResource, Informer
from kaid.kube.client import KubeClient, _Connection


class _Clock:
    """``time`` as the client reads it: ``monotonic`` moves only when told to or by ``sleep``, which says that it
    slept (and lets ``arrive`` write what came meanwhile)."""

    def __init__(self, arrive: socket.socket) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.arrive = arrive

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.arrive.sendall(b"came meanwhile")


@pytest.fixture
def pair() -> Any:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_a_read_soon_after_the_last_waits_unless_bytes_are_there(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = pair
    clock = _Clock(b)
    monkeypatch.setattr(kc, "time", clock)
    conn = _Connection(a, 0)
    conn.gather = 0.02
    b.sendall(b"first")
    assert conn._recv() == b"first" and clock.slept == []  # the first read: nothing read before it
    clock.now += 0.001
    assert conn._recv() == b"came meanwhile" and clock.slept == [0.02]  # soon after, nothing there: it waited
    b.sendall(b"there")
    clock.now += 0.001
    assert conn._recv() == b"there" and clock.slept == [0.02]  # bytes there already: read at once
    clock.now += 0.05  # a quiet spell
    threading.Timer(0.05, b.sendall, (b"after quiet",)).start()
    assert conn._recv() == b"after quiet" and clock.slept == [0.02]  # read as it comes
    conn.gather = 0.0  # (not a watch)
    threading.Timer(0.05, b.sendall, (b"plain",)).start()
    assert conn._recv() == b"plain" and clock.slept == [0.02]


class _Counting:
    """A socket that counts the reads that return bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reads = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def settimeout(self, t: float | None) -> None:
        self.sock.settimeout(t)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, most: int) -> bytes:
        out = self.sock.recv(most)
        self.reads += bool(out)
        return out

    def close(self) -> None:
        self.sock.close()


class _Client(KubeClient):
    def __init__(self, conn: _Connection) -> None:
        super().__init__("http://127.0.0.1:1", token="t", verify=False, qps=1000, burst=1000)
        self.conn = conn

    def _checkout(self) -> _Connection:
        return self.conn

    def _checkin(self, conn: _Connection) -> None:
        pass


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def test_events_that_come_often_are_read_several_at_a_time(pair: Any) -> None:
    a, b = pair
    n = 100
    events = [_chunk(json.dumps({"type": "MODIFIED", "object": {"metadata": {"name": f"p{i}"}}}).encode() + b"\n")
              for i in range(n)]

    def serve() -> None:
        b.recv(65536)  # the request
        b.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for ev in events:  # one every 2 ms: a reader that keeps up finds each alone
            b.sendall(ev)
            time.sleep(0.002)
        b.sendall(b"0\r\n\r\n")

    sock = _Counting(a)
    client = _Client(_Connection(sock, 0))  # type: ignore[arg-type]
    server = threading.Thread(target=serve)
    server.start()
    names = [ev["object"]["metadata"]["name"]
             for ev in client.watch("/api/v1/pods", "1", timeout_seconds=30, gather=WATCH_GATHER_S)]
    server.join()
    assert names == [f"p{i}" for i in range(n)]
    assert sock.reads <= n // 3, f"{sock.reads} reads for {n} events"


def test_informers_gather_their_watches() -> None:
    asked: list[float] = []

    class _Watching(KubeClient):
        def list(self, path: str, on_item: Any, timeout: float = 120.0, **params: Any) -> dict[str, Any]:
            return {"metadata": {"resourceVersion": "1"}}

        def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                  gather: float = 0.0) -> Any:
            asked.append(gather)
            stop.set()
            return iter(())

    stop = threading.Event()
    inf = Informer(_Watching("http://127.0.0.1:1", token="t", verify=False), ApiResource("Pod", "/api/v1/pods"),
                   stop, threading.Event())
    inf._run()
    assert asked == [WATCH_GATHER_S] and WATCH_GATHER_S > 0
