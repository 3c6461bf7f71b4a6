"""A scenario's turns (``kaid.actions.scenario.turns``) skip the pops of the jobs it places no one of, and change
no decision: on random clusters and several cycles, the decisions are those of the plain reading, which pops every
job of the order and serves the involved ones as they come (issue 15: most of a reclaim scenario's time went to
popping the waiting jobs ahead of the pending one)."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import event, given

from kaid.actions import scenario
from kaid.actions.order import ByQueue
from kaid.model.objects import Job
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def every_turn(order: ByQueue, involved: list[Job]) -> Iterator[Job]:
    """The plain reading: pop every job in turn until each involved one had its turn."""
    left = {id(j) for j in involved}
    while left and (job := order.pop()) is not None:
        if id(job) in left:
            left.discard(id(job))
            yield job


@SETTINGS
@given(case=cases())
def test_turns_decide_as_every_pop(case: Case) -> None:
    skipped = [0]
    short = scenario.turns

    def counted(order: ByQueue, involved: list[Job]) -> Iterator[Job]:
        before = sum(len(jobs) for jobs in order.leaves.values())
        served = 0
        for job in short(order, involved):
            served += 1
            yield job
        skipped[0] += before - sum(len(jobs) for jobs in order.leaves.values()) < served

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "turns", counted)],
                          [(scenario, "turns", every_turn)])
    event(f"scenarios that skipped pops: {'some' if skipped[0] else 'none'}")
