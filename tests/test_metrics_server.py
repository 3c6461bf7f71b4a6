"""kaid's HTTP endpoints on loopback: the probes answer from the start; /metrics has no samples until the
daemon has made its metrics (after its first binds), then the ``kai_`` families."""

from __future__ import annotations

import http.client
import sys
from collections.abc import Iterator

import pytest

from kaid.kube.metrics import Metrics, serve


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


class State:
    metrics: Metrics | None = None
    ready = False


@pytest.fixture
def served() -> Iterator[tuple[int, State]]:
    state = State()
    server = serve(lambda: state.metrics, 0, lambda: state.ready, lambda: True, "127.0.0.1")
    try:
        yield server.server_address[1], state
    finally:
        server.shutdown()
        server.server_close()


def test_probes_answer_before_the_metrics_are_made(served: tuple[int, State]) -> None:
    port, state = served
    assert _get(port, "/healthz") == (200, "ok")
    assert _get(port, "/readyz") == (503, "not ready")
    assert _get(port, "/metrics") == (200, "")
    state.ready = True
    assert _get(port, "/readyz") == (200, "ok")
    assert _get(port, "/nope")[0] == 404


def test_metrics_once_made(served: tuple[int, State]) -> None:
    port, state = served
    state.metrics = Metrics()
    state.metrics.leader.set(1)
    state.metrics.binds.labels("ok").inc(3)
    status, body = _get(port, "/metrics")
    assert status == 200
    assert "kai_is_leader 1.0" in body
    assert 'kai_binds_total{result="ok"} 3.0' in body


def test_the_daemon_module_does_not_load_prometheus_client() -> None:
    """(Checked in a fresh interpreter: this one may have loaded it for another test.)"""
    import subprocess

    code = "import sys, kaid.kube.daemon; sys.exit('prometheus_client' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
