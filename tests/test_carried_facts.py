"""What a cycle reads of each job, carried to the next cycle for the jobs that did not change
(``kaid.actions.carried``): on random event sequences over the daemon's live model, cycle after cycle with the memory
handed on, the roll a cycle begins with is the plain reading of its snapshot (every carried fact and job key is the one
the job has), and the decisions are those of a cycle on a cold build of the same objects without any memory."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kaid.actions import scenario
from kaid.actions.carried import Facts, Roll, read
from kaid.actions.evictions import Roles
from kaid.actions.memory import SearchMemory
from kaid.actions.order import ByQueue, JobKey, job_key
from kaid.actions.session import Session
from kaid.actions.stale import stale_gangs
from kaid.api.config import Action, SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.journal import job_errors
from kaid.model.live import LiveModel
from kaid.model.objects import Job, Reason, Snapshot, own_errors
from kaid.model.vocabulary import PodStatus
from kaid.placement.index import NodeIndex
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over
from tests.test_live_model import Cache, _event, _outcome, busy_model

HELD = Reason("Held", "held")


def _digest(d: Decisions) -> tuple[object, ...]:
    return (sorted((b.pod, b.node, b.devices, b.action, b.by) for b in d.binds),
            sorted((b.pod, b.node, b.devices, b.action, b.by) for b in d.pipelined),
            [(e.pod, e.node, e.action, e.by, e.message) for e in d.evictions],
            sorted((k, [(r.code, r.message) for r in v]) for k, v in d.pending.items()),
            sorted(d.stale.items()), sorted((k, v) for k, v in d.stale_pods.items()))


def _plain(roll: Roll) -> tuple[object, ...]:
    return (roll.pending, roll.running, [j.key for j in roll.pipelined], [j.key for j in roll.waiters],
            [j.key for j in roll.victims], [j.key for j in roll.stale])


def check_roll(snap: Snapshot, carried: dict[int, Facts]) -> int:
    """The roll a cycle begins with against the plain reading of the snapshot; returns how many facts it took from
    ``carried``."""
    roll = Roll.of(snap, carried)
    assert _plain(roll) == _plain(Roll.of(snap, None))
    assert [j.key for j in roll.waiting(snap)] == _pending_keys(snap)
    taken = 0
    for job in snap.jobs.values():
        f = roll.facts[id(job)]
        fresh = read(job)
        assert (f.job, f.pods, f.pending, f.running, f.pipelined, f.possible, f.stale) == \
            (fresh.job, fresh.pods, fresh.pending, fresh.running, fresh.pipelined, fresh.possible, fresh.stale), job.key
        if f.key is not None:
            assert f.key == job_key(job), job.key
            assert roll.keys[id(job)] == f.key
        taken += carried.get(id(job)) is f
    return taken


def plain_roles(session: Session) -> Roles:
    """The roles as a cycle without a roll works them out, with the session as it stands."""
    roll, roles = session.roll, session.roles
    session.roll = session.roles = None
    try:
        return Roles.of(session)
    finally:
        session.roll, session.roles = roll, roles


def check_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every time an eviction action takes the session's roles: those worked out from the roll (and the operations
    since) are the plain ones, and every job key they hold is the job's as it stands; every time a scenario reads
    which jobs of a queue wait (``scenario.waiting_in``), the roles' view of pending jobs is the plain reading of every
    job's pods (mid-search, with the search's operations)."""
    real = Roles.of.__func__  # type: ignore[attr-defined]

    def of(cls: type[Roles], session: Session) -> Roles:
        roles: Roles = real(cls, session)
        if session.roll is not None:
            plain = plain_roles(session)
            assert (roles.pending, roles.running, roles.waiting(), roles.pool()) == \
                (plain.pending, plain.running, plain.waiting(), plain.pool())
            jobs = {id(j): j for j in session.snap.jobs.values()}
            assert all(key == job_key(jobs[jid]) for jid, key in roles.keys.items())
        return roles

    monkeypatch.setattr(Roles, "of", classmethod(of))
    real_waiting = scenario.waiting_in

    def waiting_in(session: Session, att: scenario.Attempt, queue: str) -> list[Job]:
        for q in {j.queue for j in session.snap.jobs.values()}:  # (the roles' view, as a scenario reads it)
            assert [j.key for j in scenario._pending_in(session, q)] == [j.key for j in session.jobs_in(q)
                                                                         if not j.errors and _has_pending(j)]
        return real_waiting(session, att, queue)

    monkeypatch.setattr(scenario, "waiting_in", waiting_in)
    real_jobs = Roll.waiting

    def roll_waiting(roll: Roll, snap: Snapshot) -> list[Job]:
        jobs = real_jobs(roll, snap)  # (allocate's, as the actions begin: after ``ready_pipelined``)
        assert [j.key for j in jobs] == _pending_keys(snap)
        # the job keys allocate's order takes from the roll are those of the jobs as they stand
        assert all(key == job_key(j) for j in snap.jobs.values() if (key := roll.keys.get(id(j))) is not None)
        return jobs

    monkeypatch.setattr(Roll, "waiting", roll_waiting)
    real_push_all = ByQueue.push_all

    def push_all(order: ByQueue, jobs: Iterable[Job], keys: Mapping[int, JobKey] | None = None) -> None:
        jobs = list(jobs)  # every job key an order is handed (allocate's from the roll) is the job's as it stands
        assert keys is None or all(keys.get(id(j), k) == k for j in jobs if (k := job_key(j)))
        real_push_all(order, jobs, keys)

    monkeypatch.setattr(ByQueue, "push_all", push_all)


def _pending_keys(snap: Snapshot) -> list[str]:
    """The keys of the jobs with a pending pod, in the snapshot's order (the plain reading of every job's pods)."""
    return [j.key for j in snap.jobs.values() if any(p.status == PodStatus.PENDING for p in j.pods)]


def run_carried(seed: int, steps: int) -> int:
    rng = random.Random(seed)
    cfg = SchedulerConfig()
    if rng.random() < 0.3:  # some cycles without an eviction action (``evictions.pending_now`` without roles)
        cfg = cfg.model_copy(update={"actions": (Action.ALLOCATE, Action.STALE_GANG)[: rng.randint(1, 2)]})
    model, cache = busy_model(cfg, rng)
    memory = SearchMemory()
    now = 5000.0
    taken = 0
    for _ in range(steps):
        if rng.random() < 0.7:
            _event(rng, model, cache)
        if rng.random() < 0.1:
            _delete_a_node(rng, model, cache)
        now += rng.choice((0.0, 30.0, 3600.0))
        snap = model.snapshot(now)
        cold = build_snapshot(cache.objects(), cfg, now, wait_for_owners=model.wait_for_owners)
        for job in snap.jobs.values():  # the daemon's held jobs, before the cycle
            if rng.random() < 0.05:
                job_errors(snap.journal, job).append(HELD)
                own_errors(cold.jobs[job.key]).append(HELD)
        taken += check_roll(snap, memory.carried)
        decisions = run_cycle(snap, cfg, memory=memory)
        assert decisions.memory is not None
        assert _digest(decisions) == _digest(run_cycle(cold, cfg))
        memory = decisions.memory
        if rng.random() < 0.7:
            _outcome(rng, decisions, model, cache, now)
    return taken


def _delete_a_node(rng: random.Random, model: LiveModel, cache: Cache) -> None:
    """A node gone: its pods' templates are made again (NODE_GONE) without their jobs being read again."""
    nodes = list(cache.items.get("Node", {}))
    if nodes:
        key = rng.choice(nodes)
        model.delete("Node", key)
        cache.delete("Node", key)


@given(st.integers(0, 2**32))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_carried_facts_are_the_plain_reading(seed: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        check_roles(patch)
        taken = run_carried(seed, 25)
    event(f"facts carried: {'some' if taken else 'none'}")


def test_carried_facts_long(monkeypatch: pytest.MonkeyPatch) -> None:
    check_roles(monkeypatch)
    assert run_carried(7, 120) > 0


def test_stale_gangs_read_the_jobs_the_operations_changed() -> None:
    """A gang of two running pods, not stale as the cycle began, loses one pod to an operation of the cycle: the
    stale-gang check reads it again (the roll alone names only the jobs stale as the cycle began)."""
    objs = [node("n0", gpus=2), queue("a", gpu=(2, -1, 1)), podgroup("g", "a", 2, priority_class="train")]
    objs += [pod(f"g-{k}", gpus=1, group="g", node_name="n0") for k in range(2)]
    cfg = SchedulerConfig()
    model = LiveModel(cfg)
    for obj in objs:
        model.upsert(obj)
    snap = model.snapshot(NOW)
    session = Session(snap, NodeIndex(snap.nodes, snap.journal), cfg)
    session.roll = Roll.of(snap, None)
    assert not session.roll.stale
    victim = snap.jobs["default/g"].pods[0]
    session.evict(victim, Action.RECLAIM, None, "")
    stale_gangs(session)
    assert session.stale == {"default/g": NOW}


def test_a_node_gone_is_read_again() -> None:
    """The nodes deleted make their running pods NODE_GONE on new templates in a new pods list of the same job object:
    the job's facts are read again (carried by the job object alone, it would still run)."""
    cfg = SchedulerConfig()
    model, _ = busy_model(cfg, random.Random(3))
    first = run_cycle(model.snapshot(5000.0), cfg, memory=SearchMemory())
    assert first.memory is not None
    snap = model.snapshot(5030.0)
    ran = {j.key: j for j in snap.jobs.values() if first.memory.carried.get(id(j)) is not None
           and first.memory.carried[id(j)].running}
    assert ran
    for key in {_node_key(p.node) for j in ran.values() for p in j.pods if p.node}:
        model.delete("Node", key)
    snap = model.snapshot(5060.0)
    gone = [j for j in snap.jobs.values() if j.key in ran and ran[j.key] is j and not read(j).running]
    assert gone  # the same job objects, no longer running
    check_roll(snap, first.memory.carried)


def _node_key(node: str) -> str:
    return "/" + node


def test_a_job_changed_before_the_actions_loses_its_carried_key() -> None:
    """``Roll.changed`` (a pipelined pod put back to pending: its job's elastic state, in its key, may change) drops
    the job's key and reads its facts again."""
    cfg = SchedulerConfig()
    for seed in range(5, 25):  # (the first busy cluster whose cycle carries the key of a job that does not wait)
        model, _ = busy_model(cfg, random.Random(seed))
        first = run_cycle(model.snapshot(5000.0), cfg, memory=SearchMemory())
        assert first.memory is not None
        snap = model.snapshot(5030.0)
        roll = Roll.of(snap, first.memory.carried)
        keyed = [j for j in snap.jobs.values() if id(j) in roll.keys and id(j) not in roll.pending]
        if keyed:
            break
    assert keyed
    job = keyed[0]
    for p in job.pods:
        p.status = PodStatus.PENDING
    roll.changed([job])
    assert id(job) not in roll.keys and id(job) in roll.pending and id(job) not in roll.running
    # allocate's jobs (``Roll.waiting``) name it now, in its place in the snapshot's order
    assert [j.key for j in roll.waiting(snap)] == _pending_keys(snap)


@SETTINGS
@given(case=cases())
def test_the_roles_view_of_waiting_jobs_on_random_clusters(case: Case) -> None:
    """The roles' view of which jobs wait, as each scenario reads it (``scenario.pending_now``), and the roles
    themselves, against the plain readings, over the eviction properties' random clusters and cycles (partial jobs
    placed mid-search, victims moved, several queues)."""
    with pytest.MonkeyPatch.context() as patch:
        check_roles(patch)
        decisions_over(case, 4)


def test_the_roles_view_reads_the_jobs_of_the_operations_since() -> None:
    """Once the roles were brought up to date, an operation that places a waiting job's last pending pod (a search's
    scenario placing the pending job) makes the view read that job from its pods; a rollback makes it wait again."""
    objs = [node("n0", gpus=2), queue("a", gpu=(2, -1, 1)), podgroup("w", "a", 1), pod("w-0", gpus=1, group="w")]
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, NOW)
    session = Session(snap, NodeIndex(snap.nodes, snap.journal), cfg)
    roles = Roles.of(session)
    job = snap.jobs["default/w"]
    assert scenario._pending_in(session, "a") == [job] and id(job) in roles.pending
    start = session.checkpoint()
    session.allocate(job.pods[0], snap.nodes[0], (0,))
    assert scenario._pending_in(session, "a") == []
    session.rollback(start)
    assert scenario._pending_in(session, "a") == [job]


def _has_pending(job: Job) -> bool:
    return any(p.status == PodStatus.PENDING for p in job.pods)
