"""The searches' GPU bound read with less work, the same answers (``by_node``, ``evictions``):

- ``by_node.vain`` for a batch of a few pods asks the victim order first (``VAIN_DRAWS`` units drawn at most): where
  the units drawn make room, the census (every unit of the candidates) does too, and where every unit is drawn they
  are the census's. Checked against the census alone (``VAIN_BATCH = 0``) at every call, and the decisions are the
  census's.
- ``Tally.add`` keeps each node's level (its base and the victims' GPUs there): its total is the plain count of the
  pods of the batch's shape each node then holds room for.
- ``evictions.rest_after``: what is left of a victim handed out unit after unit, from the last count less the unit's
  pods, is ``rest_of`` the victim without every unit handed out.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import by_node, evictions
from kaid.actions.order import JobKey
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session, Vec
from kaid.actions.victims import Search, Unit
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job
from tests.equivalence import assert_same_decisions
from tests.test_by_node_pruning import big_jobs
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over
from tests.test_search_memory import _digest

_VAIN = by_node.vain


def _census_only(session: Session, att: Attempt, search: Search) -> bool:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "VAIN_BATCH", 0)
        return _VAIN(session, att, search)


def _checked_vain(run: Callable[[], list[Decisions]]) -> dict[str, int]:
    """Run with every ``vain`` answer checked against the census alone (asked first, on a copy of the search: the
    draws change what the search has drawn, not what it may draw); how often each path answered."""
    real = _VAIN
    seen = {"drawn": 0, "census": 0, "all drawn": 0}

    def checked(session: Session, att: Attempt, search: Search) -> bool:
        start = session.checkpoint()
        census = _census_only(session, att, search)
        drawn_before = len(search.units)
        said = real(session, att, search)
        assert said == census, att.job.key
        assert session.checkpoint() == start
        if len(att.batch) <= by_node.VAIN_BATCH:
            seen["all drawn" if search.more is None and said else "drawn"] += 1
        else:
            seen["census"] += 1
        assert len(search.units) >= drawn_before
        return said

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "vain", checked)
        run()
    return seen


@SETTINGS
@given(case=cases())
def test_vain_by_draws_answers_as_the_census(case: Case) -> None:
    """(And with a few draws only, so that the census answers after them: ``VAIN_DRAWS = 1``.)"""
    seen = _checked_vain(lambda: decisions_over(case, 3))
    event(f"answered from the draws: {'some' if seen['drawn'] else 'none'}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "VAIN_DRAWS", 1)
        _checked_vain(lambda: decisions_over(case, 3))
    assert_same_decisions(lambda: decisions_over(case, 3), [(by_node, "VAIN_BATCH", by_node.VAIN_BATCH)],
                          [(by_node, "VAIN_BATCH", 0)])


@SETTINGS
@given(objs=big_jobs())
def test_vain_by_draws_answers_as_the_census_on_big_gangs(objs: list[dict[str, object]]) -> None:
    """Clusters whose waiting gangs need some or more than every GPU the candidates hold: vain searches of a few pods
    too, answered once every unit is drawn."""
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(objs, cfg, NOW), cfg)]

    seen = _checked_vain(run)
    event(f"vain with every unit drawn: {'some' if seen['all drawn'] else 'none'}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "VAIN_DRAWS", 1)
        _checked_vain(run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "VAIN_BATCH", 0)
        census = _digest(run()[0])
    assert _digest(run()[0]) == census


def test_the_benchmark_vain_checks_read_the_draws() -> None:
    """bench_victims' workload, small: searches of gangs of a few pods get their answer from the draws, the same as
    the census's, and the decisions are the census's."""
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=2)
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)]

    assert _checked_vain(run)["drawn"] >= 1
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "VAIN_BATCH", 0)
        census = _digest(run()[0])
    assert _digest(run()[0]) == census


def _plain_total(tally: by_node.Tally, added: list[Unit]) -> int:
    """The room a tally counts, from scratch: per node, the pods of the batch's shape its base and the victims' GPUs
    there hold room for (or the GPUs alone where the room does not count by pod)."""
    room = tally.room
    if not room.per_pod:
        return room.total + sum(g for u in added for _, g in room.of(u))
    level = dict(room.base)
    for u in added:
        for i, g in room.of(u):
            level[i] = level.get(i, 0) + g
    return sum(v // room.per_pod for v in level.values())


@SETTINGS
@given(case=cases())
def test_a_tally_counts_the_plain_room(case: Case) -> None:
    added: dict[int, list[Unit]] = {}  # id(tally) -> the units added to it (a new tally may reuse an old one's id)
    init, add, copy = by_node.Tally.__init__, by_node.Tally.add, by_node.Tally.copy

    def checked_init(self: by_node.Tally, room: by_node.GpuRoom, need: int) -> None:
        init(self, room, need)
        added[id(self)] = []

    def checked_add(self: by_node.Tally, unit: Unit) -> None:
        add(self, unit)
        if self.need:
            mine = added[id(self)]
            mine.append(unit)
            assert self.total == _plain_total(self, mine)

    def checked_copy(self: by_node.Tally) -> by_node.Tally:
        other = copy(self)
        added[id(other)] = list(added.get(id(self), []))
        return other

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node.Tally, "__init__", checked_init)
        mp.setattr(by_node.Tally, "add", checked_add)
        mp.setattr(by_node.Tally, "copy", checked_copy)
        decisions_over(case, 3)


@SETTINGS
@given(case=cases())
def test_the_rest_after_each_unit_is_the_rest_of_all_handed_out(case: Case) -> None:
    real = evictions.rest_after
    handed: dict[tuple[int, int], set[int]] = {}  # (id(left), id(job)) -> id(pod) of its units handed out so far
    seen = {"again": 0}

    def checked(job: Job, unit: Unit, gone: dict[int, set[int]], left: dict[int, list[int]]) -> tuple[JobKey, Vec]:
        out = handed.setdefault((id(left), id(job)), set())
        if out:
            seen["again"] += 1
        out.update(id(p) for p in unit.pods)
        got = real(job, unit, gone, left)
        assert got == evictions.rest_of(job, out), job.key
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "rest_after", checked)
        decisions_over(case, 3)
    event(f"victims handed out more than once: {'some' if seen['again'] else 'none'}")
