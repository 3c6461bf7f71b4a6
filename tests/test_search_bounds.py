"""The victim search's capacity bounds (``kaid.actions.evictions.Room``) only skip scenarios that could not place the
job: over the eviction property tests' random clusters, a full cycle decides the same with the bounds as with every
scenario simulated."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from kaid.actions import evictions
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.test_eviction_properties import NOW, Case, break_a_gang, cases, start

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _decide(world: list[dict[str, Any]], cfg: SchedulerConfig) -> tuple[list[Any], ...]:
    d: Decisions = run_cycle(build_snapshot(copy.deepcopy(world), cfg, NOW), cfg)
    return ([(b.pod, b.node, b.devices, b.action, b.by) for b in d.binds],
            [(b.pod, b.node, b.devices, b.action, b.by) for b in d.pipelined],
            [(e.pod, e.node, e.action, e.by, e.message) for e in d.evictions],
            sorted((k, [r.code for r in v]) for k, v in d.pending.items()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_bounds_change_no_decision(case: Case) -> None:
    world = start(case.objs, case.cfg, case.spread) + copy.deepcopy(case.late)
    if case.broken:
        world = break_a_gang(world)
    bounded = _decide(world, case.cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions.Room, "could_fit", lambda self, unit: True)
        every = _decide(world, case.cfg)
    assert bounded == every


def test_bounds_change_no_decision_for_a_gang_across_nodes() -> None:
    """The scenario whose search the bounds once cut short: the whole-GPU bound said no for each of the first three
    victims, and the per-node room was then not brought up to date, so the fourth looked short too."""
    docs = [d for d in yaml.safe_load_all((SCENARIOS / "evict-preempt-gang-across-nodes.yaml").read_text())
            if d and d.get("kind") != "Scenario"]
    cfg = SchedulerConfig()
    bounded = _decide(docs, cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions.Room, "could_fit", lambda self, unit: True)
        every = _decide(docs, cfg)
    assert bounded == every
    assert len(bounded[2]) == 4  # all four train pods make room
