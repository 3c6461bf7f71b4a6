"""A victim gang that allocate placed in this cycle is taken back whole or not at all, and not served again in the
cycle that tears it down: no gang is left running below its minimum (tools1's hypothesis example of
``test_properties.test_cycles_keep_invariants``). allocate binds j1-0 and j1-1 (minimum 2) and j2-0; reclaim for
j0 evicts j1's core; a scenario put j1-1 back alone (one pod per victim pod that can stay) and left j1-0 evicted,
and reclaim's own turn for j1 then pipelined j1-2 alone: 1 of 2 either way."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.sim.apply import apply
from tests.objects import node, pod, podgroup, queue
from tests.test_properties import check_invariants

UNLIMITED = (-1, -1, 1)


def _objs() -> list[dict[str, Any]]:
    taint = [{"key": "gpu", "effect": "NoSchedule"}]
    return [
        node("n0", gpus=2, cpu="8", memory="256Gi", labels={"rack": "r0"}),
        node("n1", gpus=1, cpu="8", memory="256Gi", labels={"rack": "r1"}, taints=taint),
        {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "t"},
         "spec": {"levels": [{"nodeLabel": "rack"}]}},
        queue("org", gpu=UNLIMITED), queue("d0", "org", gpu=(2, -1, 1), priority=200),
        queue("t00", "d0", gpu=(-1, -1, 0)), queue("t01", "d0", gpu=(-1, -1, 0)),
        queue("d1", "org", gpu=UNLIMITED), queue("t10", "d1", gpu=(-1, -1, 0)), queue("t11", "d1", gpu=(-1, -1, 0)),
        podgroup("j0", "t10", 1, priority_class="train",
                 topologyConstraint={"topology": "t", "requiredTopologyLevel": "rack"}),
        pod("j0-0", gpus=1, group="j0", tolerations=[]),
        podgroup("j1", "t00", 2, priority_class="train", created="2026-01-01T00:00:01Z"),
        *[pod(f"j1-{k}", gpus=1, group="j1", tolerations=[]) for k in range(3)],
        podgroup("j2", "t00", 1, priority_class="train", created="2026-01-01T00:00:02Z"),
        pod("j2-0", gpus=1, group="j2", tolerations=[{"key": "gpu", "operator": "Exists"}]),
    ]


def test_no_gang_is_left_below_its_minimum() -> None:
    for solver in ("cpsat", "greedy"):
        cfg = SchedulerConfig.model_validate({"placement": {"gangSolver": solver}})
        objs = _objs()
        snap = build_snapshot(objs, cfg, 0.0)
        d = run_cycle(snap, cfg)
        check_invariants(snap)  # the engine's own view
        apply(objs, d, 0.0)
        check_invariants(build_snapshot(objs, cfg, 0.0))  # and the cluster with the decisions applied
