"""When one queue may take resources back from another: KAI-Scheduler's reclaim rules (``proportion`` plugin,
``reclaimable/`` at the reference commit), on every resource at once.

* A reclaimer's leaf queue must stay within its fair share with the job, and a non-preemptible reclaimer
  within its queue's deserved share.
* Queues are compared at the level where the two branches part (the "leveled" queues). A victim's side
  must hold more than its fair share, or, while the reclaimer's side is within its deserved share, more
  than its own deserved share; checked before each victim goes, so a queue above its share can lose a
  victim bigger than the gap (a guaranteed quota is reached even then).
* After the reclaim, the reclaimer's side must not end up more saturated than a sibling it took from
  (allocated / fair share, per involved resource, once it is above its fair share), and a non-preemptible
  reclaimer's queues stay within their deserved shares all the way up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import add

from kaid.actions.order import allocatable, within_deserved
from kaid.model.objects import UNLIMITED, Queue, Reason
from kaid.model.vocabulary import ReasonCode

Vec = tuple[int, int, int]
SATURATION_MULTIPLIER = 1.0  # KAI's relcaimerSaturationMultiplier default


def _le(a: int, b: int) -> bool:
    return b == UNLIMITED or a <= b


def within(held: Iterable[int], cap: Iterable[int]) -> bool:
    return all(b == UNLIMITED or a <= b for a, b in zip(held, cap, strict=True))  # (``_le``, inline)


def _plus(a: Iterable[int], b: Iterable[int]) -> list[int]:
    return list(map(add, a, b))


def _over_fair_share(q: Queue, held: list[int]) -> bool:
    return not within(held, [allocatable(q, r) for r in range(3)])


def _over_deserved(q: Queue, held: list[int]) -> bool:
    return not within(held, q.quota)


def leveled(reclaimer: Queue, victim: Queue) -> tuple[Queue, Queue]:
    """The two queues where the branches of the reclaimer's and the victim's queues part."""
    mine, theirs = reclaimer.path()[::-1], victim.path()[::-1]
    pair = (mine[0], theirs[0])
    for a, b in zip(mine, theirs, strict=False):
        pair = (a, b)
        if a is not b:
            break
    return pair


def cannot_reclaim(q: Queue, req: Vec, preemptible: bool) -> Reason | None:
    """Why a job of queue ``q`` needing ``req`` may not reclaim at all, or None."""
    held = _plus(q.allocated, req)
    if not within(held, q.fair):
        r = next(r for r in range(3) if not _le(held[r], q.fair[r]))
        return Reason(ReasonCode.RECLAIM_NOT_POSSIBLE, "", {"queue": q.name, "resource": r, "allocated": q.allocated[r],
                                                 "fairShare": q.fair[r], "requested": req[r]})
    if not preemptible and not within(_plus(q.alloc_np, req), q.quota):
        return Reason(ReasonCode.NON_PREEMPTIBLE_OVER_QUOTA, "", {"queue": q.name})
    return None


def sides_allowed(mine: Queue, theirs: Queue, req: Vec) -> bool:
    """Whether jobs of a victim queue are candidates at all for a reclaimer's job needing ``req`` (KAI's reclaim
    victim filter), from the two queues where their branches part (``leveled(reclaimer, victim)``): it reads nothing
    else of either queue, so the leaves under one ``theirs`` share its answer."""
    if not within_deserved(mine, req):
        return _over_fair_share(theirs, list(theirs.allocated))
    under = False
    for r in range(3):
        if req[r] <= 0 or theirs.quota[r] == UNLIMITED:
            continue
        if theirs.allocated[r] > theirs.quota[r]:
            return True
        under = under or theirs.allocated[r] < theirs.quota[r]
    return not under


@dataclass(slots=True)
class Before:
    """What every queue held when the job's attempt started (KAI's job-simulation queues)."""

    allocated: dict[str, list[int]]
    non_preemptible: dict[str, list[int]]

    @classmethod
    def of(cls, queues: Iterable[Queue]) -> Before:
        qs = list(queues)
        return cls({q.name: list(q.allocated) for q in qs}, {q.name: list(q.alloc_np) for q in qs})


def reclaimable(queues: dict[str, Queue], reclaimer: Queue, req: Vec, preemptible: bool,
                taken: list[tuple[Queue, list[Vec]]], before: Before) -> bool:
    """Whether taking ``taken`` (each victim queue with the amounts of its victims, in the order they go)
    for a job of ``reclaimer`` needing ``req`` keeps to KAI's rules."""
    remaining: dict[str, list[int]] = {}
    involved: dict[str, set[int]] = {}
    for victim_q, amounts in taken:
        mine, theirs = leveled(reclaimer, victim_q)
        involved[victim_q.name] = {r for a in amounts for r in range(3) if a[r] > 0}
        left = remaining.setdefault(theirs.name, list(before.allocated[theirs.name]))
        for amount in amounts:
            if not _fits_strategy(mine, theirs, left, req, before):
                return False
            for anc in victim_q.path():
                held = remaining.setdefault(anc.name, list(before.allocated[anc.name]))
                for r in range(3):
                    held[r] -= amount[r]
                involved.setdefault(anc.name, set()).update(involved[victim_q.name])
    return _within_boundaries(queues, reclaimer, req, preemptible, remaining, involved, before)


def _fits_strategy(mine: Queue, theirs: Queue, left: list[int], req: Vec, before: Before) -> bool:
    if _over_fair_share(theirs, left):
        return True
    return within(_plus(before.allocated[mine.name], req), mine.quota) and _over_deserved(theirs, left)


def _saturation(held: int, fair: int) -> float:
    if fair == 0:
        return float("inf") if held > 0 else 0.0
    return held / fair


def _less_saturated(resources: set[int], mine: Queue, mine_held: list[int], sibling: Queue,
                    sibling_held: list[int]) -> bool:
    for r in resources:
        ratio = _saturation(mine_held[r], mine.fair[r])
        if ratio > 1 and sibling.fair[r] > 0 and ratio * SATURATION_MULTIPLIER >= _saturation(sibling_held[r],
                                                                                               sibling.fair[r]):
            return False
    return True


def _within_boundaries(queues: dict[str, Queue], reclaimer: Queue, req: Vec, preemptible: bool,
                       remaining: dict[str, list[int]], involved: dict[str, set[int]], before: Before) -> bool:
    wanted = {r for r in range(3) if req[r] > 0}
    for q in reclaimer.path():
        held = _plus(remaining.get(q.name, before.allocated[q.name]), req)
        for name, sibling_held in remaining.items():
            sibling = queues[name]
            if sibling is q or sibling.parent is not q.parent:
                continue
            if not _less_saturated(involved.get(name, set()) | wanted, q, held, sibling, sibling_held):
                return False
        if not preemptible and not within(_plus(before.non_preemptible[q.name], req), q.quota):
            return False
    return True
