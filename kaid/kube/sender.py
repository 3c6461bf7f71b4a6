"""One thread that sends requests over many kept connections at once and reads, each time it wakes, every answer that
has come (``selectors``): the actuator's first try of each bind.

Thirty-two threads, each sending one bind and blocking on its answer, cost the API server's machine a wake-up, a
run on cold caches and a turn at the GIL per bind and per thread: about half of kaid's CPU per bind under
bench_kube's load (50-60 us of process CPU a bind against ~25 us for the same call made alone; kube4's bindpath.py,
/work/notes/kube4.md "Bind path"). Here one thread keeps up to ``connections`` requests in flight, one per connection
(HTTP/1.1, no pipelining: the API server serves a connection's requests one after the other), and a wake-up takes
every answer that has come meanwhile.

A request is an object with three methods, called on the loop's thread: ``prepare()`` (the bytes to send now, or None
when it settled without sending), then ``answered(status, reason, body)`` or ``failed(error)`` (the connection
failed, timed out, or ``prepare`` raised). They must not block for long: what needs waiting (a backoff, a second
request) goes to threads (the actuator's ``SendPool``). The client's rate limit holds (``RateLimiter.try_take``:
the loop waits for a token without sleeping), and a connection is made with the client's current credentials.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import ssl
import threading
import time
from collections import deque
from typing import Protocol

from kaid.kube.client import KubeClient, _Connection, parse_answer

log = logging.getLogger("kaid.kube.sender")


class Request(Protocol):
    def prepare(self) -> bytes | None: ...

    def answered(self, status: int, reason: str, body: bytes) -> None: ...

    def failed(self, error: BaseException) -> None: ...


class _Slot:
    """A connection with a request in flight (or none: ``request`` None)."""

    __slots__ = ("conn", "deadline", "request")

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn
        self.request: Request | None = None
        self.deadline = 0.0


class RequestLoop:
    """Requests sent (``send``, from any thread) over up to ``connections`` kept connections of ``client``, answered
    on one thread that starts with the first request. ``timeout``: seconds an answer may take (then its connection
    is closed and the request ``failed`` with TimeoutError). ``close``: every request sent is settled, the thread
    ends, the connections close."""

    def __init__(self, client: KubeClient, connections: int, name: str, timeout: float = 30.0) -> None:
        self._client = client
        self._connections = connections
        self._name = name
        self._timeout = timeout
        self._queue: deque[Request] = deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._poked = False
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._closed = False
        self._broken = False  # the thread stopped on a bug: requests fail at once (the caller's other way)

    def send(self, request: Request) -> None:
        if self._closed:
            raise RuntimeError("the loop is closed")
        if self._broken:
            _failed(request, RuntimeError(f"the {self._name} thread has stopped"))
            return
        self._queue.append(request)
        if self._thread is None:
            self._start()
        if not self._poked:  # (the loop clears it before it looks at the queue: a request never waits unseen)
            self._poked = True
            os.write(self._wake_w, b"!")

    def _start(self) -> None:
        with self._starting:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def close(self) -> None:
        with self._starting:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._poked = True
            os.write(self._wake_w, b"!")
            thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ------------------------------------------------------------------------------------------ the loop
    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        idle: list[_Slot] = []  # connections without a request, the last used on top
        busy = 0
        held: tuple[Request, bytes] | None = None  # prepared, waiting for a token of the rate limit
        next_check = time.monotonic() + 1.0
        queue, limiter, client = self._queue, self._client.limiter, self._client
        try:
            while True:
                wait: float | None = None
                while (held is not None or queue) and busy < self._connections:
                    if held is None:
                        request = queue.popleft()
                        try:
                            data = request.prepare()
                        except Exception as err:
                            _failed(request, err)
                            continue
                        if data is None:
                            continue
                        held = (request, data)
                    wait = limiter.try_take()
                    if wait:
                        break
                    request, data = held
                    held = None
                    slot = self._slot(idle, sel)
                    if slot is None:
                        try:
                            slot = _Slot(client._checkout())  # (an idle one of the client's, else a new one)
                        except Exception as err:
                            _failed(request, err)
                            continue
                        slot.conn.sock.setblocking(False)
                        sel.register(slot.conn.sock, selectors.EVENT_READ, slot)
                    try:
                        _send(slot.conn, data)
                    except Exception as err:
                        self._drop(slot, sel)
                        _failed(request, err)
                        continue
                    slot.request = request
                    slot.deadline = time.monotonic() + self._timeout
                    busy += 1
                if self._closed and held is None and not queue and not busy:
                    return
                if busy and (wait is None or wait > 1.0):
                    wait = 1.0  # (to look for answers that take too long)
                for key, _ in sel.select(wait):
                    slot = key.data
                    if slot is None:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 4096)
                        self._poked = False
                        continue
                    busy -= self._read(slot, idle, sel)
                now = time.monotonic()
                if busy and now >= next_check:
                    next_check = now + 1.0
                    for key in list(sel.get_map().values()):
                        slot = key.data
                        if slot is not None and slot.request is not None and slot.deadline < now:
                            request, slot.request = slot.request, None
                            busy -= 1
                            self._drop(slot, sel)
                            _failed(request, TimeoutError(f"no answer within {self._timeout:.0f} s"))
        except BaseException as err:  # a bug: what is in flight or waiting goes to the callers' other ways
            log.exception("the %s thread stopped; what it held is sent again otherwise", self._name)
            self._broken = True
            stranded = [key.data.request for key in sel.get_map().values()
                        if key.data is not None and key.data.request is not None]
            if held is not None:
                stranded.append(held[0])
            while queue:
                stranded.append(queue.popleft())
            for request in stranded:
                _failed(request, err if isinstance(err, Exception) else RuntimeError(str(err)))
            if not isinstance(err, Exception):
                raise
        finally:
            for key in list(sel.get_map().values()):
                if key.data is not None:
                    key.data.conn.close()
            sel.close()

    def _slot(self, idle: list[_Slot], sel: selectors.BaseSelector) -> _Slot | None:
        """An idle connection of the current credentials, or None."""
        generation = self._client._tls_generation
        while idle:
            slot = idle.pop()
            if slot.conn.generation == generation:
                return slot
            self._drop(slot, sel)
        return None

    @staticmethod
    def _drop(slot: _Slot, sel: selectors.BaseSelector) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            sel.unregister(slot.conn.sock)
        slot.conn.close()

    def _read(self, slot: _Slot, idle: list[_Slot], sel: selectors.BaseSelector) -> int:
        """Read what came on ``slot``'s connection; settle its request if its answer is all in. Returns how many
        requests left the air (0 or 1)."""
        conn = slot.conn
        ended = False
        try:
            chunk = conn.sock.recv(65536)
            if chunk:
                conn.buf += chunk
                sock = conn.sock
                while isinstance(sock, ssl.SSLSocket) and sock.pending():
                    conn.buf += sock.recv(65536)
            else:
                ended = True
        except (BlockingIOError, ssl.SSLWantReadError):
            return 0
        except OSError as err:
            request = slot.request
            slot.request = None
            self._forget(slot, idle, sel)
            if request is None:
                return 0
            _failed(request, err)
            return 1
        request = slot.request
        if request is None:  # an idle connection the server closed (or wrote to unasked): not used again
            self._forget(slot, idle, sel)
            return 0
        try:
            answer = parse_answer(conn.buf, ended)
        except (ValueError, ConnectionError) as err:
            slot.request = None
            self._forget(slot, idle, sel)
            _failed(request, err)
            return 1
        if answer is None:
            return 0
        status, reason, body, keep, rest = answer
        slot.request = None
        conn.buf = b""
        if keep and not rest and not ended:
            idle.append(slot)
        else:
            self._forget(slot, idle, sel)
        try:
            request.answered(status, reason, body)
        except Exception as err:
            log.exception("an answer (%d %s) not taken", status, reason)
            _failed(request, err)
        return 1

    def _forget(self, slot: _Slot, idle: list[_Slot], sel: selectors.BaseSelector) -> None:
        if slot in idle:
            idle.remove(slot)
        self._drop(slot, sel)


def _failed(request: Request, error: BaseException) -> None:
    try:
        request.failed(error)
    except Exception:
        log.exception("a request's failure (%s) not taken", error)


def _send(conn: _Connection, data: bytes) -> None:
    """``data`` on a non-blocking connection: at once as a rule (a request is far smaller than a socket's buffer);
    what does not go at once goes blocking."""
    sock = conn.sock
    try:
        sent = sock.send(data)
    except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
        sent = 0
    if sent < len(data):
        sock.settimeout(10.0)
        try:
            sock.sendall(data[sent:])
        finally:
            sock.setblocking(False)
