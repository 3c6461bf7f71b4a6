"""The GPU bound of KAI's victim search (``by_node.GpuRoom``, ``Tally``) reads each victim unit's GPUs by node once per
search (``GpuRoom.of``) where each tally read every pod's node again: every tally of a search (a partial job's
recorded victims, each potential unit added, each simulation's victims) counts what the plain per-pod reading
counts, on random clusters and where a node selector keeps the job off some victims' nodes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given

from kaid.actions import by_node
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session
from kaid.actions.victims import Search, Unit
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over


def _plain_total(room: by_node.GpuRoom, victims: list[Unit]) -> int:
    """A tally's total as each pod of each victim, read afresh, adds it."""
    freed: dict[int, int] = {}
    total = room.total
    for unit in victims:
        for p in unit.pods:
            gpus = p.gpu_whole + p.frac_devices
            n = room.nodes.get(room.home[id(p)])
            if not gpus or n is None or (room.mask is not None and not room.mask[n.index]):
                continue
            before = room.base.get(n.index, 0) + freed.get(n.index, 0)
            freed[n.index] = freed.get(n.index, 0) + gpus
            total += room._pods(before + gpus) - room._pods(before)
    return total


Simulate = Callable[[Session, Attempt, Search, list[Unit], bytearray | None], Outcome | None]


def _checked() -> tuple[list[int], Simulate]:
    """``by_node._simulate`` that checks, before each simulation, the tally of its victims in a room of the search
    (its units read once: ``GpuRoom.of``) against the plain reading; returns the checks made and the patch."""
    made = [0]
    real = by_node._simulate
    # id(search) -> the search (kept: a search gone could lend its id to a later one, which then read the room of
    # the one gone, whose victims' nodes its own do not hold) and its room
    rooms: dict[int, tuple[Search, by_node.GpuRoom]] = {}

    def checked(session: Session, att: Attempt, search: Search, victims: list[Unit],
                feasible: bytearray | None) -> Outcome | None:
        known = rooms.get(id(search))
        if known is None:
            known = rooms[id(search)] = (search, by_node.GpuRoom(session, att, search.home))
        room = known[1]
        tally = room.tally(att, victims[:1]).copy()
        for u in victims[1:]:
            tally.add(u)
        if tally.need:
            made[0] += 1
            assert tally.total == _plain_total(room, victims)
        return real(session, att, search, victims, feasible)

    return made, checked


@SETTINGS
@given(case=cases())
def test_each_tally_counts_what_the_plain_reading_counts(case: Case) -> None:
    made, checked = _checked()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "_simulate", checked)
        decisions_over(case, 3)
    event(f"tallies checked: {'some' if made[0] else 'none'}")


def test_a_victim_off_the_jobs_nodes_frees_nothing_for_it() -> None:
    """Victims on nodes the job's selector leaves out count nothing; the job waits (no simulation can place it),
    where counting them would simulate a scenario."""
    objs: list[dict[str, object]] = [queue("q"), podgroup("w", "q", 2, priority_class="build")]
    for i in range(4):
        objs += [node(f"n{i}", gpus=2, labels={"pool": "a" if i == 0 else "b"}),
                 podgroup(f"v{i}", "q", 1, priority_class="train"),
                 pod(f"v{i}-0", gpus=2, group=f"v{i}", node_name=f"n{i}")]
    objs += [pod(f"w-{k}", gpus=2, group="w", nodeSelector={"pool": "a"}) for k in range(2)]
    _, checked = _checked()
    sims = [0]

    def counted(session: Session, att: Attempt, search: Search, victims: list[Unit],
                feasible: bytearray | None) -> Outcome | None:
        sims[0] += 1
        return checked(session, att, search, victims, feasible)

    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "preempt"]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "_simulate", counted)
        d = run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    assert not d.evictions and sims[0] == 0


def test_victims_that_share_a_node_add_up_to_a_pod_of_more_gpus() -> None:
    """Two 1-GPU victims of one 2-GPU node make room for a 2-GPU pod together, neither alone (the room counts pods
    of the job's GPUs per node, from the GPUs freed there in all)."""
    objs: list[dict[str, object]] = [node("n0", gpus=2), queue("q"), podgroup("w", "q", 1, priority_class="build"),
                                     pod("w-0", gpus=2, group="w")]
    for k in range(2):
        objs += [podgroup(f"v{k}", "q", 1, priority_class="train", created=f"2025-12-31T1{k}:00:00Z"),
                 pod(f"v{k}-0", gpus=1, group=f"v{k}", node_name="n0", created=f"2025-12-31T1{k}:00:00Z")]
    made, checked = _checked()
    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "preempt"]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "_simulate", checked)
        d = run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    assert sorted(e.pod for e in d.evictions) == ["default/v0-0", "default/v1-0"]
    assert [p.pod for p in d.pipelined] == ["default/w-0"] and made[0]
