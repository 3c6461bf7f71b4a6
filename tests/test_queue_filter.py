"""A victim search reads only the jobs of the queues its action's rules may take candidates from
(``Rules.candidate_queue``: reclaim and preempt say no to some queues) and changes no decision: ``candidate_queue``
says no only where ``candidate`` says no to every job of the queue, and on random clusters and several cycles the
decisions are those of the plain reading, which lines up every queue of the pool and asks ``candidate`` of each
of its jobs (issue 15: the filter read every running job of the cluster per search; and reclaim's
``Rules.queue_only``, which asks nothing more of the jobs of the queues the filter kept, is off in the plain
reading)."""

from __future__ import annotations

from hypothesis import event, given

from kaid.actions import evictions
from kaid.actions.evictions import Pool, Rules
from kaid.actions.reclaim import ReclaimRules
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def every_queue(self: Pool, session: Session, rules: Rules, att: Attempt) -> list[str]:
    """The plain reading: every queue of the pool."""
    if not self.by_queue:
        for job in self.jobs:
            self.by_queue.setdefault(job.queue, []).append(job)
    return list(self.by_queue)


@SETTINGS
@given(case=cases())
def test_queue_filter_decides_as_every_job(case: Case) -> None:
    refused = [0]
    narrowed = Pool.queues

    def checked(self: Pool, session: Session, rules: Rules, att: Attempt) -> list[str]:
        queues = narrowed(self, session, rules, att)
        for job in self.jobs:
            if job.queue not in queues:
                refused[0] += 1
                assert not rules.candidate(session, att, job), f"{job.key} refused with its queue {job.queue}"
        return queues

    assert_same_decisions(lambda: decisions_over(case, 4), [(evictions.Pool, "queues", checked)],
                          [(evictions.Pool, "queues", every_queue), (ReclaimRules, "queue_only", False)])
    event(f"jobs left unread by the queue filter: {'some' if refused[0] else 'none'}")
