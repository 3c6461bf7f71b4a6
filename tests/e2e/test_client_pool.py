"""kaid's client keeps a connection for each of its informers' watches and each of its bind workers at once, against
the real API server: none is closed when handed back (urllib3, which served the watches before, warned "Connection
pool is full, discarding connection" 13-14 times per bench_kube run, each a TLS handshake to pay again)."""

from __future__ import annotations

import threading

from kaid.kube.actuator import bind_workers
from kaid.kube.cache import API_RESOURCES
from kaid.kube.client import KubeClient
from tests.e2e.controlplane import ControlPlane


def test_every_watch_and_bind_worker_keeps_its_connection(control_plane: ControlPlane) -> None:
    client = KubeClient.from_config(str(control_plane.kubeconfig), qps=1000, burst=1000)
    path = "/api/v1/namespaces/kai-e2e-no-such-namespace/configmaps"  # a watch on it sees nothing: held to its end
    version = str(client.get(path)["metadata"]["resourceVersion"])
    at_once = len(API_RESOURCES) + bind_workers(4000)  # kaid at bench_kube's --qps 2000 (burst 4000)
    start = threading.Barrier(at_once)
    failures: list[BaseException] = []

    def hold() -> None:
        try:
            start.wait(30)
            for _ in client.watch(path, version, timeout_seconds=3):
                pass
        except BaseException as err:  # told below
            failures.append(err)

    threads = [threading.Thread(target=hold) for _ in range(at_once)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures[:3]
    kept = len(client._idle)
    assert kept == at_once, f"{at_once - kept} of {at_once} connections closed when handed back"
    assert client.request("GET", path)["kind"] == "ConfigMapList" and len(client._idle) == at_once, \
        "a kept connection serves the next request"
    client.close()
