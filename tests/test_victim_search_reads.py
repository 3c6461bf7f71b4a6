"""What a victim search reads in its own way is what the plain reading finds: a tree victim order's key of a queue
(``order.VictimTree._key``: the rules that read only what the queue holds worked out once per queue) is ``order._key``
with no request; a stream's test for a job with units (``Pool.has_units``, the queue's min runtime read once per line)
is ``Pool.count`` > 0; and each line a search reads (``Pool.lines_of``: a line kept from the action before is read
again only where it holds fewer jobs than the pool) is the sort of the pool's jobs of its queue by their keys as they
stand. Checked at every reading on random clusters over several cycles and on bench_victims small."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from operator import itemgetter

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import order
from kaid.actions.evictions import Pool, Rules
from kaid.actions.order import ZERO, JobKey, Key, Vec, VictimTree, job_key
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.actions.victims import units_of
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Queue
from tests.objects import node, pod, podgroup, queue
from tests.sessions import session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _checked(run: Callable[[], object]) -> Counter[str]:
    """``run`` with every such reading checked against the plain one; returns how many of each were checked."""
    seen: Counter[str] = Counter()
    real_key, real_has, real_lines = VictimTree._key, Pool.has_units, Pool.lines_of

    def key(tree: VictimTree, q: Queue, given: Vec) -> Key:
        got = real_key(tree, q, given)
        assert got == order._key(tree._rules[q.name], ZERO, given, tree._allocated[q.name]), q.name
        seen["keys"] += 1
        return got

    def has_units(pool: Pool, job: Job, q: Queue, now: float, least: float) -> bool:
        got = real_has(pool, job, q, now, least)
        assert q.name == job.queue and got == (pool.count(pool_sessions[-1], job, rule_actions[-1],
                                                          claimants[-1]) > 0), job.key
        seen["streams"] += 1
        return got

    pool_sessions: list[Session] = []
    rule_actions: list[str] = []
    claimants: list[Queue] = []

    def lines_of(pool: Pool, session: Session, rules: Rules, att: Attempt) -> dict[str, list[tuple[JobKey, Job]]]:
        kept = sum(1 for q in pool.queues(session, rules, att) if q in pool.lines and q not in pool._members)
        got = real_lines(pool, session, rules, att)
        for name, line in got.items():
            plain = sorted(((job_key(j), j) for j in pool.by_queue[name]), key=itemgetter(0), reverse=True)
            assert [k for k, _ in line] == [k for k, _ in plain] and \
                all(a is b for (_, a), (_, b) in zip(line, plain, strict=True)), name
        seen["lines"] += len(got)
        seen["kept lines"] += kept
        pool_sessions.append(session)
        rule_actions.append(rules.action)
        claimants.append(session.snap.queues[att.job.queue])
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VictimTree, "_key", key)
        mp.setattr(Pool, "has_units", has_units)
        mp.setattr(Pool, "lines_of", lines_of)
        run()
    return seen


@SETTINGS
@given(case=cases())
def test_a_search_reads_what_the_plain_reading_finds(case: Case) -> None:
    seen = _checked(lambda: decisions_over(case, 3))
    for kind in ("keys", "kept lines", "streams"):
        event(f"{kind}: {'some' if seen[kind] else 'none'}")


def test_the_benchmark_search_reads_what_the_plain_reading_finds() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    seen = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert seen["keys"] >= 20 and seen["streams"] >= 20 and seen["kept lines"] >= 1


class _EveryQueue:
    """Rules whose every queue may hold candidates (what ``Pool.lines_of`` asks of them)."""

    action = "preempt"

    def candidate_queues(self, session: Session, att: Attempt, queues: Collection[str]) -> list[str]:
        return list(queues)


def _two_jobs() -> tuple[Session, Job, Job]:
    session = session_of([node("n0", gpus=4), queue("q"),
                          podgroup("a", "q", 1, priority_class="train", created="2026-01-01T00:00:00Z"),
                          pod("a-0", gpus=1, group="a", node_name="n0", created="2026-01-01T00:00:00Z"),
                          podgroup("b", "q", 1, priority_class="train", created="2026-01-01T01:00:00Z"),
                          pod("b-0", gpus=1, group="b", node_name="n0", created="2026-01-01T01:00:00Z")])
    return session, session.snap.jobs["default/a"], session.snap.jobs["default/b"]


def test_a_line_kept_from_the_action_before_is_the_pool_s() -> None:
    """The line kept from the action before held ``a`` only (``b`` was pipelined by it, say): the next action's pool
    has both, and its line puts ``b`` in its place; a line that holds a job the pool does not have loses it."""
    session, a, b = _two_jobs()
    plain = sorted(((job_key(j), j) for j in (a, b)), key=itemgetter(0), reverse=True)
    for kept, pool_jobs in (([a], [a, b]), ([a, b], [b])):
        pool = Pool(list(pool_jobs), lines={"q": [(job_key(j), j) for j in kept]},
                    placed={id(j): job_key(j) for j in kept}, ops=len(session.ops))
        line = pool.lines_of(session, _EveryQueue(), None)["q"]  # type: ignore[arg-type]
        assert [j for _, j in line] == [j for _, j in plain if j in pool_jobs]


def test_a_job_whose_pods_its_min_runtime_protects_has_no_unit() -> None:
    """``b`` started an hour ago: a min runtime of two hours protects its one pod (its last unit: none is left), counted
    without its units or from them."""
    session, _, b = _two_jobs()
    q, now = session.snap.queues["q"], session.snap.now
    pool = Pool([b])
    least = now - b.pods[0].started + 3600.0
    assert pool.has_units(b, q, now, 0.0)
    assert not pool.has_units(b, q, now, least)
    pool.units[id(b)] = units_of(b, q, now, least)
    pool._least[id(b)] = least
    assert pool.units[id(b)] == ([], 1) and not pool.has_units(b, q, now, least)
