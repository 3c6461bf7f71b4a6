"""A victim search over the queues of a tree whose every level ``ByQueue`` reads by a scan of its children (most:
reclaim's searches over a few queues) hands its victims out through ``kaid.actions.order.VictimTree``: frozen, it works
out again only the entries on the path of the leaf pushed or popped, without ``ByQueue``'s upkeep for queues whose
allocations change. Every pop, push and what is left is checked against the frozen ``ByQueue`` fed the same calls:
on random clusters (a tree of three levels) over several cycles and on bench_victims small."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import evictions, order
from kaid.actions.order import JobKey, Vec, job_key
from kaid.actions.scenario import held_by, job_order
from kaid.actions.session import Session
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job
from tests.objects import node, pod, podgroup, queue
from tests.sessions import session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _checked(run: Callable[[], object]) -> tuple[int, int]:
    """``run`` with every tree order shadowed by the frozen ``ByQueue`` fed the same calls; returns how many jobs the
    tree orders handed out, and how many of them came from another queue than the one before."""
    popped = [0, 0]
    sessions: list[Session] = []
    real = evictions._victim_order

    def capture(session: Session, lines: dict[str, Iterator[tuple[JobKey, Job]]]) -> object:
        sessions.append(session)
        return real(session, lines)

    class Shadowed(order.VictimTree):
        __slots__ = ("last", "tree")

        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            self.tree = job_order(sessions[-1], [], victims=True, frozen=True)
            self.last: str | None = None

        def pop(self) -> Job | None:
            job = super().pop()
            assert self.tree.pop() is job
            if job is not None:
                popped[0] += 1
                popped[1] += self.last is not None and job.queue != self.last
                self.last = job.queue
            return job

        def push(self, job: Job, key: JobKey | None = None) -> None:
            super().push(job, key)
            self.tree.push(job, key)

        def push_rest(self, job: Job, key: JobKey, held: Vec) -> None:
            self.tree.push_rest(job, key, held)
            self._job_keys[id(job)] = key
            self._held[id(job)] = held
            order.VictimTree.push(self, job)

        def remaining(self) -> list[Job]:
            left = super().remaining()
            assert [id(j) for j in left] == [id(j) for j in self.tree.remaining()]
            return left

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "_victim_order", capture)
        mp.setattr(evictions, "VictimTree", Shadowed)
        run()
    return popped[0], popped[1]


@SETTINGS
@given(case=cases())
def test_tree_hands_out_what_the_queue_order_would(case: Case) -> None:
    popped, switched = _checked(lambda: decisions_over(case, 3))
    event(f"jobs handed out by tree orders: {'some' if popped else 'none'}")
    event(f"tree orders that went from queue to queue: {'some' if switched else 'none'}")


def test_the_benchmark_tree_orders_hand_out_what_the_queue_order_would() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    popped, switched = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert popped >= 5 and switched >= 2


def test_a_level_wider_than_a_scan_is_left_to_the_queue_order() -> None:
    """``ByQueue`` reads a level of more than ``SCAN_UP_TO`` children by a heap: the tree order is not used there."""
    narrow = [queue("top"), *(queue(f"l{i}", "top") for i in range(order.SCAN_UP_TO))]
    wide = [*narrow, queue("extra", "top")]
    assert order.scanned(session_of(narrow).snap.queues)
    assert not order.scanned(session_of(wide).snap.queues)


def test_equal_keys_are_told_apart_by_the_tie_rule() -> None:
    """Two sibling leaves alike in all but their names, each with one running job alike: their keys tie at every
    level, so the tie rule decides (the older queue, then the name, is served first: its victims go last), as in the
    queue order."""
    objs = [node("n0", gpus=4), queue("top"), queue("a", "top", gpu=(1, -1, 1)), queue("b", "top", gpu=(1, -1, 1))]
    for name in ("a", "b"):
        objs += [podgroup(f"{name}-job", name, 1, priority_class="train"),
                 pod(f"{name}-job-0", gpus=1, group=f"{name}-job", node_name="n0")]
    session = session_of(objs)
    jobs = [session.snap.jobs[f"default/{name}-job"] for name in ("a", "b")]
    tree = order.VictimTree(session.snap.queues, session.total, held_by, {}, {}, {})
    plain = job_order(session, [], victims=True, frozen=True)
    for job in jobs:
        tree.push(job, job_key(job))
        plain.push(job, job_key(job))
    taken = [tree.pop(), tree.pop(), tree.pop()]
    assert taken == [plain.pop(), plain.pop(), plain.pop()]
    assert [j.queue if j else None for j in taken] == ["b", "a", None]
