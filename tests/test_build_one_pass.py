"""The cold build's short cuts (a PodGroup's job that asks its labels nothing they cannot tell; a pod's parts read
once for all the build reads of it) build the snapshot the plain readings build, on random clusters whose pods, owners
and PodGroups say queue, priority class, preemptibility and topology every which way, and on the benchmark's
workload; the live model, which reads each object as the plain build does, agrees."""

from __future__ import annotations

import random
from typing import Any

import pytest

from benchmarks.bench_allocate import build_workload, config_for
from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.model import build, jobs
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Job, Pod, Reason
from kaid.model.pods import read_pod
from kaid.sim.cluster import EPOCH
from tests.test_build_annotations import _odd
from tests.test_live_model import NS, _fixed_queues, _node, _owner, _pod, _podgroup, _policy, _queue, describe

Obj = dict[str, Any]

# the PodGroups a pod without the PodGroup annotation is grouped into (``grouping.group_for_pod``): a PodGroup object
# of that name is the job, and its first pod's owner may label it
_GROUP_NAMES = [*(f"pg-{kind}-own-{i}" for kind in ("replicaset", "job", "deployment") for i in range(6)),
                *(f"pg-pod-p-{i}" for i in range(6)), "pg-job-id-j0", "pg-job-id-j1"]
_PREEMPTIBILITY = [c.PREEMPTIBLE, c.NON_PREEMPTIBLE, "sometimes", "", None]
_TOPOLOGY = ["topo", "none", "", None]


def _labelled(rng: random.Random, obj: Obj) -> Obj:
    """A pod or owner that may say its preemptibility (label) and topology (annotations)."""
    m = obj["metadata"]
    labels = m.get("labels")
    if isinstance(labels, dict) and rng.random() < 0.3:
        labels[c.PREEMPTIBILITY_LABEL] = rng.choice(_PREEMPTIBILITY)
    if isinstance(labels, dict) and rng.random() < 0.15:
        labels[c.PRIORITY_CLASS_LABEL] = rng.choice(("inference", "custom"))
    anns = m.get("annotations")
    if isinstance(anns, dict) and rng.random() < 0.3:
        anns[c.TOPOLOGY_ANNOTATION] = rng.choice(_TOPOLOGY)
        if rng.random() < 0.5:
            anns[c.TOPOLOGY_REQUIRED_ANNOTATION] = rng.choice(("zone", "rack", "row"))
        if rng.random() < 0.5:
            anns[c.TOPOLOGY_PREFERRED_ANNOTATION] = rng.choice(("zone", "rack", ""))
    return obj


def _said(rng: random.Random, pg: Obj, name: str | None = None, ns: str | None = None) -> Obj:
    """A PodGroup that says its priority class (most do), and may say its preemptibility or leave its queue unsaid."""
    spec = pg["spec"]
    if name is not None:
        pg["metadata"]["name"] = name
    if ns is not None:
        pg["metadata"]["namespace"] = ns
    if rng.random() < 0.7:
        spec["priorityClassName"] = rng.choice(("train", "inference", "custom"))
    if rng.random() < 0.3:
        spec["preemptibility"] = rng.choice((c.PREEMPTIBLE, c.NON_PREEMPTIBLE))
    if rng.random() < 0.1:
        del spec["queue"]
    return pg


def _cluster(rng: random.Random) -> list[Obj]:
    objs: list[Obj] = [*_fixed_queues(), *(_queue(rng, i) for i in range(5)), *(_node(rng, i) for i in range(7))]
    objs += [_said(rng, _podgroup(rng, i)) for i in range(7)]
    objs += [_said(rng, _podgroup(rng, 40 + i), name, ns) for i, name in enumerate(_GROUP_NAMES) for ns in NS
             if rng.random() < 0.6]
    objs += [_labelled(rng, _owner(rng, i, kind)) for i in range(6) for kind in ("ReplicaSet", "Job", "Deployment")]
    objs.append(_policy(rng, "PriorityClass", 0))
    objs += [{"kind": "Namespace", "metadata": {"name": ns, "labels": {c.QUEUE_LABEL: rng.choice(("q-0", "q-3"))}}}
             for ns in NS if rng.random() < 0.6]
    objs.append({"kind": "Topology", "metadata": {"name": "topo"},
                 "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]}})
    objs += [_labelled(rng, _odd(rng, _pod(rng, i))) for i in range(rng.randint(20, 80))]
    rng.shuffle(objs)
    return objs


def _always(job: Job, pod: Obj, owner: Obj | None) -> bool:
    return True


def _read_plain(obj: Obj, m: Obj, spec: Obj, status: Obj, anns: Obj, problems: list[Reason]) -> Pod:
    return read_pod(obj, problems)


def _plain(mp: pytest.MonkeyPatch) -> None:
    """Every short cut off: each job's first pod asks its labels everything (``jobs._labels_from``); every pod is read
    from its object (``read_pod``, which reads its parts again)."""
    mp.setattr(jobs, "_labels_may_tell", _always)
    mp.setattr(build, "read_parts", _read_plain)


def _both(objs: list[Obj], cfg: SchedulerConfig, now: float, wait: bool = False) -> tuple[Any, Any]:
    """The snapshot of the build with its short cuts, and of the plain readings; the live model, which reads each
    object as the plain build does (``pod_role``, ``read_pod``, ``place_pod``, ``complete_job``), agrees with the
    first."""
    fast = describe(build_snapshot(objs, cfg, now, wait_for_owners=wait))
    with pytest.MonkeyPatch.context() as mp:
        _plain(mp)
        plain = describe(build_snapshot(objs, cfg, now, wait_for_owners=wait))
    live = LiveModel(cfg, wait_for_owners=wait)
    for obj in objs:
        live.upsert(obj)
    assert describe(live.snapshot(now)) == fast
    return fast, plain


@pytest.mark.parametrize("seed", range(16))
def test_random_clusters_build_the_plain_snapshot(seed: int) -> None:
    rng = random.Random(seed)
    fast, plain = _both(_cluster(rng), SchedulerConfig(), 5000.0, rng.random() < 0.5)
    assert fast == plain


@pytest.mark.parametrize("seed", range(2))
def test_the_benchmark_workload_builds_the_plain_snapshot(seed: int) -> None:
    wl = build_workload(50, 500, 18, seed)
    fast, plain = _both(wl.objects, config_for("cpsat"), EPOCH + 3600.0)
    assert fast == plain


def test_a_podgroup_job_takes_what_its_first_pod_says_and_the_podgroup_does_not() -> None:
    """The PodGroup says queue and priority class; its pod says preemptibility and topology, which the job takes;
    a pod grouped by its owner into a PodGroup of that name takes its owner's preemptibility."""
    def pod(name: str, labels: Obj, anns: Obj, refs: list[Obj]) -> Obj:
        return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": anns,
                                            "ownerReferences": refs},
                "spec": {"schedulerName": c.DEFAULT_SCHEDULER_NAME, "containers": [{"name": "c"}]},
                "status": {"phase": "Pending"}}

    def pg(name: str) -> Obj:
        return {"kind": "PodGroup", "metadata": {"name": name, "namespace": "ns"},
                "spec": {"minMember": 1, "queue": "q", "priorityClassName": "train"}}

    owner = {"kind": "Job", "metadata": {"name": "own", "namespace": "ns",
                                         "labels": {c.PREEMPTIBILITY_LABEL: c.NON_PREEMPTIBLE}}, "spec": {}}
    objs = [pg("a"), pg("pg-job-own"), owner,
            pod("a-0", {c.PREEMPTIBILITY_LABEL: c.NON_PREEMPTIBLE}, {c.POD_GROUP_ANNOTATION: "a",
                                                                     c.TOPOLOGY_ANNOTATION: "topo"}, []),
            pod("b-0", {}, {}, [{"kind": "Job", "name": "own", "controller": True}])]
    snap = build_snapshot(objs, SchedulerConfig(), 0.0)
    a, b = snap.jobs["ns/a"], snap.jobs["ns/pg-job-own"]
    assert (a.preemptibility, a.topology, a.queue, a.priority_class) == (c.NON_PREEMPTIBLE, "topo", "q", "train")
    assert (b.preemptibility, b.queue) == (c.NON_PREEMPTIBLE, "q")
