"""The order in which jobs are served and victims are taken: KAI-Scheduler's job order and queue order (its
``priority`` and ``elastic`` plugins, ``proportion/queue_order`` and ``actions/utils/job_order_by_queue.go`` at the
reference commit).

Jobs inside a leaf queue: higher priority first, then a job below its gang minimum before one exactly at it
before one above it, then the older job. Queues: at every level of the tree the best child is chosen by a chain
of rules, each looking at the queue and the job it would serve next: not over its fair share, then starved (its
next job fits its deserved share), then priority, then no job that needs what the queue has no share of, then
the smaller dominant share with the next job (and without the victims given), then without it, then the smaller
allocatable share, then the older queue. The rules that look at one queue at a time make a key (``_key``), the
last two tell apart queues whose keys tie (``_tie``); the victims' order is the reverse of both. The tests read
the rules one pair of queues at a time, as KAI writes them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

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


def _first(left: bool, right: bool) -> int:
    """-1 when only ``left`` holds, 1 when only ``right`` does, else 0."""
    return -1 if left and not right else (1 if right and not left else 0)


@dataclass(slots=True)
class Side:
    """One queue as the order compares it: the job it would serve next (its request), or the victims it has
    given so far (what they hold)."""

    queue: Queue
    request: Vec = ZERO
    given: Vec = ZERO


@dataclass(slots=True)
class _Entry:
    """What the order knows about one queue: the leaf it would serve next (None: no job below it), that queue's
    side and the key of the rules that compare sides one at a time (``_key``); valid while the queue's version
    stands and no leaf below it gained or lost a job."""

    version: int
    leaf: Queue | None
    side: Side | None = None
    key: tuple[int, int, int, int, float, float] | None = None


@dataclass
class ByQueue:
    """Jobs to serve (or victims to take, ``victims=True``), handed out one at a time in KAI's order. The order
    is worked out again at every ``pop`` (queues' allocations change as the action goes), but only for the
    queues that changed since the last one: a queue's entry stands while its version (bumped by every charge
    here or below) does and no leaf below it gained or lost a job, so a pop costs the depth of the tree times
    the siblings on the way, not the whole tree."""

    queues: dict[str, Queue]
    total: Vec
    request: Callable[[Job], Vec]
    held: Callable[[Job], Vec]
    victims: bool = False
    # the order as the cluster stood when it was made, whatever happens to it while its jobs are handed out: the
    # queues' allocations, each job's key and what each job holds are read once (a victim search hands out its
    # victims one at a time, evicting some before it asks for the next: ``evictions._search``)
    frozen: bool = False
    # each leaf's jobs, in serving order (``victims``: the reverse); the head is served next
    leaves: dict[str, list[Job]] = field(default_factory=dict)
    _keys: dict[str, list[tuple[int, int, float, str]]] = field(default_factory=dict)  # job_key of each, ascending
    _given: dict[str, list[int]] = field(default_factory=dict)  # leaf -> what the victims taken so far hold
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)  # queues whose leaves' jobs changed since their entry
    _roots: list[Queue] = field(default_factory=list)
    _caps: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # allocatable per queue: fixed in a cycle
    _asked: dict[int, Vec] = field(default_factory=dict)  # id(job) -> its request, for one pop (each level asks)
    _ties: dict[tuple[str, str], int] = field(default_factory=dict)  # ``_tie`` of two queues: fixed in a cycle
    _allocated: dict[str, list[int]] | None = None  # ``frozen``: each queue's allocation when the order was made
    _job_keys: dict[int, tuple[int, int, float, str]] = field(default_factory=dict)  # ``frozen``: id(job) -> key

    def __post_init__(self) -> None:
        self._roots = [q for q in self.queues.values() if q.parent is None]
        if self.frozen:
            self._allocated = {name: list(q.allocated) for name, q in self.queues.items()}
            held, known = self.held, dict[int, Vec]()

            def held_then(job: Job) -> Vec:
                value = known.get(id(job))
                if value is None:
                    value = known[id(job)] = held(job)
                return value

            self.held = held_then

    def push_all(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.push(job)

    def push(self, job: Job) -> None:
        queue = self.queues.get(job.queue)
        if queue is None or queue.children:
            return
        jobs = self.leaves.setdefault(job.queue, [])
        keys = self._keys.setdefault(job.queue, [])
        if self.frozen:
            known = self._job_keys.get(id(job))
            key = known if known is not None else self._job_keys.setdefault(id(job), job_key(job))
        else:
            key = job_key(job)
        at = bisect_right(keys, key)  # job keys are unique (they end with the job's key)
        keys.insert(at, key)
        jobs.insert(len(jobs) - at if self.victims else at, job)
        self._touch(queue)

    def __bool__(self) -> bool:
        return any(self.leaves.values())

    def remaining(self) -> list[Job]:
        """Every job still to hand out, leaf by leaf in serving order (not in the order ``pop`` would hand them
        out)."""
        return [job for jobs in self.leaves.values() for job in jobs]

    def clear(self) -> None:
        """Hand out nothing more."""
        for name, jobs in self.leaves.items():
            if jobs:
                jobs.clear()
                self._keys[name].clear()
                self._touch(self.queues[name])

    def pop(self) -> Job | None:
        self._asked.clear()  # nothing changes during one pop: a leaf's head job is asked once, not once per level
        best = self._best(self._roots)
        if best is None or best.leaf is None:
            return None
        leaf = best.leaf
        job = self.leaves[leaf.name].pop(0)
        self._keys[leaf.name].pop(-1 if self.victims else 0)
        if self.victims:
            held = self.held(job)
            given = self._given.setdefault(leaf.name, [0, 0, 0])
            for r in range(3):
                given[r] += held[r]
        self._touch(leaf)
        return job

    def _touch(self, leaf: Queue) -> None:
        for q in leaf.path():
            self._dirty.add(q.name)

    def _best(self, queues: list[Queue]) -> _Entry | None:
        """The entry of the queue served first among ``queues`` (the first of equals), ignoring those with no
        job below them."""
        best: _Entry | None = None
        best_key: tuple[int, int, int, int, float, float] | None = None
        entries, dirty, victims = self._entries, self._dirty, self.victims
        for q in queues:
            name = q.name
            e = entries.get(name)  # ``_entry``'s check inline: most siblings on the way are unchanged
            if e is None or e.version != q.version or name in dirty:
                e = self._entry(q)
            key = e.key
            if key is None:  # no job below it
                continue
            if best_key is None:
                best, best_key = e, key
            elif key != best_key:  # ``_compare`` where the keys differ, inline
                if (key < best_key) != victims:
                    best, best_key = e, key
            elif self._compare(e, best) < 0:  # type: ignore[arg-type]
                best = e
        return best

    def _entry(self, q: Queue) -> _Entry:
        e = self._entries.get(q.name)
        if e is not None and e.version == q.version and q.name not in self._dirty:
            return e
        self._dirty.discard(q.name)
        if q.children:
            below = self._best(q.children)
            leaf = below.leaf if below is not None else None
        else:
            leaf = q if self.leaves.get(q.name) else None
        e = _Entry(q.version, leaf)
        if leaf is not None:
            if self.victims:
                taken = self.held(self.leaves[leaf.name][0])
                before = self._given.get(leaf.name, ZERO)
                e.side = Side(q, given=(before[0] + taken[0], before[1] + taken[1], before[2] + taken[2]))
            else:
                head = self.leaves[leaf.name][0]
                asked = self._asked.get(id(head))
                if asked is None:
                    asked = self._asked[id(head)] = self.request(head)
                e.side = Side(q, asked)
            caps = self._caps.get(q.name)
            if caps is None:
                caps = self._caps[q.name] = (allocatable(q, 0), allocatable(q, 1), allocatable(q, 2))
            held = q.allocated if self._allocated is None else self._allocated[q.name]
            e.key = _key(e.side, self.total, caps, held)
        self._entries[q.name] = e
        return e

    def _compare(self, left: _Entry, right: _Entry) -> int:
        """Negative when ``left`` is served (or, for victims, taken) first: by the keys where they differ, else by
        the rules the keys leave out (``_tie``)."""
        assert left.key is not None and right.key is not None and left.side is not None and right.side is not None
        if left.key != right.key:
            result = -1 if left.key < right.key else 1
        else:
            lq, rq = left.side.queue, right.side.queue
            pair = (lq.name, rq.name)
            result = self._ties.get(pair, 0)
            if not result:  # the same for the whole cycle: worked out once per pair
                result = self._ties[pair] = _tie(lq, rq, self._caps[lq.name], self._caps[rq.name])
        return -result if self.victims else result


def _tie(lq: Queue, rq: Queue, lcaps: tuple[int, int, int], rcaps: tuple[int, int, int]) -> int:
    """The last two rules, for queues whose keys tie: the smaller allocatable share (``caps``: ``allocatable`` per
    resource; one is smaller when it is nowhere larger and somewhere smaller), then the older queue."""
    def below(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
        return any(not _le(b[r], a[r]) for r in range(3)) and all(_le(a[r], b[r]) for r in range(3))

    result = _first(below(lcaps, rcaps), below(rcaps, lcaps))
    if result:
        return result
    return -1 if (lq.created, lq.name) < (rq.created, rq.name) else 1


def _key(side: Side, total: Vec, caps: tuple[int, int, int],
         held: list[int]) -> tuple[int, int, int, int, float, float]:
    """The rules of the queue order that look at one side at a time, as a key: where two keys differ, the
    first rule that tells the sides apart is the first element that differs. ``caps``: ``allocatable`` of the
    side's queue per resource (fixed for the cycle), ``held`` what it holds. One pass over the resources (it runs
    for every queue on the way at every pop): not over its fair share, within its deserved share with the
    request, no request for what it has no share of, the dominant share with the request less the victims given
    and without it; a resource with nothing allocatable counts 1000 times what it holds."""
    q = side.queue
    req, given, quota, fair = side.request, side.given, q.quota, q.fair
    over = fair[0] < held[0] and fair[1] < held[1] and fair[2] < held[2]
    within, zero_share = True, False
    share_with = share = 0.0
    for r in (0, 1, 2):
        h = held[r]
        asked = h + req[r]
        if within and quota[r] != UNLIMITED and asked > quota[r]:
            within = False
        if caps[r] == 0 and asked > 0:
            zero_share = True
        cap = total[r] if caps[r] == UNLIMITED else caps[r]
        amount = h + req[r] - given[r]
        w: float
        d: float
        if cap == 0:
            w, d = amount * NO_SHARE_MULTIPLIER, h * NO_SHARE_MULTIPLIER
        else:
            w, d = amount / cap, h / cap
        if w > share_with:
            share_with = w
        if d > share:
            share = d
    return (int(over), int(not within), -q.priority, int(zero_share), share_with, share)
