"""Prometheus metrics with the ``kai_`` names of the compatibility contract, and ``/healthz`` and ``/readyz``.

``prometheus_client`` is imported when the metrics are made, not with this module: loading it is a tenth
of kaid's start, so the daemon makes them once its first binds are out (until then ``/metrics`` answers
with no samples; the probes answer from the start)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

BUCKETS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class Metrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.cycle = Histogram("kai_e2e_scheduling_latency_milliseconds", "Whole scheduling cycle", registry=r,
                               buckets=BUCKETS)
        self.phase = Histogram("kai_cycle_phase_latency_milliseconds", "Cycle latency by phase", ["phase"],
                               registry=r, buckets=BUCKETS)
        self.binds = Counter("kai_binds_total", "Pods bound", ["result"], registry=r)
        self.evictions = Counter("kai_pod_group_evicted_pods_total", "Pods evicted, by action", ["action"],
                                 registry=r)
        self.fair_share = Gauge("kai_queue_fair_share_gpu", "Queue fair share of GPUs", ["queue"], registry=r)
        self.fair_share_cpu = Gauge("kai_queue_fair_share_cpu_millicores", "Queue fair share of cpu", ["queue"],
                                    registry=r)
        self.allocated = Gauge("kai_queue_allocated_gpus", "GPUs allocated to a queue", ["queue"], registry=r)
        self.requested = Gauge("kai_queue_requested_gpus", "GPUs requested by a queue", ["queue"], registry=r)
        self.depth = Gauge("kai_queue_depth", "Pending pod groups in a queue", ["queue"], registry=r)
        self.wait = Histogram("kai_pending_wait_seconds", "Time from creation to bind", registry=r,
                              buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600))
        self.gangs = Counter("kai_gang_outcomes_total", "Gangs placed, and gangs some of whose binds "
                             "failed while others did not (partly_bound)", ["outcome"], registry=r)
        self.leader = Gauge("kai_is_leader", "1 while this replica holds the lease", registry=r)
        self.lists = Gauge("kai_watch_lists", "Lists of a resource since the start (1: only the first; more: a "
                           "watch expired, 410 Gone, or could not resume)", ["resource"], registry=r)
        self.events_queued = Gauge("kai_snapshot_events_queued", "Watch events and lists not applied to the "
                                   "incremental snapshot yet (each cycle applies them; a standby, each period)",
                                   registry=r)


    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


EMPTY_EXPOSITION = (b"", "text/plain; version=0.0.4; charset=utf-8")


class PlainHandler(BaseHTTPRequestHandler):
    """A request handler that answers with ``reply`` and logs nothing per request."""

    def reply(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


class Exposition(Protocol):
    def render(self) -> tuple[bytes, str]: ...


def serve(metrics: Callable[[], Exposition | None], port: int, ready: Callable[[], bool], healthy: Callable[[], bool],
          address: str = "0.0.0.0") -> ThreadingHTTPServer:
    """``metrics``: the process's metrics (the daemon's ``Metrics``), None while they are not made yet."""

    class Handler(PlainHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/metrics":
                made = metrics()
                body, ctype = made.render() if made is not None else EMPTY_EXPOSITION
                code = 200
            elif path == "/healthz":
                ok = healthy()
                body, ctype, code = (b"ok" if ok else b"unhealthy"), "text/plain", 200 if ok else 500
            elif path == "/readyz":
                ok = ready()
                body, ctype, code = (b"ok" if ok else b"not ready"), "text/plain", 200 if ok else 503
            else:
                body, ctype, code = b"not found", "text/plain", 404
            self.reply(code, body, ctype)

    server = ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
