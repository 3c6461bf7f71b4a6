"""End to end: scheduling shards (KAI's node pools, docs/compatibility.md). A node labelled
kai.scheduler/node-pool=<shard> is left alone by the default kaid, which also makes no PodGroup for that shard's
workloads; the shard's own kaid (partitionLabelValue, a Lease of its own) binds its workload there, through a
PodGroup that carries the workload's labels, and gives each pod it binds the shard's label."""

from __future__ import annotations

from typing import Any

from kaid.api.config import NODE_POOL_LABEL

from .controlplane import ControlPlane
from .kaid_helpers import PODGROUPS, bound, create_object, pod, podgroup, pods_of, queue, suffix, wait_for


def test_a_labelled_node_is_left_to_its_shards_kaid(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    shard = f"x{suffix()}"
    pool, (node,) = make_pool(1, gpus=4)
    cp.request("PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": {NODE_POOL_LABEL: shard}}},
               content_type="application/merge-patch+json")
    plain_q, shard_q = f"plain-{suffix()}", f"shard-{suffix()}"
    shard_queue = queue(shard_q, -1)
    shard_queue["metadata"]["labels"] = {NODE_POOL_LABEL: shard}
    make_queues(queue(plain_q, -1), shard_queue)
    default = start_kaid("default")
    create_object(cp, namespace, pod("plain", pool, plain_q, 1))  # the default shard's: only shard x's node fits
    mine = pod("mine", pool, shard_q, 1)
    mine["metadata"]["labels"][NODE_POOL_LABEL] = shard  # shard x's workload
    create_object(cp, namespace, mine)
    default.wait_cycles(4)
    assert bound(pods_of(cp, namespace)) == [], "the default kaid bound a pod onto another shard's node"

    def made() -> list[str]:
        return [pg["metadata"]["name"] for pg in cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups")[
            "items"]]

    wait_for(lambda: made() or None, 20, "the default kaid to make its pod's PodGroup")
    assert made() == ["pg-pod-plain"]  # none for shard x's pod

    # a pod of shard x by its PodGroup's label alone: bound, it carries the label too (as KAI labels the pods it binds)
    grouped = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
               "metadata": {"name": "labelled", "labels": {NODE_POOL_LABEL: shard}},
               "spec": {"minMember": 1, "queue": shard_q}}
    cp.create(f"{PODGROUPS}/namespaces/{namespace}/podgroups", grouped)
    create_object(cp, namespace, pod("unlabelled", pool, shard_q, 1, annotations={"pod-group-name": "labelled"}))

    start_kaid("shard", lease=f"kai-e2e-shard-{suffix()}", overrides={"partitionLabelValue": shard})
    got = wait_for(lambda: len(bound(pods_of(cp, namespace))) == 2 and bound(pods_of(cp, namespace)), 30,
                   "shard x's kaid to bind its pods")
    assert sorted((p["metadata"]["name"], p["spec"]["nodeName"]) for p in got) == [("mine", node), ("unlabelled", node)]
    assert {p["metadata"]["name"]: p["metadata"]["labels"].get(NODE_POOL_LABEL) for p in got} == \
        {"mine": shard, "unlabelled": shard}
    # (kaid binds a pod whose PodGroup it made from memory while the PodGroup is being created: it may come after)
    pg = wait_for(lambda: podgroup(cp, namespace, "pg-pod-mine"), 20, "the PodGroup kaid made for pod mine")
    assert pg["metadata"]["labels"][NODE_POOL_LABEL] == shard
    default.wait_cycles(2)
    assert sorted(p["metadata"]["name"] for p in bound(pods_of(cp, namespace))) == ["mine", "unlabelled"]
