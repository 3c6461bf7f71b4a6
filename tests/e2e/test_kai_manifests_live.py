"""End to end: manifests written for KAI-Scheduler, with the fields of its PodGroup and Topology that kai added for
them (``spec.markUnschedulable``, ``spec.schedulingBackoff``, ``spec.levels[].alias``), apply unchanged through
``kubectl apply`` (strict field validation: a field the CRD lacks is refused) and mean what they mean in KAI: a
gang constrained to a rack by the level's alias lands in one rack; a PodGroup tried once per node pool says which
pool its message is of, and with ``markUnschedulable: false`` its pod gets no PodScheduled condition; found
unschedulable in its pool, it is not tried there again."""

from __future__ import annotations

import json
from typing import Any

import yaml

from .controlplane import ControlPlane
from .kaid_helpers import POOL_LABEL, bound, last_condition, pod, podgroup, pods_of, queue, suffix, wait_for

RACK = "example.com/rack"
Obj = dict[str, Any]


def _apply(cp: ControlPlane, namespace: str, objs: list[Obj]) -> None:
    """``kubectl apply`` as a user would (strict field validation is kubectl's default)."""
    cp.kubectl("apply", "-n", namespace, "--validate=strict", "-f", "-",
               input=yaml.safe_dump_all(objs))


def test_kai_manifests_with_aliases_backoff_and_unmarked_pods_apply_and_mean_what_they_do_in_kai(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, nodes = make_pool(4, gpus=4)
    for i, name in enumerate(nodes):  # two racks of two nodes
        cp.request("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {RACK: f"r{i // 2}"}}},
                   content_type="application/merge-patch+json")
    (q,) = make_queues(queue(f"kaiman-{suffix()}", 0))
    topology = f"dc-{suffix()}"
    cp.kubectl("apply", "--validate=strict", "-f", "-", input=json.dumps({
        "apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": topology},
        "spec": {"levels": [{"nodeLabel": RACK, "alias": "rack"}]}}))
    try:
        start_kaid("kaiman")
        rack_gang = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "racked"},
                     "spec": {"minMember": 4, "queue": q, "markUnschedulable": True, "schedulingBackoff": -1,
                              "topologyConstraint": {"topology": topology, "requiredTopologyLevel": "rack"}}}
        once = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "once"},
                "spec": {"minMember": 1, "queue": q, "markUnschedulable": False, "schedulingBackoff": 1}}
        _apply(cp, namespace, [rack_gang, once])
        _apply(cp, namespace, [pod(f"racked-{i}", pool, q, 2, annotations={"pod-group-name": "racked"})
                               for i in range(4)])
        _apply(cp, namespace, [pod("once-0", pool, q, 8, annotations={"pod-group-name": "once"})])

        def gang_bound() -> list[Obj] | None:
            got = bound([p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("racked-")])
            return got if len(got) == 4 else None

        placed = wait_for(gang_bound, 40, "the gang constrained to one rack by its alias to be bound")
        racks = {nodes.index(p["spec"]["nodeName"]) // 2 for p in placed}
        assert len(racks) == 1, [p["spec"]["nodeName"] for p in placed]

        def once_said() -> Obj | None:
            cond = last_condition(podgroup(cp, namespace, "once"))
            return cond if cond.get("type") == "UnschedulableOnNodePool" else None

        cond = wait_for(once_said, 40, "PodGroup once to say why it waits")
        assert cond["nodePool"] == "default", cond
        assert cond["message"].startswith("Node-Pool 'default': "), cond["message"]
        assert "8 GPUs" in cond["message"], cond["message"]
        (waiting,) = [p for p in pods_of(cp, namespace) if p["metadata"]["name"] == "once-0"]
        scheduled = [c for c in waiting.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
        assert scheduled == [], scheduled  # markUnschedulable: false
    finally:
        cp.kubectl("delete", "topologies.kai.scheduler", topology, "--wait=false", check=False)


def test_a_podgroup_tried_once_per_node_pool_is_left_alone_there_once_unschedulable(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """KAI's ``schedulingBackoff: 1``: found unschedulable in its pool once, the PodGroup is not tried there again
    (an outside controller moves it to another pool), even where room appears; one without it takes that room."""
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"once-{suffix()}", 0))
    kaid = start_kaid("once")
    once = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "once"},
            "spec": {"minMember": 1, "queue": q, "schedulingBackoff": 1}}
    _apply(cp, namespace, [once, pod("once-0", pool, q, 8, annotations={"pod-group-name": "once"})])

    def said() -> Obj | None:
        cond = last_condition(podgroup(cp, namespace, "once"))
        return cond if cond.get("nodePool") == "default" else None

    wait_for(said, 40, "PodGroup once to be found unschedulable in pool default")
    big = cp.add_gpu_nodes(2, gpus=8, name_prefix=f"kaid-{pool}-big", labels={POOL_LABEL: pool}, wait=True)
    try:
        _apply(cp, namespace, [pod("plain-0", pool, q, 8)])
        wait_for(lambda: bound([p for p in pods_of(cp, namespace) if p["metadata"]["name"] == "plain-0"]), 40,
                 "a plain pod of 8 GPUs to take one of the new nodes")
        kaid.wait_cycles(3, 30)  # three more cycles, with a free 8-GPU node all along
        (waiting,) = [p for p in pods_of(cp, namespace) if p["metadata"]["name"] == "once-0"]
        assert not waiting["spec"].get("nodeName"), waiting["spec"]
    finally:
        for name in big:
            cp.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}},
                       content_type="application/merge-patch+json")
