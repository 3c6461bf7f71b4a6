"""``scenario.skip_alike`` hands out without a pop the passed-over jobs after a passed one of its leaf that ask no
more of any resource than it asked, and the jobs served come as when every job is popped: on the order's own random
trees, with requests that differ in one resource only as often as not, each resource large enough to decide a
queue's dominant share or its deserved share (a mutant that reads two of the three resources fails here)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaid.actions.order import ByQueue
from kaid.actions.scenario import skip_alike
from kaid.model.objects import Job, Queue
from tests.test_order import Case as OrderCase
from tests.test_order import scenarios as order_scenarios
from tests.test_passed_over import PassOver, served_in_order

TOTAL = (16000, 64000, 64000)


@settings(max_examples=300, deadline=None)
@given(case=order_scenarios(), data=st.data())
def test_heads_that_ask_no_more_are_handed_out_as_every_pop_would(case: OrderCase, data: st.DataObject) -> None:
    queues, jobs, _, _, _ = case
    base = data.draw(st.tuples(st.sampled_from([0, 1000, 8000]), st.sampled_from([0, 8000, 32000]),
                               st.sampled_from([0, 8000, 32000])))
    vec: dict[str, tuple[int, int, int]] = {}
    for j in jobs:  # the base request, one resource of it changed, or any request
        how = data.draw(st.sampled_from(["base", "one", "any"]))
        v = list(base)
        if how == "one":
            r = data.draw(st.integers(0, 2))
            v[r] = data.draw(st.sampled_from([[0, 1000, 4000, 8000], [0, 4000, 32000, 48000],
                                              [0, 4000, 32000, 48000]][r]))
        elif how == "any":
            v = [data.draw(st.sampled_from([0, 1000, 8000])), data.draw(st.sampled_from([0, 8000, 32000])),
                 data.draw(st.sampled_from([0, 8000, 32000]))]
        vec[j.key] = (v[0], v[1], v[2])
    passed = {id(j) for j in data.draw(st.lists(st.sampled_from(jobs), unique_by=id))}
    amounts = data.draw(st.lists(st.sampled_from([0, 1000, 4000]), min_size=len(jobs), max_size=len(jobs)))
    skipped = [0]

    def served(pass_over: PassOver) -> list[str]:
        return served_in_order(queues, jobs, vec, passed, lambda n: (amounts[n], amounts[n] * 4, 0), pass_over,
                               skipped)

    assert served(skip_alike) == served(lambda order, job, passed: None)
    event(f"pops skipped: {'some' if skipped[0] else 'none'}")


@pytest.mark.parametrize("resource", [0, 1, 2])
def test_a_head_that_asks_more_of_one_resource_is_popped(resource: int) -> None:
    """Leaf a: j0 (passed over), j1 (passed over, asks more of one resource than j0), j2 (served); leaf b: k
    (served). Once j0 is popped, j1 keys a after b, so k is served before j2; handing j1 out with j0 would serve j2
    first."""
    queues: dict[str, Queue] = {}
    for name in ("a", "b"):
        q = queues[name] = Queue(name)
        q.quota, q.limit, q.fair, q.allocated = [-1, -1, -1], [-1, -1, -1], [16000, 64000, 64000], [0, 0, 0]
    base = (1000, 1000, 1000)

    def more(amount: int) -> tuple[int, int, int]:
        v = list(base)
        v[resource] = amount * TOTAL[resource] // 16
        return (v[0], v[1], v[2])

    jobs: list[Job] = []
    vec: dict[str, tuple[int, int, int]] = {}
    for name, queue, ask in (("j0", "a", base), ("j1", "a", more(12)), ("j2", "a", base), ("k", "b", more(4))):
        job = Job("ns", name)
        job.queue, job.priority, job.created = queue, 100, float(len(jobs))
        jobs.append(job)
        vec[job.key] = ask
    passed = {id(jobs[0]), id(jobs[1])}

    def served(pass_over: Callable[[ByQueue, Job, Callable[[Job], bool]], None]) -> list[str]:
        tree = copy.deepcopy(queues)
        order = ByQueue(tree, TOTAL, lambda j: vec[j.key], lambda j: vec[j.key])
        order.push_all(jobs)
        out = []
        while (job := order.pop()) is not None:
            if id(job) in passed:
                pass_over(order, job, lambda j: id(j) in passed)
            else:
                out.append(job.name)
        return out

    assert served(lambda order, job, passed: None) == ["k", "j2"]
    assert served(skip_alike) == ["k", "j2"]
