"""End to end: kaid reads a Deployment's required pod anti-affinity from the API (through the watch cache and what
it keeps of a pod, ``kaid.kube.strip``) and spreads the replicas one per node, where binpack alone would put them
on one node; a replica more than there are nodes waits, and its PodGroup says why."""

from __future__ import annotations

from typing import Any

from .controlplane import ControlPlane
from .kaid_helpers import bound, create_object, last_condition, pod, podgroup, pods_of, queue, suffix, wait_for

HOST = "kubernetes.io/hostname"


def test_anti_affinity_spreads_replicas_one_per_node(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, nodes = make_pool(3, gpus=4)
    (q,) = make_queues(queue(f"anti-{suffix()}", 0))
    start_kaid("anti")
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    for i in range(4):
        obj = pod(f"db-{i}", pool, q, 1)
        obj["metadata"]["labels"].update({"app": "db"})
        obj["spec"]["affinity"] = {**obj["spec"].get("affinity", {}), **apart}
        create_object(cp, namespace, obj)

    def three_bound() -> list[dict[str, Any]] | None:
        got = bound(pods_of(cp, namespace, "app=db"))
        return got if len(got) == 3 else None

    placed = wait_for(three_bound, 30, "3 of the 4 replicas bound")
    assert sorted(p["spec"]["nodeName"] for p in placed) == sorted(nodes)
    waiting = next(p["metadata"]["name"] for p in pods_of(cp, namespace, "app=db") if not p["spec"].get("nodeName"))

    def says_why() -> bool:
        reasons = last_condition(podgroup(cp, namespace, f"pg-pod-{waiting}")).get("reasons") or []
        return any("pod anti-affinity conflict" in str(r.get("message", "")) for r in reasons)

    wait_for(says_why, 30, f"the PodGroup of {waiting} to name the anti-affinity conflict")
