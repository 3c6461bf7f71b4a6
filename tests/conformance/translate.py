"""A scenario (and the state of its tasks in one round) as the Kubernetes objects kai reads, and KAI's
harness settings as a kai config (``kai/FORMAT.md`` sections 1 and 2).

Nodes, Queues, PriorityClasses, Topologies, PodGroups and Pods are written the way a user would write
them, so that every round goes through the same snapshot builder as ``kaictl dry-run``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from tests.conformance.scenario import (
    Amount,
    JobSpec,
    NodeSpec,
    QueueSpec,
    Scenario,
    SubGroupSpec,
    TaskSpec,
    TaskState,
    TopologyConstraintSpec,
)

Obj = dict[str, Any]
NAMESPACE = "kai-test"  # KAI's tests use namespace "": any one namespace will do
T0 = 1_767_225_600.0  # the clock of the first round (2026-01-01T00:00:00Z)
QUEUE_EPOCH = T0 - 86_400.0  # queues were made a day before, the i-th i minutes after this
RUNNING_FOR = 60.0  # jobs running in the input started this long before the first round
STUCK_FOR = 600.0  # a StuckInReleasing pod was deleted this long ago (KAI's threshold is 2 minutes)
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
FINISHED = {TaskState.FAILED: "Failed", TaskState.SUCCEEDED: "Succeeded"}  # a finished pod's phase
NODE_TYPE_LABEL = "kai.scheduler/type"  # KAI's test utils set it to the node name (files with node_affinity list it)
ACTIONS = {"allocate": "allocate", "consolidation": "consolidate", "reclaim": "reclaim", "preempt": "preempt",
           "stalegangeviction": "stale-gang"}


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """Where a task stands between rounds: KAI's status, its node, its GPU devices and group, and (for a
    pending pod whose ``spec.nodeName`` was preset in the input) the node KAI keeps on it."""

    state: TaskState
    node: str | None = None
    devices: tuple[int, ...] = ()
    gpu_group: str | None = None
    started: float | None = None
    preset_node: str | None = None

    def pending(self) -> TaskStatus:
        return replace(self, state=TaskState.PENDING, node=None, devices=(), started=None)


def initial_state(sc: Scenario) -> dict[str, TaskStatus]:
    out: dict[str, TaskStatus] = {}
    for job in sc.jobs:
        for task in job.tasks:
            group = task.gpu_groups[0] if task.gpu_groups and _shared(job) else None
            if task.state == TaskState.PENDING:
                out[task.name] = TaskStatus(TaskState.PENDING, gpu_group=group, preset_node=task.node)
            else:
                out[task.name] = TaskStatus(task.state, task.node, gpu_group=group, started=T0 - RUNNING_FOR)
    return out


def harness_config(sc: Scenario) -> SchedulerConfig:
    """KAI's harness settings: stale gangs evicted in the first session that sees them, consolidation with
    no cap on victims, binpack for GPUs and CPUs, and no cap on the victim searches or their scenarios."""
    return SchedulerConfig(
        actions=tuple(ACTIONS[a] for a in sc.actions),
        staleGangGraceSeconds=sc.stale_gang_grace_seconds,
        maxConsolidationMoves=1_000_000,
        maxVictimSearches=1_000_000,
        maxVictimScenarios=1_000_000,
    )


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def objects(sc: Scenario, state: dict[str, TaskStatus]) -> list[Obj]:
    out: list[Obj] = [_node(n) for n in sc.nodes]
    out += [_queue(q) for q in sc.queues]
    out += [_priority_class(p) for p in sorted({j.priority for j in sc.jobs})]
    out += [{"apiVersion": f"{c.TOPOLOGY_GROUP}/{c.TOPOLOGY_VERSION}", "kind": "Topology", "metadata": {"name": name},
             "spec": {"levels": [{"nodeLabel": lvl} for lvl in levels]}} for name, levels in sc.topologies.items()]
    for job in sc.jobs:
        out.append(_podgroup(job))
        out += [_pod(job, t, state[t.name]) for t in job.tasks]
    return out


def _node(n: NodeSpec) -> Obj:
    labels = {**n.labels, c.GPU_MEMORY_NODE_LABEL: str(n.gpu_memory_mib)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels},
            "status": {"allocatable": {"cpu": f"{n.cpu_millis}m", "memory": f"{n.memory_mb}M", "pods": "110",
                                       c.GPU_RESOURCE: str(n.gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _resource(a: Amount) -> Obj:
    # the implicit department of KAI's test utils has weight -1; it is alone at the top with an unlimited
    # quota, so its weight never matters, and kai's Queue schema accepts weights >= 0 only
    return {"quota": a.quota, "limit": a.limit, "overQuotaWeight": max(a.over_quota_weight, 0.0)}


def _queue(q: QueueSpec) -> Obj:
    spec: Obj = {"priority": q.priority,
                 "resources": {"gpu": _resource(q.gpu), "cpu": _resource(q.cpu), "memory": _resource(q.memory)}}
    if q.parent:
        spec["parentQueue"] = q.parent
    if q.reclaim_min_runtime_seconds is not None:
        spec["reclaimMinRuntime"] = f"{q.reclaim_min_runtime_seconds:g}s"
    created = QUEUE_EPOCH + 60.0 * q.created_offset_minutes
    return {"apiVersion": f"{c.SCHEDULING_GROUP}/{c.QUEUE_VERSION}", "kind": "Queue",
            "metadata": {"name": q.name, "creationTimestamp": iso(created)}, "spec": spec}


def _priority_class(value: int) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"priority-{value}"},
            "value": value}


def _constraint(tc: TopologyConstraintSpec | None) -> Obj:
    """A PodGroup's (or sub-group's) ``topologyConstraint``, as a one-key mapping to merge (empty: none)."""
    if tc is None:
        return {}
    return {"topologyConstraint": {"topology": tc.topology, **(
        {"requiredTopologyLevel": tc.required_level} if tc.required_level else {}), **(
        {"preferredTopologyLevel": tc.preferred_level} if tc.preferred_level else {})}}


def _flat_subgroups(sg: SubGroupSpec, parent: str | None) -> list[Obj]:
    out: list[Obj] = []
    for ps in sg.pod_sets:
        out.append({"name": ps.name, "minMember": ps.min_available, **({"parent": parent} if parent else {}),
                    **_constraint(ps.topology_constraint)})
    for child in sg.children:
        entry: Obj = {"name": child.name, **({"parent": parent} if parent else {}),
                      **_constraint(child.topology_constraint)}
        if child.min_subgroup is not None:
            entry["minSubGroup"] = child.min_subgroup
        out.append(entry)
        out += _flat_subgroups(child, child.name)
    return out


def _podgroup(job: JobSpec) -> Obj:
    spec: Obj = {"queue": job.queue, "priorityClassName": f"priority-{job.priority}",
                 "preemptibility": c.PREEMPTIBLE if job.preemptible else c.NON_PREEMPTIBLE}
    if job.subgroups is not None:
        spec["subGroups"] = _flat_subgroups(job.subgroups, None)
        if job.subgroups.min_subgroup is not None:
            spec["minSubGroup"] = job.subgroups.min_subgroup
        spec["minMember"] = 0
    else:
        spec["minMember"] = job.min_member if job.min_member is not None else len(job.tasks)
    spec.update(_constraint(job.topology_constraint))
    if job.preemption_delay_seconds is not None:
        spec["preemptionDelay"] = f"{job.preemption_delay_seconds:g}s"
    if job.staleness_grace_period_seconds is not None:
        spec["stalenessGracePeriod"] = f"{job.staleness_grace_period_seconds:g}s"
    created = T0 - 60.0 * job.created_minutes_ago
    meta: Obj = {"name": job.name, "namespace": NAMESPACE, "creationTimestamp": iso(created)}
    if job.stale_for_seconds is not None:  # KAI's test util StaleDuration: stale since that long before the session
        meta["annotations"] = {c.STALE_SINCE_ANNOTATION: iso(T0 - job.stale_for_seconds)}
    return {"apiVersion": f"{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}", "kind": "PodGroup", "metadata": meta,
            "spec": spec}


def _shared(job: JobSpec) -> bool:
    return job.gpu_memory_mib is not None or 0 < job.gpus_per_task < 1


def _pod(job: JobSpec, task: TaskSpec, st: TaskStatus) -> Obj:
    requests: Obj = {"cpu": f"{job.cpu_millis}m", "memory": f"{job.memory_mb}M"}
    annotations: Obj = {c.POD_GROUP_ANNOTATION: job.name}
    labels: Obj = {}
    if job.gpu_memory_mib is not None:
        annotations[c.GPU_MEMORY_ANNOTATION] = str(job.gpu_memory_mib)
    elif _shared(job):
        annotations[c.GPU_FRACTION_ANNOTATION] = f"{job.gpus_per_task:g}"
    elif task.gpus is not None:  # KAI's test utils: a task's RequiredGPUs replaces the pod's GPU request
        requests[c.GPU_RESOURCE] = str(task.gpus)
    elif job.gpus_per_task:
        requests[c.GPU_RESOURCE] = str(int(job.gpus_per_task))
    if job.gpu_fraction_devices is not None:  # KAI's test util RequiredMultiFractionDevicesPerTask
        annotations[c.GPU_FRACTION_NUM_DEVICES_ANNOTATION] = str(job.gpu_fraction_devices)
    labels.update(task.pod_labels)
    if task.subgroup:
        labels[SUBGROUP_LABEL] = task.subgroup
    if task.priority is not None:
        labels[TASK_PRIORITY_LABEL] = str(task.priority)
    if st.gpu_group and st.node:
        labels[c.GPU_GROUP_LABEL] = st.gpu_group
    if st.devices:
        annotations[c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in st.devices)
    meta: Obj = {"name": task.name, "namespace": NAMESPACE, "uid": task.name, "labels": labels,
                 "annotations": annotations, "creationTimestamp": iso(T0 - 60.0 * job.created_minutes_ago)}
    spec: Obj = {"schedulerName": c.DEFAULT_SCHEDULER_NAME,
                 "containers": [{"name": "main", "resources": {"requests": requests}}]}
    affinity: Obj = {}
    if task.node_affinity:  # KAI's test utils: required node affinity on the node-name label they put on each node
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": NODE_TYPE_LABEL, "operator": "In", "values": list(task.node_affinity)}]}]}}
    for kind, key in (("podAffinity", task.pod_affinity_topology_key),
                      ("podAntiAffinity", task.pod_anti_affinity_topology_key)):
        if key:  # KAI's test utils: one required term, selecting the pods with this pod's own affinity labels
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": key, "labelSelector": {"matchLabels": dict(task.pod_labels)}}]}
    if affinity:
        spec["affinity"] = affinity
    status: Obj = {"phase": "Pending"}
    if st.state in FINISHED:  # a finished pod, on a node or not (KAI's test utils leave some without one)
        status = {"phase": FINISHED[st.state]}
        if st.node:
            spec["nodeName"] = st.node
    elif st.state == TaskState.PIPELINED and st.node:  # kai's pipelined pod: pending, reserved on its node
        annotations[c.PIPELINED_NODE_ANNOTATION] = st.node
        annotations[c.PIPELINED_ACTION_ANNOTATION] = "allocate"
    elif st.state != TaskState.PENDING and st.node:
        spec["nodeName"] = st.node
        status = {"phase": "Running", "startTime": iso(st.started if st.started is not None else T0)}
        if st.state == TaskState.RELEASING:
            meta["deletionTimestamp"] = iso(T0 - 1.0)
        elif st.state == TaskState.STUCK_IN_RELEASING:
            meta["deletionTimestamp"] = iso(T0 - STUCK_FOR)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
