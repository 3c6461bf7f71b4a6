"""KAI's externally made PodGroups (docs/developer/designs/external-podgroups and podgrouper/pod_controller.go at
d5bc503a): ``kai.scheduler/skip-podgrouper: "true"`` on a pod or on any owner up its chain means no PodGroup is made
for it. A pod that says so and names its PodGroup (``pod-group-name``) joins that one, as any pod naming one; a pod
that says so and names none is not scheduled, and its job says why and what to do (KAI leaves it pending silently)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.daemon import Overlay
from kaid.kube.livesnap import LiveSnapshots
from kaid.kube.podgrouper import podgroups_to_create
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import ReasonCode
from tests.objects import node, podgroup, queue
from tests.test_live_model import Cache
from tests.test_live_snapshots import FakeCache, _cold, _live, listed

Obj = dict[str, Any]
SKIP = c.SKIP_PODGROUPER_ANNOTATION


def _owner(kind: str, name: str, annotations: dict[str, str], owner: tuple[str, str] | None = None) -> Obj:
    m: Obj = {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "annotations": annotations,
              "creationTimestamp": "2026-01-01T00:00:00Z"}
    if owner is not None:
        m["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}]
    return {"apiVersion": "apps/v1" if kind != "Job" else "batch/v1", "kind": kind, "metadata": m, "spec": {}}


def _pod(name: str, annotations: dict[str, str], owner: tuple[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "annotations": annotations,
                         "labels": {"kai.scheduler/queue": "q"}, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}",
                                              "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler",
                     "containers": [{"name": "c", "resources": {"requests": {c.GPU_RESOURCE: "1"}}}]},
            "status": {"phase": "Pending"}}


def _deployment(on: str, value: str = "true", pod_group: str | None = None) -> list[Obj]:
    """A Deployment's ReplicaSet's two pods, with the skip annotation on ``on`` (deployment, replicaset, pod)."""
    ann = {SKIP: value}
    pod_ann = dict(ann if on == "pod" else {})
    if pod_group:
        pod_ann[c.POD_GROUP_ANNOTATION] = pod_group
    return [node("n1"), queue("q"),
            _owner("Deployment", "serve", ann if on == "deployment" else {}),
            _owner("ReplicaSet", "serve-1", ann if on == "replicaset" else {}, ("Deployment", "serve")),
            *(_pod(f"serve-1-{i}", pod_ann, ("ReplicaSet", "serve-1")) for i in range(2))]


@pytest.mark.parametrize(("on", "by"), [("pod", "Pod serve-1-0"), ("replicaset", "ReplicaSet serve-1"),
                                        ("deployment", "Deployment serve")])
def test_a_workload_that_skips_the_podgrouper_and_names_no_podgroup_waits_and_says_why(on: str, by: str) -> None:
    cfg = SchedulerConfig()
    objs = _deployment(on)
    assert podgroups_to_create(objs, cfg) == []
    snap = build_snapshot(objs, cfg, 0.0, wait_for_owners=True)
    (job,) = snap.jobs.values()
    assert [e.code for e in job.errors] == [ReasonCode.POD_GROUPER_SKIPPED]
    assert by in job.errors[0].message and c.POD_GROUP_ANNOTATION in job.errors[0].message
    d = run_cycle(snap, cfg)
    assert not d.binds and ReasonCode.POD_GROUPER_SKIPPED in [r.code for r in d.pending[job.key]]


@pytest.mark.parametrize("value", ["false", "True", ""])
def test_only_the_value_true_skips(value: str) -> None:
    cfg = SchedulerConfig()
    objs = _deployment("deployment", value)
    assert [meta.name(pg) for pg in podgroups_to_create(objs, cfg)] == ["pg-deployment-serve"]
    snap = build_snapshot(objs + podgroups_to_create(objs, cfg), cfg, 0.0, wait_for_owners=True)
    assert len(run_cycle(snap, cfg).binds) == 2


def test_pods_that_skip_it_join_the_podgroup_they_name_with_pods_of_another_workload() -> None:
    cfg = SchedulerConfig()
    objs = _deployment("deployment", pod_group="pipeline")
    other = _pod("eval-0", {c.POD_GROUP_ANNOTATION: "pipeline"}, ("Job", "eval"))
    objs += [_owner("Job", "eval", {SKIP: "true"}), other, podgroup("pipeline", "q", min_member=3, ns="team-a")]
    assert podgroups_to_create(objs, cfg) == []
    snap = build_snapshot(objs, cfg, 0.0, wait_for_owners=True)
    (job,) = snap.jobs.values()
    assert job.key == "team-a/pipeline" and len(job.pods) == 3 and not job.errors
    assert len(run_cycle(snap, cfg).binds) == 3


def test_the_daemons_live_snapshot_reads_a_skipped_workload_as_the_cold_path() -> None:
    cfg = SchedulerConfig()
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    sub = fake.subs[0]
    cache = Cache()
    objs = _deployment("replicaset")
    listed(objs, cache, sub, ("Node", "Queue", "Deployment", "ReplicaSet", "Pod", "PodGroup"))
    overlay = Overlay()
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    assert live.made == {}
    # the annotation taken off the ReplicaSet: the workload's PodGroup is made from memory, as the cold path makes it
    rs = copy.deepcopy(cache.items["ReplicaSet"]["team-a/serve-1"])
    rs["metadata"]["annotations"] = {}
    cache.upsert(rs)
    sub.event("ReplicaSet", False, rs)
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    assert list(live.made) == ["team-a/pg-deployment-serve"]
