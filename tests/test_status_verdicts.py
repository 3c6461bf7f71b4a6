"""Every bad object kaid reads gets its verdict on the cluster (found by the malformed-objects fault test,
tests/e2e/test_faults.py): a PodGroup that is invalid before any of its pods exists says why, not "0 pods
placed"; a Topology, which has no status of its own, gets a Warning event (in namespace default, where
cluster-scoped objects' events go)."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.actuator import ApplyResult
from kaid.kube.status import StatusWriter
from kaid.model.build import build_snapshot


class Recorder:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.created: list[tuple[str, Any]] = []

    def merge_patch(self, path: str, patch: Any) -> dict[str, Any]:
        self.patches.append((path, patch))
        return {}

    def strategic_patch(self, path: str, patch: Any) -> dict[str, Any]:
        self.patches.append((path, patch))
        return {}

    def create(self, path: str, body: Any) -> dict[str, Any]:
        self.created.append((path, body))
        return {}


OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"},
     "spec": {"resources": {"gpu": {"quota": 1, "limit": -1}}}},
    {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "bad", "namespace": "ns"},
     "spec": {"minMember": 1, "queue": "q", "subGroups": [{"name": "a", "minMember": -1}]}},
    {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "flat"}, "spec": {"levels": []}},
]


def _write(may_act: bool = True) -> Recorder:
    cfg = SchedulerConfig()
    snap = build_snapshot(OBJECTS, cfg, 1_000_000.0)
    decisions = run_cycle(snap, cfg)
    client = Recorder()
    writer = StatusWriter(client, cfg.schedulerName, may_act=lambda: may_act)  # type: ignore[arg-type]
    try:
        writer.write(snap, decisions, ApplyResult())
    finally:
        writer.close()
    return client


def test_an_invalid_podgroup_without_pods_says_why() -> None:
    client = _write()
    (status,) = [p["status"] for path, p in client.patches if path.endswith("/podgroups/bad/status")]
    cond = status["schedulingConditions"][-1]
    assert cond["type"] == "UnschedulableOnNodePool" and cond["status"] == "True"
    assert "PodGroup ns/bad is invalid" in cond["message"]


def test_an_invalid_topology_gets_a_warning_event_in_default() -> None:
    client = _write()
    events = [(path, e) for path, e in client.created if e["involvedObject"]["kind"] == "Topology"]
    assert len(events) == 1
    path, event = events[0]
    assert path == "/api/v1/namespaces/default/events"
    assert event["type"] == "Warning" and event["reason"] == "Invalid"
    assert event["involvedObject"]["name"] == "flat" and "topology flat is invalid" in event["message"]


def test_a_replica_that_lost_the_lease_writes_nothing() -> None:
    client = _write(may_act=False)
    assert client.patches == [] and client.created == []


def test_a_topology_level_must_be_a_node_label_key_and_distinct() -> None:
    from kaid.model.objects import ObjectProblem
    from kaid.model.policy import read_topologies

    def problems(*labels: str) -> list[str]:
        found: list[ObjectProblem] = []
        read_topologies([{"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": x} for x in labels]}}], found)
        return [p.reason.message for p in found]

    assert problems("topology.kubernetes.io/zone", "kai.scheduler/rack", "kubernetes.io/hostname") == []
    assert "is not a node label key" in problems("zone", "bad label!")[0]
    assert "is not a node label key" in problems("a/b/c")[0]
    assert "rack repeated" in problems("rack", "rack")[0]


def test_podgroup_sub_groups_that_do_not_form_a_tree_are_invalid_not_a_crash() -> None:
    """Found by the malformed-objects fault test: a sub-group that is its own parent sent every cycle into a
    RecursionError (kaid scheduled nothing more); a repeated or empty name did the same."""
    cfg = SchedulerConfig()
    for subgroups in ([{"name": "a", "parent": "a"}], [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}],
                      [{"name": "a"}, {"name": "a", "parent": "a"}], [{"name": "", "minMember": 1}]):
        objects = [
            OBJECTS[0],
            {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "pg", "namespace": "ns"},
             "spec": {"minMember": 1, "queue": "q", "subGroups": subgroups}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
                                                             "annotations": {"pod-group-name": "pg"}},
             "spec": {"schedulerName": cfg.schedulerName, "containers": [{"name": "c"}]}},
        ]
        snap = build_snapshot(objects, cfg, 1_000_000.0)
        decisions = run_cycle(snap, cfg)
        (reason, *_) = decisions.pending["ns/pg"]
        assert reason.code == "InvalidPodGroup", (subgroups, reason)
