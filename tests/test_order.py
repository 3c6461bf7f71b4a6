"""The job order (``kaid.actions.order.ByQueue``) against its plain reading: every pop works the whole queue tree
out again from the rules (KAI's queue order at every level, then the leaf's job order). The order keeps entries
for queues that did not change between pops, and the children of each queue in a heap by key (the tie rule
decides between equal keys, by rank where it orders the siblings totally); whatever happens between pops (charges
anywhere in the tree, a parent queue's included, jobs pushed back), both must hand out the same jobs in the same
order."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cmp_to_key

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaid.actions import order
from kaid.actions.order import (
    NO_SHARE_MULTIPLIER,
    SCAN_UP_TO,
    ZERO,
    ByQueue,
    Vec,
    _first,
    _le,
    allocatable,
    job_key,
    over_utilized,
    within_deserved,
)
from kaid.model.objects import UNLIMITED, Job, Queue
from kaid.model.queues import charge


@dataclass
class Side:
    """One queue as KAI's order compares it: the job it would serve next (its request), or the victims it has
    given so far (what they hold)."""

    queue: Queue
    request: Vec = ZERO
    given: Vec = ZERO


# KAI's queue order as KAI writes it, one pair of queues at a time: what ByQueue's keys must agree with
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


def _smaller(a: float, b: float) -> int:
    return -1 if a < b else (1 if a > b else 0)


def _allocatable_smaller(lq: Queue, rq: Queue) -> int:
    la = [allocatable(lq, r) for r in range(3)]
    ra = [allocatable(rq, r) for r in range(3)]

    def below(a: list[int], b: list[int]) -> bool:
        return any(not _le(b[r], a[r]) for r in range(3)) and all(_le(a[r], b[r]) for r in range(3))

    return _first(below(la, ra), below(ra, la))


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
class PlainOrder:
    """The order as the rules read: nothing kept from one pop to the next."""

    queues: dict[str, Queue]
    total: Vec
    request: Callable[[Job], Vec]
    held: Callable[[Job], Vec]
    victims: bool = False
    leaves: dict[str, list[Job]] = field(default_factory=dict)
    given: dict[str, list[Job]] = field(default_factory=dict)

    def push(self, job: Job) -> None:
        queue = self.queues.get(job.queue)
        if queue is None or queue.children:
            return
        jobs = self.leaves.setdefault(job.queue, [])
        jobs.append(job)
        jobs.sort(key=job_key, reverse=self.victims)

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
        if not q.children:
            return q if self.leaves.get(q.name) else None
        live = self._live(q.children)
        return self._next_leaf(min(live, key=cmp_to_key(self._compare))) if live else None

    def _side(self, q: Queue) -> Side:
        leaf = self._next_leaf(q)
        assert leaf is not None
        if not self.victims:
            return Side(q, self.request(self.leaves[leaf.name][0]))
        held = [self.held(j) for j in [*self.given.get(leaf.name, []), self.leaves[leaf.name][0]]]
        return Side(q, given=(sum(h[0] for h in held), sum(h[1] for h in held), sum(h[2] for h in held)))

    def _compare(self, left: Queue, right: Queue) -> int:
        result = compare_queues(self._side(left), self._side(right), self.total)
        return -result if self.victims else result


def _tree(shape: list[int], draw: st.DrawFn) -> dict[str, Queue]:
    """Departments, each with ``shape[i]`` leaves (0: the department is a leaf itself)."""
    queues: dict[str, Queue] = {}
    amounts = st.sampled_from([0, 1000, 2000, 4000, 8000])
    for d, leaves in enumerate(shape):
        dept = Queue(f"d{d}")
        queues[dept.name] = dept
        members = [dept]
        for k in range(leaves):
            leaf = Queue(f"d{d}-q{k}")
            leaf.parent, leaf.parent_name = dept, dept.name
            dept.children.append(leaf)
            queues[leaf.name] = leaf
            members.append(leaf)
        for q in members:
            q.quota = [draw(st.sampled_from([-1, 0, 2000, 4000])), draw(amounts), draw(amounts)]
            q.limit = [draw(st.sampled_from([-1, 0, 8000])), -1, -1]
            q.fair = [draw(amounts), draw(amounts), draw(amounts)]
            q.priority = draw(st.sampled_from([100, 100, 110]))
            q.created = float(draw(st.integers(0, 3)))
            q.allocated = [draw(amounts), draw(amounts), draw(amounts)]
    return queues


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, Queue], list[Job], dict[str, Vec], bool, list[tuple[int, ...]]]:
    queues = _tree(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)), draw)
    leaves = [q for q in queues.values() if not q.children]
    vectors = st.tuples(st.sampled_from([0, 500, 1000, 8000]), st.sampled_from([0, 1000, 4000]),
                        st.sampled_from([0, 1000]))
    jobs: list[Job] = []
    vec: dict[str, Vec] = {}
    for i in range(draw(st.integers(1, 24))):
        job = Job("ns", f"j{i:02d}")
        job.queue = draw(st.sampled_from(leaves)).name
        job.priority = draw(st.sampled_from([50, 75, 100]))
        job.created = float(draw(st.integers(0, 5)))
        jobs.append(job)
        vec[job.key] = draw(vectors)
    # between pops: (0,) nothing, (1, leaf, sign, amount) a charge, (2,) the last popped job pushed back, (3, job,
    # amount) a pod of a job moved: what it asks and holds changes, its queue is charged (``_same_order``)
    steps: list[tuple[int, ...]] = draw(st.lists(st.one_of(st.tuples(st.just(0)),
                                    st.tuples(st.just(1), st.integers(0, len(leaves) - 1), st.sampled_from([-1, 1]),
                                              st.sampled_from([500, 1000, 4000])),
                                    st.tuples(st.just(2)),
                                    st.tuples(st.just(3), st.integers(0, len(jobs) - 1), st.sampled_from([0, 1000]))),
                                    max_size=40))
    return queues, jobs, vec, draw(st.booleans()), steps


Case = tuple[dict[str, Queue], list[Job], dict[str, Vec], bool, list[tuple[int, ...]]]


@pytest.mark.parametrize("scan_up_to", [SCAN_UP_TO, 0])  # levels read by a scan; 0: every level in a heap
@settings(max_examples=300, deadline=None)
@given(case=scenarios())
def test_order_matches_its_plain_reading(scan_up_to: int, case: Case) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(order, "SCAN_UP_TO", scan_up_to)
        _same_order(case)


def _wide_tree(draw: st.DrawFn) -> dict[str, Queue]:
    """Three levels, up to eight siblings in no particular order, each queue one of a few profiles (so that keys
    tie often between siblings, and the tie rule's allocatable shares are sometimes not comparable: then it need
    not be transitive)."""
    amounts = st.sampled_from([0, 2000, 4000])
    profiles = draw(st.lists(st.tuples(
        st.tuples(st.sampled_from([-1, 0, 2000, 4000]), amounts, amounts),  # quota
        st.tuples(st.sampled_from([-1, 0, 8000]), st.sampled_from([-1, 4000]), st.just(-1)),  # limit
        st.tuples(amounts, amounts, amounts),  # fair share
        st.sampled_from([100, 100, 110])), min_size=1, max_size=3))
    queues: dict[str, Queue] = {}

    def add(name: str, parent: Queue | None) -> Queue:
        q = Queue(name)
        if parent is not None:
            q.parent, q.parent_name = parent, parent.name
            parent.children.append(q)
        quota, limit, fair, priority = draw(st.sampled_from(profiles))
        q.quota, q.limit, q.fair, q.priority = list(quota), list(limit), list(fair), priority
        q.created = float(draw(st.integers(0, 2)))
        q.allocated = [draw(st.sampled_from([0, 1000])), 0, 0]
        queues[name] = q
        return q

    for d in range(draw(st.integers(1, 3))):
        dept = add(f"d{d}", None)
        for t in range(draw(st.integers(0, 3))):
            team = add(f"d{d}-t{t}", dept)
            for k in range(draw(st.integers(0, 8))):
                add(f"d{d}-t{t}-q{k}", team)
    for q in queues.values():  # the order reads children in their list's order, whatever their names
        q.children = list(draw(st.permutations(q.children)))
    return {q.name: q for q in draw(st.permutations(list(queues.values())))}


@st.composite
def wide_scenarios(draw: st.DrawFn) -> Case:
    queues = _wide_tree(draw)
    leaves = [q for q in queues.values() if not q.children]
    vectors = st.tuples(st.sampled_from([0, 1000, 2000]), st.sampled_from([0, 1000]), st.just(0))
    jobs: list[Job] = []
    vec: dict[str, Vec] = {}
    for i in range(draw(st.integers(1, 30))):
        job = Job("ns", f"j{i:02d}")
        job.queue = draw(st.sampled_from(leaves)).name
        job.priority = draw(st.sampled_from([75, 100]))
        job.created = float(draw(st.integers(0, 2)))
        jobs.append(job)
        vec[job.key] = draw(vectors)
    # between pops: (0,) nothing, (1, -1 - i, sign, amount) a charge of the i-th queue by name (a parent's too), (2,)
    # the last popped job pushed back, (3, job, amount) a pod of a job moved (``_same_order``)
    steps: list[tuple[int, ...]] = draw(st.lists(st.one_of(
        st.tuples(st.just(0)),
        st.tuples(st.just(1), st.integers(-len(queues), -1), st.sampled_from([-1, 1]), st.sampled_from([1000, 2000])),
        st.tuples(st.just(2)),
        st.tuples(st.just(3), st.integers(0, len(jobs) - 1), st.sampled_from([0, 1000]))), max_size=40))
    return queues, jobs, vec, draw(st.booleans()), steps


@pytest.mark.parametrize("scan_up_to", [SCAN_UP_TO, 0])
@settings(max_examples=300, deadline=None)
@given(case=wide_scenarios())
def test_order_matches_its_plain_reading_on_wide_trees(scan_up_to: int, case: Case) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(order, "SCAN_UP_TO", scan_up_to)
        fast = _same_order(case)
    levels = fast._levels.values()
    event("tie rule ranked on some level" if any(lv.ranks is not None for lv in levels) else "no level ranked")
    event("tie rule not total on some level" if any(lv.ranked and lv.ranks is None for lv in levels)
          else "tie rule total wherever asked")


@pytest.mark.parametrize("scan_up_to", [SCAN_UP_TO, 0])
@settings(max_examples=200, deadline=None)
@given(case=st.one_of(scenarios(), wide_scenarios()))
def test_a_copied_order_matches_its_plain_reading(scan_up_to: int, case: Case) -> None:
    """``ByQueue.copy`` (of an order none was handed out from, with another ``request``) sets every field the
    generated ``__init__`` sets, and hands out what the plain reading of its jobs does, pops, pushes and charges
    between them included."""
    queues, jobs, vec, _, steps = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(order, "SCAN_UP_TO", scan_up_to)
        _same_order((queues, jobs, vec, False, steps), copied=True)


def _same_order(case: Case, copied: bool = False) -> ByQueue:
    queues, jobs, vec, victims, steps = case
    leaves = [q for q in queues.values() if not q.children]
    names = sorted(queues)
    total: Vec = (16000, 64000, 64000)
    vec = dict(vec)
    held = {k: (v[0] // 2, v[1], v[2]) for k, v in vec.items()}
    fast = ByQueue(queues, total, lambda j: (0, 0, 0) if copied else vec[j.key], lambda j: held[j.key], victims)
    plain = PlainOrder(queues, total, lambda j: vec[j.key], lambda j: held[j.key], victims)
    fast.push_all(jobs)
    if copied:
        fast = fast.copy(lambda j: vec[j.key])
        assert set(vars(fast)) == set(vars(ByQueue(queues, total, fast.request, fast.held)))
    for job in jobs:
        plain.push(job)
    last: Job | None = None
    out: list[Job] = []  # handed out so far
    for step in [*steps, *[(0,)] * len(jobs)]:
        if step[0] == 1:  # a leaf by position, or (negative) any queue by position among all of them
            charge(leaves[step[1]] if step[1] >= 0 else queues[names[-1 - step[1]]], (step[2] * step[3], 0, 0), False)
        elif step[0] == 2 and last is not None and not victims:
            fast.push(last)
            plain.push(last)
        elif step[0] == 3:  # what the job asks and holds changes only with a charge of its queue (``ByQueue``)
            job = jobs[step[1]]
            vec[job.key] = (vec[job.key][0] + step[2], vec[job.key][1] + 1000, 0)
            if job not in out:  # (what a victim held is counted as it was handed out)
                held[job.key] = (held[job.key][0] + step[2], held[job.key][1], 0)
            charge(queues[job.queue], (step[2], 0, 0), False)
        a, b = fast.pop(), plain.pop()
        assert a is b, f"fast order gave {a and a.key}, the plain reading {b and b.key}"
        if a is not None:
            out.append(a)
        last = a if a is not None else last
    assert fast.pop() is None and plain.pop() is None
    return fast


@pytest.mark.parametrize("seed", range(40))
def test_push_all_lines_jobs_up_as_pushing_them_one_by_one(seed: int) -> None:
    """``push_all`` sorts each leaf that held no job at once (and takes the keys a caller knows): the same lines of
    jobs and keys as ``push`` job by job, leaves that held jobs already, victims' and frozen orders, equal keys
    (two jobs of one name in one leaf) included."""
    rng = random.Random(seed)
    queues: dict[str, Queue] = {}
    for d in range(2):
        dept = queues[f"d{d}"] = Queue(f"d{d}")
        for k in range(3):
            leaf = queues[f"d{d}-q{k}"] = Queue(f"d{d}-q{k}")
            leaf.parent, leaf.parent_name = dept, dept.name
            dept.children.append(leaf)
    names = [*queues, "nowhere"]
    jobs = []
    for _ in range(rng.randint(0, 30)):
        job = Job("ns", f"j{rng.randint(0, 12):02d}")
        job.queue, job.priority, job.created = rng.choice(names), rng.choice([50, 100]), float(rng.randint(0, 3))
        jobs.append(job)
    before, after = jobs[: rng.randint(0, len(jobs))], jobs
    known = {id(j): (0, 0, 0.0, f"given-{j.key}") for j in jobs if rng.random() < 0.3}
    victims, frozen = rng.random() < 0.5, rng.random() < 0.5
    made = [ByQueue(queues, (1, 1, 1), lambda j: ZERO, lambda j: ZERO, victims, frozen) for _ in range(2)]
    batched, single = made
    for job in before:
        batched.push(job)
        single.push(job)
    batched.push_all(after, known)
    for job in after:
        single.push(job, known.get(id(job)))
    assert {k: v for k, v in batched.leaves.items() if v} == {k: v for k, v in single.leaves.items() if v}
    assert {k: v for k, v in batched._keys.items() if v} == {k: v for k, v in single._keys.items() if v}
    assert [batched.pop() for _ in jobs] == [single.pop() for _ in jobs]
