"""A GPU group held only by pods pipelined in an earlier cycle that the cycle does not bind as it begins (a node of
their job is still over-committed) is not allocated: a shared-GPU pod that goes into it is pipelined, not bound (KAI:
gpu_sharing/gpuSharing.go GetNodePreferableGpuForSharing, node_info EnoughIdleResourcesOnGpu at d5bc503a: a group
missing from AllocatedSharedGPUsMemory, which a Pipelined pod does not enter, has no idle room). A group whose
pipelined pods the cycle binds is an allocated one: the pod is bound there."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue

NOW = 1_800_000_000.0
Obj = dict[str, Any]


def _pipelined(obj: Obj, node_name: str) -> Obj:
    anns = obj["metadata"]["annotations"]
    anns[c.PIPELINED_NODE_ANNOTATION] = node_name
    anns[c.PIPELINED_ACTION_ANNOTATION] = "reclaim"
    return obj


def _half(name: str, group: str) -> Obj:
    return pod(name, group=group, annotations={c.GPU_FRACTION_ANNOTATION: "0.5"})


def _objs(victim_left: bool) -> list[Obj]:
    """Job ``a``: half a GPU pipelined onto n1 (its GPU group ``g1`` alone on n1's device 0) and a whole GPU
    pipelined onto n2, where a releasing pod still holds n2's one GPU unless ``victim_left``. Job ``b``: half a GPU,
    pending."""
    a0 = _pipelined(_half("a-0", "a"), "n1")
    a0["metadata"]["labels"][c.GPU_GROUP_LABEL] = "g1"
    a0["metadata"]["annotations"][c.GPU_DEVICES_ANNOTATION] = "0"
    objs = [queue("org"), queue("q", "org"), node("n1", gpus=2), node("n2", gpus=1),
            podgroup("a", "q", 2), a0, _pipelined(pod("a-1", gpus=1, group="a"), "n2"),
            podgroup("b", "q", 1), _half("b-0", "b")]
    if not victim_left:
        r = pod("r-0", gpus=1, group="r", node_name="n2", phase="Running")
        r["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
        objs += [podgroup("r", "q", 1), r]
    return objs


def _run(objs: list[Obj], bind_ready: bool = True) -> Decisions:
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, NOW)
    return run_cycle(snap, cfg) if bind_ready else run_cycle(snap, cfg, bind_ready=False)


def _pods(binds: list[Any]) -> dict[str, str]:
    return {b.pod.split("/", 1)[1]: b.node for b in binds}


def test_a_pod_into_a_group_only_waiting_pods_hold_is_pipelined() -> None:
    out = _run(_objs(victim_left=False))
    assert _pods(out.binds) == {}  # job a waits for n2; b is not bound into a's group
    assert _pods(out.pipelined) == {"b-0": "n1"}
    assert out.pipelined[0].devices == (0,)  # into g1, the fullest device (binpack), not n1's idle one


def test_a_group_whose_pipelined_pods_are_bound_is_allocated() -> None:
    out = _run(_objs(victim_left=True))
    assert _pods(out.binds) == {"a-0": "n1", "a-1": "n2", "b-0": "n1"} and out.pipelined == []


def test_without_the_bind_at_the_start_every_pipelined_pod_waits() -> None:
    out = _run(_objs(victim_left=True), bind_ready=False)  # KAI's session: a Pipelined task is never bound
    assert _pods(out.binds) == {} and _pods(out.pipelined) == {"b-0": "n1"}
