"""Each pod of a scenario goes to a node where it fits on idle devices before one whose devices a pod leaving them
in this cycle freed (KAI's nodeavailability plugin: +1000 where the task fits on idle resources, at d5bc503a)."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Node, Pod
from kaid.placement.index import NodeIndex
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]


def test_reclaim_puts_the_first_task_on_the_idle_node() -> None:
    # node0 runs another queue's pod over its quota; node1 is idle: a gang of two 1-GPU pods reclaims node0, and its
    # first pod goes to node1 (idle), the second to node0 (freed), not the other way round by node order
    objs: list[Obj] = [queue("old", gpu=(0, -1, 1)), queue("new", gpu=(2, -1, 1)), node("node0", gpus=1),
                       node("node1", gpus=1),
                       pod("victim", gpus=1, queue="old", node_name="node0", phase="Running",
                           priorityClassName="train"),
                       podgroup("g", "new", 2), pod("g-0", gpus=1, group="g"), pod("g-1", gpus=1, group="g")]
    cfg = SchedulerConfig.model_validate({"actions": ["reclaim"]})
    d = run_cycle(build_snapshot(objs, cfg, 0.0), cfg)
    assert [e.pod for e in d.evictions] == ["default/victim"]
    assert {p.pod: p.node for p in d.pipelined} == {"default/g-0": "node1", "default/g-1": "node0"}


def _index() -> tuple[NodeIndex, list[Pod], list[Node]]:
    # nodes a and b, 2 GPUs each; r runs on a's device 0 and s on b's device 0; p, p2, p3 pending
    cfg = SchedulerConfig.model_validate({})
    objs: list[Obj] = [queue("q"), node("a", gpus=2), node("b", gpus=2),
                       pod("r", gpus=1, queue="q", node_name="a", phase="Running"),
                       pod("s", gpus=1, queue="q", node_name="b", phase="Running")]
    objs += [pod(name, gpus=1, queue="q") for name in ("p", "p2", "p3")]
    snap = build_snapshot(objs, cfg, 0.0)
    pods = sorted(snap.pods, key=lambda p: p.name)
    return NodeIndex(snap.nodes, pods=snap.pods), pods, snap.nodes


def test_the_index_tells_freed_devices_from_idle_ones() -> None:
    index, (p, p2, p3, r, _), (a, b) = _index()
    assert r.node == "a" and r.devices == (0,)
    index.release(a, r, (0,), planning=True)  # evicted: a's device 0 is free, not idle
    assert index.held == {a.index: {0}}
    assert index.best_node(p) == (b, (1,))  # binpack: b's one idle device
    index.assign(b, p, (1,))
    assert index.best_node(p2) == (a, (1,))  # a's idle device, not the one the eviction freed
    index.assign(a, p2, (1,))
    assert index.best_node(p3) == (a, (0,))  # then the freed one
    index.release(a, p2, (1,), planning=True)  # (a plan undone: nothing more held)
    assert index.held == {a.index: {0}}
    index.assign(a, r, (0,))  # the eviction rolled back: its device is its own again
    assert index.held == {}


def test_only_a_pods_own_devices_are_held() -> None:
    # what is held reads which snapshot pod left which of its own devices, not how the search got there
    index, (p, _, _, r, s), (a, b) = _index()
    index.release(a, r, (0,), planning=True)
    index.assign(a, r, (1,))  # the victim placed again on its node, on another device: its own one stays freed
    assert index.held == {a.index: {0}}
    index.release(a, r, (1,), planning=True)  # and leaving that device frees nothing of its own
    assert index.held == {a.index: {0}}
    index.assign(b, p, (1,))  # a pod placed this cycle (allocated, pipelined) then taken off again: nothing held
    p.node, p.status = "b", "Pipelined"
    index.release(b, p, (1,), planning=True)
    index.release(b, s, (0,), planning=True)
    index.assign(a, s, (0,))  # s put on a's device 0 (r's): b's device 0 stays held, a's too
    assert index.held == {a.index: {0}, b.index: {0}}
