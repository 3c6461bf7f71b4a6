"""Which min runtime protects a victim (KAI's minruntime plugin, resolver.go at d5bc503a): preempt takes the nearest
preemptMinRuntime up the victim's queue path; reclaim, by KAI's default resolve method "lca", starts that walk at the
child, on the victim's side, of the two queues' lowest common ancestor (the victim's own queue when they are the
same; the victim's top-level queue alone when they share none). A value set to 0 ends the walk."""

from __future__ import annotations

from typing import Any

import pytest

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.queues import min_runtimes, preempt_min_runtime, reclaim_min_runtime
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
NOW = 1767225600.0  # 2026-01-01T00:00:00Z


def _queue(name: str, parent: str | None, preempt: str | None, reclaim: str | None, **kw: Any) -> Obj:
    q = queue(name, parent, **kw)
    if preempt is not None:
        q["spec"]["preemptMinRuntime"] = preempt
    if reclaim is not None:
        q["spec"]["reclaimMinRuntime"] = reclaim
    return q


# the tree of KAI's resolver_test.go (createTestQueues): (name, parent, preempt, reclaim)
TREE = [("dev", None, "5s", "10s"), ("prod", None, "20s", "30s"), ("research", None, "4s", "6s"),
        ("dev-team1", "dev", None, "8s"), ("dev-team2", "dev", "3s", None), ("prod-team1", "prod", None, "25s"),
        ("prod-team2", "prod", "15s", "35s"), ("research-project", "research", "7s", "9s")]


@pytest.fixture(scope="module")
def tree() -> Any:
    return build_snapshot([_queue(*q) for q in TREE], SchedulerConfig(), NOW).queues


@pytest.mark.parametrize(("claimant", "victim", "seconds"), [
    ("dev-team1", "prod-team2", 30),        # no common ancestor: the victim's top-level queue's
    ("dev-team2", "dev-team1", 8),          # common ancestor dev: from dev-team1 up
    ("prod-team1", "prod-team2", 35),
    ("prod-team2", "prod-team2", 35),       # the same queue: its own
    ("dev-team1", "research-project", 6),   # the top-level queue's, not research-project's 9
    ("dev-team1", "dev-team2", 10),         # dev-team2 sets none: dev's
])
def test_reclaim_walks_up_from_below_the_lowest_common_ancestor(tree: Any, claimant: str, victim: str,
                                                                seconds: float) -> None:
    assert reclaim_min_runtime(tree[victim], tree[claimant]) == seconds


@pytest.mark.parametrize(("victim", "seconds"), [("prod-team2", 15), ("prod-team1", 20), ("dev-team1", 5),
                                                 ("research-project", 7)])
def test_preempt_walks_up_from_the_victims_queue(tree: Any, victim: str, seconds: float) -> None:
    assert preempt_min_runtime(tree[victim]) == seconds


def test_a_zero_ends_the_walk_and_the_horizon_sees_every_value(tree: Any) -> None:
    queues = build_snapshot([_queue("d", None, "1h", "1h"), _queue("leaf", "d", "0s", "0s")], SchedulerConfig(),
                            NOW).queues
    assert preempt_min_runtime(queues["leaf"]) == 0 and reclaim_min_runtime(queues["leaf"], queues["leaf"]) == 0
    assert min_runtimes(tree["prod-team2"]) == {15, 20, 30, 35}


def _cluster(claimant_parent: str) -> list[Obj]:
    """A 2-GPU node full of a job of queue a (department da: reclaimMinRuntime 10m; a itself: 1h) started 20 minutes
    before NOW and over its share; a 2-GPU job waits in queue b (under ``claimant_parent``), whose share the node is."""
    running = pod("run-0", gpus=2, group="run", node_name="n0")
    running["status"]["startTime"] = "2025-12-31T23:40:00Z"  # NOW - 1200
    return [node("n0", gpus=2), _queue("da", None, None, "10m", gpu=(0, -1, 1)), _queue("db", None, None, None),
            _queue("a", "da", None, "1h", gpu=(0, -1, 1)), _queue("b", claimant_parent, None, None, gpu=(2, -1, 1)),
            podgroup("run", "a", 1, priority_class="train"), podgroup("wait", "b", 1), running,
            pod("wait-0", gpus=2, group="wait")]


@pytest.mark.parametrize(("claimant_parent", "reclaimed"), [
    ("db", True),   # another department: da's 10 minutes, over
    ("da", False),  # a sibling: a's own hour, not over
])
def test_reclaim_by_another_department_reads_the_departments_min_runtime(claimant_parent: str,
                                                                          reclaimed: bool) -> None:
    cfg = SchedulerConfig()
    d = run_cycle(build_snapshot(_cluster(claimant_parent), cfg, NOW), cfg)
    assert [e.pod for e in d.evictions] == (["default/run-0"] if reclaimed else [])
