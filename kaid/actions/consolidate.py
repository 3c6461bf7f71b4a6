"""Consolidate: move running preemptible pods so that a pending preemptible job fits, only when every moved pod
is placed again in the same plan (pipelined onto its new node); moves per cycle are bounded by the config, and
PodDisruptionBudgets hold. Fractional and gpu-memory pods move like the others."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

from kaid.actions.evictions import SILENT, evict_for_pending
from kaid.actions.limits import limit_violation
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session, job_request
from kaid.actions.victims import Search, Unit, running
from kaid.api.config import Action
from kaid.model.objects import Job, Pod, Reason
from kaid.model.vocabulary import PodStatus


@dataclass
class ConsolidateRules:
    """Consolidate's ``Rules``: for a pending preemptible job, running pods on the nodes it lands on are moved,
    and only when every moved pod is placed again; at most ``cap`` moves a cycle."""

    cap: int  # pods moved per cycle at most
    moves_left: int = 0
    start: int | None = None  # the session's checkpoint when the action began: no move of its own comes before
    action: str = Action.CONSOLIDATE
    solver: bool = False  # the solver does not model the moved pods' new places
    split_by_node: bool = True
    moves: bool = True
    by_node: bool = True  # KAI's job solver, as reclaim and preempt (``consolidation.go``: ``solvers.NewJobsSolver``)
    queue_only: ClassVar[bool] = False
    shared: list[Pod] | None = None  # ``_devices_possible``'s shared-GPU pods, worked out once per action
    # (len(session.ops), the GPUs idle or being released then, in milli-GPUs: ``free_gpus``)
    free: tuple[int, int] = (-1, 0)

    def serves(self, job: Job) -> bool:
        return job.preemptible

    def blocked(self, session: Session, att: Attempt) -> Reason | None:
        if self.start is None:
            self.start = session.checkpoint()
        moved = sum(1 for op in session.evictions(self.start) if op.action == self.action)
        self.moves_left = self.cap - moved
        if self.moves_left <= 0 or self.free_gpus(session) < att.request[0] or \
                not self._devices_possible(session, att):
            return SILENT
        if limit_violation(att.queue, job_request(att.batch, session.ref), att.job) is not None:
            return SILENT
        return None

    def free_gpus(self, session: Session) -> int:
        """KAI's precheck reads the GPUs idle or being released in the cluster (against what the job asks for), read
        again only once the session has another operation: between two attempts, a vain search leaves the session
        as it found it and a success adds operations (it read every node with a free device per attempt)."""
        ops, free = self.free
        if ops != len(session.ops):
            free = _free_gpus(session)
            self.free = (len(session.ops), free)
        return free

    def _devices_possible(self, session: Session, att: Attempt) -> bool:
        """Moves conserve whole devices: moving a whole-GPU pod takes as many idle devices as it leaves, so the
        job's whole GPUs can only come from idle devices, the releasing pods' devices, and shared devices that
        moving their preemptible pods could empty (counted as if each could). A full cluster's whole-GPU jobs
        stop here instead of trying a quarter of the scenario budget each, every cycle (issue 15)."""
        whole = sum(p.gpu_whole for p in att.batch)
        if not whole:
            return True
        index = session.index
        idle = sum(k * len(index.buckets[k]) for k in range(1, index.max_gpus + 1))
        idle += sum(p.gpu_whole + p.frac_devices for p in session.releasing())
        if idle >= whole:
            return True
        if self.shared is None:  # the shared-GPU pods that could move: fixed for the action (no pod starts in it)
            self.shared = [p for p in session.snap.pods if p.frac_devices and p.job is not None and p.job.preemptible]
        live = (PodStatus.RUNNING, PodStatus.BOUND)
        emptied = {(p.node, d) for p in self.shared if p.status in live and not p.releasing for d in p.devices}
        return idle + len(emptied) >= whole

    def candidate(self, session: Session, att: Attempt, victim: Job) -> bool:
        return victim is not att.job and bool(running(victim))

    def candidate_queue(self, session: Session, att: Attempt, queue: str) -> bool:
        return True  # a job of any queue may be moved

    def candidate_queues(self, session: Session, att: Attempt, queues: Collection[str]) -> list[str]:
        return list(queues)

    def valid(self, session: Session, att: Attempt, out: Outcome) -> bool:
        return not out.evicted and len(out.moved) <= self.moves_left

    def message(self, session: Session, att: Attempt, unit: Unit) -> str:
        return (f"moved by consolidation from {unit.pods[0].node} to make room for {att.job.key}; it is placed "
                "again at once")

    def limit(self, session: Session, att: Attempt, search: Search) -> None:
        return None

    def explain(self, session: Session, att: Attempt, search: Search, protected: int) -> Reason | None:
        return None  # allocate's reasons (fragmentation, fit) say why the job waits


def _free_gpus(session: Session) -> int:
    """The GPUs idle or being released in the cluster, in milli-GPUs."""
    index = session.index
    # only nodes with an idle device or a partly used one have anything free (the others' devices are all in use)
    having = {*(i for k in range(1, index.max_gpus + 1) for i in index.buckets[k]), *index.shared}
    nodes = index.nodes
    free = sum(1000 * n.gpus - sum(min(u, 1000) for u in n.dev_used) for n in (nodes[i] for i in having) if n.ready)
    releasing = sum(p.gpu_milli_on(session.snap.node_by_name.get(p.node or "")) for p in session.releasing())
    return free + releasing


def consolidate(session: Session) -> None:
    """The consolidate action: running preemptible pods moved so that pending jobs fit (``ConsolidateRules``)."""
    evict_for_pending(session, ConsolidateRules(session.cfg.maxConsolidationMoves))
