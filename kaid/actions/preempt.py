"""Preempt: inside one queue, a pending job evicts strictly lower-priority preemptible work. A priority class
with ``preemptionPolicy: Never`` never preempts (KAI ignores it; kai does not, see docs/compatibility.md)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

from kaid.actions.evictions import SILENT, budget_note, evict_for_pending
from kaid.actions.reclaimable import within
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session
from kaid.actions.victims import Search, Unit, running
from kaid.api.config import Action
from kaid.model.objects import Job, Reason
from kaid.model.vocabulary import ReasonCode


@dataclass
class PreemptRules:
    """Preempt's ``Rules``: victims from the job's own queue, preemptible and of lower priority."""

    action: str = Action.PREEMPT
    solver: bool = True
    split_by_node: bool = False
    moves: bool = False
    by_node: bool = True
    queue_only: ClassVar[bool] = False  # (and a lower priority)

    def serves(self, job: Job) -> bool:
        return True

    def blocked(self, session: Session, att: Attempt) -> Reason | None:
        job = att.job
        if not job.preemptible and any(not within([a + b for a, b in zip(q.alloc_np, att.request, strict=True)],
                                                  q.quota) for q in att.queue.path()):
            return SILENT  # a non-preemptible job above its queue's quota: allocate said so already
        if job.preempt_never:
            if any(self._lower(job, v) for v in att.queue.jobs):
                return Reason(ReasonCode.PREEMPTION_NEVER,
                              f"priority class {job.priority_class} has preemptionPolicy: Never, "
                              "so this job waits for free resources instead of evicting other jobs")
            return SILENT
        return None

    def candidate(self, session: Session, att: Attempt, victim: Job) -> bool:
        """``_lower`` in the job's own queue, without reading the victim's pods: a job with no pod an eviction can take
        (``running``) has no unit, so a search hands nothing of it out and counts none (it read every candidate's pods,
        1,284 times a bench_victims cycle)."""
        job = att.job
        return victim.priority < job.priority and victim.queue == job.queue and victim is not job and victim.preemptible

    def candidate_queue(self, session: Session, att: Attempt, queue: str) -> bool:
        """Only the job's own queue holds candidates."""
        return queue == att.job.queue

    def candidate_queues(self, session: Session, att: Attempt, queues: Collection[str]) -> list[str]:
        return [att.job.queue] if att.job.queue in queues else []

    def valid(self, session: Session, att: Attempt, out: Outcome) -> bool:
        return True

    def message(self, session: Session, att: Attempt, unit: Unit) -> str:
        return (f"preempted by {att.job.key} (priority {att.job.priority}) in queue {att.queue.name}: this job has "
                f"priority {unit.job.priority}")

    def limit(self, session: Session, att: Attempt, search: Search) -> None:
        return None

    def explain(self, session: Session, att: Attempt, search: Search, protected: int) -> Reason | None:
        if not search.count():
            if not protected:
                return None
            return Reason(ReasonCode.PREEMPT_NOT_POSSIBLE,
                          f"could not preempt: {protected} lower-priority pods are younger than "
                          "preemptMinRuntime", {"protectedPods": protected})
        return Reason(
            ReasonCode.PREEMPT_NOT_POSSIBLE, f"could not preempt: even evicting all {search.count()} lower-priority "
            f"preemptible pod groups of queue {att.queue.name} would not let this job fit (in free resources and "
            "within its queue's limits and quota)" + budget_note(search), {"candidates": search.count()})

    @staticmethod
    def _lower(job: Job, victim: Job) -> bool:
        return victim is not job and victim.preemptible and victim.priority < job.priority and bool(running(victim))


def preempt(session: Session) -> None:
    """The preempt action: inside a queue, a pending job evicts strictly lower-priority preemptible work
    (``PreemptRules``)."""
    evict_for_pending(session, PreemptRules())
