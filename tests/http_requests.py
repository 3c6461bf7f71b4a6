"""Reading HTTP/1.1 requests off a socket, for the tests' small fake API servers."""

from __future__ import annotations

import socket
import ssl


def read_request(conn: socket.socket | ssl.SSLSocket,
                 buf: bytes) -> tuple[str, str, dict[str, str], bytes, bytes] | None:
    """The next request on ``conn`` after what is already read (``buf``): method, path, headers (lower-case names),
    body and what was read beyond it; None once the client has closed the connection."""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    method, path, _ = lines[0].split(" ")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    size = int(headers.get("content-length", "0"))
    while len(buf) < size:
        buf += conn.recv(65536)
    return method, path, headers, buf[:size], buf[size:]
