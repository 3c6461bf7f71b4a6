"""Readings the eviction actions take a shorter way to, checked against the plain ones: a job's pods in task order
(``gangs.task_order_key``: by age and name where no pod has a task priority), whether a job is a stale gang
(``stale._stale``: no pod pass for a job of one pod set whose minimum is at most one pod), the jobs that may wait
(``Roles._first``: ``gangs.gang_possible`` read inline for a job of one pod set) and a search's census of every unit
(``Pool.known_in``: ``known_units`` with the line's queue and min runtime read once). At every reading on random
clusters over several cycles (gangs broken among them) and on bench_victims small."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import evictions, gangs, stale
from kaid.actions.evictions import Pool
from kaid.actions.session import Session
from kaid.actions.victims import Unit, units_of
from kaid.api import constants as c
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Queue
from kaid.model.vocabulary import BOUND_OR_RUNNING
from tests.objects import node, pod, podgroup, queue
from tests.sessions import pod_named, session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _plain_stale(job: Job) -> bool:
    """Below its gang minimum while some of it runs, every pod read (the tree's for a job with sub-groups)."""
    if job.succeeded:
        return False
    running = [p for p in job.pods if not p.releasing and p.status in BOUND_OR_RUNNING]
    if not running:
        return False
    if job.subgroups:
        return not gangs.gang_of(job).satisfied()
    return sum(1 for p in job.pods if not p.releasing and p.status in gangs.ACTIVE) < job.min_member


def _fields(u: Unit) -> tuple[object, ...]:
    """What a unit is made of (a drawn unit's link and the GPU room's cells kept in it aside)."""
    return u.job, u.pods, u.elastic, u.queue, u.gpu, u.cpu, u.mem, u.lost, u.at


def _checked(run: Callable[[], object]) -> Counter[str]:
    seen: Counter[str] = Counter()
    real_stale, real_first, real_known_in = stale._stale, evictions.Roles._first.__func__, Pool.known_in  # type: ignore[attr-defined]
    known: list[tuple[Session, str, Queue]] = []

    def checked_stale(job: Job) -> tuple[bool, int]:
        got = real_stale(job)
        assert got[0] == _plain_stale(job), job.key
        seen["stale"] += got[0]
        return got

    def first(cls: type[evictions.Roles], session: Session) -> evictions.Roles:
        roles: evictions.Roles = real_first(cls, session)
        if session.roll is None:
            fit = [j for j in session.snap.jobs.values() if not j.errors and j.queue in session.snap.queues
                   and not session.snap.queues[j.queue].errors and not session.snap.queues[j.queue].children]
            assert roles.waiters == [j for j in fit if gangs.gang_possible(j) and
                                     (session.focus is None or j.key == session.focus)]
            seen["roles"] += 1
            seen["too few pods"] += any(not gangs.gang_possible(j) for j in fit)
        return roles

    def known_in(pool: Pool, job: Job, q: Queue, now: float, least: float) -> tuple[list[Unit], int]:
        got = real_known_in(pool, job, q, now, least)
        session, action, claimant = known[-1]
        assert q.name == job.queue and least == pool.min_runtime(q, action, claimant) and now == session.snap.now
        plain = units_of(job, q, now, least)
        assert got[1] == plain[1] and [_fields(u) for u in got[0]] == [_fields(u) for u in plain[0]], job.key
        seen["census"] += 1
        return got

    real_lines = Pool.lines_of

    def lines_of(pool: Pool, session: Session, rules: evictions.Rules, att: object) -> object:
        known.append((session, rules.action, session.snap.queues[att.job.queue]))  # type: ignore[attr-defined]
        return real_lines(pool, session, rules, att)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stale, "_stale", checked_stale)
        mp.setattr(evictions.Roles, "_first", classmethod(first))
        mp.setattr(Pool, "known_in", known_in)
        mp.setattr(Pool, "lines_of", lines_of)
        run()
    return seen


@SETTINGS
@given(case=cases())
def test_fast_paths_read_what_the_plain_readings_do(case: Case) -> None:
    seen = _checked(lambda: decisions_over(case, 3))
    for kind in ("stale", "too few pods", "census"):
        event(f"{kind}: {'some' if seen[kind] else 'none'}")


def test_the_benchmark_fast_paths_read_what_the_plain_readings_do() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    seen = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert seen["roles"] >= 1 and seen["census"] >= 5


def test_a_gang_of_two_with_one_pod_running_is_stale_and_one_of_one_never() -> None:
    session = session_of([node("n0", gpus=4), queue("q"),
                          podgroup("two", "q", 2), pod("two-0", gpus=1, group="two", node_name="n0"),
                          podgroup("one", "q", 1), pod("one-0", gpus=1, group="one", node_name="n0")])
    jobs = session.snap.jobs
    assert stale._stale(jobs["default/two"]) == (True, 1)
    assert stale._stale(jobs["default/one"]) == (False, 0)


def test_task_order_is_the_task_keys_order() -> None:
    """By age then name where no pod has a task priority; where one has, its priority first (then the rest)."""
    session = session_of([node("n0", gpus=4), queue("q"), podgroup("g", "q", 3),
                          pod("g-b", gpus=1, group="g", node_name="n0", created="2026-01-01T00:00:00Z"),
                          pod("g-a", gpus=1, group="g", node_name="n0", created="2026-01-01T00:00:00Z"),
                          pod("g-c", gpus=1, group="g", node_name="n0", created="2025-12-31T00:00:00Z")])
    pods = [pod_named(session, n) for n in ("g-a", "g-b", "g-c")]
    for reverse in (False, True):
        assert sorted(pods, key=gangs.task_order_key(pods), reverse=reverse) == \
            sorted(pods, key=gangs.task_key, reverse=reverse)
    assert [p.name for p in sorted(pods, key=gangs.task_order_key(pods))] == ["g-c", "g-a", "g-b"]
    pods[1].labels[c.TASK_PRIORITY_LABEL] = "5"
    assert gangs.task_order_key(pods) is gangs.task_key
    assert [p.name for p in sorted(pods, key=gangs.task_order_key(pods))] == ["g-b", "g-c", "g-a"]
