"""A victim search's order holds only the next victim of each queue, the one after it pushed as it is handed out,
with the victims' keys and each queue's line of them kept from one search to the next
(``kaid.actions.evictions._victim_order``, ``Pool.lines_of``), and no decision changes: on random clusters and
several cycles, the decisions are those of the plain reading, which pushes every candidate at once with its key read
afresh (issue 15: a search pushed every candidate of the cluster, half of its time at 4,000 nodes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import itemgetter

from hypothesis import event, given

from kaid.actions import evictions
from kaid.actions.evictions import Pool, Rules
from kaid.actions.order import ByQueue, JobKey, job_key
from kaid.actions.scenario import Attempt, job_order
from kaid.actions.session import Session
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over

Lines = dict[str, Iterator[tuple[JobKey, Job]]]


def every_victim(session: Session, lines: Lines) -> tuple[ByQueue, Callable[[Job], None]]:
    """The plain reading: every candidate pushed at once, its key read by the order."""
    order = job_order(session, [j for line in lines.values() for _, j in line], victims=True, frozen=True)
    return order, lambda victim: None


def fresh_lines(self: Pool, session: Session, rules: Rules, att: Attempt) -> dict[str, list[tuple[JobKey, Job]]]:
    """The plain reading of a search's lines: each queue's jobs sorted by their keys read afresh; the pool brought up
    to date first, as ``Pool.lines_of`` does (without it, the units of a job a search before took from stayed the ones
    made before: a victim's evicted pod was handed out again)."""
    self._catch_up(session)
    return {q: sorted(((job_key(j), j) for j in self.by_queue[q]), key=itemgetter(0), reverse=True)
            for q in self.queues(session, rules, att)}


@SETTINGS
@given(case=cases())
def test_victim_order_decides_as_every_victim_pushed(case: Case) -> None:
    longer = [0]
    lined = evictions._victim_order

    def counted(session: Session, lines: Lines) -> tuple[evictions._VictimOrder, Callable[[Job], None]]:
        # each line read as the search reads it (listing them at once read every candidate's line to its end: a
        # search that found nothing then counted, for its explanation, none of the jobs its order had not held)
        seen = [False]

        def tallied(line: Iterator[tuple[JobKey, Job]]) -> Iterator[tuple[JobKey, Job]]:
            for n, item in enumerate(line):
                if n == 1 and not seen[0]:
                    seen[0] = True
                    longer[0] += 1
                yield item

        return lined(session, {q: tallied(line) for q, line in lines.items()})

    assert_same_decisions(lambda: decisions_over(case, 4), [(evictions, "_victim_order", counted)],
                          [(evictions, "_victim_order", every_victim), (Pool, "lines_of", fresh_lines)])
    event(f"searches with a queue of several victims: {'some' if longer[0] else 'none'}")


def test_a_line_is_read_again_once_a_search_took_from_it() -> None:
    """w0 takes e's elastic pod, which puts e at its minimum: f, younger, is now the next victim of queue a (a line
    kept from w0's search would still hand out e first)."""
    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "reclaim"]})
    objs = [node("n0", gpus=2), node("n1", gpus=1), queue("a", gpu=(0, -1, 1)), queue("b", gpu=(3, -1, 1)),
            podgroup("e", "a", 1, priority_class="train", created="2025-12-31T10:00:00Z"),
            pod("e-0", gpus=1, group="e", node_name="n0", created="2025-12-31T10:00:00Z"),
            pod("e-1", gpus=1, group="e", node_name="n0", created="2025-12-31T10:00:00Z"),
            podgroup("f", "a", 1, priority_class="train", created="2025-12-31T11:00:00Z"),
            pod("f-0", gpus=1, group="f", node_name="n1", created="2025-12-31T11:00:00Z")]
    for i in range(2):
        objs += [podgroup(f"w{i}", "b", 1, priority_class="train"), pod(f"w{i}-0", gpus=1, group=f"w{i}")]
    d = run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    assert sorted(e.pod for e in d.evictions) == ["default/e-1", "default/f-0"]
