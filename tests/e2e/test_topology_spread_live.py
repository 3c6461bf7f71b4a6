"""End to end: pods with a topology spread constraint that must hold (``whenUnsatisfiable: DoNotSchedule``) are bound
within its ``maxSkew`` per zone, as kube-scheduler binds them; kaid's bin packing stacked all four one-GPU replicas on
one node of one zone. kwok's nodes admit any pod, so where each is bound is kaid's choice alone."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .controlplane import ControlPlane
from .kaid_helpers import bound, create_object, pod, pods_of, queue, suffix, wait_for

ZONE = "example.com/zone"


def test_replicas_with_a_zone_spread_constraint_are_bound_two_per_zone(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, names = make_pool(4, gpus=4, node_labels=lambda i: {ZONE: f"z{i // 2}"})
    zone_of = {n: f"z{i // 2}" for i, n in enumerate(names)}
    (q,) = make_queues(queue(f"spread-{suffix()}", 0))
    for i in range(4):
        obj = pod(f"web-{i}", pool, q, 1)
        obj["metadata"]["labels"]["app"] = "web"
        obj["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}]
        create_object(cp, namespace, obj)
    start_kaid("spread")
    placed = wait_for(lambda: (lambda b: b if len(b) == 4 else None)(bound(pods_of(cp, namespace))), 60,
                      "the four replicas to be bound")
    zones = Counter(zone_of[p["spec"]["nodeName"]] for p in placed)
    assert zones == {"z0": 2, "z1": 2}, [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in placed]
