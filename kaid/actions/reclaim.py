"""Reclaim: a queue below its fair share takes resources back from queues above theirs, evicting preemptible
work only, by KAI's rules (``reclaimable``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import ClassVar

from kaid.actions import gangs
from kaid.actions.evictions import SILENT, budget_note, evict_for_pending
from kaid.actions.limits import fmt, limit_violation
from kaid.actions.order import allocatable
from kaid.actions.reclaimable import Before, cannot_reclaim, leveled, reclaimable, sides_allowed
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session, job_request
from kaid.actions.victims import Constraint, Search, Unit
from kaid.api.config import Action
from kaid.model.objects import GPU, RESOURCES, UNLIMITED, Job, Pod, Queue, Reason
from kaid.model.vocabulary import PodStatus, ReasonCode


@dataclass
class ReclaimRules:
    """Reclaim's ``Rules``: victims from other queues, by KAI's reclaimable rules (``reclaimable``)."""

    action: str = Action.RECLAIM
    solver: bool = True
    split_by_node: bool = False
    moves: bool = False
    by_node: bool = True
    queue_only: ClassVar[bool] = True
    before: Before | None = None
    # victim queue -> its jobs are candidates, this attempt; and id(theirs) -> ``sides_allowed``, this attempt: the
    # leaves under one ``leveled`` victim side share it (each attempt asked it of every leaf holding a candidate, 190
    # at 4,000 nodes once allocate's placements are victims too)
    allowed: dict[str | int, bool] = field(default_factory=dict)
    # (reclaimer queue, victim queue) -> ``leveled``'s pair, for the action (the queue tree stays put in a cycle)
    _leveled: dict[tuple[str, str], tuple[Queue, Queue]] = field(default_factory=dict)

    def serves(self, job: Job) -> bool:
        return True

    def blocked(self, session: Session, att: Attempt) -> Reason | None:
        self.before = Before.of(session.snap.queues.values())
        self.allowed = {}
        req = job_request(att.batch, session.ref)
        if limit_violation(att.queue, req, att.job) is not None and not room_by_evicting(att.queue, req,
                                                                                        att.job.preemptible):
            return SILENT  # a limit on its queue's path blocks it (allocate said so) and no victim can lift it
        if att.job.preempt_never:
            return SILENT  # preemptionPolicy: Never evicts nobody (kai's deviation from KAI, see preempt)
        why = cannot_reclaim(att.queue, att.request, att.job.preemptible)
        if why is None or not self._others_hold(session, att):
            return None if why is None else SILENT
        return self._explain_block(att, why)

    def candidate(self, session: Session, att: Attempt, victim: Job) -> bool:
        return self.candidate_queue(session, att, victim.queue)

    def candidate_queue(self, session: Session, att: Attempt, queue: str) -> bool:
        """KAI's filter reads the victim's queue only: asked once per queue and attempt (its search asks for every
        running job of the cluster, before any eviction; ``Rules.candidate_queue``), worked out once per victim side
        (``_allowed``)."""
        if att.job.preempt_never or queue == att.job.queue:
            return False
        known = self.allowed.get(queue)
        if known is None:
            known = self.allowed[queue] = self._allowed(session, att, queue)
        return known

    def _allowed(self, session: Session, att: Attempt, queue: str) -> bool:
        """``sides_allowed`` of ``att.queue`` and ``queue``, worked out once per victim side and attempt."""
        pair = self._leveled.get((att.queue.name, queue))
        if pair is None:
            victim_q = session.snap.queues.get(queue)
            if victim_q is None:
                return False
            pair = self._leveled[(att.queue.name, queue)] = leveled(att.queue, victim_q)
        mine, theirs = pair
        known = self.allowed.get(id(theirs))
        if known is None:
            known = self.allowed[id(theirs)] = sides_allowed(mine, theirs, att.request)
        return known

    def candidate_queues(self, session: Session, att: Attempt, queues: Collection[str]) -> list[str]:
        return [q for q in queues if self.candidate_queue(session, att, q)]

    def valid(self, session: Session, att: Attempt, out: Outcome) -> bool:
        """KAI's reclaim scenario validator (``proportion.reclaimableFn``): each victim job's amounts as KAI's
        ``getVictimResources`` reads them (``reclaimed``), queue by queue."""
        taken: dict[str, list[tuple[int, int, int]]] = {}
        for job, pods in victim_tasks(out.units).values():
            amounts = reclaimed(job, pods)
            if amounts:
                taken.setdefault(job.queue, []).extend(amounts)
        assert self.before is not None
        return reclaimable(session.snap.queues, att.queue, att.request, att.job.preemptible,
                           [(session.snap.queues[q], amounts) for q, amounts in taken.items()], self.before)

    def message(self, session: Session, att: Attempt, unit: Unit) -> str:
        """With the allocations as the attempt found them (before any eviction of its scenarios)."""
        q, w = att.queue, unit.queue
        assert self.before is not None
        held = self.before.allocated
        r = GPU if att.request[GPU] else next((r for r in range(3) if att.request[r]), GPU)
        return (f"reclaimed for {att.job.key}: queue {q.name} has {fmt(r, held[q.name][r])} allocated against a "
                f"fair share of {fmt(r, q.fair[r])}, queue {w.name} has {fmt(r, held[w.name][r])} against "
                f"{fmt(r, w.fair[r])}")

    def limit(self, session: Session, att: Attempt, search: Search) -> None:
        """At most what brings each victim side down to its share, plus less than its largest unit (a queue
        above its share may lose a victim bigger than the gap)."""
        sides: dict[str, list[int]] = {}
        for i, u in enumerate(search.units):
            sides.setdefault(leveled(att.queue, u.queue)[1].name, []).append(i)
        for name, ids in sides.items():
            side = session.snap.queues[name]
            over = side.allocated[GPU] - allocatable(side, GPU)
            if over > 0 and all(side.allocated[r] <= allocatable(side, r) or allocatable(side, r) < 0
                                for r in range(1, 3)):
                cap = over + max(search.units[i].gpu for i in ids) - 1
                search.fair.append(Constraint(ids, cap, name))

    def explain(self, session: Session, att: Attempt, search: Search, protected: int) -> Reason | None:
        units = search.count()
        if not units:
            if protected:
                return Reason(ReasonCode.RECLAIM_NOT_POSSIBLE,
                              f"could not reclaim: {protected} candidate pods are younger than "
                              "their queue's reclaimMinRuntime", {"protectedPods": protected})
            return None
        return Reason(ReasonCode.RECLAIM_NOT_POSSIBLE,
                      f"could not reclaim: even evicting every allowed candidate ({units} groups of pods in queues "
                      "above their fair share) would not make room for the job within the reclaim rules (victims' "
                      "queues stay at their fair share but for the last victim, and the reclaimer no more saturated "
                      "than them)" + budget_note(search), {"candidates": units})

    def _others_hold(self, session: Session, att: Attempt) -> bool:
        return any(any(o.allocated) for o in session.snap.queues.values() if not o.children and o is not att.queue)

    def _explain_block(self, att: Attempt, why: Reason) -> Reason:
        q = att.queue
        if why.code == ReasonCode.NON_PREEMPTIBLE_OVER_QUOTA:
            return Reason(ReasonCode.RECLAIM_NOT_POSSIBLE,
                          f"queue {q.name} would have more non-preemptible work than its quota, "
                          "so this non-preemptible job cannot take resources back; it runs when resources are idle",
                          {"queue": q.name})
        r = int(why.details["resource"])
        return Reason(
            ReasonCode.RECLAIM_NOT_POSSIBLE,
            f"queue {q.name} would go above its fair share ({fmt(r, q.allocated[r])} allocated "
            f"+ {fmt(r, att.request[r])} > {fmt(r, q.fair[r])} of {RESOURCES[r]}), so it cannot take resources back "
            "from other queues; it runs when resources are idle",
            {"queue": q.name, "allocated": q.allocated[r], "fairShare": q.fair[r], "requested": att.request[r]})




def room_by_evicting(queue: Queue, req: tuple[int, int, int], preemptible: bool) -> bool:
    """Whether evicting other queues' preemptible pods could bring a request of ``queue`` within every limit on its
    path (and, for a non-preemptible job, every quota): a limit on an ancestor counts what its leaves hold, and the
    victims of other leaves beneath it free room there. KAI checks the limits in the scenario, once its victims are
    gone (``AllocateJob``'s ``IsJobOverQueueCapacityFn``), not before (its reclaim action has no such check:
    ``reclaim_elastic_test.go:879``, a department at its cpu limit whose one queue takes from the other). The bound:
    each queue of the path with everything evictable beneath it gone but the leaf's own pods (reclaim takes none of
    its own queue) and the non-preemptible pods of the others."""
    own, own_np = queue.allocated, queue.alloc_np
    for anc in queue.path():
        for r in range(3):
            if not req[r]:
                continue
            lim = anc.effective_limit(r)
            if lim != UNLIMITED and own[r] + anc.alloc_np[r] - own_np[r] + req[r] > lim:
                return False
            if not preemptible and anc.quota[r] != UNLIMITED and anc.alloc_np[r] + req[r] > anc.quota[r]:
                return False
    return True


def victim_tasks(units: list[Unit]) -> dict[str, tuple[Job, list[Pod]]]:
    """Each victim job of a scenario with its pods in the order the scenario took them (KAI's ``VictimInfo.Tasks``):
    every pod of its units, those put back too."""
    out: dict[str, tuple[Job, list[Pod]]] = {}
    for u in units:
        entry = out.get(u.job.key)
        if entry is None:
            out[u.job.key] = (u.job, list(u.pods))
        else:
            entry[1].extend(u.pods)
    return out


def reclaimed(job: Job, pods: list[Pod]) -> list[tuple[int, int, int]]:
    """What a victim job gives up, as KAI's validator reads it (``proportion.getVictimResources`` with
    allowConsolidatingReclaim, its default): the job's victim pods split per pod set by their order, the first
    ``minAvailable`` of each its core and the rest elastic; each elastic pod on its own, then the core together
    (last), counting only the pods still evicted (one placed back holds its place). So a gang's core that goes while
    one of its elastic pods comes back is checked as two amounts, its last against a victim queue already brought
    down by the first (KAI's ``reclaim_elastic_test.go:995``)."""
    if not job.subgroups:
        groups = [(job.min_member, pods)]
    else:
        where = {id(p): ps for ps in gangs.gang_of(job).all_pod_sets() for p in ps.pods}
        per_set: dict[str, tuple[int, list[Pod]]] = {}
        for p in pods:
            ps = where.get(id(p))
            name, least = (ps.name, ps.min_available) if ps is not None else (gangs.DEFAULT_POD_SET, 0)
            per_set.setdefault(name, (least, []))[1].append(p)
        groups = list(per_set.values())
    core: list[Pod] = []
    elastic: list[Pod] = []
    for least, members in groups:
        cut = max(least, 0)
        core += members[:cut]
        elastic += members[cut:]
    out = [_held([p]) for p in elastic if p.status == PodStatus.EVICTED]
    core = [p for p in core if p.status == PodStatus.EVICTED]
    if core:
        out.append(_held(core))
    return out


def _held(pods: list[Pod]) -> tuple[int, int, int]:
    return (sum(p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000 for p in pods),
            sum(p.cpu for p in pods), sum(p.mem for p in pods))


def reclaim(session: Session) -> None:
    """The reclaim action: a queue below its fair share takes resources back from queues above theirs
    (``ReclaimRules``)."""
    evict_for_pending(session, ReclaimRules())
