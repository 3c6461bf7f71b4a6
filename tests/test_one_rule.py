"""Rules that had copies, now written once: what a bind or a pipelined reservation leaves on a pod (the daemon's
assumed writes and the simulator apply the same), label selectors, a node's room for a pod shape, and the units
of the usage history."""

from __future__ import annotations

import copy

import pytest

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.cycle import Bind, Decisions
from kaid.fairshare import UsageHistory, UsageParams
from kaid.kube.actuator import ApplyResult
from kaid.kube.daemon import Overlay
from kaid.model.build import build_snapshot
from kaid.model.nodes import read_node
from kaid.model.objects import Budget, Pod
from kaid.model.pods import read_pod
from kaid.model.selectors import selector_matches
from kaid.placement.predicates import room_for
from kaid.sim.apply import bind_pod, pipeline_pod
from tests.objects import node, pod, queue

NOW = 1_767_225_600.0


def _pipelined_pod() -> dict[str, object]:
    obj = pod("p", annotations={c.GPU_FRACTION_ANNOTATION: "0.5", c.PIPELINED_NODE_ANNOTATION: "n0",
                                c.PIPELINED_ACTION_ANNOTATION: "reclaim", c.GPU_DEVICES_ANNOTATION: "3"})
    return obj


def _scheduling_fields(obj: dict[str, object]) -> tuple[object, ...]:
    """What a snapshot reads of a placed pod."""
    p = read_pod(obj, [])
    return p.node, p.devices, p.gpu_group, obj["metadata"].get("annotations")  # type: ignore[attr-defined]


@pytest.mark.parametrize("devices,group", [((1,), "n1-gpu1"), ((), None)])
def test_the_daemon_assumes_a_bind_as_the_simulator_applies_it(devices: tuple[int, ...], group: str | None) -> None:
    bind = Bind("default/p", "n1", "default/pg-p", "q", devices, group, 500, "reclaim", "default/other")
    overlay = Overlay()
    overlay.record(Decisions(), ApplyResult(bound=[bind]), NOW)
    (assumed,) = overlay.apply([_pipelined_pod()], NOW + 1)
    simulated = _pipelined_pod()
    bind_pod(simulated, bind, NOW)
    assert _scheduling_fields(assumed) == _scheduling_fields(simulated)
    anns = assumed["metadata"]["annotations"]
    assert c.PIPELINED_NODE_ANNOTATION not in anns and c.PIPELINED_ACTION_ANNOTATION not in anns
    assert read_pod(assumed, []).devices == devices


def test_the_daemon_assumes_a_pipelined_reservation_as_the_simulator_applies_it() -> None:
    bind = Bind("default/p", "n2", "default/pg-p", "q", (2,), "n2-gpu2", 500, "preempt", "default/other")
    overlay = Overlay()
    overlay.record(Decisions(pipelined=[bind]), ApplyResult(), NOW)
    (assumed,) = overlay.apply([pod("p", annotations={c.GPU_FRACTION_ANNOTATION: "0.5"})], NOW + 1)
    simulated = pod("p", annotations={c.GPU_FRACTION_ANNOTATION: "0.5"})
    pipeline_pod(simulated, bind)
    assert _scheduling_fields(assumed) == _scheduling_fields(simulated)
    assert assumed["metadata"]["annotations"][c.PIPELINED_NODE_ANNOTATION] == "n2"


@pytest.mark.parametrize("selector,labels,expected", [
    ({}, {"a": "1"}, True),
    ({"matchLabels": {"app": "x"}}, {"app": "x", "b": "2"}, True),
    ({"matchLabels": {"app": "x"}}, {"app": "y"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}, {"app": "y"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}, {}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "x"}, False),
    ({"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "x"},
     False),
])
def test_label_selectors(selector: dict[str, object], labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_a_budget_covers_the_pods_its_selector_names_in_its_namespace() -> None:
    p = Pod("team", "w-0", "u")
    p.labels = {"app": "train"}
    assert Budget("team", "pdb", {"matchLabels": {"app": "train"}}, 1).covers(p)
    assert not Budget("other", "pdb", {"matchLabels": {"app": "train"}}, 1).covers(p)
    assert not Budget("team", "pdb", {}, 1).covers(p), "an empty selector covers nothing"


def test_room_for_a_pod_shape_is_the_scarcest_resource() -> None:
    n = read_node(node("n", gpus=8, cpu="10", memory="64Gi"))
    shape = read_pod(pod("s", gpus=2, cpu="3", memory="1Gi"), [])
    assert room_for(n, shape) == 3  # cpu: 10 // 3
    n.idle = 3
    assert room_for(n, shape) == 1  # GPUs: 3 // 2
    n.used_pods = n.alloc_pods
    assert room_for(n, shape) == 0
    busy = copy.copy(n)
    busy.used_pods, busy.used_cpu = 0, n.alloc_cpu + 1000  # overcommitted: no room, never negative
    assert room_for(busy, shape) == 0


def test_usage_history_is_fed_in_the_engines_units() -> None:
    """The daemon and the simulator both keep usage through ``UsageHistory.observe`` on a snapshot (they had fed
    memory in bytes and in megabytes, and counted a cycle period rather than the time that passed): milli-GPU,
    millicores and bytes times the seconds between two snapshots, and the capacity the same way."""
    cfg = SchedulerConfig()
    objs = [node("n0"), queue("q"), pod("p", gpus=2, cpu="3", memory="2Gi", queue="q", node_name="n0", phase="Running")]
    history = UsageHistory(UsageParams())
    first = build_snapshot(objs, cfg, NOW)
    history.observe(first)
    history.observe(build_snapshot(objs, cfg, NOW + 10))
    used, capacity = history.totals()
    assert used["q"] == [a * 10.0 for a in first.queues["q"].allocated] == [2000 * 10.0, 3000 * 10.0, 2 * 2**30 * 10.0]
    assert capacity == [c * 10.0 for c in first.capacity()]
