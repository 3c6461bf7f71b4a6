"""A job's gang structure and which of its pods go next: KAI-Scheduler's pod sets and sub-group sets
(``podgroup_info/allocation_info.go`` and ``eviction_info.go`` at the reference commit).

A job without sub-groups is one pod set whose minimum is its ``minMember``. With ``spec.subGroups`` the
sub-groups form a tree: a leaf is a pod set (``minMember`` pods), an inner one a set that is satisfied when
``minSubGroup`` of its members are (all of them when unset); the job runs when the root is satisfied.
Pods above a pod set's minimum are elastic: placed one at a time once the gang runs, evicted first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cmp_to_key
from operator import attrgetter
from typing import TYPE_CHECKING

from kaid.api import constants as c
from kaid.model.objects import Job, Pod
from kaid.model.vocabulary import BOUND_OR_RUNNING, PLACED_THIS_CYCLE, PodStatus

if TYPE_CHECKING:
    from kaid.actions.session import Session

# holds a place, not on its way out (KAI: active allocated; a pod on a node gone since still counts there)
ACTIVE = PLACED_THIS_CYCLE | BOUND_OR_RUNNING | {PodStatus.NODE_GONE}
PENDING = frozenset({PodStatus.PENDING})
DEFAULT_POD_SET = c.DEFAULT_SUBGROUP


class ElasticState(IntEnum):
    """Where a job stands against its gang minimum (the order serves BELOW first)."""

    BELOW = 0
    EXACT = 1
    ABOVE = 2


def is_active(pod: Pod) -> bool:
    return pod.status in ACTIVE and not pod.releasing


@dataclass(slots=True)
class PodSet:
    name: str
    min_available: int
    pods: list[Pod] = field(default_factory=list)

    def active(self) -> int:
        return sum(1 for p in self.pods if is_active(p))

    def satisfied(self) -> bool:
        return self.active() >= self.min_available


@dataclass(slots=True)
class GangSet:
    name: str
    min_subgroup: int | None
    sets: list[GangSet] = field(default_factory=list)
    pod_sets: list[PodSet] = field(default_factory=list)

    @property
    def members(self) -> list[GangSet | PodSet]:
        return [*self.sets, *self.pod_sets]

    def needed(self) -> int:
        return len(self.members) if self.min_subgroup is None else self.min_subgroup

    def satisfied_members(self) -> int:
        return sum(1 for m in self.members if m.satisfied())

    def satisfied(self) -> bool:
        return self.satisfied_members() >= self.needed()

    def all_pod_sets(self) -> list[PodSet]:
        return [*self.pod_sets, *(p for s in self.sets for p in s.all_pod_sets())]


def gang_of(job: Job) -> GangSet:
    """The job's gang tree, with each pod in its pod set."""
    if not job.subgroups:
        root = GangSet("", None, pod_sets=[PodSet(DEFAULT_POD_SET, job.min_member, list(job.pods))])
        return root
    root = GangSet("", job.min_subgroup)
    parents = {str(s.get("parent") or "") for s in job.subgroups}
    nodes: dict[str, GangSet | PodSet] = {"": root}
    for s in job.subgroups:
        name = str(s["name"])
        nodes[name] = GangSet(name, s.get("minSubGroup")) if name in parents else PodSet(name, int(s["minMember"]))
    for s in job.subgroups:
        parent = nodes.get(str(s.get("parent") or ""), root)
        child = nodes[str(s["name"])]
        if isinstance(parent, GangSet):
            (parent.sets if isinstance(child, GangSet) else parent.pod_sets).append(child)  # type: ignore[arg-type]
    default = PodSet(DEFAULT_POD_SET, 0)
    for pod in job.pods:
        target = nodes.get(pod.subgroup)
        (target if isinstance(target, PodSet) else default).pods.append(pod)
    if default.pods:
        root.pod_sets.append(default)
    return root


def elastic_state(job: Job) -> ElasticState:
    if not job.subgroups:  # one pod set: the job's pods against its minMember
        active = sum(1 for p in job.pods if p.status in ACTIVE and not p.releasing)  # ``is_active``, inline
        return ElasticState.BELOW if active < job.min_member else (
            ElasticState.EXACT if active == job.min_member else ElasticState.ABOVE)
    exact = True
    for ps in gang_of(job).all_pod_sets():
        active = ps.active()
        if active < ps.min_available:
            return ElasticState.BELOW
        exact = exact and active == ps.min_available
    return ElasticState.EXACT if exact else ElasticState.ABOVE


def task_key(pod: Pod) -> tuple[int, int, float, str]:
    """Task order: a pod with a task-priority label first, higher first, then the older pod, then by name."""
    label = pod.labels.get(c.TASK_PRIORITY_LABEL)
    try:
        prio = int(label) if label is not None else 0
    except ValueError:
        prio = 0
    return (0 if label is not None else 1, -prio, pod.created, pod.name)


_AGE_AND_NAME = attrgetter("created", "name")


def task_order_key(pods: list[Pod]) -> Callable[[Pod], tuple[object, ...]]:
    """A sort key that orders ``pods`` as ``task_key`` does: their age and name where none of them has a task-priority
    label (the first two parts of every pod's ``task_key`` are then the same), read without a call per pod."""
    label = c.TASK_PRIORITY_LABEL
    for p in pods:
        if label in p.labels:
            return task_key
    return _AGE_AND_NAME


def _member_order(left: GangSet | PodSet, right: GangSet | PodSet) -> int:
    """Sub-group order: an unsatisfied member first, then the lower share of its minimum."""
    def count(m: GangSet | PodSet) -> tuple[int, int]:
        return (m.active(), m.min_available) if isinstance(m, PodSet) else (m.satisfied_members(), m.needed())

    (lc, lt), (rc, rt) = count(left), count(right)
    l_ok, r_ok = lc >= lt, rc >= rt
    if not l_ok or not r_ok:
        return 0 if l_ok == r_ok else (-1 if not l_ok else 1)
    if lt == 0 or rt == 0:
        return (1 if lt == 0 else -1) if lt != rt else (lc > rc) - (lc < rc)
    lr, rr = lc / lt, rc / rt
    return (lr > rr) - (lr < rr)


def _ordered(members: list[GangSet | PodSet], reverse: bool = False) -> list[GangSet | PodSet]:
    return sorted(members, key=cmp_to_key(_member_order), reverse=reverse)


def tasks_to_allocate(job: Job, waiting: Collection[str] = PENDING) -> list[Pod]:
    """The waiting pods to place next: the ones that bring every unsatisfied part of the gang to its minimum,
    or, once it runs, one elastic pod."""
    if not job.subgroups:  # one pod set: what ``_from_set`` does with it, without building the tree
        return _from_pods(job.pods, job.min_member, waiting)
    return _from_set(gang_of(job), waiting)


def _from_set(s: GangSet, waiting: Collection[str]) -> list[Pod]:
    members = _ordered(s.members)
    if not s.satisfied():
        out: list[Pod] = []
        for m in members[: s.needed()]:
            if not m.satisfied():
                out += _from_set(m, waiting) if isinstance(m, GangSet) else _from_pod_set(m, waiting)
        return out
    for m in members:
        tasks = _from_set(m, waiting) if isinstance(m, GangSet) else _from_pod_set(m, waiting)
        if tasks:
            return tasks
    return []


def gang_possible(job: Job) -> bool:
    """Enough pods exist for every pod set to reach its minimum (else the job waits for the rest)."""
    if not job.subgroups:  # one pod set: the job's pods against its minMember, without building the tree
        return len(job.pods) >= job.min_member
    return all(len(ps.pods) >= ps.min_available for ps in gang_of(job).all_pod_sets())


def domain_of_running(job: Job, session: Session) -> bytearray | None:
    """For a job with a required topology level that already runs: the nodes of its domain."""
    if not job.required_level:
        return None
    placed = [p for p in job.pods if is_active(p) and p.node]
    if not placed:
        return None
    node = session.snap.node_by_name.get(placed[0].node or "")
    value = node.labels.get(job.required_level) if node else None
    return bytearray(1 if value is not None and n.labels.get(job.required_level) == value else 0
                     for n in session.index.nodes)


def _from_pod_set(ps: PodSet, waiting: Collection[str]) -> list[Pod]:
    """The first waiting pods in task order: as many as bring the set to its minimum, or one once it is there."""
    return _from_pods(ps.pods, ps.min_available, waiting)


def _from_pods(pods: list[Pod], min_available: int, waiting: Collection[str]) -> list[Pod]:
    """``_from_pod_set`` of the pod set ``pods`` with its minimum (a job of one pod set builds none): one pass over
    the pods for both counts; the one is the least, found without sorting them all."""
    pending, active = _waiting_and_active(pods, waiting)
    if len(pending) <= 1:  # no order to find among them: the one, or none
        return pending
    key = task_order_key(pending)
    if active >= min_available:
        return [min(pending, key=key)]
    return sorted(pending, key=key)[: min_available - active]


def from_ordered(ordered: list[Pod], min_available: int, waiting: Collection[str]) -> list[Pod]:
    """``_from_pods`` of a pod set whose pods are given in task order already (``sorted(pods, key=task_key)``, kept
    by a caller that asks many times): the first waiting pods, as many as bring the set to its minimum, or one once it
    is there; no sort (no two pods have one task key: a pod's name is in it)."""
    pending, active = _waiting_and_active(ordered, waiting)
    return pending[:1] if active >= min_available else pending[:min_available - active]


def _waiting_and_active(pods: list[Pod], waiting: Collection[str]) -> tuple[list[Pod], int]:
    """The pods whose status is in ``waiting`` (in the given order), and how many are active: one pass."""
    pending: list[Pod] = []
    active = 0
    for p in pods:
        status = p.status
        if status in waiting:
            pending.append(p)
        if status in ACTIVE and not p.releasing:  # ``is_active``
            active += 1
    return pending, active


def eviction_batches(job: Job, alive: list[Pod]) -> list[list[Pod]]:
    """The job's running pods in the order they are evicted: each elastic pod on its own (from every branch that
    has pods above its minimum), then a surplus member whole, then the rest of the gang together."""
    if not job.subgroups:
        return _one_set_batches(job, alive)
    return _tree_batches(job, alive)


def _one_set_batches(job: Job, alive: list[Pod]) -> list[list[Pod]]:
    """``eviction_batches`` of a job without sub-groups (one pod set, its minimum ``minMember``), in one sort where
    the tree's walk sorted the pods left once or more per batch: below the minimum the gang goes whole; above it the
    pods beyond the minimum go one at a time, last in task order first, then the rest together (bench_victims:
    eviction_batches was most of ``victims.units_of``)."""
    ordered = sorted(alive, key=task_order_key(alive), reverse=True)  # (no two alike: a pod's name is in its key)
    if not ordered:
        return []
    if len(ordered) < job.min_member:
        return [ordered]
    elastic = len(ordered) - max(job.min_member, 0)
    batches = [[p] for p in ordered[:elastic]]
    if elastic < len(ordered):
        batches.append(ordered[elastic:])
    return batches


def _tree_batches(job: Job, alive: list[Pod]) -> list[list[Pod]]:
    root = gang_of(job)
    left = {id(p) for p in alive}
    batches: list[list[Pod]] = []
    while left:
        batch = _elastic_from_set(root, left) or [p for ps in root.all_pod_sets() for p in _alive(ps, left)]
        if not batch:
            break
        batches.append(batch)
        left -= {id(p) for p in batch}
    return batches


def _alive(ps: PodSet, left: set[int]) -> list[Pod]:
    return sorted((p for p in ps.pods if id(p) in left), key=task_key, reverse=True)


def _count(m: GangSet | PodSet, left: set[int]) -> int:
    if isinstance(m, PodSet):
        return len(_alive(m, left))
    return sum(1 for x in m.members if _satisfied(x, left))


def _satisfied(m: GangSet | PodSet, left: set[int]) -> bool:
    return _count(m, left) >= (m.min_available if isinstance(m, PodSet) else m.needed())


def _surplus(m: GangSet | PodSet, left: set[int]) -> bool:
    if isinstance(m, PodSet):
        return _count(m, left) > m.min_available
    return _count(m, left) > m.needed() or any(_surplus(x, left) for x in m.members)


def _elastic_from_set(s: GangSet, left: set[int]) -> list[Pod]:
    satisfied = _count(s, left)
    if satisfied == 0:
        return []
    members = _ordered(s.members, reverse=True)
    if _surplus(s, left):
        for m in members:
            if isinstance(m, GangSet):
                tasks = _elastic_from_set(m, left)
            else:
                tasks = _alive(m, left)[:1] if _count(m, left) > m.min_available else []
            if tasks:
                return tasks
    if s.needed() < satisfied:
        for m in members:
            tasks = [p for ps in (m.all_pod_sets() if isinstance(m, GangSet) else [m]) for p in _alive(ps, left)]
            if tasks:
                return tasks
    return []
