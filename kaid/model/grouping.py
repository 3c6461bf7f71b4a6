"""Which PodGroup a pod belongs to when it names none: its top owner's (the compatibility contract in
docs/architecture.md).

Pure functions over plain dicts, shared by the snapshot builder (for offline snapshots) and by the
daemon's PodGroup maker.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.duration import parse_duration
from kaid.api.meta import as_int

Obj = dict[str, Any]
OwnerIndex = dict[tuple[str, str, str], Obj]  # (namespace, kind, name) -> object
# the workload kinds a snapshot indexes as owners of pods
OWNER_KINDS = {"Job", "ReplicaSet", "Deployment", "StatefulSet", "CronJob", "PyTorchJob", "MPIJob",
               "RayJob", "RayCluster", "JobSet", "LeaderWorkerSet", "TFJob", "XGBoostJob"}
# owners the daemon watches: a pod whose owner is one of these waits until the owner is seen
WATCHED_OWNER_KINDS = {"Job", "ReplicaSet", "Deployment", "StatefulSet", "PyTorchJob", "MPIJob", "RayJob",
                       "RayCluster", "JobSet", "LeaderWorkerSet"}


@dataclass(slots=True, frozen=True)
class GroupInfo:
    """The PodGroup a pod without one belongs to: its name, gang size and the workload that decides them."""

    name: str
    min_member: int
    owner_kind: str
    owner_name: str
    owner: Obj | None  # the top owner object when the snapshot has it


def controller_ref(obj: Obj) -> Obj | None:
    """The owner reference marked as controller, else the first one; None without owners."""
    refs = meta.meta(obj).get("ownerReferences") or []
    if not isinstance(refs, list):
        return None
    refs = [r for r in refs if isinstance(r, dict) and r.get("kind") and r.get("name")]
    for ref in refs:
        if ref.get("controller"):
            return dict(ref)
    return dict(refs[0]) if refs else None


def top_owner(pod: Obj, owners: OwnerIndex) -> tuple[str, str, Obj | None]:
    """(kind, name, object or None) of the top owner; the pod itself when it has none."""
    return deque(owner_chain(pod, owners), maxlen=1)[0]


def owner_chain(pod: Obj, owners: OwnerIndex) -> Iterator[tuple[str, str, Obj | None]]:
    """The pod, then each owner up its controller references, as (kind, name, object or None where the snapshot does
    not have it); it ends at an owner not found or seen twice, and at a Job a CronJob made (each is a workload of its
    own)."""
    ns = meta.namespace(pod)
    kind, current = "Pod", pod
    yield kind, meta.name(pod), pod
    seen: set[tuple[str, str]] = set()
    while True:
        ref = controller_ref(current)
        if ref is None or (kind == "Job" and ref.get("kind") == "CronJob"):
            return
        kind, name = str(ref["kind"]), str(ref["name"])
        if (kind, name) in seen:
            yield kind, name, None
            return
        seen.add((kind, name))
        found = owners.get((ns, kind, name))
        yield kind, name, found
        if found is None:
            return
        current = found


def podgrouper_skipped_by(pod: Obj, owners: OwnerIndex) -> str | None:
    """The pod or owner ("Kind name") whose annotation ``kai.scheduler/skip-podgrouper: "true"`` (that value only, as
    KAI's podgrouper reads it) says that no PodGroup is to be made for the pod; None when none says so."""
    m = meta.meta(pod)
    refs = m.get("ownerReferences")
    if not refs or not isinstance(refs, list):  # (no owner: the pod's own annotation, without the walk)
        skip = meta.mapping(m.get("annotations")).get(c.SKIP_PODGROUPER_ANNOTATION) == "true"
        return f"Pod {m.get('name', '')}" if skip else None
    for kind, name, obj in owner_chain(pod, owners):
        if meta.annotations_of(obj).get(c.SKIP_PODGROUPER_ANNOTATION) == "true":
            return f"{kind} {name}"
    return None


def _replica_sum(specs: Any) -> int:
    return sum(as_int(s.get("replicas"), 1) for s in meta.mapping(specs).values() if isinstance(s, dict))


def _mappings(value: Any) -> list[Obj]:
    """The mappings of a field that should be a list of them (a workload's groups); none where it is not one."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def min_member_of(kind: str, owner: Obj | None, pod: Obj) -> int:
    """How many pods of this workload must start together. The workload's fields are read as their types say, and a
    field of another type as absent: a third party's resource (a RayCluster, a JobSet) may come through a schema
    that leaves parts of it unchecked."""
    for source in (owner, pod):  # the owner's annotation wins
        anns = meta.annotations_of(source)
        if c.BATCH_MIN_MEMBER_ANNOTATION in anns:
            return max(1, as_int(anns[c.BATCH_MIN_MEMBER_ANNOTATION], 1))
    if owner is None:
        return 1
    spec = meta.mapping(owner.get("spec"))
    if kind == "PyTorchJob":
        return max(1, _replica_sum(spec.get("pytorchReplicaSpecs")))
    if kind == "MPIJob":
        return max(1, _replica_sum(spec.get("mpiReplicaSpecs")))
    if kind == "RayCluster":
        workers = _mappings(spec.get("workerGroupSpecs"))
        return 1 + sum(as_int(w.get("minReplicas"), as_int(w.get("replicas"), 0)) for w in workers)
    if kind == "RayJob":
        return min_member_of("RayCluster", {"spec": meta.mapping(spec.get("rayClusterSpec"))}, pod)
    if kind == "JobSet":
        total = 0
        for rj in _mappings(spec.get("replicatedJobs")):
            par = as_int(meta.mapping(meta.mapping(rj.get("template")).get("spec")).get("parallelism"), 1)
            total += as_int(rj.get("replicas"), 1) * par
        return max(1, total)
    if kind == "LeaderWorkerSet":
        return max(1, as_int(meta.mapping(spec.get("leaderWorkerTemplate")).get("size"), 1))
    return 1


def group_for_pod(pod: Obj, owners: OwnerIndex) -> GroupInfo:
    """The PodGroup a pod without a ``pod-group-name`` annotation belongs to."""
    m = meta.meta(pod)
    labels = meta.mapping(m.get("labels"))
    job_id = labels.get(c.JOB_ID_LABEL)
    if job_id:
        size = max(1, as_int(labels.get(c.JOB_SIZE_LABEL), 1))
        return GroupInfo(f"pg-job-id-{job_id}", size, "JobId", str(job_id), None)
    refs = m.get("ownerReferences")
    if not refs or not isinstance(refs, list):  # a pod of its own, as most single pods are: no owner to walk up to
        # (what top_owner and min_member_of say of it, without the walk: a cold snapshot and the live model's cycle
        # ask this of every such pod two or three times, 4.5 us each through the walk, bench_kube: 2,141 pods)
        name = str(m.get("name", ""))
        anns = m.get("annotations")
        size = 1
        if isinstance(anns, dict) and c.BATCH_MIN_MEMBER_ANNOTATION in anns:
            size = max(1, as_int(anns[c.BATCH_MIN_MEMBER_ANNOTATION], 1))
        return GroupInfo(f"pg-pod-{name}", size, "Pod", name, pod)
    kind, name, owner = top_owner(pod, owners)
    if kind == "Pod":
        return GroupInfo(f"pg-pod-{name}", min_member_of(kind, None, pod), kind, name, pod)
    return GroupInfo(f"pg-{kind.lower()}-{name}", min_member_of(kind, owner, pod), kind, name, owner)


@dataclass(slots=True)
class WorkloadLabels:
    """What a workload says about itself: the owner first, then the pod, then its namespace."""

    queue: str | None = None
    priority_class: str | None = None
    priority: int | None = None  # a pod's spec.priority when it names no class
    preemptibility: str | None = None
    topology: str | None = None
    required_level: str | None = None
    preferred_level: str | None = None


def _text(value: Any) -> str | None:
    """A label or annotation value as text; None when absent or empty."""
    return None if value is None or value == "" else str(value)


def workload_labels(pod: Obj, owner: Obj | None, namespace: Obj | None,
                    queue_keys: tuple[str, ...]) -> WorkloadLabels:
    """Queue, priority class, preemptibility and topology from the owner's labels, then the pod's, then (for the
    queue) its namespace's."""
    sources = label_sources(pod, owner)
    out = WorkloadLabels()
    out.queue = labelled_queue(sources, namespace, queue_keys)
    out.priority_class, out.priority = labelled_priority(sources, pod)
    out.preemptibility = labelled_preemptibility(sources)[0]
    out.topology, out.required_level, out.preferred_level = annotated_topology(pod, owner)
    return out


# Each part of ``workload_labels`` on its own: a job whose PodGroup says its queue and priority class (as most do)
# reads only the rest (``jobs._labels_from``).
def label_sources(pod: Obj, owner: Obj | None) -> tuple[Obj, Obj]:
    """The labels a workload says things with: the owner's first (none: empty), then the pod's."""
    return meta.labels_of(owner), meta.labels_of(pod)


def labelled_queue(sources: tuple[Obj, Obj], namespace: Obj | None, queue_keys: tuple[str, ...]) -> str | None:
    for labels in sources:
        for key in queue_keys:
            queue = _text(labels.get(key))
            if queue:
                return queue
    ns_labels = meta.labels_of(namespace)
    return next((q for q in (_text(ns_labels.get(k)) for k in queue_keys) if q), None)


def labelled_priority(sources: tuple[Obj, Obj], pod: Obj) -> tuple[str | None, int | None]:
    """(the priority class, the pod's ``spec.priority`` when it names none)."""
    for labels in sources:
        priority_class = _text(labels.get(c.PRIORITY_CLASS_LABEL))
        if priority_class:
            return priority_class, None
    spec = pod.get("spec") or {}
    priority_class = str(spec.get("priorityClassName") or "") or None
    if priority_class is None and "priority" in spec:
        return None, as_int(spec.get("priority"), 0)
    return priority_class, None


def labelled_preemptibility(sources: tuple[Obj, Obj]) -> tuple[str | None, str | None]:
    """(preemptible or non-preemptible, the label's value when it is neither)."""
    for labels in sources:
        value = _text(labels.get(c.PREEMPTIBILITY_LABEL))
        if value in (c.PREEMPTIBLE, c.NON_PREEMPTIBLE):
            return value, None
        if value:
            return None, value
    return None, None


def annotated_topology(pod: Obj, owner: Obj | None) -> tuple[str | None, str | None, str | None]:
    """(topology, required level, preferred level) from the owner's annotations, then the pod's."""
    for anns in (meta.annotations_of(owner), meta.annotations_of(pod)):
        topology = _text(anns.get(c.TOPOLOGY_ANNOTATION))
        if topology:
            return (topology, _text(anns.get(c.TOPOLOGY_REQUIRED_ANNOTATION)),
                    _text(anns.get(c.TOPOLOGY_PREFERRED_ANNOTATION)))
    return None, None, None


# The PodGroup fields a workload's annotations set (KAI's pod grouper: calcPodGroupPreemptionDelay,
# calcStalenessGracePeriod in plugins/defaultgrouper/default_grouper.go at d5bc503a).
ANNOTATED_DURATIONS = {c.PREEMPTION_DELAY_ANNOTATION: "preemptionDelay",
                       c.STALENESS_GRACE_ANNOTATION: "stalenessGracePeriod"}


def annotated_durations(pod: Obj, owner: Obj | None) -> tuple[dict[str, str], list[str]]:
    """The PodGroup fields (``preemptionDelay``, ``stalenessGracePeriod``) that the workload's annotations set: for
    each, the first valid value of the owner's annotation, then the pod's; and why each value passed over is not
    valid. A preemption delay may not be negative; a negative staleness grace period means never stale."""
    fields: dict[str, str] = {}
    problems: list[str] = []
    for source, what in ((owner, "its owner"), (pod, "the pod")):
        anns = meta.annotations_of(source)
        for key, field in ANNOTATED_DURATIONS.items():
            if field in fields or key not in anns:
                continue
            value = anns[key]
            try:
                seconds = parse_duration(value)
            except ValueError as err:
                problems.append(f"annotation {key} on {what}: {err}; ignored")
                continue
            if seconds < 0 and key == c.PREEMPTION_DELAY_ANNOTATION:
                problems.append(f"annotation {key} on {what}: {value!r} is negative (a delay is 0 or more); ignored")
                continue
            fields[field] = str(value)
    return fields, problems
