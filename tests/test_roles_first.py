"""The eviction actions' roles worked out in one pass over the pods (``evictions.Roles._first``: the jobs with a
pending pod and those with a pod an eviction can take, ``victims.takes`` read inline but for a pipelined pod) are
the sets the plain reading makes, one comprehension each: on random clusters over several cycles (pipelined pods
among them) and on bench_victims small."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import evictions
from kaid.actions.session import Session
from kaid.actions.victims import takes
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import PodStatus
from tests.objects import node, pod, podgroup, queue
from tests.sessions import pod_named, session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _checked(run: Callable[[], object]) -> tuple[int, int]:
    """``run`` with every first reading of the roles checked against the plain sets; returns how many were checked
    and how many of them had a pipelined pod an eviction can take."""
    seen = [0, 0]
    real = evictions.Roles._first.__func__  # type: ignore[attr-defined]

    def checked(cls: type[evictions.Roles], session: Session) -> evictions.Roles:
        roles: evictions.Roles = real(cls, session)
        if session.roll is None:
            pods = session.snap.pods
            assert roles.pending == {id(p.job) for p in pods if p.status == PodStatus.PENDING}
            assert roles.running == {id(p.job) for p in pods if takes(p)}
            seen[0] += 1
            seen[1] += any(p.status == PodStatus.PIPELINED and takes(p) for p in pods)
        return roles

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions.Roles, "_first", classmethod(checked))
        run()
    return seen[0], seen[1]


@SETTINGS
@given(case=cases())
def test_roles_are_the_plain_sets(case: Case) -> None:
    _, pipelined = _checked(lambda: decisions_over(case, 3))
    event(f"first readings with a pipelined victim pod: {'some' if pipelined else 'none'}")


def test_the_benchmark_roles_are_the_plain_sets() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    checked, _ = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert checked >= 1


def test_a_job_whose_only_victim_pod_is_pipelined_or_releasing() -> None:
    """p's one pod was pipelined in this cycle (a victim), q's one running pod is releasing (no victim), w waits."""
    objs = [queue("org"), queue("a", "org"), node("n0", gpus=4),
            podgroup("p", "a", 1), pod("p-0", gpus=1, group="p"),
            podgroup("q", "a", 1), pod("q-0", gpus=1, group="q", node_name="n0", phase="Running"),
            podgroup("w", "a", 1), pod("w-0", gpus=1, group="w")]
    session = session_of(objs)
    pod_named(session, "p-0").status = PodStatus.PIPELINED
    pod_named(session, "q-0").releasing = True
    roles = evictions.Roles._first(session)
    jobs = session.snap.jobs
    assert roles.running == {id(jobs["default/p"])}
    assert roles.pending == {id(jobs["default/w"])}
