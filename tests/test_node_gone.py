"""Pods bound to a node that has since been deleted (the pod garbage collector has not removed them yet): both
snapshot paths make them ``NODE_GONE``. They hold nothing on any node, count for their gang and their queue as
running (as KAI counts them), and no action ever takes them as victims: a cycle that reclaims from their job, or
evicts their stale gang, evicts the pods on live nodes only (it used to raise KeyError in ``Session.evict``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Snapshot
from kaid.model.vocabulary import PodStatus
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
NOW = 1_800_000_000.0  # 2027: long past the stale marks below


def _objects() -> list[Obj]:
    stale = podgroup("c", "qa", min_member=3, priority_class="train")
    stale["metadata"]["annotations"] = {c.STALE_SINCE_ANNOTATION: "2026-01-01T00:00:00Z"}
    return [
        node("n1", gpus=8), node("gone", gpus=8),
        queue("qa", gpu=(0, -1, 1)), queue("qb", gpu=(8, -1, 1)),
        # a: a gang of 2 over its queue's share, one pod on each node; b: a guaranteed job that needs a's GPUs on n1
        podgroup("a", "qa", min_member=2, priority_class="train"),
        pod("a-0", gpus=4, group="a", node_name="n1"), pod("a-1", gpus=4, group="a", node_name="gone"),
        podgroup("b", "qb", min_member=1), pod("b-0", gpus=6, group="b"),
        # c: a gang of 3 with 2 pods left, below its minimum past its grace: evicted whole
        stale, pod("c-0", gpus=2, group="c", node_name="n1"), pod("c-1", gpus=2, group="c", node_name="gone"),
    ]


def _cold(objects: list[Obj]) -> Snapshot:
    return build_snapshot([o for o in objects if o["metadata"]["name"] != "gone" or o["kind"] != "Node"],
                          SchedulerConfig(), NOW)


def _live(objects: list[Obj]) -> Snapshot:
    model = LiveModel(SchedulerConfig())
    for o in objects:
        model.upsert(o)
    model.snapshot(NOW)  # every pod placed, the node there
    model.delete("Node", "/gone")
    return model.snapshot(NOW)


@pytest.mark.parametrize("build", [_cold, _live], ids=["cold", "live"])
def test_pods_on_a_deleted_node_are_never_victims_and_hold_nothing(build: Callable[[list[Obj]], Snapshot]) -> None:
    snap = build(_objects())
    status = {p.name: p.status for p in snap.pods}
    assert status == {"a-0": PodStatus.RUNNING, "a-1": PodStatus.NODE_GONE, "b-0": PodStatus.PENDING,
                      "c-0": PodStatus.RUNNING, "c-1": PodStatus.NODE_GONE}
    assert [n.name for n in snap.nodes] == ["n1"]
    assert sum(1000 for d in snap.node_by_name["n1"].dev_used if d) == 6000  # a-0 and c-0 only
    assert snap.queues["qa"].allocated[0] == 12_000  # the queue is charged as KAI charges it: 4 pods running

    decisions = run_cycle(snap, SchedulerConfig())

    evicted = sorted(e.pod for e in decisions.evictions)
    assert evicted == ["default/a-0", "default/c-0"]  # never a pod on the deleted node
    assert {e.pod: e.action for e in decisions.evictions}["default/c-0"] == "stale-gang"
    assert [b.pod for b in decisions.pipelined + decisions.binds] == ["default/b-0"]


def test_a_gang_counts_its_pods_on_a_deleted_node_as_running() -> None:
    """As KAI: a gang whose pods are on a node gone since is whole until the pod garbage collector removes them."""
    objects = [node("n1", gpus=8), queue("qa"), podgroup("g", "qa", min_member=2),
               pod("g-0", gpus=1, group="g", node_name="n1"), pod("g-1", gpus=1, group="g", node_name="gone")]
    for snap in (build_snapshot(objects, SchedulerConfig(), NOW), _live([*objects, node("gone")])):
        decisions = run_cycle(snap, SchedulerConfig())
        assert decisions.evictions == [] and decisions.stale.get("default/g") is None
