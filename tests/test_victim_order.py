"""A victim search's order holds only the next victim of each queue, the one after it pushed as it is handed out,
with the victims' keys kept from one search to the next (``kaid.actions.evictions._victim_order``, ``Pool.key_of``),
and no decision changes: on random clusters and several cycles, the decisions are those of the plain reading, which
pushes every candidate at once with its key read afresh (issue 15: a search pushed every candidate of the cluster,
half of its time at 4,000 nodes)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import event, given

from kaid.actions import evictions
from kaid.actions.order import ByQueue, JobKey
from kaid.actions.scenario import job_order
from kaid.actions.session import Session
from kaid.model.objects import Job
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def every_victim(session: Session, per_queue: dict[str, list[tuple[JobKey, Job]]]) -> tuple[ByQueue,
                                                                                           Callable[[Job], None]]:
    """The plain reading: every candidate pushed at once, its key read by the order."""
    order = job_order(session, [j for pairs in per_queue.values() for _, j in pairs], victims=True, frozen=True)
    return order, lambda victim: None


@SETTINGS
@given(case=cases())
def test_victim_order_decides_as_every_victim_pushed(case: Case) -> None:
    longer = [0]
    lined = evictions._victim_order

    def counted(session: Session, per_queue: dict[str, list[tuple[JobKey, Job]]]) -> tuple[ByQueue,
                                                                                           Callable[[Job], None]]:
        longer[0] += any(len(pairs) > 1 for pairs in per_queue.values())
        return lined(session, per_queue)

    assert_same_decisions(lambda: decisions_over(case, 4), [(evictions, "_victim_order", counted)],
                          [(evictions, "_victim_order", every_victim)])
    event(f"searches with a queue of several victims: {'some' if longer[0] else 'none'}")
