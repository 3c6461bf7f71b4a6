"""The order in which jobs are served and victims are taken: KAI-Scheduler's job order and queue order (its
``priority`` and ``elastic`` plugins, ``proportion/queue_order`` and ``actions/utils/job_order_by_queue.go`` at the
reference commit).

Jobs inside a leaf queue: higher priority first, then a job below its gang minimum before one exactly at it
before one above it, then the older job. Queues: at every level of the tree the best child is chosen by a chain
of rules (``compare_queues``), each looking at the queue and the job it would serve next; the victims' order is
the reverse of both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cmp_to_key

from kaid.actions import gangs
from kaid.model.objects import UNLIMITED, Job, Queue

Vec = tuple[int, int, int]
ZERO: Vec = (0, 0, 0)
NO_SHARE_MULTIPLIER = 1000  # KAI's noFairShareDrfMultiplier


def job_key(job: Job) -> tuple[int, int, float, str]:
    """Serve first: higher priority, then below / at / above the gang minimum, then older, then by name."""
    return (-job.priority, int(gangs.elastic_state(job)), job.created, job.key)


def _le(a: int, b: int) -> bool:
    """a <= b where b may be UNLIMITED (-1)."""
    return b == UNLIMITED or a <= b


def allocatable(q: Queue, r: int) -> int:
    """What the queue may hold of a resource before it is over its share: max(deserved, fair share), never
    above its limit; an unlimited deserved share makes it the limit (perhaps unlimited)."""
    limit = q.effective_limit(r)
    if q.quota[r] == UNLIMITED:
        return limit
    share = max(q.quota[r], q.fair[r])
    return share if limit == UNLIMITED else min(limit, share)


def over_utilized(q: Queue) -> bool:
    """Above its fair share in every resource."""
    return all(q.fair[r] < q.allocated[r] for r in range(3))


def within_deserved(q: Queue, extra: Vec) -> bool:
    return all(_le(q.allocated[r] + extra[r], q.quota[r]) for r in range(3))


def _zero_share_violation(q: Queue, extra: Vec) -> bool:
    return any(allocatable(q, r) == 0 and q.allocated[r] + extra[r] > 0 for r in range(3))


def dominant_share(q: Queue, total: Vec, extra: Vec = ZERO) -> float:
    """The largest (allocated + extra) / allocatable over the resources; a resource with nothing allocatable
    counts 1000 times what it holds."""
    share = 0.0
    for r in range(3):
        cap = allocatable(q, r)
        if cap == UNLIMITED:
            cap = total[r]
        held = q.allocated[r] + extra[r]
        share = max(share, held * NO_SHARE_MULTIPLIER if cap == 0 else held / cap)
    return share


def _first(left: bool, right: bool) -> int:
    """-1 when only ``left`` holds, 1 when only ``right`` does, else 0."""
    return -1 if left and not right else (1 if right and not left else 0)


def _smaller(a: float, b: float) -> int:
    return -1 if a < b else (1 if a > b else 0)


def _allocatable_smaller(lq: Queue, rq: Queue) -> int:
    la = [allocatable(lq, r) for r in range(3)]
    ra = [allocatable(rq, r) for r in range(3)]

    def below(a: list[int], b: list[int]) -> bool:
        return any(not _le(b[r], a[r]) for r in range(3)) and all(_le(a[r], b[r]) for r in range(3))

    return _first(below(la, ra), below(ra, la))


@dataclass(slots=True)
class Side:
    """One queue as the order compares it: the job it would serve next (its request), or the victims it has
    given so far (what they hold)."""

    queue: Queue
    request: Vec = ZERO
    given: Vec = ZERO


def compare_queues(left: Side, right: Side, total: Vec) -> int:
    """KAI's queue order: negative when ``left`` goes first. Not over its fair share, then starved (its next
    job fits its deserved share), then priority, then no job that needs what the queue has no share of, then
    the smaller dominant share with the next job (and without the victims given), then without it, then the
    smaller allocatable share, then the older queue."""
    lq, rq = left.queue, right.queue
    with_l = tuple(a - b for a, b in zip(left.request, left.given, strict=True))
    with_r = tuple(a - b for a, b in zip(right.request, right.given, strict=True))
    for result in (
        _first(not over_utilized(lq), not over_utilized(rq)),
        _first(within_deserved(lq, left.request), within_deserved(rq, right.request)),
        _smaller(-lq.priority, -rq.priority),
        _first(not _zero_share_violation(lq, left.request), not _zero_share_violation(rq, right.request)),
        _smaller(dominant_share(lq, total, with_l), dominant_share(rq, total, with_r)),  # type: ignore[arg-type]
        _smaller(dominant_share(lq, total), dominant_share(rq, total)),
        _allocatable_smaller(lq, rq),
    ):
        if result:
            return result
    return -1 if (lq.created, lq.name) < (rq.created, rq.name) else 1


@dataclass
class ByQueue:
    """Jobs to serve (or victims to take, ``victims=True``), handed out one at a time in KAI's order. The order
    is worked out again at every ``pop``: queues' allocations change as the action goes."""

    queues: dict[str, Queue]
    total: Vec
    request: Callable[[Job], Vec]
    held: Callable[[Job], Vec]
    victims: bool = False
    leaves: dict[str, list[Job]] = field(default_factory=dict)
    given: dict[str, list[Job]] = field(default_factory=dict)

    def push_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.push(job)

    def push(self, job: Job) -> None:
        queue = self.queues.get(job.queue)
        if queue is None or queue.children:
            return
        jobs = self.leaves.setdefault(job.queue, [])
        jobs.append(job)
        jobs.sort(key=job_key, reverse=self.victims)

    def __bool__(self) -> bool:
        return any(self.leaves.values())

    def pop(self) -> Job | None:
        level = self._live([q for q in self.queues.values() if q.parent is None])
        while level:
            best = min(level, key=cmp_to_key(self._compare))
            if not best.children:
                job = self.leaves[best.name].pop(0)
                self.given.setdefault(best.name, []).append(job)
                return job
            level = self._live(best.children)
        return None

    def _live(self, queues: list[Queue]) -> list[Queue]:
        return [q for q in queues if self._next_leaf(q) is not None]

    def _next_leaf(self, q: Queue) -> Queue | None:
        """The leaf under ``q`` (or ``q``) whose job would be served next."""
        if not q.children:
            return q if self.leaves.get(q.name) else None
        live = self._live(q.children)
        if not live:
            return None
        return self._next_leaf(min(live, key=cmp_to_key(self._compare)))

    def _side(self, q: Queue) -> Side:
        leaf = self._next_leaf(q)
        assert leaf is not None
        if not self.victims:
            return Side(q, self.request(self.leaves[leaf.name][0]))
        taken = [*self.given.get(leaf.name, []), self.leaves[leaf.name][0]]
        held = [self.held(j) for j in taken]
        return Side(q, given=(sum(h[0] for h in held), sum(h[1] for h in held), sum(h[2] for h in held)))

    def _compare(self, left: Queue, right: Queue) -> int:
        result = compare_queues(self._side(left), self._side(right), self.total)
        return -result if self.victims else result
