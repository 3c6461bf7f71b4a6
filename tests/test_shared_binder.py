"""The shared-GPU binder (``kaid.kube.reservations.SharedBinder``) without a cluster: a recording client, a
reservation pod that the watch cache already shows with its device's UUID, binds that fail on demand."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.api.config import GpuSharingConfig
from kaid.cycle import Bind
from kaid.kube.client import pod_path
from kaid.kube.reservations import SharedBinder
from kaid.sharing import handoff
from tests.test_gpu_sharing import mutated

Obj = dict[str, Any]
CFG = GpuSharingConfig(reservationTimeoutSeconds=5)
UUID = "GPU-0b6c2a8e-3f1d-4c7e-9a5b-1d2e3f4a5b6c"


class RecordingClient:
    """Accepts every write and records it: (method, path)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def create(self, path: str, body: Obj) -> Obj:
        self.sent.append(("POST", path))
        return body

    def merge_patch(self, path: str, body: Obj) -> Obj:
        self.sent.append(("PATCH", path))
        return {}

    def get(self, path: str) -> Obj:
        self.sent.append(("GET", path))
        return {}

    def request(self, method: str, path: str, body: Any = None) -> Obj:
        self.sent.append((method, path))
        return {}


def _bind(pod: str, group: str | None = None) -> Bind:
    return Bind(pod, "n", "default/gang", "q", (0,), group, 500 if group else 0,
                gpu_groups=(group,) if group else ())


def test_a_shared_gpu_gang_partly_bound_keeps_its_bound_pods() -> None:
    """As on the whole-GPU path (``Actuator.bind``): deleting the bound pods of a gang one of whose binds failed
    would lose bare pods and fail Jobs; they stay bound, the failed pod is rolled back (its ConfigMaps and group
    labels), and the next cycle (or the stale-gang grace) deals with the rest."""
    shared_pod = mutated("a")
    reservation = handoff.reservation_pod("n", "g1", shared_pod, CFG)
    reservation["metadata"].setdefault("annotations", {})[c.RESERVED_GPU_ANNOTATION] = UUID
    cache = {("default", "a"): shared_pod, ("default", "b"): mutated("b"), ("default", "c"): {},
             (CFG.reservationNamespace, reservation["metadata"]["name"]): reservation}
    bound: list[str] = []

    def bind_one(b: Bind, patch: Obj | None) -> str | None:
        if b.pod == "default/c":
            return "500 the API server is down"
        bound.append(b.pod)
        return None

    client = RecordingClient()
    binder = SharedBinder(client, CFG, lambda ns, name: cache.get((ns, name)), bind_one)  # type: ignore[arg-type]
    try:
        binder.submit([_bind("default/a", "g1"), _bind("default/b", "g1"), _bind("default/c")])
        binder.jobs.shutdown(wait=True)
        [out] = binder.drain()
    finally:
        binder.close()
    assert bound == ["default/a", "default/b"]
    assert [b.pod for b in out.bound] == ["default/a", "default/b"]
    assert [(b.pod, r.message) for b, r in out.failed] == [("default/c", "500 the API server is down")]
    deleted = [path for method, path in client.sent if method == "DELETE"]
    assert pod_path("default", "a") not in deleted and pod_path("default", "b") not in deleted
