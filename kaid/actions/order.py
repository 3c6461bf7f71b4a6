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

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush, heapreplace
from itertools import pairwise

from kaid.actions import gangs
from kaid.model.objects import UNLIMITED, Job, Queue

Vec = tuple[int, int, int]
ZERO: Vec = (0, 0, 0)
NO_SHARE_MULTIPLIER = 1000  # KAI's noFairShareDrfMultiplier
TIE_SCORES_UP_TO = 32  # siblings whose tie rule is checked pair by pair for a total order (``ByQueue._rank``)
SCAN_UP_TO = 16  # children read by a scan of them all (``ByQueue._scan``); more are kept in a heap
RANK_AFTER_TIES = 4  # ties between siblings (or siblings in one tie) before their tie rule is ranked (``_tied``)


JobKey = tuple[int, int, float, str]


def job_key(job: Job) -> JobKey:
    """Serve first: higher priority, then below / at / above the gang minimum, then older, then by name."""
    if job.subgroups:
        return (-job.priority, int(gangs.elastic_state(job)), job.created, job.key)
    # one pod set: ``elastic_state`` read inline (the key of every job waiting is made at the start of each order)
    active = 0
    for p in job.pods:
        if p.status in _ACTIVE and not p.releasing:  # ``gangs.is_active``
            active += 1
    least = job.min_member
    return (-job.priority, _BELOW if active < least else (_EXACT if active == least else _ABOVE), job.created,
            job.key)


_ACTIVE = gangs.ACTIVE
# ``ElasticState``'s values as ints (a member read through its class costs ``EnumType.__getattr__``, and int() a call)
_BELOW, _EXACT, _ABOVE = int(gangs.ElasticState.BELOW), int(gangs.ElasticState.EXACT), int(gangs.ElasticState.ABOVE)


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


class _Entry:
    """What the order knows about one queue: the leaf it would serve next (None: no job below it), and the key
    of the rules that compare queues one at a time (``_key``) with that leaf's next job (or the victims it would
    have given); valid while the queue's version stands and no leaf below it gained or lost a job. ``ask``: what
    the key was worked out with (the head job's request and the victims given), valid as long as the entry."""

    __slots__ = ("ask", "key", "leaf", "queue", "version")

    def __init__(self, version: int, leaf: Queue | None, queue: Queue,
                 key: tuple[int, int, int, int, float, float] | None) -> None:
        self.version = version
        self.leaf = leaf
        self.queue = queue
        self.key = key
        self.ask: tuple[Vec, Vec] = (ZERO, ZERO)


Key = tuple[int, int, int, int, float, float]
# what ``_key`` reads of a queue besides what it holds: its deserved share per resource (``math.inf``: unlimited),
# its fair share, the amount its dominant share is counted against (``allocatable``, or the total where that is
# unlimited), whether it has nothing allocatable, its priority, and whether it counts its dominant share against
# something of every resource (none is 0: then it has something allocatable of every resource)
_Rules = tuple[float, float, float, int, int, int, int, int, int, bool, bool, bool, int, bool]
QueueRules = _Rules  # (for an owner of orders that shares them: ``ByQueue._rules``)
_Item = tuple[Key, int, str]  # (a child's key, negated for victims; its tie rank, 0 until ranked; its name)


@dataclass(slots=True)
class _Level:
    """The children of one queue (or the roots), kept in a heap by their entries' keys so that the best is found
    without reading every sibling. A heap item stands while it is its child's item in ``items`` (a child with no
    job below it has none); the others are dropped when they come to the top. ``stale``: the children touched
    since the level was last read (a job pushed or popped below them); ``version``: the level's version then (the
    parent's, or the roots' summed). A charge below the level bumps its version and that of exactly one child,
    so where the touched children's versions moved by as much as the level's, no other child's did
    (``ByQueue._moved``). A child never touched has never had a job below it: it is not read at all."""

    queues: list[Queue]
    items: dict[str, _Item] = field(default_factory=dict)
    heap: list[_Item] = field(default_factory=list)
    stale: dict[str, Queue] = field(default_factory=dict)
    read: dict[str, Queue] = field(default_factory=dict)  # the children read so far (they have entries)
    version: int | None = None  # None: never read
    # the tie rule's rank of each child where it orders these siblings totally (``ByQueue._rank``); None: not
    # (yet), and children whose keys are equal are compared pair by pair in list order
    ranks: dict[str, int] | None = None
    ties: int = 0  # ties between children met so far
    ranked: bool = False  # whether ``ranks`` was worked out


@dataclass
class ByQueue:
    """Jobs to serve (or victims to take, ``victims=True``), handed out one at a time in KAI's order. The order
    is worked out again at every ``pop`` (queues' allocations change as the action goes), but only for the
    queues that changed since the last one: a queue's entry stands while its version (bumped by every charge
    here or below) does and no leaf below it gained or lost a job, so a pop costs the depth of the tree times
    the siblings on the way, not the whole tree. So what a job asks for (``request``) and holds (``held``) may
    change only where its queue is charged (as every operation of the session on one of its pods does) or it is
    pushed again."""

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
    _keys: dict[str, list[JobKey]] = field(default_factory=dict)  # job_key of each, ascending
    _given: dict[str, list[int]] = field(default_factory=dict)  # leaf -> what the victims taken so far hold
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _roots: list[Queue] = field(default_factory=list)
    _caps: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # allocatable per queue: fixed in a cycle
    _rules: dict[str, _Rules] = field(default_factory=dict)  # what ``_key`` reads of a queue but what it holds
    _ties: dict[tuple[str, str], int] = field(default_factory=dict)  # ``_tie`` of two queues: fixed in a cycle
    _allocated: dict[str, list[int]] | None = None  # ``frozen``: each queue's allocation when the order was made
    _job_keys: dict[int, JobKey] = field(default_factory=dict)  # ``frozen``: id(job) -> key
    _levels: dict[str | None, _Level] = field(default_factory=dict)  # parent's name (None: the roots) -> its level
    # leaf -> per queue from it up: (what its level has touched since last read: ``_Level.stale``, its name, it)
    _paths: dict[str, list[tuple[dict[str, Queue], str, Queue]]] = field(default_factory=dict)
    _held: dict[int, Vec] = field(default_factory=dict)  # ``frozen``: id(job) -> what it holds (``held``)

    def __post_init__(self) -> None:
        self._roots = [q for q in self.queues.values() if q.parent is None]
        if self.frozen:
            self._allocated = {name: list(q.allocated) for name, q in self.queues.items()}
            held, known = self.held, self._held

            def held_then(job: Job) -> Vec:
                value = known.get(id(job))
                if value is None:
                    value = known[id(job)] = held(job)
                return value

            self.held = held_then

    def push_all(self, jobs: Iterable[Job], keys: Mapping[int, JobKey] | None = None) -> None:
        """``push`` each job (``keys``: id(job) -> its ``job_key`` as it stands now, where the caller knows it); a
        leaf that holds none yet gets its jobs sorted at once, and is touched once."""
        # each leaf's keys and jobs in two lists, sorted by an index (a (key, job) pair per job was a tracked
        # allocation: 26,939 of them at once for the serving order of a 4,000-node cycle)
        fresh: dict[str, tuple[list[JobKey], list[Job]]] = {}
        for job in jobs:
            queue = self.queues.get(job.queue)
            if queue is None or queue.children:
                continue
            given = keys.get(id(job)) if keys is not None else None
            if self.leaves.get(job.queue):
                self.push(job, given)  # among the jobs it holds already
                continue
            if self.frozen:
                key = self._job_keys.get(id(job))
                if key is None:
                    key = self._job_keys[id(job)] = job_key(job) if given is None else given
            else:
                key = job_key(job) if given is None else given
            lists = fresh.get(job.queue)
            if lists is None:
                lists = fresh[job.queue] = ([], [])
            lists[0].append(key)
            lists[1].append(job)
        for name, (job_keys, jobs_in) in fresh.items():
            if len(job_keys) > 1:
                # (stable: equal keys stay in push order, as bisect_right leaves them)
                at = sorted(range(len(job_keys)), key=job_keys.__getitem__)
                job_keys = [job_keys[i] for i in at]
                jobs_in = [jobs_in[i] for i in at]
            self._keys.setdefault(name, [])[:] = job_keys
            if self.victims:
                jobs_in.reverse()
            self.leaves.setdefault(name, [])[:] = jobs_in
            self._touch(self.queues[name])

    def push(self, job: Job, key: JobKey | None = None) -> None:
        """Hand ``job`` out in its turn; ``key``: its ``job_key`` as it stands now, where the caller knows it."""
        queue = self.queues.get(job.queue)
        if queue is None or queue.children:
            return
        jobs = self.leaves.setdefault(job.queue, [])
        keys = self._keys.setdefault(job.queue, [])
        if self.frozen:  # the key as the job was first pushed, whatever happens to it later
            known = self._job_keys.get(id(job))
            if known is None:
                known = self._job_keys[id(job)] = job_key(job) if key is None else key
            key = known
        elif key is None:
            key = job_key(job)
        at = bisect_right(keys, key)  # job keys are unique (they end with the job's key)
        keys.insert(at, key)
        jobs.insert(len(jobs) - at if self.victims else at, job)
        self._touch(queue)

    def push_rest(self, job: Job, key: JobKey, held: Vec) -> None:
        """``push`` a victim again, as what is left of it (a ``frozen`` victim order: KAI pushes back a clone of the
        job with its tasks not handed out yet, ``pod_scenario_builder.addNextPotentialVictims``): its key (its
        elastic state is the rest's) and what it holds are the rest's from now on."""
        assert self.frozen and self.victims
        self._job_keys[id(job)] = key
        self._held[id(job)] = held
        self.push(job)

    def copy(self, request: Callable[[Job], Vec]) -> ByQueue:
        """A serving order of the jobs this one holds, in the same lines, that asks ``request`` what a job asks for
        (for an order none was handed out from: nothing it worked out is copied but the queues' fixed rules)."""
        assert not self.victims and not self.frozen
        new = ByQueue.__new__(ByQueue)  # (each field set here: the generated ``__init__`` costs more than the copy)
        new.queues, new.total, new.request, new.held, new.victims, new.frozen = \
            self.queues, self.total, request, self.held, False, False
        leaves: dict[str, list[Job]] = {}
        keys: dict[str, list[JobKey]] = {}
        new.leaves, new._keys, new._given, new._entries = leaves, keys, {}, {}
        new._roots = self._roots  # (read only)
        new._caps, new._rules, new._ties = self._caps, self._rules, self._ties  # (fixed in a cycle)
        new._allocated, new._job_keys, new._levels, new._paths, new._held = None, {}, {}, {}, {}
        queues, own = self.queues, self._keys
        for name, jobs in self.leaves.items():
            if jobs:
                leaves[name] = jobs[:]
                keys[name] = own[name][:]
                new._touch(queues[name])
        return new

    def remove(self, job: Job, key: JobKey) -> None:
        """Take ``job``, pushed with ``key``, out of a serving order."""
        assert not self.victims
        keys = self._keys[job.queue]
        at = bisect_left(keys, key)
        assert self.leaves[job.queue][at] is job
        del keys[at]
        del self.leaves[job.queue][at]
        self._touch(self.queues[job.queue])

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
        best = self._below(None)
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

    def skip(self, queue: str) -> Job:
        """Hand out the head job of the leaf ``queue`` without working out the order: for a caller that knows the
        next ``pop`` would hand it out (a serving order only: a victim taken changes what its queue has given)."""
        assert not self.victims
        job = self.leaves[queue].pop(0)
        self._keys[queue].pop(0)
        self._touch(self.queues[queue])
        return job

    def _touch(self, leaf: Queue) -> None:
        path = self._paths.get(leaf.name)
        if path is None:
            path = self._paths[leaf.name] = [(self._level(q.parent).stale, q.name, q) for q in leaf.path()]
        for stale, name, q in path:
            stale[name] = q

    def _level(self, parent: Queue | None) -> _Level:
        name = parent.name if parent is not None else None
        level = self._levels.get(name)
        if level is None:
            level = self._levels[name] = _Level(parent.children if parent is not None else self._roots)
        return level

    def _below(self, parent: Queue | None) -> _Entry | None:
        """The entry of the child of ``parent`` (None: the root) served first (the first of equals in the list
        of children, as a scan of them all would find it), ignoring those with no job below them. A level of a few
        children is read by a scan of them all (in CPython a short scan costs less than a heap's upkeep), reading
        again those touched or whose version moved; a wider one reads again only the children that changed since
        the last time (``_moved``), then the top of its heap. Where keys tie, the tie rule decides (``_compare``,
        ``_tied``)."""
        level = self._levels.get(parent.name if parent is not None else None)
        if level is None:
            level = self._level(parent)
        if len(level.queues) <= SCAN_UP_TO:
            best: _Entry | None = None
            best_key: Key | None = None
            entries, stale, victims = self._entries, level.stale, self.victims
            for q in level.queues:
                name = q.name
                e = entries.get(name)
                if name in stale or (e is not None and e.version != q.version):
                    e = self._entry(q)
                elif e is None:  # never touched: no job below it
                    continue
                key = e.key
                if key is None:
                    continue
                if best_key is None:
                    best, best_key = e, key
                elif key != best_key:
                    if (key < best_key) != victims:
                        best, best_key = e, key
                elif self._compare(e, best) < 0:  # type: ignore[arg-type]
                    best = e
            stale.clear()
            return best
        items, heap = level.items, level.heap
        now = parent.version if parent is not None else sum(q.version for q in level.queues)
        stale, was = level.stale, level.version
        if now != was or stale:
            victims, ranks, read = self.victims, level.ranks, level.read
            if was is not None and was != now:
                # where the touched children's versions moved by as much as the level's, no other child's did
                # (``_Level``); else every child read whose version moved is read again (``_moved``)
                known, entries = 0, self._entries
                for name, q in stale.items():
                    e = entries.get(name)
                    if e is not None:
                        known += q.version - e.version
                if known != now - was:
                    self._moved(level)
            level.version = now
            for name, q in stale.items():  # (the children that changed: ``_moved``; reading them touches no level's)
                read[name] = q
                key = self._entry(q).key
                if key is None:
                    items.pop(name, None)
                    continue
                if victims:
                    key = (-key[0], -key[1], -key[2], -key[3], -key[4], -key[5])  # the heap keeps the least
                item = items[name] = (key, 0 if ranks is None else ranks[name], name)
                if heap and heap[0][2] == name:  # its old item on top (most often: the child just served) is
                    heapreplace(heap, item)  # dropped in the same sift (every item of a child read again is stale)
                else:
                    heappush(heap, item)
            stale.clear()
            if len(heap) > 2 * len(items) + 8:  # drop the items that no longer stand
                heap[:] = items.values()
                heapify(heap)
        while heap:
            top = heap[0]
            if items.get(top[2]) is top:
                break
            heappop(heap)
        else:
            return None
        if level.ranks is None:
            key = top[0]
            if (len(heap) > 1 and heap[1][0] == key) or (len(heap) > 2 and heap[2][0] == key):
                return self._tied(parent, level)  # (nothing below the top's children is less than they are)
        return self._entries[top[2]]

    def _moved(self, level: _Level) -> None:
        """Add to the children touched since the level was last read (``_Level.stale``) every child read before whose
        version moved: a charge below the level went elsewhere too (or a child was touched first since)."""
        stale, entries = level.stale, self._entries
        for name, q in level.read.items():
            if entries[name].version != q.version:
                stale[name] = q

    def _tied(self, parent: Queue | None, level: _Level) -> _Entry:
        """Where more than one child has the least key: the tie rule decides, by rank where it orders the
        children totally (``_rank``, worked out once ties come often), else pair by pair over the tied children in
        list order, as the plain reading's scan over all of them would."""
        heap, items = level.heap, level.items
        key = heap[0][0]
        tied: list[_Item] = []
        while heap and heap[0][0] == key:
            item = heappop(heap)
            if items.get(item[2]) is item:
                tied.append(item)
        for item in tied:
            heappush(heap, item)
        entries = self._entries
        if len(tied) == 1:
            return entries[tied[0][2]]
        level.ties += 1
        if not level.ranked and (level.ties >= RANK_AFTER_TIES or len(tied) > RANK_AFTER_TIES):
            self._rank(level)
            if level.ranks is not None:
                return entries[heap[0][2]]
        position = {q.name: i for i, q in enumerate(level.queues)} if len(tied) > 2 else None
        if position is not None:
            tied.sort(key=lambda i: position[i[2]])
        elif len(tied) == 2 and level.queues.index(self.queues[tied[1][2]]) < \
                level.queues.index(self.queues[tied[0][2]]):
            tied.reverse()
        best = entries[tied[0][2]]
        for item in tied[1:]:
            e = entries[item[2]]
            if self._compare(e, best) < 0:
                best = e
        return best

    def _rank(self, level: _Level) -> None:
        """Rank the children by the tie rule where it orders them totally, and key the heap by rank. It does where
        their allocatable shares, told apart, make a chain (each below the next): the rule is then the chain, then
        age. Else, for a few children, where each beats a different number of the others (a tournament is
        transitive where its scores are all different)."""
        level.ranked = True
        queues = level.queues
        n = len(queues)
        caps = [self._caps_of(q) for q in queues]
        kinds = sorted(set(caps), key=lambda c: tuple(math.inf if x == UNLIMITED else x for x in c))
        ranks = [0] * n
        if all(_smaller_caps(a, b) for a, b in pairwise(kinds)):
            link = {c: i for i, c in enumerate(kinds)}
            for rank, pos in enumerate(sorted(range(n), key=lambda i: (link[caps[i]], queues[i].created,
                                                                        queues[i].name))):
                ranks[pos] = rank
        elif n <= TIE_SCORES_UP_TO:
            wins = [0] * n
            for i in range(n):
                for j in range(i + 1, n):
                    wins[i if self._tie_of(queues[i], queues[j]) < 0 else j] += 1
            if len(set(wins)) != n:
                return
            ranks = [n - 1 - w for w in wins]
        else:
            return
        sign = -1 if self.victims else 1
        by_name = level.ranks = {q.name: sign * r for q, r in zip(queues, ranks, strict=True)}
        items = level.items
        for name, item in items.items():
            items[name] = (item[0], by_name[name], name)
        level.heap[:] = items.values()
        heapify(level.heap)

    def _caps_of(self, q: Queue) -> tuple[int, int, int]:
        return _caps_in(self._caps, q)

    def _entry(self, q: Queue) -> _Entry:
        """Work out the queue's entry again (its level found it changed). A queue above a leaf reads what the leaf's
        entry was worked out with (``_Entry.ask``): the entry stands, so the leaf's head job and what it asks stand
        too (``ByQueue``)."""
        name = q.name
        leaf: Queue | None = None
        key = None
        if q.children:
            below = self._below(q)
            if below is not None and below.leaf is not None:
                leaf = below.leaf
                ask = below.ask
        else:
            jobs = self.leaves.get(name)
            if jobs:
                leaf, head = q, jobs[0]
                if self.victims:  # what the victims taken from the leaf hold with its head
                    taken, before = self.held(head), self._given.get(name, ZERO)
                    ask = ZERO, (before[0] + taken[0], before[1] + taken[1], before[2] + taken[2])
                else:  # what its head asks for
                    ask = self.request(head), ZERO
        if leaf is not None:
            rules = self._rules.get(name)
            if rules is None:
                rules = self._rules_of(q)
            key = _key(rules, ask[0], ask[1], q.allocated if self._allocated is None else self._allocated[name])
        e = self._entries.get(name)
        if e is None:
            e = self._entries[name] = _Entry(q.version, leaf, q, key)
        else:  # (kept and written again: nothing holds an entry from one reading of its queue to the next)
            e.version, e.leaf, e.key = q.version, leaf, key
        if leaf is not None:
            e.ask = ask
        return e

    def _rules_of(self, q: Queue) -> _Rules:
        """What ``_key`` reads of a queue besides what it holds (fixed in a cycle, as its fair share is)."""
        return _rules_in(self._rules, self._caps, self.total, q)

    def _compare(self, left: _Entry, right: _Entry) -> int:
        """Negative when ``left`` is served (or, for victims, taken) first: by the keys where they differ, else by
        the rules the keys leave out (``_tie``)."""
        assert left.key is not None and right.key is not None
        if left.key != right.key:
            return (-1 if left.key < right.key else 1) * (-1 if self.victims else 1)
        result = self._tie_of(left.queue, right.queue)
        return -result if self.victims else result

    def _tie_of(self, lq: Queue, rq: Queue) -> int:
        """``_tie`` of two queues whose keys are equal; the same for the whole cycle: worked out once per pair."""
        return _tie_in(self._ties, self._caps, lq, rq)


def _caps_in(caps: dict[str, tuple[int, int, int]], q: Queue) -> tuple[int, int, int]:
    """``allocatable`` of each resource of ``q``, kept in ``caps`` (fixed in a cycle)."""
    known = caps.get(q.name)
    if known is None:
        known = caps[q.name] = (allocatable(q, 0), allocatable(q, 1), allocatable(q, 2))
    return known


def _rules_in(rules: dict[str, _Rules], caps: dict[str, tuple[int, int, int]], total: Vec, q: Queue) -> _Rules:
    """What ``_key`` reads of ``q`` besides what it holds, worked out into ``rules`` (fixed in a cycle)."""
    c0, c1, c2 = _caps_in(caps, q)
    quota, fair = q.quota, q.fair
    cap0, cap1, cap2 = (total[0] if c0 == UNLIMITED else c0, total[1] if c1 == UNLIMITED else c1,
                        total[2] if c2 == UNLIMITED else c2)
    out = rules[q.name] = (
        _deserved(quota[0]), _deserved(quota[1]), _deserved(quota[2]), fair[0], fair[1], fair[2],
        cap0, cap1, cap2, c0 == 0, c1 == 0, c2 == 0, q.priority,
        0 not in (cap0, cap1, cap2))  # (nothing allocatable: a cap of 0)
    return out


def _tie_in(ties: dict[tuple[str, str], int], caps: dict[str, tuple[int, int, int]], lq: Queue, rq: Queue) -> int:
    """``_tie`` of two queues whose keys are equal, kept in ``ties`` (the caps of both worked out already)."""
    pair = (lq.name, rq.name)
    result = ties.get(pair, 0)
    if not result:
        result = ties[pair] = _tie(lq, rq, caps[lq.name], caps[rq.name])
    return result


def scanned(queues: Mapping[str, Queue]) -> bool:
    """Whether every level of the tree is read by a scan of its children (``ByQueue._below``): none has more than
    ``SCAN_UP_TO`` (then ``VictimTree`` hands out what ``ByQueue`` would)."""
    return sum(1 for q in queues.values() if q.parent is None) <= SCAN_UP_TO and \
        all(len(q.children) <= SCAN_UP_TO for q in queues.values())


class VictimTree:
    """KAI's victim order as ``ByQueue`` (``victims``, ``frozen``) hands it out, for a tree whose every level it reads
    by a scan (``scanned``), without its upkeep for orders whose queues' allocations change: frozen, a queue's entry
    changes only where a job is pushed or popped below it, so the entries on that leaf's path alone are worked out
    again (leaf first, each parent's from its children's by the same scan), at the next pop. A search's victim order
    over a few queues (reclaim's) spent most of each pop in that upkeep: versions, touched children, levels.

    ``held``: what a job holds, read once per job (the first time it heads its leaf; ``push_rest`` tells the rest's);
    ``caps``, ``rules``, ``ties``: what the order reads of the queues, fixed in a cycle (``ByQueue._caps`` ...)."""

    __slots__ = ("_allocated", "_caps", "_dirty", "_entries", "_fixed", "_given", "_held", "_job_keys", "_keys",
                 "_roots", "_rules", "_ties", "held", "leaves", "queues", "total")

    def __init__(self, queues: dict[str, Queue], total: Vec, held: Callable[[Job], Vec],
                 caps: dict[str, tuple[int, int, int]], rules: dict[str, _Rules],
                 ties: dict[tuple[str, str], int]) -> None:
        self.queues, self.total, self.held = queues, total, held
        self._caps, self._rules, self._ties = caps, rules, ties
        self._roots = [q for q in queues.values() if q.parent is None]
        self._allocated = {name: list(q.allocated) for name, q in queues.items()}
        self.leaves: dict[str, list[Job]] = {}  # each leaf's jobs, the largest key first (the head is taken next)
        self._keys: dict[str, list[JobKey]] = {}  # ascending
        self._given: dict[str, Vec] = {}  # leaf -> what the victims taken from it so far hold
        self._job_keys: dict[int, JobKey] = {}  # id(job) -> the key it is handed out under
        self._held: dict[int, Vec] = {}  # id(job) -> what it holds, as first read (or the rest's)
        # queue -> (its key, the leaf it would hand out from, what that leaf's victims hold with its head); None:
        # no job below it
        self._entries: dict[str, tuple[Key, Queue, Vec] | None] = {}
        self._dirty: dict[str, Queue] = {}  # the leaves pushed or popped since the last pop
        self._fixed: dict[str, _Fixed] = {}  # queue -> what ``_key`` reads of it but the victims given

    def push(self, job: Job, key: JobKey | None = None) -> None:
        queue = self.queues.get(job.queue)
        if queue is None or queue.children:
            return
        known = self._job_keys.get(id(job))
        if known is None:
            known = self._job_keys[id(job)] = job_key(job) if key is None else key
        keys = self._keys.get(queue.name)
        if keys is None:
            keys = self._keys[queue.name] = []
            self.leaves[queue.name] = []
        at = bisect_right(keys, known)
        keys.insert(at, known)
        jobs = self.leaves[queue.name]
        jobs.insert(len(jobs) - at, job)
        self._dirty[queue.name] = queue

    def push_rest(self, job: Job, key: JobKey, held: Vec) -> None:
        """``ByQueue.push_rest``: the rest of a victim, under the rest's key and what it holds."""
        self._job_keys[id(job)] = key
        self._held[id(job)] = held
        self.push(job)

    def remaining(self) -> list[Job]:
        return [job for jobs in self.leaves.values() for job in jobs]

    def pop(self) -> Job | None:
        if self._dirty:
            self._refresh()
        best = self._best(self._roots)
        if best is None:
            return None
        leaf = best[1]
        name = leaf.name
        job = self.leaves[name].pop(0)
        self._keys[name].pop()
        held = self._held_of(job)
        given = self._given.get(name, ZERO)
        self._given[name] = (given[0] + held[0], given[1] + held[1], given[2] + held[2])
        self._dirty[name] = leaf
        return job

    def _held_of(self, job: Job) -> Vec:
        value = self._held.get(id(job))
        if value is None:
            value = self._held[id(job)] = self.held(job)
        return value

    def _refresh(self) -> None:
        """Work out again the entries of the leaves pushed or popped since the last pop, and of the queues above
        them, each once and after its children."""
        entries = self._entries
        above: dict[str, Queue] = {}
        for name, leaf in self._dirty.items():
            jobs = self.leaves[name]
            if jobs:
                taken, before = self._held_of(jobs[0]), self._given.get(name, ZERO)
                given = (before[0] + taken[0], before[1] + taken[1], before[2] + taken[2])
                entries[name] = (self._key(leaf, given), leaf, given)
            else:
                entries[name] = None
            q = leaf.parent
            while q is not None:
                above[q.name] = q
                q = q.parent
        self._dirty.clear()
        # (a queue's depth below the roots orders them: deeper first, each after every child of it)
        for q in sorted(above.values(), key=_depth, reverse=True):
            below = self._best(q.children)
            if below is None:
                entries[q.name] = None
                continue
            entries[q.name] = (self._key(q, below[2]), below[1], below[2])

    def _key(self, q: Queue, given: Vec) -> Key:
        """``_key`` of ``q`` with no request and the victims taken from it holding ``given``: of its rules, only the
        dominant share with the victims taken reads ``given``; the others read what the queue holds, frozen, so they
        are worked out once per queue (``_fixed``: a victim search's pops worked out every rule of two queues each)."""
        fixed = self._fixed.get(q.name)
        if fixed is None:
            rules = self._rules.get(q.name)
            if rules is None:
                rules = _rules_in(self._rules, self._caps, self.total, q)
            fixed = self._fixed[q.name] = _fixed_rules(rules, self._allocated[q.name])
        over, beyond, priority, zero_share, share, h0, h1, h2, cap0, cap1, cap2 = fixed
        w0 = (h0 - given[0]) / cap0 if cap0 != 0 else (h0 - given[0]) * NO_SHARE_MULTIPLIER
        w1 = (h1 - given[1]) / cap1 if cap1 != 0 else (h1 - given[1]) * NO_SHARE_MULTIPLIER
        w2 = (h2 - given[2]) / cap2 if cap2 != 0 else (h2 - given[2]) * NO_SHARE_MULTIPLIER
        share_with = 0.0
        if w0 > share_with:
            share_with = w0
        if w1 > share_with:
            share_with = w1
        if w2 > share_with:
            share_with = w2
        return (over, beyond, priority, zero_share, share_with, share)

    def _best(self, level: list[Queue]) -> tuple[Key, Queue, Vec] | None:
        """The entry of the child taken first (``ByQueue._below``'s scan, for victims): the largest key, the tie rule
        between equal keys, the first in the list where that ties too."""
        entries = self._entries
        best: tuple[Key, Queue, Vec] | None = None
        best_q: Queue | None = None
        for q in level:
            e = entries.get(q.name)
            if e is None:
                continue
            if best is None:
                best, best_q = e, q
            elif e[0] != best[0]:
                if e[0] > best[0]:
                    best, best_q = e, q
            elif _tie_in(self._ties, self._caps, q, best_q) > 0:  # type: ignore[arg-type]
                best, best_q = e, q
        return best


# what ``VictimTree._key`` reads of a queue but the victims given: the key's rules that read only what it holds (not
# over its fair share, within its deserved share, its priority negated, a request for what it has no share of), the
# dominant share of what it holds, what it holds, and what each resource's share is counted against (0: none)
_Fixed = tuple[bool, bool, int, bool, float, int, int, int, int, int, int]


def _fixed_rules(rules: _Rules, held: list[int]) -> _Fixed:
    """``_key``'s rules of a queue that holds ``held`` and asks for nothing, but the one that reads the victims given
    (``VictimTree._key``): the same expressions with no request."""
    quota0, quota1, quota2, fair0, fair1, fair2, cap0, cap1, cap2, none0, none1, none2, priority, shares = rules
    h0, h1, h2 = held
    zero_share = False if shares else ((none0 and h0 > 0) or (none1 and h1 > 0) or (none2 and h2 > 0))
    d0 = h0 / cap0 if cap0 != 0 else h0 * NO_SHARE_MULTIPLIER
    d1 = h1 / cap1 if cap1 != 0 else h1 * NO_SHARE_MULTIPLIER
    d2 = h2 / cap2 if cap2 != 0 else h2 * NO_SHARE_MULTIPLIER
    share = 0.0
    if d0 > share:
        share = d0
    if d1 > share:
        share = d1
    if d2 > share:
        share = d2
    return (fair0 < h0 and fair1 < h1 and fair2 < h2, not (h0 <= quota0 and h1 <= quota1 and h2 <= quota2),
            -priority, zero_share, share, h0, h1, h2, cap0, cap1, cap2)


def _depth(q: Queue) -> int:
    n = 0
    while q.parent is not None:
        n += 1
        q = q.parent
    return n



def _tie(lq: Queue, rq: Queue, lcaps: tuple[int, int, int], rcaps: tuple[int, int, int]) -> int:
    """The last two rules, for queues whose keys tie: the smaller allocatable share (``caps``: ``allocatable`` per
    resource; one is smaller when it is nowhere larger and somewhere smaller), then the older queue."""
    result = _first(_smaller_caps(lcaps, rcaps), _smaller_caps(rcaps, lcaps))
    if result:
        return result
    return -1 if (lq.created, lq.name) < (rq.created, rq.name) else 1


def _deserved(quota: int) -> float:
    """A deserved share as ``_key`` compares it: unlimited as infinity."""
    return math.inf if quota == UNLIMITED else quota


def _smaller_caps(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """``a`` is nowhere larger than ``b`` and somewhere smaller (UNLIMITED: larger than any amount)."""
    return any(not _le(b[r], a[r]) for r in range(3)) and all(_le(a[r], b[r]) for r in range(3))


def _key(rules: _Rules, request: Vec, given: Vec, held: list[int]) -> tuple[int, int, int, int, float, float]:
    """The rules of the queue order that look at one queue at a time, as a key: where two keys differ, the first
    rule that tells the queues apart is the first element that differs. ``request``: what the queue's next job
    asks for, ``given``: what the victims taken from it so far hold (one of them is zero), ``held`` what it holds.
    The rules: not over its fair share, within its deserved share with the request, no request for what it has no
    share of, the dominant share with the request less the victims given, and without it; a resource with nothing
    allocatable counts 1000 times what it holds. (It runs for every queue on the way at every pop: written out per
    resource, the loop over them cost a third of it; the first rules are bools, which compare as 0 and 1.)"""
    quota0, quota1, quota2, fair0, fair1, fair2, cap0, cap1, cap2, none0, none1, none2, priority, shares = rules
    h0, h1, h2 = held
    a0, a1, a2 = h0 + request[0], h1 + request[1], h2 + request[2]
    w0: float
    w1: float
    w2: float
    d0: float
    d1: float
    d2: float
    if shares:  # something allocatable of every resource: shares only (no multiplier, no zero-share request)
        zero_share = False
        if given is ZERO:
            w0, w1, w2 = a0 / cap0, a1 / cap1, a2 / cap2
        else:
            w0, w1, w2 = (a0 - given[0]) / cap0, (a1 - given[1]) / cap1, (a2 - given[2]) / cap2
        d0, d1, d2 = h0 / cap0, h1 / cap1, h2 / cap2
    else:
        zero_share = (none0 and a0 > 0) or (none1 and a1 > 0) or (none2 and a2 > 0)
        if cap0 == 0:
            w0, d0 = (a0 - given[0]) * NO_SHARE_MULTIPLIER, h0 * NO_SHARE_MULTIPLIER
        else:
            w0, d0 = (a0 - given[0]) / cap0, h0 / cap0
        if cap1 == 0:
            w1, d1 = (a1 - given[1]) * NO_SHARE_MULTIPLIER, h1 * NO_SHARE_MULTIPLIER
        else:
            w1, d1 = (a1 - given[1]) / cap1, h1 / cap1
        if cap2 == 0:
            w2, d2 = (a2 - given[2]) * NO_SHARE_MULTIPLIER, h2 * NO_SHARE_MULTIPLIER
        else:
            w2, d2 = (a2 - given[2]) / cap2, h2 / cap2
    share_with = share = 0.0
    if w0 > share_with:
        share_with = w0
    if w1 > share_with:
        share_with = w1
    if w2 > share_with:
        share_with = w2
    if d0 > share:
        share = d0
    if d1 > share:
        share = d1
    if d2 > share:
        share = d2
    return (fair0 < h0 and fair1 < h1 and fair2 < h2, not (a0 <= quota0 and a1 <= quota1 and a2 <= quota2),
            -priority, zero_share, share_with, share)
