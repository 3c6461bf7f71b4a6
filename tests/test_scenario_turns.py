"""A scenario's turns (``kaid.actions.scenario.turns``) skip the pops of the jobs it places no one of, and change
no decision: on random clusters and several cycles, the decisions are those of the plain reading, which pops every
job of the order and serves the involved ones as they come (issue 15: most of a reclaim scenario's time went to
popping the waiting jobs ahead of the pending one)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaid.actions import scenario
from kaid.actions.order import ByQueue, JobKey
from kaid.actions.scenario import Attempt, job_order
from kaid.actions.session import Session
from kaid.model.objects import Job
from kaid.model.queues import charge
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over
from tests.test_order import Case as OrderCase
from tests.test_order import scenarios as order_scenarios


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


@settings(max_examples=300, deadline=None)
@given(case=order_scenarios(), data=st.data())
def test_turns_hand_out_what_every_pop_does(case: OrderCase, data: st.DataObject) -> None:
    """``turns`` against ``every_turn`` on the order's own random trees: some jobs involved, each involved one's
    queue charged as its turn comes (a victim taking its place back), the waiting jobs asking alike or not (the
    pops ``turns`` skips after a job of the same leaf that asked the same)."""
    queues, jobs, drawn, _, _ = case
    common = data.draw(st.sampled_from([(0, 1000, 0), (1000, 1000, 0)]))  # many waiting jobs ask alike
    vec = {k: v if data.draw(st.booleans()) else common for k, v in drawn.items()}
    involved = data.draw(st.lists(st.sampled_from(jobs), unique_by=id, min_size=1))
    amounts = data.draw(st.lists(st.sampled_from([0, 1000, 4000]), min_size=len(involved), max_size=len(involved)))
    skipped = [0]
    skip = ByQueue.skip

    def counted(self: ByQueue, queue: str) -> Job:
        skipped[0] += 1
        return skip(self, queue)

    def served(turn: Callable[[ByQueue, list[Job]], Iterator[Job]]) -> list[str]:
        tree = copy.deepcopy(queues)
        order = ByQueue(tree, (16000, 64000, 64000), lambda j: vec[j.key], lambda j: vec[j.key])
        order.push_all(jobs)
        out = []
        for k, job in enumerate(turn(order, involved)):
            out.append(job.key)
            charge(tree[job.queue], (amounts[k], 0, 0), False)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ByQueue, "skip", counted)
        short = served(scenario.turns)
    assert short == served(every_turn)
    event(f"pops skipped: {'some' if skipped[0] else 'none'}")


@SETTINGS
@given(case=cases())
def test_one_leaf_scenarios_decide_as_with_every_waiting_job(case: Case) -> None:
    """A scenario whose jobs all wait in one leaf queue orders only them (``scenario._others_matter``): the same
    decisions as with every waiting job of the queues involved pushed, and every job popped in turn."""
    alone = [0]
    short = scenario._others_matter

    def counted(involved: set[str]) -> bool:
        alone[0] += not short(involved)
        return short(involved)

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "_others_matter", counted)],
                          [(scenario, "_others_matter", lambda involved: True), (scenario, "turns", every_turn)])
    event(f"scenarios in one leaf: {'some' if alone[0] else 'none'}")


def plain_serving_order(session: Session, att: Attempt, victims: dict[str, Job]) -> ByQueue:
    """The plain reading of a scenario's order: its victims, its job and the other waiting jobs of the queues it
    involves (where their turns matter) pushed at once, every key read afresh."""
    involved = {j.queue for j in victims.values()} | {att.job.queue}
    jobs = [*victims.values(), att.job]
    if scenario._others_matter(involved):
        jobs += [job for q in involved for job in scenario.waiting_in(session, att, q)
                 if job.key not in victims and job is not att.job]
    return job_order(session, jobs, request=scenario._asks(session, att, victims))


@SETTINGS
@given(case=cases())
def test_serving_orders_copied_are_those_made_afresh(case: Case) -> None:
    """A scenario's order copied from the one made for the attempt's queues (``scenario.serving_order``) holds
    every job in the line and with the key the plain reading gives it (a mutant that leaves a victim in the copy,
    or keeps one order per attempt whatever the queues involved, fails this test)."""
    stale = [0]
    copied = [0]
    kept = scenario.serving_order

    def checked(session: Session, att: Attempt, victims: dict[str, Job]) -> ByQueue:
        queues = frozenset({j.queue for j in victims.values()} | {att.job.queue})
        copied[0] += queues in att.orders
        order = kept(session, att, victims)
        plain = plain_serving_order(session, att, victims)
        stale[0] += {q: jobs for q, jobs in order.leaves.items() if jobs} != \
            {q: jobs for q, jobs in plain.leaves.items() if jobs}
        stale[0] += {q: keys for q, keys in order._keys.items() if keys} != \
            {q: keys for q, keys in plain._keys.items() if keys}
        return order

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "serving_order", checked)
        decisions_over(case, 4)
    event(f"scenarios that copied an order: {'some' if copied[0] else 'none'}")
    assert not stale[0]


@SETTINGS
@given(case=cases())
def test_one_leaf_lines_are_the_turns_of_their_order(case: Case) -> None:
    """A scenario of one leaf takes its turns from the leaf's line of its jobs (``scenario.in_one_leaf``, the pending
    job's key kept in the attempt) without making a serving order: the same jobs in the same order as ``turns``
    hands them out of the order of them alone, every key read afresh (a mutant that keeps the victims' order as
    given, or serves the pending job first, fails here)."""
    seen = [0]
    short = scenario.in_one_leaf

    def checked(session: Session, jobs: list[Job], keys: Mapping[int, JobKey] | None = None) -> list[Job]:
        value = short(session, jobs, keys)
        order = job_order(session, jobs, request=lambda job: (0, 0, 0))
        assert value == list(scenario.turns(order, jobs))
        seen[0] += len(value) > 1
        return value

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "in_one_leaf", checked)
        decisions_over(case, 4)
    event(f"one-leaf scenarios with victims: {'some' if seen[0] else 'none'}")
