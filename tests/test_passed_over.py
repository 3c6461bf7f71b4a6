"""An eviction action hands out without a pop the waiting jobs it passes over after a passed job of their leaf that
asked the same (``evictions._passed_over``, ``scenario.skip_alike``), and decides what it decided popping every job
in turn: on random clusters over several cycles, the same decisions (issue 15: most of the pops of the steady
cycle's eviction actions handed out jobs alike to one that had found nothing)."""

from __future__ import annotations

import copy
from collections.abc import Callable

from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaid.actions import evictions
from kaid.actions.order import ByQueue
from kaid.actions.scenario import skip_alike
from kaid.model.objects import Job, Queue
from kaid.model.queues import charge
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over
from tests.test_order import Case as OrderCase
from tests.test_order import scenarios as order_scenarios


@SETTINGS
@given(case=cases())
def test_passed_jobs_decide_as_every_pop(case: Case) -> None:
    skipped = [0]

    def counted(order: ByQueue, job: Job, passed: Callable[[Job], bool]) -> None:
        before = len(order.leaves[job.queue])
        skip_alike(order, job, passed)
        skipped[0] += before - len(order.leaves[job.queue])

    def every_pop(order: ByQueue, job: Job, passed: Callable[[Job], bool]) -> None:
        return None

    assert_same_decisions(lambda: decisions_over(case, 4), [(evictions, "skip_alike", counted)],
                          [(evictions, "skip_alike", every_pop)])
    event(f"pops skipped: {'some' if skipped[0] else 'none'}")


@settings(max_examples=300, deadline=None)
@given(case=order_scenarios(), data=st.data())
def test_passing_over_hands_out_what_every_pop_does(case: OrderCase, data: st.DataObject) -> None:
    """The action's loop on the order's own random trees: some jobs passed over (the others served, each charging
    its queue as a success does), the jobs asking alike or not; the jobs served come in the same order whether the
    passed ones after a passed one of their leaf are handed out by ``skip_alike`` or each popped (a mutant that
    skips regardless of the request, or of whether the next job is passed over, fails here)."""
    queues, jobs, drawn, _, _ = case
    common = data.draw(st.sampled_from([(0, 1000, 0), (1000, 1000, 0)]))  # many waiting jobs ask alike
    vec = {k: v if data.draw(st.booleans()) else common for k, v in drawn.items()}
    passed = {id(j) for j in data.draw(st.lists(st.sampled_from(jobs), unique_by=id))}
    amounts = data.draw(st.lists(st.sampled_from([0, 1000, 4000]), min_size=len(jobs), max_size=len(jobs)))
    skipped = [0]

    def served(pass_over: PassOver) -> list[str]:
        return served_in_order(queues, jobs, vec, passed, lambda n: (amounts[n], 0, 0), pass_over, skipped)

    assert served(skip_alike) == served(lambda order, job, passed: None)
    event(f"pops skipped: {'some' if skipped[0] else 'none'}")


PassOver = Callable[[ByQueue, Job, Callable[[Job], bool]], None]


Vec3 = tuple[int, int, int]


def served_in_order(queues: dict[str, Queue], jobs: list[Job], vec: dict[str, Vec3], passed: set[int],
                    charged: Callable[[int], Vec3], pass_over: PassOver, skipped: list[int]) -> list[str]:
    """An eviction action's loop over the order of ``jobs`` (asking ``vec``): the jobs in ``passed`` (by id) passed
    over, the ones after them handed out by ``pass_over`` (counted in ``skipped[0]``), the others served, the n-th
    charging its queue ``charged(n)``; the keys of the jobs served, in order."""
    tree = copy.deepcopy(queues)
    order = ByQueue(tree, (16000, 64000, 64000), lambda j: vec[j.key], lambda j: vec[j.key])
    order.push_all(jobs)
    out: list[str] = []
    while (job := order.pop()) is not None:
        if id(job) in passed:
            before = len(order.leaves[job.queue])
            pass_over(order, job, lambda j: id(j) in passed)
            skipped[0] += before - len(order.leaves[job.queue])
            continue
        charge(tree[job.queue], charged(len(out)), False)
        out.append(job.key)
    return out
