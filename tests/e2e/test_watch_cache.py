"""kaid's watch cache on the real API server: what it hands over while its first lists arrive (the daemon
reads its pods there, ahead of the first snapshot)."""

from __future__ import annotations

from typing import Any

from kaid.kube.cache import API_RESOURCES, WatchCache
from kaid.kube.client import KubeClient

from .controlplane import ControlPlane, wait_until


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "nobody",
                     "containers": [{"name": "main", "image": "registry.example/kai/fake:1"}]}}


def test_first_lists_are_handed_over_once_and_watch_changes_are_not(control_plane: ControlPlane,
                                                                     namespace: str) -> None:
    control_plane.create(f"/api/v1/namespaces/{namespace}/pods", _pod("listed"))
    seen: list[dict[str, Any]] = []
    # kai's CRDs are not installed here: built-in kinds, and an optional one the server does not have
    kinds = {"Pod", "Node", "Namespace", "PriorityClass", "Topology"}
    cache = WatchCache(KubeClient.from_config(str(control_plane.kubeconfig)),
                       tuple(r for r in API_RESOURCES if r.kind in kinds))
    cache.on_first_list(seen.append)
    cache.start()
    try:
        assert cache.wait_synced(60)
        ours = {o["metadata"]["name"] for o in seen if o["kind"] == "Pod" and o["metadata"]["namespace"] == namespace}
        assert ours == {"listed"}
        listed = cache.get("Pod", namespace, "listed")
        assert listed is not None and any(o is listed for o in seen), "the very object the cache keeps"
        assert all("managedFields" not in o["metadata"] for o in seen)
        assert {o["kind"] for o in seen} == {o["kind"] for o in cache.objects()}  # every kind listed (Nodes if any)
        assert {"Pod", "Namespace", "PriorityClass"} <= {o["kind"] for o in seen}
        assert len({id(o) for o in seen}) == len(seen), "each object once"
        before = len(seen)
        control_plane.create(f"/api/v1/namespaces/{namespace}/pods", _pod("watched"))
        wait_until(lambda: cache.get("Pod", namespace, "watched") is not None, 30, "the watch to bring the new pod")
        assert len(seen) == before, "objects from the watch are not first-list items"
    finally:
        cache.close()
