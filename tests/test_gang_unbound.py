"""``gang.place(..., bound=False)``, a simulation's placement (``scenario._place``, greedy, reads the placements
alone): the count of room that only ends a greedy placement early (``gang._room``) is not worked out, and the
placements are the same as with it, on the same nodes and devices, or none where the gang does not fit; the index is
left as it was. Pods of one shape with whole GPUs or none, in a region or not, binpack and spread."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import bench_victims
from kaid.actions import scenario
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Pod
from kaid.placement import gang
from kaid.placement.index import NodeIndex
from tests.test_gang_fill import _state, cases


def _plan(plan: gang.GangPlan) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(p.name, n.name, tuple(d)) for p, n, d in plan.placements]


@settings(max_examples=300, deadline=None)
@given(case=cases(), cpu_only=st.booleans(), spread=st.booleans())
def test_unbound_places_as_bound(case: tuple[NodeIndex, list[Pod], bytearray | None], cpu_only: bool,
                                 spread: bool) -> None:
    index, pods, region = case
    if cpu_only:
        for p in pods:
            p.gpu_whole = 0
            p.cpu = p.cpu or 1000
    before = _state(index)
    bound = gang.place(pods, index, spread, None, "greedy", 1.0, within=region)
    assert _state(index) == before
    unbound = gang.place(pods, index, spread, None, "greedy", 1.0, within=region, bound=False)
    assert _state(index) == before
    assert _plan(unbound) == _plan(bound)
    if not bound.placements:
        assert unbound.placed_max <= len(pods) - 1  # greedy's own count of a gang that does not fit


def test_unbound_skips_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count is not read where unbound, and read where bound."""
    pods = [Pod("ns", f"p{k}", f"p{k}") for k in range(3)]
    for p in pods:
        p.gpu_whole = 1

    def never(*args: object) -> object:
        raise AssertionError("the room was counted")

    monkeypatch.setattr(gang, "_room", never)
    assert gang.place(pods, NodeIndex([]), False, None, "greedy", 1.0, bound=False).placements == []
    with pytest.raises(AssertionError, match="counted"):
        gang.place(pods, NodeIndex([]), False, None, "greedy", 1.0)


def test_simulations_place_unbound(monkeypatch: pytest.MonkeyPatch) -> None:
    """No simulation's placement counts the room (bench_victims small: allocate's placements still do)."""
    inside = [0]
    counted = {True: 0, False: 0}
    room, place = gang._room, scenario._place

    def counting(*args: Any) -> Any:
        counted[bool(inside[0])] += 1
        return room(*args)

    def placing(*args: Any, **kwargs: Any) -> Any:
        inside[0] += 1
        try:
            return place(*args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(gang, "_room", counting)
    monkeypatch.setattr(scenario, "_place", placing)
    wl = bench_victims.build_workload(nodes=60, reclaimers=12, seed=0)
    cfg = bench_victims.config_for("greedy")
    run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)
    assert counted[True] == 0
    assert counted[False] >= 1
