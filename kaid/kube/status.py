"""Status people can read with kubectl: PodGroup ``status.schedulingConditions`` with the engine's
structured reasons and ``resourcesStatus``; Queue status (allocated, fair share, deserved, ...); the
``PodScheduled=False`` condition on pending pods; events (``Scheduled``, ``Unschedulable`` rate-limited,
``Evicted``). Writes only what changed."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import NODE_POOL_LABEL
from kaid.cycle import Bind, Decisions
from kaid.kube.actuator import ApplyResult
from kaid.kube.client import ApiError, KubeClient, pod_path
from kaid.model.objects import NO_BACKOFF, SINGLE_BACKOFF, Job, Reason, Snapshot
from kaid.model.partition import (
    UNSCHEDULABLE_CONDITIONS,
    last_scheduling_condition,
    pool_of,
    scheduling_conditions,
    transition_id,
)
from kaid.model.vocabulary import EventReason, PodStatus, SchedulingCondition

log = logging.getLogger("kaid.status")
Obj = dict[str, Any]
UNSCHEDULABLE_EVENT_EVERY = 300.0
# kinds whose problems go into a Warning event (they have no status of their own): kind -> apiVersion
_NO_STATUS = {"Topology": f"{c.TOPOLOGY_GROUP}/{c.TOPOLOGY_VERSION}", "PriorityClass": "scheduling.k8s.io/v1",
              "Node": "v1", "Pod": "v1",  # (a Node's and a Pod's status are their kubelet's)
              "PodGroup": f"{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}"}  # (one left out: no job writes its status)


def _now() -> str:
    return meta.format_time(time.time())


def _digest(value: Any) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


_SAYS = ("type", "nodePool", "reason", "message", "status")  # what KAI compares of two (equalSchedulingConditions)


def _other_pools(other: Obj, pool: str) -> bool:
    """Whether a PodGroup's scheduling condition is an unschedulable one of another node pool than ``pool`` (the one
    it is in), which KAI keeps beside the one it writes (``squashAndAppendConditionsForNodepool``; a controller that
    moves PodGroups between pools reads them)."""
    named = other.get("nodePool")
    return str(other.get("type")) in UNSCHEDULABLE_CONDITIONS and isinstance(named, str) and bool(named) and \
        named != pool


def _reasons(rs: list[Reason]) -> list[Obj]:
    return [r.to_dict() for r in rs]


@dataclass(frozen=True, slots=True)
class OutcomeEvent:
    """An event that tells one of a cycle's outcomes (a pod evicted, a bind refused), on the object it concerns
    (its identity only: the pod may be gone by the time the event is written)."""

    involved: Obj
    reason: EventReason
    message: str
    kind: str


def outcome_events(snap: Snapshot, applied: ApplyResult) -> list[OutcomeEvent]:
    """The ``Evicted`` and ``BindingError`` events of a cycle: they come from its outcome alone, so a cycle whose status
    is written later (the writer was busy) hands them on (``StatusWriter.read``'s ``carried``)."""
    pods = {p.key: p for p in snap.pods}
    out: list[OutcomeEvent] = []
    for e in applied.evicted:
        pod = pods.get(e.pod)
        if pod is not None and pod.raw is not None:
            out.append(OutcomeEvent(_identity(pod.raw), EventReason.EVICTED, f"{e.action} for {e.by}: {e.message}",
                                    "Warning"))
    for b, error in applied.failed:
        pod = pods.get(b.pod)
        if pod is not None and pod.raw is not None:
            out.append(OutcomeEvent(_identity(pod.raw), EventReason.BINDING_ERROR,
                                    f"could not bind to node {b.node}: {error}", "Warning"))
    return out


def _identity(obj: Obj) -> Obj:
    """What an event says of the object it is about (``StatusWriter._send_event``)."""
    m = meta.meta(obj)
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {"name": m.get("name"), "namespace": m.get("namespace"), "uid": m.get("uid")}}


class StatusWriter:
    def __init__(self, client: KubeClient, scheduler_name: str, workers: int = 8,
                 may_act: Callable[[], bool] | None = None, pool_label: str = NODE_POOL_LABEL) -> None:
        """``may_act``: asked before each write (the daemon's "this replica holds the lease"); ``pool_label``: the
        label that names a PodGroup's node pool (``nodePoolLabelKey``)."""
        self.client = client
        self.pool_label = pool_label
        self.may_act = may_act or (lambda: True)
        self.component = scheduler_name
        self.written: dict[str, str] = {}  # object key -> digest of what we last wrote
        self.last_event: dict[tuple[str, str], tuple[float, str]] = {}
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="status")
        self.lock = threading.Lock()
        self.tasks: list[Any] = []
        # Queue name -> status.usage to write (the daemon replaces it every usage.writeIntervalSeconds)
        self.usage: dict[str, Obj] = {}

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def _patch_status(self, path: str, key: str, status: Obj) -> None:
        digest = _digest(status)
        with self.lock:
            if self.written.get(key) == digest:
                return
        self.tasks.append(lambda: self._send_status(path, key, status, digest))

    def _send_status(self, path: str, key: str, status: Obj, digest: str) -> None:
        try:
            self.client.merge_patch(path, {"status": status})
            with self.lock:
                self.written[key] = digest
        except ApiError as err:
            if err.status != 404:
                log.warning("status of %s not written: %s", key, err.message)

    def event(self, involved: Obj, reason: EventReason, message: str, kind: str = "Normal", every: float = 0.0) -> None:
        key = (f"{involved.get('kind')}/{meta.namespace(involved)}/{meta.meta(involved).get('name')}", str(reason))
        last = self.last_event.get(key)
        now = time.monotonic()
        if last is not None and last[1] == message and now - last[0] < every:
            return
        self.last_event[key] = (now, message)
        self.tasks.append(lambda: self._send_event(involved, reason, message, kind))

    def _send_event(self, involved: Obj, reason: EventReason, message: str, kind: str) -> None:
        m = meta.meta(involved)
        ns = meta.namespace(involved) or "default"  # a cluster-scoped object's events live in default
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{m.get('name', 'kai')}.", "namespace": ns},
            "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                               "name": m.get("name"), "namespace": m.get("namespace"), "uid": m.get("uid")},
            "reason": reason, "message": message[:1000], "type": kind,
            "source": {"component": self.component}, "reportingComponent": self.component,
            "firstTimestamp": _now(), "lastTimestamp": _now(), "count": 1,
        }
        try:
            self.client.create(f"/api/v1/namespaces/{quote(ns)}/events", body)
        except ApiError as err:
            log.debug("event not written: %s", err.message)

    def write(self, snap: Snapshot, d: Decisions, applied: ApplyResult, earlier: Sequence[Bind] = (),
              carried: Sequence[OutcomeEvent] = ()) -> None:
        """Work out every change (``read``), then send them (``send``)."""
        self.read(snap, d, applied, earlier, carried)
        self.send()

    def read(self, snap: Snapshot, d: Decisions, applied: ApplyResult, earlier: Sequence[Bind] = (),
             carried: Sequence[OutcomeEvent] = ()) -> None:
        """Work out every change from a cycle's snapshot and decisions; the snapshot is not looked at again (the
        daemon's next snapshot may change its objects). ``earlier``: binds of an earlier cycle that wrote nothing
        (the daemon's early cycle): their ``Scheduled`` events are written here, on this cycle's PodGroups (the
        snapshot counts those pods as placed already) and of cycles that found the writer busy; ``carried``: those
        cycles' ``outcome_events``."""
        self.tasks = []
        self._collect(snap, d, applied, earlier, carried)

    def send(self) -> None:
        """Send what ``read`` worked out, concurrently (the writes are independent)."""
        tasks, self.tasks = self.tasks, []
        list(self.pool.map(lambda task: task() if self.may_act() else None, tasks))

    def _collect(self, snap: Snapshot, d: Decisions, applied: ApplyResult, earlier: Sequence[Bind],
                 carried: Sequence[OutcomeEvent]) -> None:
        bound_jobs: dict[str, int] = {}
        bound_gpu: dict[str, int] = {}
        bound_nodes: dict[str, set[str]] = {}
        for b in applied.bound:
            bound_jobs[b.job] = bound_jobs.get(b.job, 0) + 1
            bound_gpu[b.job] = bound_gpu.get(b.job, 0) + b.gpu_milli
            bound_nodes.setdefault(b.job, set()).add(b.node)
        for job in snap.jobs.values():
            reasons = d.pending.get(job.key)
            if reasons is None and job.errors and not job.pods:
                reasons = list(job.errors)  # a bad PodGroup says so before its pods come, not "0 pods placed"
            if job.explicit and job.raw is not None:
                alloc = sum(p.gpu_milli_on(snap.node_by_name.get(p.node or "")) for p in job.pods if p.active) + \
                    bound_gpu.get(job.key, 0)
                running = sum(1 for p in job.pods if p.active) + bound_jobs.get(job.key, 0)
                self._podgroup_status(job, job.raw, reasons, alloc, running)
            if reasons and job.mark_unschedulable:  # (spec.markUnschedulable false: the PodGroup says it alone)
                self._pending_pods(job, self._message(job, reasons, 2000))
        for b in earlier:
            bound_jobs[b.job] = bound_jobs.get(b.job, 0) + 1
            bound_nodes.setdefault(b.job, set()).add(b.node)
        for job_key, count in bound_jobs.items():  # one Scheduled event per pod group, not per pod
            group = snap.jobs.get(job_key)
            if group is not None and group.raw is not None and group.explicit:
                nodes = sorted(bound_nodes[job_key])
                self.event(group.raw, EventReason.SCHEDULED, f"bound {count} pods to {len(nodes)} nodes at node-pool "
                           f"{self._pool(group)}: {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}")
        for e in [*carried, *outcome_events(snap, applied)]:
            self.event(e.involved, e.reason, e.message, e.kind)
        self._problems(d)
        self.write_queues(d, snap)

    def _problems(self, d: Decisions) -> None:
        """A Warning event on each bad object that has no status of its own to say it (a Topology, a
        PriorityClass, a Node, a Pod, a PodGroup left out as malformed); Queues and PodGroups read say it in their
        status. Repeated every few minutes while it lasts."""
        for problem in d.problems:
            api_version = _NO_STATUS.get(problem.kind)
            if api_version is None:
                continue
            involved = {"apiVersion": api_version, "kind": problem.kind,
                        "metadata": {"name": problem.name, "namespace": problem.namespace}}
            self.event(involved, EventReason.INVALID, problem.reason.message, "Warning", UNSCHEDULABLE_EVENT_EVERY)

    def _podgroup_status(self, job: Job, raw: Obj, reasons: list[Reason] | None, alloc: int, running: int) -> None:
        """A PodGroup's scheduling condition and resources; an ``Unschedulable`` event, rate-limited, while it waits.
        The condition is KAI's (``default_status_updater.go`` at d5bc503a): while it waits, ``UnschedulableOnNodePool``
        with reason ``Unschedulable``, its node pool and the reasons (their codes in ``reasons[].reason``), after the
        other pools' conditions, which stay; once placed, kai's ``Scheduled`` alone (KAI removes them all). A
        condition that says something new gets the next transition ID and time; one that says the same keeps them."""
        cond: Obj
        if reasons:
            cond = {"type": SchedulingCondition.UNSCHEDULABLE_ON_NODE_POOL, "status": "True", "reason": "Unschedulable",
                    "message": self._message(job, reasons, 4000), "reasons": _reasons(reasons)}
            if not (running and job.scheduling_backoff != NO_BACKOFF):  # (a PodGroup tried once per pool is left
                # alone when its condition names its pool: never one that runs pods, for which KAI writes none)
                cond["nodePool"] = self._pool(job)
        else:
            cond = {"type": SchedulingCondition.SCHEDULED, "status": "True", "reason": "Scheduled",
                    "message": f"{running} pods placed", "reasons": []}
        old = last_scheduling_condition(raw)
        if all(old.get(k) == cond.get(k) for k in _SAYS):
            cond["transitionID"] = str(old.get("transitionID") or 1)
            cond["lastTransitionTime"] = old.get("lastTransitionTime") or _now()
        else:
            cond["transitionID"] = str(max(transition_id(old), 0) + 1)
            cond["lastTransitionTime"] = _now()
        pool = self._pool(job)  # (a condition that names none, of a PodGroup running pods, replaces its pool's too)
        others = [other for other in scheduling_conditions(raw) if reasons and _other_pools(other, pool)]
        status = {"schedulingConditions": [*others, cond], "resourcesStatus": {
            "allocated": {"gpu": alloc / 1000, "pods": running},
            "requested": {"gpu": job.request_milli / 1000, "pods": len(job.pods)}}}
        self._patch_status(f"/apis/{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}/namespaces/"
                           f"{quote(job.namespace)}/podgroups/{quote(job.name)}/status", f"PodGroup/{job.key}", status)
        if reasons:
            self.event(raw, EventReason.UNSCHEDULABLE, str(cond["message"]), "Warning", UNSCHEDULABLE_EVENT_EVERY)

    def _pool(self, job: Job) -> str:
        """The node pool a PodGroup is in: its ``nodePoolLabelKey`` label (KAI's GetNodePoolNameFromLabels)."""
        return pool_of(job.raw, self.pool_label)

    def _message(self, job: Job, reasons: list[Reason], most: int) -> str:
        """The reasons in one message of at most ``most`` characters; for a PodGroup tried once per node pool
        (``schedulingBackoff: 1``), after the pool's name (KAI's addNodePoolPrefixIfNeeded)."""
        text = "; ".join(r.message for r in reasons)
        if job.scheduling_backoff == SINGLE_BACKOFF:
            text = f"Node-Pool '{self._pool(job)}': {text}"
        return text[:most]

    def _pending_pods(self, job: Job, message: str) -> None:
        """``PodScheduled=False`` with the reasons' ``message`` on the job's pending pods, where it says something
        new."""
        for p in job.pods:
            if p.status != PodStatus.PENDING or p.raw is None:
                continue
            conds = (p.raw.get("status") or {}).get("conditions") or []
            cur: Obj = next((x for x in conds if x.get("type") == "PodScheduled"), {})
            if cur.get("status") == "False" and cur.get("message") == message:
                continue
            cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                    "lastTransitionTime": _now()}
            self.tasks.append(lambda p=p, cond=cond: self._pod_condition(p.namespace, p.name, cond))

    def _pod_condition(self, namespace: str, name: str, cond: Obj) -> None:
        try:
            self.client.strategic_patch(pod_path(namespace, name, "status"), {"status": {"conditions": [cond]}})
        except ApiError as err:
            log.debug("pod condition not written: %s", err.message)

    def write_queues(self, d: Decisions, snap: Snapshot) -> None:
        for row in d.queues:
            q = snap.queues.get(row.name)
            if q is None:
                continue
            conds = [{"type": "Valid", "status": "False" if q.errors else "True",
                      "reason": q.errors[0].code if q.errors else "Valid",
                      "message": q.errors[0].message if q.errors else "queue is valid"}]
            status = {"allocated": row.allocated_final,
                      "allocatedNonPreemptible": row.allocated_non_preemptible, "requested": row.requested,
                      "fairShare": row.fair_share, "deserved": row.deserved,
                      "childQueues": [ch.name for ch in q.children], "conditions": conds}
            usage = self.usage.get(q.name)
            if usage is not None:
                status["usage"] = usage
            self._patch_status(f"/apis/{c.SCHEDULING_GROUP}/{c.QUEUE_VERSION}/queues/{quote(q.name)}/status",
                               f"Queue/{q.name}", status)
