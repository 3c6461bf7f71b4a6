"""A workload without a PodGroup of its own says its PodGroup's ``preemptionDelay`` and ``stalenessGracePeriod``
with KAI's annotations (``kai.scheduler/preemption-delay``, ``kai.scheduler/staleness-grace-period``; KAI's pod
grouper, defaultgrouper/default_grouper.go at d5bc503a): the owner's valid value first, then the pod's. The job in
the snapshot and the PodGroup kaid makes for it say the same; a value that does not parse is a warning on the job and
is passed over; an explicit PodGroup's own fields are not looked for in annotations."""

from __future__ import annotations

from typing import Any

import pytest

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.kube.podgrouper import podgroups_to_create
from kaid.model.build import build_snapshot
from kaid.model.grouping import annotated_durations
from kaid.model.vocabulary import ReasonCode

Obj = dict[str, Any]
DELAY, GRACE = c.PREEMPTION_DELAY_ANNOTATION, c.STALENESS_GRACE_ANNOTATION


def _batch_job(annotations: dict[str, str]) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a", "uid": "job-uid", "annotations": annotations,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parallelism": 1}}


def _pod(annotations: dict[str, str], owned: bool = True) -> Obj:
    m: Obj = {"name": "train-0", "namespace": "team-a", "uid": "pod-uid", "annotations": annotations,
              "creationTimestamp": "2026-01-01T00:00:00Z"}
    if owned:
        m["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid",
                                 "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m,
            "spec": {"schedulerName": "kai-scheduler",
                     "containers": [{"name": "c", "resources": {"requests": {c.GPU_RESOURCE: "1"}}}]},
            "status": {"phase": "Pending"}}


@pytest.mark.parametrize(("owner", "pod", "fields", "problems"), [
    ({DELAY: "5m"}, {DELAY: "30s", GRACE: "2m"}, {"preemptionDelay": "5m", "stalenessGracePeriod": "2m"}, 0),
    ({DELAY: "soon"}, {DELAY: "30s"}, {"preemptionDelay": "30s"}, 1),  # the owner's does not parse: the pod's
    ({DELAY: "-1m", GRACE: "-1s"}, {}, {"stalenessGracePeriod": "-1s"}, 1),  # a negative delay is not valid
    ({}, {}, {}, 0),
])
def test_the_owners_valid_value_first_then_the_pods(owner: Obj, pod: Obj, fields: Obj, problems: int) -> None:
    got, why = annotated_durations(_pod(pod), _batch_job(owner))
    assert got == fields
    assert len(why) == problems, why


def _built(objs: list[Obj]) -> tuple[Any, list[Obj]]:
    cfg = SchedulerConfig()
    made = podgroups_to_create(objs, cfg)
    return build_snapshot(objs, cfg, 0.0), made


def test_the_job_and_the_podgroup_kaid_makes_say_the_same() -> None:
    snap, made = _built([_batch_job({DELAY: "5m"}), _pod({GRACE: "-1s", DELAY: "1s"})])
    (job,) = snap.jobs.values()
    assert (job.preemption_delay, job.stale_grace) == (300.0, -1.0)
    (pg,) = made
    assert (pg["spec"]["preemptionDelay"], pg["spec"]["stalenessGracePeriod"]) == ("5m", "-1s")
    snap_of_made, _ = _built([_batch_job({}), _pod({}), pg])  # the PodGroup alone says it once made
    assert (snap_of_made.jobs[job.key].preemption_delay, snap_of_made.jobs[job.key].stale_grace) == (300.0, -1.0)


def test_a_bare_pods_annotations_and_a_bad_one_warns() -> None:
    snap, made = _built([_pod({DELAY: "an hour", GRACE: "90s"}, owned=False)])
    (job,) = snap.jobs.values()
    assert (job.preemption_delay, job.stale_grace) == (None, 90.0)
    assert [w.code for w in job.warnings] == [ReasonCode.INVALID_ANNOTATION]
    assert DELAY in job.warnings[0].message and "an hour" in job.warnings[0].message
    assert "preemptionDelay" not in made[0]["spec"]


def test_a_zero_delay_is_no_delay() -> None:
    snap, _ = _built([_pod({DELAY: "0s"}, owned=False)])
    (job,) = snap.jobs.values()
    assert job.preemption_delay is None


def test_an_explicit_podgroup_is_not_overridden_by_its_pods_annotations() -> None:
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "pg", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
          "spec": {"minMember": 1, "queue": "default-queue", "preemptionDelay": "10s"}}
    pod = _pod({DELAY: "5m", GRACE: "1m", c.POD_GROUP_ANNOTATION: "pg"}, owned=False)
    snap, made = _built([pg, pod])
    job = snap.jobs["team-a/pg"]
    assert (job.preemption_delay, job.stale_grace, made) == (10.0, None, [])
