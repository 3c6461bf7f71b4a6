"""What reclaim works out once and shares, checked against the plain answer every time it is asked, on random clusters
(two departments of two teams, per-leaf min runtimes) and several cycles:

- ``ReclaimRules.candidate_queue``: KAI's victim filter (``reclaimable.sides_allowed``) reads only the two queues
  where the reclaimer's and the victim's branches part (``leveled``), so the leaves under one victim side share its
  answer, once per attempt (the allocations and the request are the attempt's); each attempt asked it of every leaf
  holding a candidate, 190 at 4,000 nodes once allocate's placements were victims too.
- ``evictions._useful_pod``: one mask (a batch's pods mostly share their signature's), or a mask of every node,
  read without the loop over the masks.
- ``Pool.min_runtime`` and ``Pool.count_line`` (a vain search's count of the units it has not drawn): the count
  is checked against the plain draw in ``tests/test_unit_count.py``; here the min runtime against ``min_runtime``.
- ``Rules.queue_only``: for reclaim, every job of the lines a search reads (``Pool.lines_of``) is a candidate by the
  plain rule (``ReclaimRules.candidate``) exactly when it is not the attempt's own job, so the search asks no more of
  it (13,010 questions at 4,000 nodes).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given

import kaid.actions.reclaim as reclaim_mod
from kaid.actions import evictions
from kaid.actions.consolidate import ConsolidateRules
from kaid.actions.order import JobKey
from kaid.actions.preempt import PreemptRules
from kaid.actions.reclaim import ReclaimRules
from kaid.actions.reclaimable import leveled, sides_allowed
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.model.objects import Job, Pod, Queue
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _plain_useful(session: Session, att: Attempt) -> Callable[[Pod], bool]:
    masks = [session.index.static_mask(p) for p in att.batch]
    nodes = session.snap.node_by_name

    def useful(p: Pod) -> bool:
        return p.node in nodes and any(m[nodes[p.node].index] for m in masks)

    return useful


@SETTINGS
@given(case=cases())
def test_shared_answers_are_the_plain_ones(case: Case) -> None:
    asked, shared, pods = [0], [0], [0]
    candidate_queue = ReclaimRules.candidate_queue
    useful_pod = evictions._useful_pod
    min_runtime = evictions.Pool.min_runtime

    blocked = ReclaimRules.blocked
    attempt = [0]
    first: dict[tuple[int, str], bool] = {}  # (attempt, queue) -> the plain answer when the attempt first asked

    def starts(self: ReclaimRules, session: Session, att: Attempt) -> object:
        attempt[0] += 1
        return blocked(self, session, att)

    def checked(self: ReclaimRules, session: Session, att: Attempt, queue: str) -> bool:
        known = sum(isinstance(k, int) for k in self.allowed)
        answer = candidate_queue(self, session, att, queue)
        victim_q = session.snap.queues.get(queue)
        plain = first.setdefault((attempt[0], queue), (
            not att.job.preempt_never and queue != att.job.queue and victim_q is not None
            and sides_allowed(*leveled(att.queue, victim_q), att.request)))
        assert answer == plain, f"{att.job.key} ({att.queue.name}) asked of {queue}"
        asked[0] += 1
        shared[0] += queue in self.allowed and sum(isinstance(k, int) for k in self.allowed) == known
        return answer

    def useful_checked(session: Session, att: Attempt) -> Callable[[Pod], bool]:
        useful, plain = useful_pod(session, att), _plain_useful(session, att)
        for p in [*session.snap.pods, *(p for j in session.snap.jobs.values() for p in j.pods)]:
            assert useful(p) == plain(p), f"{p.key} on {p.node} for {att.job.key}"
            pods[0] += 1
        return useful

    def min_runtime_checked(self: evictions.Pool, q: Queue, action: str, claimant: Queue) -> float:
        got = min_runtime(self, q, action, claimant)
        assert got == evictions.min_runtime(q, action, claimant)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimRules, "candidate_queue", checked)
        mp.setattr(ReclaimRules, "blocked", starts)
        mp.setattr(evictions, "_useful_pod", useful_checked)
        mp.setattr(evictions.Pool, "min_runtime", min_runtime_checked)
        decisions_over(case, 4)
    event(f"queues asked: {'some' if asked[0] else 'none'}; answered from a side's: {'some' if shared[0] else 'none'}")


def test_leaves_of_one_side_share_its_answer() -> None:
    """Leaves t10 and t11 of d1 against a reclaimer in t00: one side (d1), one answer worked out for both; asked
    again in the next attempt (``blocked`` starts it), worked out again."""
    def child(name: str, parent: Queue) -> Queue:
        q = Queue(name)
        q.parent, q.parent_name = parent, parent.name
        parent.children.append(q)
        return q

    org = Queue("org")
    d0, d1 = child("d0", org), child("d1", org)
    t00, t01 = child("t00", d0), child("t01", d0)
    t10, t11 = child("t10", d1), child("t11", d1)
    for q in (d0, d1, t00, t01, t10, t11):
        q.quota = [2000, 0, 0]
        q.fair = [2000, 0, 0]
    d1.allocated = [4000, 0, 0]  # above its share: its leaves are candidates
    queues = {q.name: q for q in (org, d0, d1, t00, t01, t10, t11)}

    class Snap:
        pass

    class Job:
        preempt_never = False
        queue = "t00"

    snap = Snap()
    snap.queues = queues  # type: ignore[attr-defined]
    session = type("S", (), {"snap": snap})()
    att = type("A", (), {"job": Job(), "queue": t00, "request": (1000, 0, 0)})()
    rules = ReclaimRules()
    calls: list[str] = []
    plain = sides_allowed

    def counted(mine: Queue, theirs: Queue, req: tuple[int, int, int]) -> bool:
        calls.append(theirs.name)
        return plain(mine, theirs, req)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reclaim_mod, "sides_allowed", counted)
        assert rules.candidate_queues(session, att, ["t10", "t11", "t01"]) == ["t10", "t11"]
        assert calls == ["d1", "t01"]
        rules.allowed = {}  # the next attempt (``blocked``)
        d1.allocated = [1000, 0, 0]  # below its share now
        assert rules.candidate_queues(session, att, ["t10", "t11"]) == []
        assert calls == ["d1", "t01", "d1"]


@SETTINGS
@given(case=cases())
def test_every_job_of_the_lines_is_a_candidate_but_the_reclaimers_own(case: Case) -> None:
    assert ReclaimRules.queue_only and not PreemptRules.queue_only and not ConsolidateRules.queue_only
    lines_of = evictions.Pool.lines_of
    seen = [0]

    def checked(self: evictions.Pool, session: Session, rules: evictions.Rules,
                att: Attempt) -> dict[str, list[tuple[JobKey, Job]]]:
        lines = lines_of(self, session, rules, att)
        if rules.queue_only:
            for line in lines.values():
                for _, job in line:
                    victim_q = session.snap.queues.get(job.queue)
                    plain = (not att.job.preempt_never and job.queue != att.job.queue and victim_q is not None
                             and sides_allowed(*leveled(att.queue, victim_q), att.request))
                    assert plain == (job is not att.job), f"{job.key} for {att.job.key}"
                    seen[0] += 1
        return lines

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions.Pool, "lines_of", checked)
        decisions_over(case, 4)
    event(f"jobs in reclaim lines: {'some' if seen[0] else 'none'}")
