"""The cold build reads each pod's annotations once for what it reads of them (the pipelined node, the PodGroup
name, the stale mark its job keeps): the snapshot it builds is the one the plain readings build, each reading the
annotation from the object again (``place_pod`` and ``job_for_pod`` without the values given, ``complete_job``), on
random clusters whose pods write those annotations every which way."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.model import build
from kaid.model.build import build_snapshot
from kaid.model.jobs import job_for_pod
from kaid.model.objects import Job, Pod
from tests.test_live_model import _fixed_queues, _node, _owner, _pod, _podgroup, _queue, describe

Obj = dict[str, Any]

_MARKS = ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "1960-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "soon",
          "", None, 5]
_NAMES = ["pg-0", "pg-1", "pg-9", "", None, 3]


def _odd(rng: random.Random, obj: Obj) -> Obj:
    """A pod whose annotations name a stale mark, a PodGroup and a pipelined node every which way."""
    m = obj["metadata"]
    anns = m["annotations"]
    if rng.random() < 0.5:
        anns[c.STALE_SINCE_ANNOTATION] = rng.choice(_MARKS)
    if rng.random() < 0.2:
        anns[c.POD_GROUP_ANNOTATION] = rng.choice(_NAMES)
    if rng.random() < 0.1:
        anns[c.PIPELINED_NODE_ANNOTATION] = rng.choice(["node-1", "", None, 4])
    if rng.random() < 0.05:
        m["annotations"] = rng.choice([None, "x", []])
    return obj


def _cluster(rng: random.Random) -> list[Obj]:
    objs: list[Obj] = [*_fixed_queues(), *(_queue(rng, i) for i in range(5)), *(_node(rng, i) for i in range(7))]
    objs += [_podgroup(rng, i) for i in range(6)]
    objs += [_owner(rng, i, kind) for i in range(6) for kind in ("ReplicaSet", "Job")]
    objs += [_odd(rng, _pod(rng, i)) for i in range(rng.randint(20, 80))]
    rng.shuffle(objs)
    return objs


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build reading each annotation from the object again, as it did."""
    place = build.place_pod

    def place_pod(obj: Obj, pod: Pod, ours: bool, anns: Obj | None = None) -> int | None:
        return place(obj, pod, ours)

    def plain_job_for_pod(obj: Obj, pod: Pod, jobs: dict[str, Job], *args: Any) -> Job:
        return job_for_pod(obj, pod, jobs, *args[:4])

    def finish(jobs: dict[str, Job], queues: Any, pcs: Any, topologies: Any, aliases: Any, marks: Any) -> None:
        for job in jobs.values():
            build.complete_job(job, queues, pcs, topologies, aliases)

    monkeypatch.setattr(build, "place_pod", place_pod)
    monkeypatch.setattr(build, "job_for_pod", plain_job_for_pod)
    monkeypatch.setattr(build, "_finish_jobs", finish)


@pytest.mark.parametrize("seed", range(12))
def test_annotations_read_once_build_the_plain_snapshot(seed: int) -> None:
    rng = random.Random(seed)
    objs = _cluster(rng)
    cfg = SchedulerConfig()
    wait = rng.random() < 0.5
    fast = describe(build_snapshot(objs, cfg, 5000.0, wait_for_owners=wait))
    with pytest.MonkeyPatch.context() as mp:
        _plain(mp)
        plain = describe(build_snapshot(objs, cfg, 5000.0, wait_for_owners=wait))
    assert fast == plain


def test_a_job_of_marked_and_unmarked_pods_is_stale_since_its_latest_mark() -> None:
    """Every pod marked before 1970: the latest of them; one pod unmarked (0): not stale."""
    def pod(i: int, mark: str | None) -> Obj:
        anns = {c.POD_GROUP_ANNOTATION: "pg"} | ({c.STALE_SINCE_ANNOTATION: mark} if mark else {})
        return {"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns", "annotations": anns},
                "spec": {"schedulerName": c.DEFAULT_SCHEDULER_NAME, "containers": [{"name": "c"}]},
                "status": {"phase": "Pending"}}

    pg = {"kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 1, "queue": "q"}}
    early, earlier = "1960-01-02T00:00:00Z", "1960-01-01T00:00:00Z"
    snap = build_snapshot([pg, pod(0, early), pod(1, earlier)], SchedulerConfig(), 0.0)
    assert snap.jobs["ns/pg"].stale_since == meta.parse_time(early) < 0
    snap = build_snapshot([pg, pod(0, early), pod(1, None)], SchedulerConfig(), 0.0)
    assert snap.jobs["ns/pg"].stale_since is None
