"""Each queue's line of candidate victims (``evictions.Pool.lines_of``) is brought up to date from the jobs the
operations since touched (taken out, those still in the pool put back by their keys as they stand) instead of sorted
again: on random clusters over several cycles and on bench_victims small, every line a search reads is the sort of
the queue's pool jobs by their keys as the search finds them (a line kept from the action before held the jobs that
lost their running pods there: they had no units and were never handed out; now they leave it)."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import evictions
from kaid.actions.order import JobKey, job_key
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _lines_checked(run: Callable[[], object]) -> int:
    """``run`` with every line a search reads checked against a sort of the queue's pool jobs; returns how many
    lines were brought up to date from touched jobs."""
    fixed = [0]
    real = evictions.Pool.lines_of

    def checked(pool: evictions.Pool, session: Session, rules: evictions.Rules,
                att: Attempt) -> dict[str, list[tuple[JobKey, Job]]]:
        fixed[0] += sum(1 for q in pool.queues(session, rules, att) if pool.touched.get(q) and q in pool.lines)
        lines = real(pool, session, rules, att)
        for queue, line in lines.items():
            plain = sorted(((job_key(j), j) for j in pool.by_queue[queue]), key=itemgetter(0), reverse=True)
            assert [(k, id(j)) for k, j in line] == [(k, id(j)) for k, j in plain], queue
        return lines

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions.Pool, "lines_of", checked)
        run()
    return fixed[0]


@SETTINGS
@given(case=cases())
def test_every_line_is_the_sort_of_its_jobs(case: Case) -> None:
    fixed = _lines_checked(lambda: decisions_over(case, 3))
    event(f"lines brought up to date: {'some' if fixed else 'none'}")


@pytest.mark.parametrize(("nodes", "reclaimers", "seed"), [(40, 8, 2), (60, 10, 0)])
def test_the_benchmark_lines_are_the_sort_of_their_jobs(nodes: int, reclaimers: int, seed: int) -> None:
    wl = bench_victims.build_workload(nodes=nodes, reclaimers=reclaimers, seed=seed)
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)]

    assert _lines_checked(run) >= 1
