"""What the victim searches keep from one search to the next is what the plain reading works out afresh: what a job
holds, as the frozen victim orders read it (``Roles.held``, dropped once an operation touches the job), the queue
rules those orders read (``Roles.caps``, ``rules``: fixed in a cycle), and the whole GPUs a unit's pods free on the
nodes a job may use (``by_node.GpuRoom.of``, kept in the unit per node mask). Checked at every reading on random
clusters over several cycles and on bench_victims small."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import by_node, evictions
from kaid.actions.order import ByQueue, QueueRules, Vec, VictimTree
from kaid.actions.scenario import attempt_for, held_by
from kaid.actions.victims import Unit, units_of
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Queue
from tests.objects import node, pod, podgroup, queue
from tests.sessions import pod_named, session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _checked(run: Callable[[], object]) -> Counter[str]:
    """``run`` with every kept reading checked against the plain one; returns how many of each kind were checked
    (``held``: of a job an earlier order read too, ``cells``: kept in the unit, ``rules``: a queue's rules an order
    found worked out)."""
    seen: Counter[str] = Counter()
    real_of = by_node.GpuRoom.of

    read: set[int] = set()  # id(job) of the jobs an order read what they hold of (ids may repeat across cycles)

    def checked_held(kept: Callable[[Job], Vec]) -> Callable[[Job], Vec]:
        def held(job: Job) -> Vec:
            value = kept(job)
            assert value == held_by(job), job.key
            seen["held"] += id(job) in read
            read.add(id(job))
            return value

        return held

    def check_rules(queues: dict[str, Queue], total: Vec, rules: dict[str, QueueRules],
                    caps: dict[str, tuple[int, int, int]]) -> None:
        plain = ByQueue(queues, total, held_by, held_by, victims=True, frozen=True)
        for name in rules:
            seen["rules"] += 1
            assert rules[name] == plain._rules_of(queues[name]), name
            assert caps[name] == plain._caps[name], name

    class Checked(ByQueue):
        def __post_init__(self) -> None:
            self.held = checked_held(self.held)
            super().__post_init__()
            check_rules(self.queues, self.total, self._rules, self._caps)

    class CheckedTree(VictimTree):
        __slots__ = ()

        def __init__(self, queues: dict[str, Queue], total: Vec, held: Callable[[Job], Vec],
                     caps: dict[str, tuple[int, int, int]], rules: dict[str, QueueRules],
                     ties: dict[tuple[str, str], int]) -> None:
            super().__init__(queues, total, checked_held(held), caps, rules, ties)
            check_rules(queues, total, rules, caps)

    def of(room: by_node.GpuRoom, unit: Unit) -> list[tuple[int, int]]:
        kept = unit.cells is not None and unit.cells_mask is room.kind
        got = real_of(room, unit)
        saved = unit.cells, unit.cells_mask
        unit.cells = None
        fresh = real_of(room, unit)
        unit.cells, unit.cells_mask = saved
        assert got == fresh, unit.job.key
        seen["cells"] += kept
        return got

    real_add = by_node.Tally.add

    def add(tally: by_node.Tally, unit: Unit) -> None:  # (``Tally.add`` reads the kept cells itself)
        if unit.cells is not None and unit.cells_mask is tally.room.kind:
            of(tally.room, unit)
        real_add(tally, unit)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "ByQueue", Checked)
        mp.setattr(evictions, "VictimTree", CheckedTree)
        mp.setattr(by_node.GpuRoom, "of", of)
        mp.setattr(by_node.Tally, "add", add)
        run()
    return seen


@SETTINGS
@given(case=cases())
def test_kept_readings_are_the_plain_ones(case: Case) -> None:
    seen = _checked(lambda: decisions_over(case, 3))
    event(f"kept cells read: {'some' if seen['cells'] else 'none'}")
    event(f"held read again: {'some' if seen['held'] else 'none'}")


def test_the_benchmark_kept_readings_are_the_plain_ones() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    seen = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert seen["cells"] >= 5 and seen["rules"] >= 5 and seen["held"] >= 5


def test_a_unit_keeps_its_cells_per_node_mask() -> None:
    """One victim, a pod on each of two zones' nodes; two pending jobs, each bound to one zone. The unit's cells are
    those on the nodes of the job asking, whichever asked first (kept per mask: kept per unit alone, the second job
    was told the first's node)."""
    objs = [node("a0", gpus=1, labels={"zone": "a"}), node("b0", gpus=1, labels={"zone": "b"}),
            queue("q"), podgroup("v", "q", 2, priority_class="train"),
            pod("v-0", gpus=1, group="v", node_name="a0"), pod("v-1", gpus=1, group="v", node_name="b0"),
            podgroup("pa", "q", 1), pod("pa-0", gpus=1, group="pa", nodeSelector={"zone": "a"}),
            podgroup("pb", "q", 1), pod("pb-0", gpus=1, group="pb", nodeSelector={"zone": "b"})]
    session = session_of(objs)
    jobs = session.snap.jobs
    victim = jobs["default/v"]
    [unit], _ = units_of(victim, session.snap.queues["q"], session.snap.now, 0.0)
    home = {id(p): p.node or "" for p in unit.pods}
    index = {n.name: n.index for n in session.snap.nodes}
    rooms = {zone: by_node.GpuRoom(session, attempt_for(session, "reclaim", jobs[f"default/p{zone}"],
                                                         [pod_named(session, f"p{zone}-0")]), home)
             for zone in "ab"}
    for zone in "abba":
        assert rooms[zone].of(unit) == [(index[f"{zone}0"], 1)]
