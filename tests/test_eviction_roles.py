"""The eviction actions' waiting jobs and candidate victims are worked out once per cycle and brought up to date
from the operations between actions (``kaid.actions.evictions.Roles``), and no decision changes: on random
clusters and several cycles, the decisions are those of the plain reading, which walks every job of the cluster
and its pods at the start of each action (issue 15: three walks of 27,000 jobs per cycle at 4,000 nodes)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from operator import itemgetter

from hypothesis import event, given
from pytest import MonkeyPatch

from kaid.actions import evictions, gangs, victims
from kaid.actions.evictions import Pool, Roles, Rules
from kaid.actions.order import JobKey, job_key
from kaid.actions.scenario import Attempt, request_of
from kaid.actions.session import Session, Vec
from kaid.api.config import SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Reason, own_errors
from kaid.model.vocabulary import PodStatus, ReasonCode
from kaid.placement.index import NodeIndex
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over

kept = Roles.of


def afresh(session: Session) -> Roles:
    """The plain reading: every job and its pods read again as each action starts, job by job."""
    queues = session.snap.queues

    def known(job: Job) -> bool:
        q = queues.get(job.queue)
        return q is not None and not q.errors and not q.children

    jobs = session.snap.jobs.values()
    roles = Roles(len(session.ops), [j for j in jobs if known(j) and not j.errors and gangs.gang_possible(j) and
                                     (session.focus is None or j.key == session.focus)],
                  [j for j in jobs if j.preemptible and not j.errors and known(j)])
    roles.pending = {id(j) for j in roles.waiters if any(p.status == PodStatus.PENDING for p in j.pods)}
    roles.running = {id(j) for j in roles.victims if any(victims.takes(p) for p in j.pods)}
    session.roles = roles
    return roles


def assert_none_stale(case: Case, patch: tuple[object, str, object], seen: str, read: list[int],
                      stale: list[int]) -> None:
    """Run four cycles of ``case`` with ``patch`` (a checker around a kept reading that counts the readings it saw
    and those that differ from the plain one) in place: none may differ."""
    with MonkeyPatch.context() as mp:
        mp.setattr(*patch)
        decisions_over(case, 4)
    event(f"{seen}: {'some' if read[0] else 'none'}")
    assert not stale[0]


@SETTINGS
@given(case=cases())
def test_roles_decide_as_every_job_read_again(case: Case) -> None:
    moved = [0]

    def counted(session: Session) -> Roles:
        before = session.roles
        ops = before.ops if isinstance(before, Roles) else len(session.ops)
        roles = kept(session)
        moved[0] += roles.ops > ops
        return roles

    assert_same_decisions(lambda: decisions_over(case, 4), [(Roles, "of", staticmethod(counted))],
                          [(Roles, "of", staticmethod(afresh))])
    event(f"actions that read jobs moved by an earlier one: {'some' if moved[0] else 'none'}")


def test_roles_leave_out_jobs_with_errors_and_pods_on_their_way_out() -> None:
    """A job whose only running pod is being deleted is no one's victim; a job with errors neither waits nor is a
    victim; the first reading says what the plain one does."""
    objs = [node("n0", gpus=4), queue("a"), podgroup("gone", "a", 1, priority_class="train"),
            pod("gone-0", gpus=1, group="gone", node_name="n0"), podgroup("bad", "a", 1, priority_class="train"),
            pod("bad-0", gpus=1, group="bad", node_name="n0"), pod("bad-1", gpus=1, group="bad"),
            podgroup("ok", "a", 1, priority_class="train"), pod("ok-0", gpus=1, group="ok", node_name="n0"),
            pod("ok-1", gpus=1, group="ok")]
    objs[3]["metadata"]["deletionTimestamp"] = "2025-12-31T23:59:30Z"
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, NOW)
    own_errors(snap.jobs["default/bad"]).append(Reason(ReasonCode.NOT_PLACED_THIS_CYCLE, "broken"))
    first = Roles.of(Session(snap, NodeIndex(snap.nodes), cfg))
    plain = afresh(Session(snap, NodeIndex(snap.nodes), cfg))
    assert [j.key for j in first.waiting()] == [j.key for j in plain.waiting()] == ["default/ok"]
    assert [j.key for j in first.pool()] == [j.key for j in plain.pool()] == ["default/ok"]


@SETTINGS
@given(case=cases())
def test_kept_job_keys_are_those_read_again(case: Case) -> None:
    """The waiting jobs' ``job_key`` kept from one action to the next (``Roles.keys``, each action ordered every
    waiting job afresh) is, as each action starts, what the job's pods say then."""
    stale = [0]
    kept_then = [0]

    def checked(session: Session) -> Roles:
        roles = kept(session)
        for job in roles.waiters:
            key = roles.keys.get(id(job))
            if key is not None:
                kept_then[0] += 1
                stale[0] += key != job_key(job)
        return roles

    assert_none_stale(case, (Roles, "of", staticmethod(checked)), "keys kept from an earlier action", kept_then, stale)


@SETTINGS
@given(case=cases())
def test_kept_victim_lines_are_those_read_again(case: Case) -> None:
    """Each queue's line of candidate victims, kept from one search and one action to the next (``Roles.lines``,
    ``Roles.keys``), is, whenever a search reads it, the pool's jobs of the queue sorted by the keys their pods say
    then (a mutant that keeps the lines of a queue whose jobs an earlier action moved fails here)."""
    stale = [0]
    read = [0]
    lines_of = Pool.lines_of

    def checked(pool: Pool, session: Session, rules: Rules, att: Attempt) -> dict[str, list[tuple[JobKey, Job]]]:
        lines = lines_of(pool, session, rules, att)
        for name, line in lines.items():
            read[0] += 1
            plain = sorted(((job_key(j), j) for j in pool.by_queue[name]), key=itemgetter(0), reverse=True)
            stale[0] += [(k, id(j)) for k, j in line] != [(k, id(j)) for k, j in plain]
        return lines

    assert_none_stale(case, (Pool, "lines_of", checked), "lines read", read, stale)


@SETTINGS
@given(case=cases())
def test_kept_requests_are_those_read_again(case: Case) -> None:
    """What each waiting job asks for next, kept for the actions' orders from one question and one action to the
    next (``Roles.requests``), is whenever an order asks what the job's pods say then (``request_of``; a mutant that
    keeps a moved job's answer fails this test or the next)."""
    stale = [0]
    asked = [0]
    kept_asked = Roles.asked

    def checked(roles: Roles, session: Session) -> Callable[[Job], Vec]:
        request, plain = kept_asked(roles, session), request_of(session)

        def check(job: Job) -> Vec:
            value = request(job)
            asked[0] += 1
            stale[0] += value != plain(job)
            return value

        return check

    assert_none_stale(case, (Roles, "asked", checked), "questions", asked, stale)


def test_a_request_kept_is_read_again_once_its_pods_moved() -> None:
    """A gang asks for the pods it lacks: once one of them is placed (an operation), the kept answer goes."""
    objs = [node("n0", gpus=4), queue("a"), podgroup("g", "a", 2, priority_class="train"),
            pod("g-0", gpus=1, group="g"), pod("g-1", gpus=1, group="g")]
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, NOW)
    session = Session(snap, NodeIndex(snap.nodes), cfg)
    roles = Roles.of(session)
    request = roles.asked(session)
    job = snap.jobs["default/g"]
    before = request(job)
    session.allocate(job.pods[0], snap.nodes[0], (0,))
    assert request(job) == request_of(session)(job) != before


@SETTINGS
@given(case=cases())
def test_no_attempt_outlives_its_search(case: Case) -> None:
    """An attempt is freed as its search ends (its message named it: a cycle kept it, with every scenario's order
    it keeps, until the collector's next pass: one more young collection per steady cycle at 4,000 nodes)."""
    searched = [0]
    kept_serve = evictions._serve

    def counted(session: Session, rules: Rules, att: Attempt, pool: Pool) -> bool:
        searched[0] += 1
        return kept_serve(session, rules, att, pool)

    gc.collect()
    gc.disable()
    try:
        with MonkeyPatch.context() as mp:
            mp.setattr(evictions, "_serve", counted)
            decisions_over(case, 2)
        left = [o for o in gc.get_objects() if type(o) is Attempt]
    finally:
        gc.enable()
    event(f"searches: {'some' if searched[0] else 'none'}")
    assert not left
