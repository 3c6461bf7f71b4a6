"""``scenario.evict`` works out a unit's message only for a unit with a pod still to evict (a partial job's
simulations begin with its recorded victims evicted already: bench_victims, 821 messages -> 282 per cycle), and
the evictions, messages included, are those of the plain reading, which worked out every unit's message."""

from __future__ import annotations

import pytest
from hypothesis import given

from benchmarks import bench_victims
from kaid.actions import scenario
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.actions.victims import Unit
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import PodStatus
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def plain_evict(session: Session, att: Attempt, units: list[Unit]) -> None:
    for u in units:
        message = att.message(u)
        for p in u.pods:
            if p.status != PodStatus.EVICTED:
                session.evict(p, att.action, att.job.key, message)


PLAIN = [(scenario, "evict", plain_evict)]


@SETTINGS
@given(case=cases())
def test_evictions_and_their_messages_are_the_plain_ones(case: Case) -> None:
    assert_same_decisions(lambda: decisions_over(case, 4), [], PLAIN)


@pytest.mark.parametrize(("nodes", "reclaimers", "seed"), [(60, 12, 0), (100, 10, 1)])
def test_the_benchmark_evictions_and_their_messages_are_the_plain_ones(nodes: int, reclaimers: int,
                                                                       seed: int) -> None:
    wl = bench_victims.build_workload(nodes=nodes, reclaimers=reclaimers, seed=seed)
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)]

    decided = run()
    assert decided[0].evictions and len({e.message for e in decided[0].evictions}) > 1
    assert_same_decisions(run, [], PLAIN)
