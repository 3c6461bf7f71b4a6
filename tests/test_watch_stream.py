"""A watch's events as the API server streams them: JSON lines in HTTP chunks, cut anywhere (an event over several
chunks, several in one), the chunks read in pieces of any size (a loaded reader finds many in one read). Each event
comes out as the plain reading has it (``json.loads`` of its line, without ``managedFields``), and what follows the
answer on the connection is left for the next one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kaid.kube.client import KubeClient, _Connection

NEXT = b"HTTP/1.1 200 OK\r\n"  # the start of the next answer on the same connection


class _Socket:
    """What the connection reads: ``data`` in reads of the given sizes (cycled)."""

    def __init__(self, data: bytes, reads: list[int]) -> None:
        self.data = data
        self.reads = reads
        self.n = 0

    def settimeout(self, _t: float) -> None:
        pass

    def sendall(self, _b: bytes) -> None:
        pass

    def recv(self, most: int) -> bytes:
        size = min(most, self.reads[self.n % len(self.reads)])
        self.n += 1
        out, self.data = self.data[:size], self.data[size:]
        return out

    def close(self) -> None:
        pass


class _Client(KubeClient):
    def __init__(self, conn: _Connection) -> None:
        super().__init__("http://127.0.0.1:1", token="t", verify=False, qps=1000, burst=1000)
        self.conn = conn
        self.kept: list[_Connection] = []

    def _checkout(self) -> _Connection:
        return self.conn

    def _checkin(self, conn: _Connection) -> None:
        self.kept.append(conn)


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_pods = st.fixed_dictionaries({
    "metadata": st.fixed_dictionaries({"name": _text, "labels": st.dictionaries(_text, _text, max_size=3)},
                                      optional={"managedFields": st.lists(st.fixed_dictionaries(
                                          {"manager": _text, "fieldsV1": st.dictionaries(_text, st.just({}))}),
                                          max_size=2)}),
    "spec": st.fixed_dictionaries({"nodeName": _text}),
})
_events = st.lists(st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]), _pods), max_size=12)


def _chunked(body: bytes, cuts: list[int], extensions: bool, trailer: bool) -> bytes:
    out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    at = 0
    for cut in sorted({c % (len(body) + 1) for c in cuts} | {len(body)}):
        if cut > at:
            out += b"%x%s\r\n" % (cut - at, b";x=1" if extensions else b"") + body[at:cut] + b"\r\n"
            at = cut
    return out + b"0\r\n" + (b"X-Trailer: yes\r\n" if trailer else b"") + b"\r\n"


@settings(max_examples=150, deadline=None)
@given(_events, st.lists(st.integers(0, 10_000), max_size=20), st.lists(st.integers(1, 700), min_size=1, max_size=8),
       st.booleans(), st.booleans(), st.booleans())
def test_every_event_as_its_line_reads_however_the_stream_is_cut(events: list[tuple[str, Any]], cuts: list[int],
                                                                  reads: list[int], compact: bool, extensions: bool,
                                                                  trailer: bool) -> None:
    sep = (",", ":") if compact else None  # the API server's own (compact: managedFields cut before decoding)
    lines = [json.dumps({"type": t, "object": o}, separators=sep, ensure_ascii=False).encode() for t, o in events]
    body = b"".join(line + b"\n" for line in lines)
    conn = _Connection(_Socket(_chunked(body, cuts, extensions, trailer) + NEXT, reads), 0)  # type: ignore[arg-type]
    client = _Client(conn)
    got = list(client.watch("/api/v1/pods", "1"))
    want = [json.loads(line) for line in lines]
    for e in want:
        e["object"]["metadata"].pop("managedFields", None)
    assert got == want
    assert client.kept == [conn] and conn.buf + conn.sock.data == NEXT  # type: ignore[attr-defined]


def _pieces(conn: _Connection) -> Iterator[bytes]:
    status, _, framing, keep = conn.begin(b"GET / HTTP/1.1\r\n\r\n", 5.0)
    assert status == 200 and keep
    return conn.pieces(framing)


@settings(max_examples=100, deadline=None)
@example(b"x" * 5000, [1000], [65536], False, False)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 10_000), max_size=20),
       st.lists(st.integers(1, 700), min_size=1, max_size=8), st.booleans(), st.booleans())
def test_a_chunked_body_whole_in_pieces_and_at_once(body: bytes, cuts: list[int], reads: list[int], extensions: bool,
                                                    trailer: bool) -> None:
    """The body's bytes, in order, whether read as it arrives (a list, a watch) or at once (``exchange``); a chunk
    that is all in comes whole."""
    answer = _chunked(body, cuts, extensions, trailer)
    conn = _Connection(_Socket(answer + NEXT, reads), 0)  # type: ignore[arg-type]
    pieces = list(_pieces(conn))
    assert b"".join(pieces) == body and all(pieces)
    assert conn.buf + conn.sock.data == NEXT  # type: ignore[attr-defined]
    conn = _Connection(_Socket(answer + NEXT, [len(answer) + len(NEXT)]), 0)  # type: ignore[arg-type]
    assert conn.exchange(b"GET / HTTP/1.1\r\n\r\n", 5.0)[2] == body
    assert conn.buf + conn.sock.data == NEXT  # type: ignore[attr-defined]
    whole = _Connection(_Socket(answer, [len(answer)]), 0)  # type: ignore[arg-type]
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {len(body)})
    sizes = [end - start for start, end in zip([0, *bounds], bounds, strict=False) if end > start]
    assert [len(p) for p in _pieces(whole)] == sizes  # all in at once: one piece per chunk
