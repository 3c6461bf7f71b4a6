"""The waiting jobs of a queue, as a scenario's serving order reads them (``kaid.actions.scenario.waiting_in``), found
among the eviction roles' pending jobs by their place in the queue (``scenario._pending_in``, ``Session.places``)
where each attempt walked every job of the queue (bench_victims: 42-195 jobs of a queue for 2-14 pending ones, 2.2%
of a first-fit cycle's opcodes): the list the plain reading makes (same jobs, same order), on random clusters over
several cycles and on bench_victims small, with the same decisions. And the jobs' pods in task order, kept once per
cycle (``Session.task_orders``), shared by every attempt ``attempt_for`` makes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import scenario
from kaid.actions.evictions import Roles
from kaid.actions.session import Op, Session
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Reason
from kaid.model.vocabulary import OpKind, PodStatus, ReasonCode
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.sessions import session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def plain_pending_in(session: Session, queue: str) -> list[Job]:
    """The plain reading: every job of the queue, its pods read."""
    return [j for j in session.jobs_in(queue) if not j.errors and any(p.status == PodStatus.PENDING for p in j.pods)]


def _checked(run: Callable[[], object]) -> tuple[int, int]:
    """``run`` with every ``_pending_in`` checked against the plain reading; returns how many read the roles, and how
    many of those found a job moved since the roles were brought up to date."""
    seen = [0, 0]
    real = scenario._pending_in

    def checked(session: Session, queue: str) -> list[Job]:
        value = real(session, queue)
        assert value == plain_pending_in(session, queue), queue
        roles = session.roles
        if roles is not None and roles.ops <= len(session.ops):
            seen[0] += 1
            seen[1] += any(op.pod.job is not None and op.pod.job.queue == queue for op in session.ops[roles.ops:])
        return value

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "_pending_in", checked)
        run()
    return seen[0], seen[1]


@SETTINGS
@given(case=cases())
def test_the_pending_jobs_of_a_queue_are_the_plain_list(case: Case) -> None:
    roles, moved = _checked(lambda: decisions_over(case, 3))
    event(f"readings from the roles: {'some' if roles else 'none'}; with a job of the queue moved since: "
          f"{'some' if moved else 'none'}")


@SETTINGS
@given(case=cases())
def test_the_pending_jobs_decide_as_the_plain_list(case: Case) -> None:
    assert_same_decisions(lambda: decisions_over(case, 4), [],
                          [(scenario, "_pending_in", plain_pending_in)])


def test_the_benchmark_pending_jobs_are_the_plain_list() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    roles, moved = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert roles >= 1 and moved >= 1


def test_a_job_moved_since_the_roles_is_read_from_its_pods() -> None:
    """A job pending in the roles whose pod an operation since placed, and one not pending in them whose pod an
    operation since made pending again (a rollback of its placement is an operation no more: made here by hand), in a
    queue whose jobs come in the snapshot's order, one with errors among them."""
    s = session_of([node("n1", gpus=8), queue("q"), *(podgroup(f"j{i}", "q", 1) for i in range(5)),
                    *(pod(f"p{i}", group=f"j{i}", gpus=1) for i in range(5))])
    jobs = s.jobs_in("q")
    assert [j.name for j in jobs] == [f"j{i}" for i in range(5)]
    roles = Roles.of(s)
    assert scenario._pending_in(s, "q") == jobs
    j0, j1, j2, j3, _ = jobs
    s.allocate(j1.pods[0], s.snap.node_by_name["n1"], (0,))  # j1 moved: no pod pending now
    assert roles.ops < len(s.ops)
    j3.errors = [Reason(ReasonCode.NOT_PLACED_THIS_CYCLE, "broken")]
    assert scenario._pending_in(s, "q") == [j0, j2, jobs[4]] == plain_pending_in(s, "q")
    roles.pending.discard(id(j2))  # (as though j2 had had no pending pod when the roles were read, and moved since)
    s.ops.append(Op(OpKind.ALLOCATE, j2.pods[0], s.snap.node_by_name["n1"], (), "x"))
    assert scenario._pending_in(s, "q") == [j0, j2, jobs[4]]


def test_attempts_share_the_task_orders_of_the_cycle() -> None:
    s = session_of([node("n1", gpus=8), queue("q"), podgroup("j", "q", 2),
                    *(pod(f"p{i}", group="j", gpus=1) for i in range(2))])
    job = s.jobs_in("q")[0]
    first = scenario.attempt_for(s, "reclaim", job, job.pods)
    second = scenario.attempt_for(s, "preempt", job, job.pods[:1])
    assert first.task_orders is second.task_orders is s.task_orders
    assert scenario.tasks(first, job) == scenario.tasks(second, job) == job.pods
    assert list(s.task_orders) == [id(job)]
