"""Build a Snapshot from plain Kubernetes objects (dicts): sort them by kind, read each kind (``pods``,
``nodes``, ``queues``, ``jobs``, ``policy``), account what the pods hold, and assemble.

Nothing here raises on a bad object: every problem becomes a Reason on that object (a job's
``errors``/``warnings``, a queue's ``errors``, or an ``ObjectProblem``), and every other object is
still read.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.model.grouping import OWNER_KINDS, OwnerIndex, group_for_pod
from kaid.model.jobs import Aliases, check_min_member, finish_job, job_for_pod, read_podgroup
from kaid.model.nodes import hold_other, hold_reserved_device, occupy, read_node
from kaid.model.objects import (
    Job,
    Node,
    ObjectProblem,
    Pod,
    PriorityClass,
    Queue,
    Reason,
    Snapshot,
    malformed,
    own_errors,
)
from kaid.model.partition import Partition, podgroup_key, workload_owner
from kaid.model.pods import (
    PodReader,
    annotation_text,
    annotation_value,
    claims,
    is_reservation_pod,
    opened_by,
    read_parts,
    read_pod,
)
from kaid.model.policy import read_budgets, read_priority_classes, read_topologies
from kaid.model.queues import account, read_queues
from kaid.model.vocabulary import BOUND_OR_RUNNING, FINISHED_PHASES, PodPhase, PodStatus
from kaid.model.volumes import ClaimModes, bound_volumes, read_claims

Obj = dict[str, Any]
# a pod that holds resources on a node, with the order it is accounted in: those that recorded their GPUs
# first, then the others, then pipelined pods, which take what is left
Holder = tuple[int, Node, Pod]


@dataclass
class Inputs:
    """The objects of a snapshot, by kind."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    queues: list[Obj] = field(default_factory=list)
    podgroups: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    topologies: list[Obj] = field(default_factory=list)
    namespaces: dict[str, Obj] = field(default_factory=dict)
    pdbs: list[Obj] = field(default_factory=list)
    volumes: list[Obj] = field(default_factory=list)  # PersistentVolumes
    claims: list[Obj] = field(default_factory=list)  # PersistentVolumeClaims
    classes: list[Obj] = field(default_factory=list)  # StorageClasses
    owners: OwnerIndex = field(default_factory=dict)


_LISTS = {"Node": "nodes", "Pod": "pods", "Queue": "queues", "PodGroup": "podgroups",
          "PriorityClass": "priority_classes", "Topology": "topologies", "PodDisruptionBudget": "pdbs",
          "PersistentVolume": "volumes", "PersistentVolumeClaim": "claims", "StorageClass": "classes"}
READ_KINDS: frozenset[str] = frozenset({*_LISTS, "Namespace", *OWNER_KINDS})  # the kinds a snapshot reads


def sort_inputs(objects: Iterable[Obj], into: Inputs | None = None) -> Inputs:
    """Objects by kind (the items of a ``List`` included); unknown kinds and non-objects are skipped."""
    inp = into or Inputs()
    # each kind's list found once per call
    into_list: dict[Any, Callable[[Obj], None]] = {kind: getattr(inp, name).append for kind, name in _LISTS.items()}
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        kind = obj.get("kind")
        if not isinstance(kind, str):
            continue  # (no kind kai reads; a list or a mapping cannot be looked up)
        add = into_list.get(kind)
        if add is not None:
            add(obj)
        elif kind == "List":
            sort_inputs(obj.get("items") or [], inp)
        elif kind == "Namespace":
            inp.namespaces[meta.name(obj)] = obj
        elif kind in OWNER_KINDS:
            inp.owners[(meta.namespace(obj), str(kind), meta.name(obj))] = obj
    return inp


def build_snapshot(objects: Iterable[Obj], config: SchedulerConfig | None = None, now: float = 0.0,
                   usage: Mapping[str, list[float]] | None = None, wait_for_owners: bool = False,
                   pod_reader: PodReader | None = None) -> Snapshot:
    """Read plain Kubernetes objects into a Snapshot. Never raises on a bad object.

    ``wait_for_owners``: a pod whose workload owner (a Job, PyTorchJob, ...) is not among the objects yet
    waits instead of being grouped by itself; the daemon sets it, since its watches can show a pod before
    its owner and the owner decides the gang.

    ``pod_reader``: reads one pod as ``read_pod`` does (the daemon's ``PodMemo`` copies the pods it read in
    an earlier cycle); it must return a Pod this snapshot may change."""
    with collector_paused():
        return _build(objects, config or SchedulerConfig(), now, usage, wait_for_owners, pod_reader)


class _Builds:
    """Whether a cold build freezes what it made (``freeze_builds``): one switch per process, as the collector is."""

    frozen = False


def freeze_builds(on: bool) -> bool:
    """Under kaid's collector settings (``kaid.kube.startup.settle_gc``, ``--gc kaid`` of bench_allocate) a cold
    build ends with ``gc.freeze()``: the snapshot's objects (214,000 at 4,000 nodes) live for one cycle and die by
    reference counting once it is released, so no collection should walk them; left young, the first collection
    after the build walked them all (about 11 ms at 1,000 nodes, 66 ms at 4,000) to find nothing. A caller that
    builds with this on must ``release`` each snapshot it is done with: frozen, its pods and jobs, which refer to
    each other, are never collected otherwise. Returns the setting it replaced."""
    was = _Builds.frozen
    _Builds.frozen = on
    return was


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a snapshot is read. Reading allocates hundreds of thousands of tracked
    objects that all live on (the snapshot's) or die by reference counting (the temporaries): a collection finds
    nothing to free, and CPython's default thresholds start full collections over the whole heap, the objects read
    included, as the snapshot grows (two at 4,000 nodes, 1.0 s of a 2.9 s build; one at 1,000, 0.17 s). The
    collector is left as it was (``kaid run`` pauses it itself while it lists).

    With ``freeze_builds`` on, what the build made is frozen once it is read. A full collection first, so that
    nothing unreachable is frozen with it (frozen, it would never be freed): it walks only what is out of the
    freezer, what came since the last build (the last cycle's leftovers, new objects of the watch cache)."""
    frozen = _Builds.frozen
    if frozen:
        gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if frozen:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()


def _build(objects: Iterable[Obj], cfg: SchedulerConfig, now: float, usage: Mapping[str, list[float]] | None,
           wait_for_owners: bool, pod_reader: PodReader | None) -> Snapshot:
    inp = sort_inputs(objects)
    problems: list[ObjectProblem] = []
    pcs = read_priority_classes(inp.priority_classes, problems)
    aliases: dict[str, dict[str, str]] = {}
    topologies = read_topologies(inp.topologies, problems, aliases)
    part = Partition(cfg)
    queues = read_queues([q for q in inp.queues if part.takes(q)] if part.key else inp.queues, problems,
                         cfg.unmentionedQueueResources == "unmanaged")
    for q in queues.values():
        problems.extend(ObjectProblem("Queue", q.name, None, err) for err in q.errors)
        if usage and q.name in usage:
            q.usage = list(usage[q.name])
    bad_nodes: list[ObjectProblem] = []
    nodes: list[Node] = []
    for obj in inp.nodes:
        try:
            if part.takes_node(obj):
                node = read_node(obj, bad_nodes)
                node.roles = part.node_roles(node.labels)
                nodes.append(node)
        except Exception as err:  # (a malformed object: left out, ``malformed``)
            bad_nodes.append(malformed("Node", obj, err, namespaced=False))
    nodes.sort(key=lambda n: n.name)
    problems.extend(sorted(bad_nodes, key=lambda p: p.name))  # (by name, as the live model's)
    node_by_name = {n.name: n for n in nodes}
    jobs: dict[str, Job] = {}
    foreign: set[str] = set()  # the PodGroups of other shards: their pods are no jobs of this scheduler
    for obj in inp.podgroups:
        try:
            if part.takes_podgroup(obj):
                read_podgroup(obj, jobs)
            else:
                foreign.add(podgroup_key(obj))
        except Exception as err:
            problems.append(malformed("PodGroup", obj, err))
    marks: StaleMarks = {}
    pods, holders, reservations = _read_pods(inp, cfg, pod_reader or read_pod, node_by_name, jobs, wait_for_owners,
                                             marks, part, (foreign - jobs.keys(), set(jobs) if part.key else set()),
                                             problems)
    for _, node, pod in sorted(holders, key=lambda h: h[0]):
        occupy(node, pod)
    waiting = {p.uid for p in pods if p.status == _PENDING and p.frac_devices}
    for node, pod in reservations:
        if pod.gpu_group and not opened_by(pod.gpu_group, waiting):  # (else its pod meets it again if placed here)
            hold_reserved_device(node, pod.gpu_group)
    _finish_jobs(jobs, queues, pcs, topologies, aliases, marks)
    check_min_member(jobs, inp.owners)
    budgets = read_budgets(inp.pdbs, problems)
    snap = Snapshot(nodes, queues, jobs, pods, topologies, pcs, now, problems, budgets, node_by_name)
    account(snap)
    return snap


def _read_pods(inp: Inputs, cfg: SchedulerConfig, read: PodReader, node_by_name: Mapping[str, Node],
               jobs: dict[str, Job], wait_for_owners: bool, marks: StaleMarks, part: Partition,
               pgs: PodGroupKeys, problems: list[ObjectProblem],
               ) -> tuple[list[Pod], list[Holder], list[tuple[Node, Pod]]]:
    """This scheduler's pods, each in its job; every pod that holds resources on a node, this scheduler's or
    another's (accounted after all are read); and the reservation pods of shared GPUs, which are kai's own: they
    count for nothing but what they hold on their node (no queue's share, no job). ``marks``: the stale marks the
    pods carry, by job (``StaleMarks``). A pod of this scheduler's name whose PodGroup is in another shard's partition
    (``in_partition``) is read as another scheduler's. A malformed pod is left out, its problem in ``problems``."""
    pods: list[Pod] = []
    holders: list[Holder] = []
    reservations: list[tuple[Node, Pod]] = []
    succeeded: list[Obj] = []
    sharing = cfg.gpuSharing
    reserved_in = sharing.reservationNamespace  # (a reservation pod is read with it as its namespace)
    pg_key, stale_key = c.POD_GROUP_ANNOTATION, c.STALE_SINCE_ANNOTATION
    scheduler = cfg.schedulerName
    reader = None if read is read_pod else read  # (the daemon's PodMemo reads the objects itself)
    bound = bound_volumes(inp.volumes) if inp.volumes else None  # (claim -> its volume's node affinity)
    restrict = part.restrict
    known = {meta.object_key(o): o for o in inp.claims} if inp.claims else None  # (claim key -> the claim)
    modes = ClaimModes(inp.classes) if known else None
    # (a pod that names a PodGroup is in the partition unless another shard's PodGroup has that name)
    check, foreign = bool(part.key or pgs[0]), pgs[0]  # (without a partition: PodGroups left alone, ``takes_podgroup``)
    for obj in inp.pods:
        # the object's parts read once for all that is read of the pod here: ``pod_role``, ``read_pod``, then
        # ``place_pod``, ``job_for_pod`` and the stale mark from its annotations, where each read them again
        try:
            spec = obj.get("spec") or {}
            status = obj.get("status") or {}
            wanted, ours = role_of(spec, status, scheduler)
            if not wanted:  # finished, or another scheduler's pending pod: not ours to place, holds nothing yet
                if status.get("phase") == _SUCCEEDED and \
                        (spec.get("schedulerName") or "default-scheduler") == scheduler:
                    succeeded.append(obj)
                continue
            m = obj.get("metadata")
            if not isinstance(m, dict):
                m = _NO_ANNOTATIONS
            anns = m.get("annotations")
            if not isinstance(anns, dict):
                anns = _NO_ANNOTATIONS
            pod_problems: list[Reason] = []
            pod = read_parts(obj, m, spec, status, anns, pod_problems) if reader is None else reader(obj, pod_problems)
            if (bound or known) and spec.get("volumes") and \
                    (waits := read_claims(pod, claims(obj), bound, known, modes)) is not None:
                pod_problems.append(waits)
            if restrict:
                part.pod_role(pod)
        except Exception as err:  # (a malformed object: left out, ``malformed``)
            problems.append(malformed("Pod", obj, err))
            continue
        if (not reserved_in or pod.namespace == reserved_in) and is_reservation_pod(obj, sharing):
            node = node_by_name.get(pod.node or "")
            if node is not None:
                pod.gpu_whole = 0  # its device is counted on its group's pods, or alone (hold_reserved_device)
                holders.append((1, node, pod))
                reservations.append((node, pod))
            continue
        if ours and check and (foreign or not anns.get(pg_key)) and \
                not in_partition(obj, anns.get(pg_key), pod.namespace, part, pgs, inp.owners):
            ours = False
            if not pod.node:
                continue  # another shard's to place
        rank = place_pod(obj, pod, ours, anns)
        node = node_by_name.get(pod.node) if rank is not None and pod.node else None
        if node is not None and rank is not None:
            holders.append((rank, node, pod))
            if not ours and other_scheduler(spec, scheduler):
                hold_other(node, pod)
        elif rank is not None:
            node_gone(pod)
        if not ours or (not pod.node and pod.releasing):
            continue  # another scheduler's, or deleted before it was ever placed
        pods.append(pod)
        pg = anns.get(pg_key)
        job = job_for_pod(obj, pod, jobs, inp.owners, inp.namespaces, cfg, wait_for_owners,
                          "" if pg is None else str(pg))
        if pod_problems:
            own_errors(job).extend(pod_problems)
        pod.job = job
        job.pods.append(pod)
        mark = anns.get(stale_key)
        if mark is not None and pod.raw:
            when = meta.parse_time(str(mark))
            was = marks.get(id(job))
            marks[id(job)] = (when, 1) if was is None else (max(was[0], when), was[1] + 1)
    for obj in succeeded:  # counted for the jobs their pods are read in (a job of finished pods only is none)
        done = jobs.get(done_job_key(obj, inp.owners))
        if done is not None:
            done.succeeded += 1
    return pods, holders, reservations


_NO_ANNOTATIONS: Obj = {}  # a pod without metadata or annotations (read, never written)
# the statuses a pod is read with, as module constants: an enum member read through its class (``PodStatus.PENDING``) is
# an attribute lookup through ``EnumType.__getattr__`` on Python 3.11, ~0.3 us, where a constant is ~0.02 us
_PENDING, _PIPELINED, _RELEASING = PodStatus.PENDING, PodStatus.PIPELINED, PodStatus.RELEASING
_RUNNING, _BOUND, _RUNNING_PHASE = PodStatus.RUNNING, PodStatus.BOUND, PodPhase.RUNNING
_SUCCEEDED: str = PodPhase.SUCCEEDED
# the stale marks that a job's pods read from their objects carry (``complete_job``): id(job) -> (the latest, how many)
StaleMarks = dict[int, tuple[float, int]]
# the keys of the PodGroups of another shard's partition, and of those of this one's (``in_partition``)
PodGroupKeys = tuple[set[str], set[str]]



def in_partition(obj: Obj, pg: Any, namespace: str, part: Partition, pgs: PodGroupKeys, owners: OwnerIndex) -> bool:
    """Whether one of this scheduler's pods is in its shard: the PodGroup it names is not another shard's; naming
    none, the PodGroup of its workload (``group_for_pod``) where there is one, else its workload's labels
    (``Partition.takes_owned``). ``pg``: its PodGroup annotation as read."""
    foreign, taken = pgs
    pg_name = "" if pg is None else str(pg)
    if pg_name:
        return f"{namespace}/{pg_name}" not in foreign
    info = group_for_pod(obj, owners)
    key = f"{namespace}/{info.name}"
    return key not in foreign and (key in taken or part.takes_owned(obj, workload_owner(obj, info, owners)))


def place_pod(obj: Obj, pod: Pod, ours: bool, anns: Obj | None = None) -> int | None:
    """A read pod's status from its node or the node it is pipelined onto (``pod.node`` becomes that node); the rank
    it is accounted in on that node when it holds resources there (``Holder``), else None. ``anns``: the object's
    annotations, where the caller has read them."""
    if ours and not pod.node:
        if anns is None:
            pipelined: str | None = annotation_text(obj, c.PIPELINED_NODE_ANNOTATION)
        else:
            value = anns.get(c.PIPELINED_NODE_ANNOTATION)
            pipelined = "" if value is None else str(value)
    else:
        pipelined = None
    if pipelined and not pod.releasing:
        pod.node = pipelined
    if pipelined and pod.node:
        pod.status = _PIPELINED
        pod.pipeline_action = annotation_text(obj, c.PIPELINED_ACTION_ANNOTATION)
        return 2
    if pod.node:
        pod.status = _RELEASING if pod.releasing else _RUNNING if pod.phase == _RUNNING_PHASE else _BOUND
        return 0 if pod.devices else 1
    return None


def node_gone(pod: Pod) -> None:
    """A placed pod whose node the snapshot does not have: bound or running there, it is ``NODE_GONE`` (a pipelined
    pod is placed again by the cycle; a releasing one is on its way out anyway)."""
    if pod.status in BOUND_OR_RUNNING:
        pod.status = PodStatus.NODE_GONE


def pod_role(obj: Obj, cfg: SchedulerConfig) -> tuple[bool, bool]:
    """(read it at all, ours): finished pods and another scheduler's pending pods are not read."""
    return role_of(obj.get("spec") or {}, obj.get("status") or {}, cfg.schedulerName)


def succeeded_ours(obj: Obj, scheduler: str) -> bool:
    """One of this scheduler's pods that has finished with phase Succeeded (``Job.succeeded``)."""
    return (obj.get("status") or {}).get("phase") == _SUCCEEDED and \
        ((obj.get("spec") or {}).get("schedulerName") or "default-scheduler") == scheduler


def done_job_key(obj: Obj, owners: OwnerIndex) -> str:
    """The key of the job a finished pod counts for: the PodGroup it names, else its workload's (``job_for_pod``)."""
    namespace = meta.namespace(obj)
    pg_name = annotation_text(obj, c.POD_GROUP_ANNOTATION)
    return f"{namespace}/{pg_name}" if pg_name else f"{namespace}/{group_for_pod(obj, owners).name}"


def other_scheduler(spec: Obj, scheduler: str) -> bool:
    """Whether a pod is another scheduler's by name (a pod of this name in another shard is not: KAI's proportion
    compares the names)."""
    return (spec.get("schedulerName") or "default-scheduler") != scheduler


def role_of(spec: Obj, status: Obj, scheduler: str) -> tuple[bool, bool]:
    """``pod_role`` from the pod's spec and status as read (``or {}``) and the scheduler's name."""
    if status.get("phase") in FINISHED_PHASES:
        return False, False
    ours = (spec.get("schedulerName") or "default-scheduler") == scheduler
    return ours or bool(spec.get("nodeName")), ours


def _finish_jobs(jobs: Mapping[str, Job], queues: Mapping[str, Queue], pcs: Mapping[str, PriorityClass],
                 topologies: Mapping[str, list[str]], aliases: Aliases, marks: StaleMarks) -> None:
    """``complete_job`` for every job, with the stale marks its pods carry as read with them (``_read_pods``)."""
    for job in jobs.values():
        finish_job(job, queues, pcs, topologies, aliases)
        if job.stale_since is None:
            known = marks.get(id(job))
            if known is not None:
                latest, marked = known
                if marked < sum(1 for p in job.pods if p.raw):  # a pod without a mark reads as 0
                    latest = max(latest, 0.0)
                job.stale_since = latest or None


def complete_job(job: Job, queues: Mapping[str, Queue], pcs: Mapping[str, PriorityClass],
                 topologies: Mapping[str, list[str]], aliases: Aliases | None = None) -> None:
    """``finish_job``, and the stale mark of a job without a PodGroup object, which its pods keep."""
    finish_job(job, queues, pcs, topologies, aliases)
    if job.stale_since is None:
        latest: float | None = None  # the latest mark of the pods read from an object (none: 0)
        for p in job.pods:
            if p.raw:
                mark = annotation_value(p.raw, c.STALE_SINCE_ANNOTATION)
                when = 0.0 if mark is None else meta.parse_time(str(mark))
                if latest is None or when > latest:
                    latest = when
        job.stale_since = latest or None
