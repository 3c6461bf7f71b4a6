"""A victim search draws its units in KAI's victim order as first-fit reads them (``victims.Search.unit``), after
some of them were evicted, and only the solver and the explanations draw them all (``evictions._whole``); the
candidates' units are kept from one search to the next while none succeeded (``evictions.Pool``): on random clusters
and several cycles, the decisions are those of working out every search's units afresh and drawing them all before
any eviction, as the search did before (issue 15: at 4,000 nodes each reclaim search ordered every candidate,
thousands of units, to read a few)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaid.actions import evictions
from kaid.actions.evictions import Pool, Rules
from kaid.actions.order import ByQueue, Vec
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.actions.victims import Search, Unit, units_of
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Queue
from kaid.model.queues import charge
from kaid.model.vocabulary import ReasonCode
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over
from tests.test_order import scenarios
from tests.test_search_memory import _digest


def _run(case: Case, cycles: int) -> list[Decisions]:
    # greedy gangs: the solver would draw every unit of a search that found victims
    cfg = case.cfg.model_copy(update={"placement": case.cfg.placement.model_copy(update={"gangSolver": "greedy"})})
    return decisions_over(case, cycles, cfg)


@SETTINGS
@given(case=cases())
def test_drawing_units_as_read_decides_as_drawing_all_first(case: Case) -> None:
    lazy = evictions._search

    def counted(session: Session, rules: Rules, att: Attempt, pool: Pool) -> tuple[Search, int]:
        search, protected = lazy(session, rules, att, pool)
        searches.append(search)
        return search, protected

    def eager(session: Session, rules: Rules, att: Attempt, pool: Pool) -> tuple[Search, int]:
        search, protected = lazy(session, rules, att, pool)
        evictions._whole(session, rules, att, search)  # every unit, with the session as the search found it
        return search, protected

    def afresh(pool: Pool, session: Session, job: Job, action: str, claimant: Queue) -> tuple[list[Unit], int]:
        q = session.snap.queues[job.queue]
        return units_of(job, q, session.snap.now, evictions.min_runtime(q, action, claimant))

    searches: list[Search] = []
    # the plain reading: every unit first, each search's units afresh
    assert_same_decisions(lambda: _run(case, 4), [(evictions, "_search", counted)],
                          [(evictions, "_search", eager), (Pool, "units_of", afresh)])
    left = sum(1 for s in searches if s.more is not None)
    event(f"searches ended before their last unit: {'some' if left else 'none'}")


def _hand_out(order: ByQueue, units: dict[str, int], between: Callable[[Job], None]) -> list[str]:
    """Victims as ``_search`` draws them: a job is pushed back while it has units left."""
    left = dict(units)
    out = []
    while (job := order.pop()) is not None:
        out.append(job.key)
        left[job.key] -= 1
        if left[job.key]:
            order.push(job)
        between(job)
    return out


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.data())
def test_a_frozen_order_hands_out_what_it_would_have_at_once(
        case: tuple[dict[str, Queue], list[Job], dict[str, Vec], bool, list[tuple[int, ...]]],
        data: st.DataObject) -> None:
    """Whatever changes between two pops of a frozen victim order (queues charged, a victim evicted: what it holds
    and its key change), it hands out the victims as it would have with nothing changed."""
    queues, jobs, vec, _, steps = case
    leaves = [q for q in queues.values() if not q.children]
    total: Vec = (16000, 64000, 64000)
    held = {k: (v[0] // 2, v[1], v[2]) for k, v in vec.items()}
    units = {j.key: data.draw(st.integers(1, 3)) for j in jobs}

    def order(frozen: bool) -> ByQueue:
        made = ByQueue(queues, total, lambda j: vec[j.key], lambda j: held[j.key], True, frozen)
        made.push_all(jobs)
        return made

    at_once = _hand_out(order(False), units, lambda job: None)
    moves = iter(steps)

    def change(job: Job) -> None:
        step = next(moves, (0,))
        if step[0] == 1:
            charge(leaves[step[1]], (step[2] * step[3], 0, 0), False)
        held[job.key] = (0, 0, 0)  # its unit evicted
        job.priority -= 1  # another key, were it asked again
    assert _hand_out(order(True), units, change) == at_once


@pytest.mark.parametrize("allowed", [-1, "two", 1.5])
def test_a_budget_whose_allowance_is_no_count_protects_its_own_pods_only(allowed: object) -> None:
    """A PodDisruptionBudget whose status allows fewer than 0 disruptions, or no whole number of them (only a
    hand-written snapshot has one), is a problem and reads as none allowed: it protects the pod it covers and no
    other, and drawing the units as read decides as drawing them all first."""
    objs: list[dict[str, object]] = [
        node("n0", gpus=2), queue("a", gpu=(0, -1, 1)), queue("b", gpu=(2, -1, 1)),
        podgroup("old", "a", 1, priority_class="train", created="2025-12-31T00:00:00Z"),
        podgroup("new", "a", 1, priority_class="train", created="2025-12-31T12:00:00Z"),
        podgroup("wait", "b", 1, priority_class="train"),
        pod("old-0", gpus=1, group="old", node_name="n0", labels={"app": "old"}, created="2025-12-31T00:00:00Z"),
        pod("new-0", gpus=1, group="new", node_name="n0", created="2025-12-31T12:00:00Z"),
        pod("wait-0", gpus=1, group="wait"),
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "old", "namespace": "default"},
         "spec": {"selector": {"matchLabels": {"app": "old"}}}, "status": {"disruptionsAllowed": allowed}}]
    cfg = SchedulerConfig()
    lazy = evictions._search

    def eager(session: Session, rules: Rules, att: Attempt, pool: Pool) -> tuple[Search, int]:
        search, protected = lazy(session, rules, att, pool)
        evictions._whole(session, rules, att, search)
        return search, protected

    snap = build_snapshot(objs, cfg, NOW)
    assert [(p.kind, p.name, p.reason.code) for p in snap.problems] == \
        [("PodDisruptionBudget", "old", ReasonCode.INVALID_DISRUPTION_BUDGET)]
    assert [b.disruptions_allowed for b in snap.budgets] == [0]
    drawn = run_cycle(snap, cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "_search", eager)
        first = run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    assert _digest(drawn) == _digest(first)
    assert [(e.pod, e.by) for e in first.evictions] == [("default/new-0", "default/wait")]
