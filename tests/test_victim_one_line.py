"""A victim search whose candidates are all in one queue (most of preempt's: the job's own queue) reads that
leaf's line alone (``kaid.actions.evictions._OneLine``) instead of KAI's whole queue order (``ByQueue``, frozen),
whose entries were worked out again at every pop to hand out the head of that one leaf. Every pop, push and what is
left is checked against the frozen ``ByQueue`` fed the same calls: on random clusters over several cycles and on
bench_victims small."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import evictions
from kaid.actions.order import JobKey, Vec
from kaid.actions.scenario import job_order
from kaid.actions.session import Session
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _checked(run: Callable[[], object]) -> int:
    """``run`` with every one-line order shadowed by the frozen ``ByQueue`` fed the same calls; returns how many jobs
    the one-line orders handed out."""
    popped = [0]
    sessions: list[Session] = []
    real, one_line = evictions._victim_order, evictions._OneLine

    def capture(session: Session, lines: dict[str, Iterator[tuple[JobKey, Job]]]) -> object:
        sessions.append(session)
        return real(session, lines)

    class Shadowed(evictions._OneLine):
        def __init__(self) -> None:
            super().__init__()
            self.tree = job_order(sessions[-1], [], victims=True, frozen=True)

        def pop(self) -> Job | None:
            job = super().pop()
            assert self.tree.pop() is job
            popped[0] += job is not None
            return job

        def push(self, job: Job, key: JobKey | None = None) -> None:
            super().push(job, key)
            self.tree.push(job, key)

        def push_rest(self, job: Job, key: JobKey, held: Vec) -> None:
            self.tree.push_rest(job, key, held)
            self.known[id(job)] = key
            one_line.push(self, job)

        def remaining(self) -> list[Job]:
            left: list[Job] = super().remaining()
            assert [id(j) for j in left] == [id(j) for j in self.tree.remaining()]
            return left

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "_victim_order", capture)
        mp.setattr(evictions, "_OneLine", Shadowed)
        run()
    return popped[0]


@SETTINGS
@given(case=cases())
def test_one_line_hands_out_what_the_queue_order_would(case: Case) -> None:
    popped = _checked(lambda: decisions_over(case, 3))
    event(f"jobs handed out by one-line orders: {'some' if popped else 'none'}")


def test_the_benchmark_one_line_orders_hand_out_what_the_queue_order_would() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    assert _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)) >= 5
