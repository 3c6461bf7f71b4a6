"""One scheduling cycle: a Snapshot in, Decisions out. Pure: no client calls, no clock reads.

Actions run in a fixed order, the table ``ACTIONS`` (docs/architecture.md, "The cycle"): allocate,
consolidate, reclaim, preempt, stale-gang; the config enables or disables each. Every action is
``action(session)``: the Session holds the cluster's view with its tentative operations, the config, and the
reasons and statistics it leaves for the decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kaid.actions.allocate import allocate
from kaid.actions.carried import Roll
from kaid.actions.consolidate import consolidate
from kaid.actions.evictions import known_keys, pending_now
from kaid.actions.memory import SearchMemory, recall
from kaid.actions.preempt import preempt
from kaid.actions.reclaim import reclaim
from kaid.actions.session import STUCK_RELEASING_SECONDS, AllocateStats, EvictionStats, Session
from kaid.actions.stale import stale_gangs
from kaid.api.config import Action, SchedulerConfig
from kaid.fairshare import QueueRow, compute_fair_share, queue_rows
from kaid.model.objects import Node, ObjectProblem, Pod, Reason, Snapshot
from kaid.model.pods import claims
from kaid.model.vocabulary import PLACED_THIS_CYCLE, OpKind, PodStatus, ReasonCode
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import extended_alloc

# the actions in the order a cycle runs them; the config's ``actions`` says which run
ACTIONS: tuple[tuple[Action, Callable[[Session], None]], ...] = (
    (Action.ALLOCATE, allocate),
    (Action.CONSOLIDATE, consolidate),
    (Action.RECLAIM, reclaim),
    (Action.PREEMPT, preempt),
    (Action.STALE_GANG, stale_gangs),
)


@dataclass(slots=True)
class Bind:
    """A pod to bind to a node (or, in ``Decisions.pipelined``, reserved there until its victims are gone)."""

    pod: str  # namespace/name
    node: str
    job: str
    queue: str
    devices: tuple[int, ...]
    gpu_group: str | None
    gpu_milli: int
    action: str = Action.ALLOCATE
    by: str | None = None
    gpu_groups: tuple[str, ...] = ()  # a shared-GPU pod's group on each of its devices (``devices`` order)
    # labels the pod is given as it is bound: its shard's node-pool label where it lacks it (``pool_label``)
    set_labels: tuple[tuple[str, str], ...] = ()
    claims: tuple[str, ...] = ()  # the PersistentVolumeClaims its volumes use (``pods.claims``), in its namespace

    @property
    def groups(self) -> tuple[str, ...]:
        """The GPU groups of a shared-GPU bind (``gpu_groups``; ``gpu_group`` where only that is set)."""
        return self.gpu_groups or ((self.gpu_group,) if self.gpu_group else ())


@dataclass(slots=True)
class Eviction:
    """A pod to evict, the action that chose it and the job it was evicted for (``by``)."""

    pod: str
    node: str
    job: str
    action: str  # reclaim | preempt | consolidate | stale-gang
    by: str | None
    message: str


@dataclass
class Decisions:
    """A cycle's outcome as plain data: what the daemon applies, kaictl prints and the simulator plays out. Read
    it, never write it: the lists of reasons of ``pending`` and ``allocate_reasons`` may be one list."""

    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    pipelined: list[Bind] = field(default_factory=list)
    pending: dict[str, list[Reason]] = field(default_factory=dict)  # job key -> why it waits
    warnings: dict[str, list[Reason]] = field(default_factory=dict)
    queues: list[QueueRow] = field(default_factory=list)  # fair shares, allocated before and after
    problems: list[ObjectProblem] = field(default_factory=list)
    stale: dict[str, float | None] = field(default_factory=dict)  # job key -> stale since (None: clear)
    stale_pods: dict[str, list[str]] = field(default_factory=dict)  # job key -> its pods, for jobs in ``stale``
    allocate_reasons: dict[str, list[Reason]] = field(default_factory=dict)  # why allocate left a job pending
    stats: AllocateStats = field(default_factory=AllocateStats)
    victims: EvictionStats = field(default_factory=EvictionStats)
    memory: SearchMemory | None = None  # the vain victim searches, for the next cycle's ``run_cycle(memory=...)``


def _overcommitted(node: Node) -> bool:
    return (node.used_cpu > node.alloc_cpu or node.used_mem > node.alloc_mem or node.used_pods > node.alloc_pods
            or any(u > 1000 for u in node.dev_used)
            or (node.ext_used is not None and any(v > extended_alloc(node, k) for k, v in node.ext_used.items())))


def ready_pipelined(snap: Snapshot, roll: Roll | None = None, waits: list[Pod] | None = None) -> list[Pod]:
    """Pipelined pods whose victims are gone: bound now, a whole job at a time (``roll``: the jobs as the cycle
    began, which names those with a pipelined pod; the jobs whose pods it puts back to pending are told it).
    ``waits`` receives the pipelined pods that stay pipelined (a node of their job still over-committed)."""
    ready: list[Pod] = []
    pipelined = PodStatus.PIPELINED
    if roll is not None:
        held_jobs = roll.pipelined
    else:
        # the jobs with a pipelined pod, from one pass over the pods (every job's pods are the snapshot's), where
        # each job's pods were walked (27,000 jobs at 4,000 nodes, nearly none of them with a pipelined pod)
        held = {id(p.job) for p in snap.pods if p.status == pipelined}
        held_jobs = [job for job in snap.jobs.values() if id(job) in held] if held else []
    for job in held_jobs:
        waiting = [p for p in job.pods if p.status == pipelined]
        if not waiting:
            continue
        if any(snap.node_by_name.get(p.node or "") is None for p in waiting):
            for p in waiting:  # the node is gone: place the pods again
                if snap.node_by_name.get(p.node or "") is None:
                    if snap.journal is not None:
                        snap.journal.pod(p)
                    p.status, p.node = PodStatus.PENDING, None
            if roll is not None:
                roll.changed([job])
            continue
        if all(not _overcommitted(snap.node_by_name[p.node or ""]) for p in waiting):
            ready.extend(waiting)
        elif waits is not None:
            waits.extend(waiting)
    return ready


def _bind(pod: Pod, node: Node, action: str, by: str | None, ones: dict[str, tuple[str]] | None = None) -> Bind:
    """``ones``: the GPU groups of the one-device shared pods bound so far, each as a tuple of one, to hand out
    again (pods that share a device share its group: at 4,000 nodes 6,000 binds of 2,561 groups)."""
    job = pod.job
    assert job is not None
    if not pod.frac_devices:
        groups: tuple[str, ...] = ()
    elif len(pod.devices) == 1 and ones is not None:
        group = node.dev_group[pod.devices[0]] or ""
        groups = ones.get(group) or ones.setdefault(group, (group,))
    else:
        groups = tuple(node.dev_group[d] or "" for d in pod.devices)
    return Bind(pod.key, node.name, job.key, job.queue, pod.devices, pod.gpu_group if pod.frac_devices else None,
                pod.gpu_milli_on(node), action, by, groups, claims=claims(pod.raw))


def pool_label(cfg: SchedulerConfig) -> Callable[[Bind, Pod], Bind]:
    """What marks each bind of a scheduling shard's pod (``partitionLabelValue``) that lacks the shard's node-pool
    label with it, so that the bound pod carries it (as KAI's scheduler patches a pod it binds, ``cache.go``
    ``nodePoolLabelsChange`` at d5bc503a); the default shard's binds are left as they are."""
    key, value = cfg.nodePoolLabelKey, cfg.partitionLabelValue
    if not key or not value:
        return lambda b, pod: b
    mark = ((key, value),)

    def marked(b: Bind, pod: Pod) -> Bind:
        if pod.labels.get(key) != value:
            b.set_labels = mark
        return b

    return marked


def run_cycle(snap: Snapshot, cfg: SchedulerConfig, focus: str | None = None,
              on_bind: Callable[[list[Bind]], None] | None = None, memory: SearchMemory | None = None,
              bind_ready: bool = True) -> Decisions:
    """One cycle. With ``focus`` (a job key) it decides only as much as that job's outcome needs: what
    ``kaictl explain`` uses; the decisions about other jobs are then incomplete. ``on_bind`` receives each
    job's binds as soon as allocate commits them (they are in the Decisions too), so that a daemon can
    start binding while the rest of the cycle decides. ``memory``: the last cycle's ``Decisions.memory`` (or an
    empty ``SearchMemory`` to start one): the victim searches found nothing for in the same world are not
    repeated, with the same decisions (``kaid.actions.memory``); this cycle's is in ``Decisions.memory``.
    ``bind_ready=False``: no pipelined pod is bound as the cycle begins, every one waits (KAI's session, which
    never binds a Pipelined task: the conformance harness's one-action sessions)."""
    compute_fair_share(snap, use_usage=cfg.usage.enabled, k_value=cfg.kValue)
    fair_rows = queue_rows(snap)  # fair shares as computed at the start of the cycle
    recalled = recall(memory, snap, cfg, STUCK_RELEASING_SECONDS) if memory is not None and focus is None else None
    index = NodeIndex(snap.nodes, snap.journal, snap.pods)
    label = pool_label(cfg)
    hook = None if on_bind is None else \
        (lambda ops: on_bind([label(_bind(op.pod, op.node, op.action, op.by), op.pod) for op in ops]))
    session = Session(snap, index, cfg, focus=focus, on_commit=hook, recall=recalled)
    out = Decisions(problems=list(snap.problems), memory=recalled.after if recalled is not None else None)
    roll = None
    if recalled is not None and memory is not None and snap.journal is not None:  # (``kaid.actions.carried``)
        roll = session.roll = Roll.of(snap, memory.carried)
    waits: list[Pod] = []
    ready = ready_pipelined(snap, roll, waits)
    if not bind_ready:
        waits.extend(ready)
        ready = []
    for pod in ready:
        out.binds.append(label(_bind(pod, snap.node_by_name[pod.node or ""], pod.pipeline_action or Action.ALLOCATE,
                                     None), pod))
    if waits:  # their share of a GPU group is not allocated (``NodeIndex.note_waiting``)
        index.note_waiting(waits)
    for name, action in ACTIONS:
        if name in cfg.actions:
            action(session)
    out.stats, out.victims, out.allocate_reasons = session.alloc_stats, session.victim_stats, session.allocate_reasons
    out.stale = session.stale
    out.stale_pods = {k: [p.key for p in snap.jobs[k].pods] for k in out.stale}
    reasons = session.reasons
    ones: dict[str, tuple[str]] = {}
    for op in session.placements():
        if op.kind == OpKind.ALLOCATE:
            out.binds.append(label(_bind(op.pod, op.node, op.action, op.by, ones), op.pod))
        else:
            out.pipelined.append(_bind(op.pod, op.node, op.action, op.by, ones))
    for op in session.evictions():
        job = op.pod.job
        out.evictions.append(Eviction(op.pod.key, op.node.name, job.key if job else "", op.action, op.by,
                                      op.message))
    if roll is not None:
        waiting = pending_now(session, roll)
    else:
        pending = PodStatus.PENDING
        waiting = {id(p.job) for p in snap.pods if p.status == pending}  # (one pass over the pods, as above)
    for job in snap.jobs.values():
        if job.warnings:
            out.warnings[job.key] = list(job.warnings)
        if id(job) not in waiting:
            continue
        said = reasons.get(job.key)
        if said and not job.errors and not job.warnings:
            out.pending[job.key] = said  # (shared with ``allocate_reasons``: the lists of the decisions are read only)
            continue
        why = [*job.errors, *(said or ())]
        if not why:
            placed = sum(1 for p in job.pods if p.status in PLACED_THIS_CYCLE)
            why = [Reason(ReasonCode.NOT_PLACED_THIS_CYCLE,
                          f"{placed} of {len(job.pods)} pods were placed this cycle; the rest wait for the next")]
        out.pending[job.key] = [*why, *job.warnings]
    after = {row.name: row for row in queue_rows(snap)}
    for row in fair_rows:
        row.allocated_after = after[row.name].allocated
    out.queues = fair_rows
    if roll is not None and out.memory is not None and snap.journal is not None:
        out.memory.carried = roll.handed_on(snap.journal, known_keys(session))
    return out
